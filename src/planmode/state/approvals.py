"""The ``approvals`` state key: the run's one approval record, append-only, and its never-raising reducer.

Every approval decision is a record (a dict, JSON data in every checkpoint)::

    {"kind": "plan" | "step" | "stale" | "patch" | "refused" | "new_run", "decision", "policy",
     "by": "policy" | "human" | "settings", "plan_version", "revision", "at",
     "run", "thread", "ns",                               # the run, thread and graph namespace it is bound to
     "steps": {"<step id>": "<definition digest>", ...},   # what an approval covers (grants only)
     "tools": {"<step id>": ["<tool>", ...], ...},          # the tools each covered step declared (grants only)
     "hold": ["<step id>", ...],                          # steps that still need their own answer
     "seal": "<hmac>"}

A record whose ``decision`` is ``approved`` or ``edited`` and that carries ``steps`` is a **grant**: it covers
exactly those step definitions (`definition_digest`: the plan's goal and the step's id, description,
dependencies, tools, complexity and acceptance), for this run. execute_step runs a step only when a grant covers
its definition (`covering_grant`); a step listed in a grant's ``hold`` also needs a ``step`` grant of its own
(``step_approval="writes"``: the per-step question, answered by a human or the policy).

**Who can write it.** Only planmode's nodes: every record is sealed (an HMAC over its content with the
installation's approval key, `planmode.approval_key`), and the reducer drops any record whose seal does not
verify. ``update_state`` (Studio, the SDK, ``planmode.edit_plan``) can send data, never a valid seal, so it
cannot approve anything, undo a refusal or reset the run. It is append-only: a record is never changed or
removed, except that a sealed ``new_run`` record (written by detect when a run starts) starts the log afresh.

**Bound to its thread, namespace and run.** A sealed record can still be copied: from another thread, or from an
earlier run of the same thread. So every record carries the thread id and the graph's checkpoint namespace of the
graph run that wrote it (`run_binding`, from LangGraph's config) and the run it belongs to, all under the seal:

- the reducer starts the log afresh only for a ``new_run`` record that names, as ``after``, the run it follows
  (the log's current run; detect writes it so). A replayed one (an earlier run's, another thread's) names
  another run: it is refused, and a sealed ``refused`` record says so. A record of another run than the log's
  is refused the same way: a replay cannot reset the log, drop its refusals or bring an old grant back;
- a grant covers a step only in the graph run it is bound to: `covering_grant` compares the grant's thread and
  namespace with the running graph's own config (execute_step passes them; any other caller gets the config it
  runs in), never with what the log says about itself;
- a ``patch`` grant given ``by: settings`` (a repair applied without asking) covers a step only when the step's
  write tools are among the tools a human's or the policy's grant of that step covered in the run
  (`decided_tools`): a repair that adds a step, or a write tool to a step, is decided by the policy, never by
  the settings.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langgraph.config import get_config

from planmode._compat import CONFIG_KEY_CHECKPOINT_NS, NS_SEP
from planmode.state.models import Plan, Step, clean_text, definition_values

__all__ = [
    "GRANT_DECISIONS",
    "HERE",
    "MAX_RECORDS",
    "Binding",
    "add_approval_records",
    "binding_of",
    "covering_grant",
    "current_run",
    "decided_tools",
    "decisions",
    "definition_digest",
    "definitions",
    "foreign_grant",
    "grant",
    "granted_shape",
    "held_steps",
    "is_sealed",
    "new_run_record",
    "record",
    "run_binding",
    "seal",
]

#: What a record is bound to: ``(thread id, graph checkpoint namespace)`` of the graph run that wrote it.
Binding = tuple[str | None, str | None]

#: How many approval records a run keeps (oldest dropped first, grants last).
MAX_RECORDS = 500
#: Decisions that make a record with ``steps`` a grant.
GRANT_DECISIONS = ("approved", "edited")
_SEAL = "seal"


def definition_digest(step: Step, goal: str) -> str:
    """What an approval of ``step`` covers: the plan's goal and the step's id and definition (not its status,
    attempts or results). A step edited in any of these is a step nobody approved."""
    body = [goal, step.id, *definition_values(step)]
    blob = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def definitions(steps: Iterable[Step], goal: str) -> dict[str, str]:
    """``{step id: definition digest}`` of ``steps``."""
    return {s.id: definition_digest(s, goal) for s in steps}


def _canonical(record: Mapping[str, Any]) -> bytes:
    body = {k: v for k, v in record.items() if k != _SEAL}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str).encode()


def seal(record: Mapping[str, Any], key: bytes | None = None) -> dict[str, Any]:
    """``record`` with its seal (an HMAC-SHA256 of its content under ``key``, default: the approval key)."""
    if key is None:
        from planmode.approval_key import approval_key

        key = approval_key()
    body = {k: v for k, v in record.items() if k != _SEAL}
    return {**body, _SEAL: hmac.new(key, _canonical(body), hashlib.sha256).hexdigest()}


def is_sealed(record: Any, key: bytes | None = None) -> bool:
    """Whether ``record`` carries a valid seal (never raises)."""
    if not isinstance(record, Mapping) or not isinstance(record.get(_SEAL), str):
        return False
    if key is None:
        from planmode.approval_key import approval_key

        try:
            key = approval_key()
        except Exception:  # no key can be had: nothing verifies (fail closed); the reducer must not raise
            return False
    try:
        expected = hmac.new(key, _canonical(record), hashlib.sha256).hexdigest()
    except (TypeError, ValueError):
        return False
    return hmac.compare_digest(expected, str(record[_SEAL]))


def run_binding() -> Binding | None:
    """``(thread id, graph namespace)`` of the graph run this is called in, from LangGraph's config (None outside
    a graph run). The namespace is the graph's own: the task's ``checkpoint_ns`` without task ids and without
    the node's own segment (``""`` for a root graph, ``"parent_node"`` for a subgraph)."""
    try:
        conf = get_config().get("configurable") or {}
    except RuntimeError:
        return None
    return binding_of(conf)


def binding_of(configurable: Mapping[str, Any]) -> Binding:
    """The binding (`run_binding`) read from a config's ``configurable``."""
    thread = configurable.get("thread_id")
    ns = configurable.get(CONFIG_KEY_CHECKPOINT_NS)
    # each level is "<node>:<task id>" (a task id changes with every task); a digit-only level is a Send's index
    levels = [p.split(":")[0] for p in ns.split(NS_SEP) if not p.isdigit()] if isinstance(ns, str) and ns else []
    return (None if thread is None else str(thread), NS_SEP.join(levels[:-1]))


def _bound(record: Mapping[str, Any], binding: Binding | None) -> bool:
    return binding is None or (record.get("thread"), record.get("ns")) == binding


def add_approval_records(current: Any, update: Any) -> list[dict[str, Any]]:
    """Reducer of the ``approvals`` record: appends the sealed records of ``update`` that belong to the log's run.

    A record without a valid seal (anything ``update_state`` makes up) is dropped. A sealed ``new_run`` record
    starts the log afresh only when its ``after`` names the log's current run (the run detect saw when it
    started the new one); a sealed record of another run (a replay from an earlier run or another thread) is not
    appended, and neither resets nor hides anything: a sealed ``refused`` record naming it is appended instead.
    An exact copy of a record already in the log adds nothing. Never raises: anything that is not a record is
    dropped, and the current log is read as far as it can be."""
    out = [dict(r) for r in _records(current)]
    seen = {str(r.get(_SEAL)) for r in out} | {str(r["refused"].get(_SEAL)) for r in out if _is_refusal(r)}
    for record in _records(update):
        if not is_sealed(record) or str(record.get(_SEAL)) in seen:
            continue  # unsealed, already in the log, or already refused once (a replay adds one refusal, not many)
        run = _head_run(out)
        if record.get("kind") == "new_run":
            if record.get("after") != run:
                out.append(_refusal(run, record, "a new_run record that does not follow this run"))
                seen.add(str(record.get(_SEAL)))
                continue
            out = []
        elif run is not None and record.get("run") != run:
            out.append(_refusal(run, record, "a record of another run"))
            seen.add(str(record.get(_SEAL)))
            continue
        out.append(dict(record))
        seen.add(str(record.get(_SEAL)))
    if len(out) > MAX_RECORDS:  # keep the run's start and its grants; drop the oldest other records first
        keep = {0} | {i for i, r in enumerate(out) if _is_grant(r)}
        drop = len(out) - MAX_RECORDS
        dropped = [i for i in range(len(out)) if i not in keep][:drop]
        out = [r for i, r in enumerate(out) if i not in set(dropped)][-MAX_RECORDS:]
    return out


def _head_run(out: Sequence[Mapping[str, Any]]) -> str | None:
    for r in reversed(out):
        if r.get("kind") == "new_run":
            run = r.get("run")
            return run if isinstance(run, str) else None
    return None


def _refusal(run: str | None, refused: Mapping[str, Any], what: str) -> dict[str, Any]:
    """The sealed record of a sealed record the reducer refused (a replay); the refused one's run, thread and
    kind are named, not copied. No seal can be made without the key: the reducer must not raise, so the
    refusal is then left unsealed (shown, never trusted)."""
    body = {
        "kind": "refused",
        "decision": "refused",
        "policy": "approval record",
        "by": "planmode",
        "run": run,
        "at": round(time.time(), 3),
        "reason": f"{what} was refused (replayed or copied from another thread or run)",
        "refused": {k: _short(refused.get(k)) for k in ("kind", "decision", "by", "run", "thread", "ns", "at", _SEAL)},
    }
    try:
        return seal(body)
    except Exception:  # no approval key: an unsealed record is dropped by every reader that trusts seals
        return body


def _is_refusal(record: Mapping[str, Any]) -> bool:
    return record.get("kind") == "refused" and isinstance(record.get("refused"), Mapping)


def _short(value: Any) -> Any:
    return clean_text(value)[:200] if isinstance(value, str) else value if isinstance(value, int | float) else None


def _records(value: Any) -> Iterable[Mapping[str, Any]]:
    if isinstance(value, Mapping):
        return [value]
    if isinstance(value, list | tuple):
        return [r for r in value if isinstance(r, Mapping)]
    return []


def _is_grant(record: Mapping[str, Any]) -> bool:
    return record.get("decision") in GRANT_DECISIONS and isinstance(record.get("steps"), Mapping)


def current_run(log: Any) -> str | None:
    """The id of the run the log belongs to (its sealed ``new_run`` record), if any."""
    return _index(log, None).run


class _Index:
    """What a log grants in one graph run (``binding``; None: any), its seals verified once: per kind, each step
    id's covered digests, and the tools a decided (non-``patch``) grant covered per step id."""

    def __init__(self, log: Any, binding: Binding | None) -> None:
        records = list(_records(log))
        self.run: str | None = None
        for record in reversed(records):
            if record.get("kind") == "new_run" and is_sealed(record):
                self.run = record.get("run") if isinstance(record.get("run"), str) else None
                break
        self.covered: dict[str, dict[str, dict[str, Mapping[str, Any]]]] = {}
        self.decided: dict[str, set[str]] = {}
        self.foreign: set[tuple[str, str]] = set()
        self.shape: str | None = None
        for record in records:  # oldest first: a later grant of the same definition wins
            if not _is_grant(record) or record.get("run") != self.run or not is_sealed(record):
                continue
            if not _bound(record, binding):  # sealed, but for another thread or namespace
                self.foreign.update((str(k), str(v)) for k, v in record["steps"].items())
                continue
            kind = str(record.get("kind"))
            per_step = self.covered.setdefault(kind, {})
            named_tools = record.get("tools")
            tools: Mapping[str, Any] = named_tools if isinstance(named_tools, Mapping) else {}
            for step_id, digest in record["steps"].items():
                per_step.setdefault(str(step_id), {})[str(digest)] = record
                if kind != "patch":
                    named = tools.get(step_id)
                    self.decided.setdefault(str(step_id), set()).update(
                        str(t) for t in (named if isinstance(named, list) else ())
                    )
            if kind == "plan" and isinstance(record.get("shape"), str):
                self.shape = record["shape"]
            elif kind == "patch":
                self.shape = None  # a settings grant is checked step by step (its tools against the decided ones)


_INDEX_CACHE: dict[tuple[Any, ...], _Index] = {}


def _index(log: Any, binding: Binding | None) -> _Index:
    key = (binding, *(str(r.get(_SEAL)) for r in _records(log)))
    index = _INDEX_CACHE.get(key)
    if index is None:
        index = _Index(log, binding)
        if len(_INDEX_CACHE) > 64:
            _INDEX_CACHE.clear()
        _INDEX_CACHE[key] = index
    return index


#: ``binding`` argument meaning "the graph run this is called in" (`run_binding`).
HERE: Any = object()


def covering_grant(
    log: Any,
    step: Step,
    goal: str,
    *,
    kinds: Sequence[str] = ("plan", "patch"),
    binding: Binding | None = HERE,
    read_only: frozenset[str] | None = None,
) -> Mapping[str, Any] | None:
    """The latest sealed grant of one of ``kinds`` in this run's log, bound to ``binding`` (default: the graph run
    this is called in; None: any), that covers ``step``'s exact definition. A ``patch`` grant counts only for a
    step a decided grant (a human's or the policy's) covered in the run, and whose tools, but the read-only ones
    (``read_only``; None: the ones the patch grant names, the graph's when it was written), are all among the
    tools decided grants of the step covered."""
    where = run_binding() if binding is HERE else binding
    index = _index(log, where)
    digest = definition_digest(step, goal)
    found: Mapping[str, Any] | None = None
    for kind in kinds:
        record = index.covered.get(kind, {}).get(step.id, {}).get(digest)
        if record is None:
            continue
        decided = index.decided.get(step.id)
        exempt = read_only if read_only is not None else _names(record.get("read_only"))
        if kind == "patch" and (decided is None or not set(step.tools) - exempt <= decided):
            continue  # a step the repair added, or gave a write tool: the settings cannot decide it
        if found is None or float(record.get("at") or 0) >= float(found.get("at") or 0):
            found = record
    return found


def _names(value: Any) -> frozenset[str]:
    return frozenset(str(v) for v in value) if isinstance(value, list) else frozenset()


def foreign_grant(log: Any, step: Step, goal: str, binding: Binding | None) -> bool:
    """Whether a sealed grant of this run covers ``step``'s definition but is bound to another thread or
    namespace than ``binding`` (a copied record: it covers nothing here)."""
    return (step.id, definition_digest(step, goal)) in _index(log, binding).foreign


def decided_tools(log: Any, step_id: str, binding: Binding | None = HERE) -> frozenset[str] | None:
    """The tools the human's or the policy's grants of ``step_id`` covered in this run (None: none covered it)."""
    where = run_binding() if binding is HERE else binding
    tools = _index(log, where).decided.get(step_id)
    return None if tools is None else frozenset(tools)


def granted_shape(log: Any, binding: Binding | None = HERE) -> str | None:
    """The plan shape (`Plan.shape`) the latest plan grant covered whole, when no settings grant came after it
    (a fast path: a plan of that shape is covered step by step)."""
    return _index(log, run_binding() if binding is HERE else binding).shape


def held_steps(grant: Mapping[str, Any] | None) -> frozenset[str]:
    """The steps a grant holds for their own answer (``step_approval="writes"`` when it was given)."""
    hold = grant.get("hold") if grant else None
    return frozenset(str(h) for h in hold) if isinstance(hold, list) else frozenset()


def record(log: Any, kind: str, decision: str, policy: str, by: str, plan: Plan, **extra: Any) -> dict[str, Any]:
    """A sealed record of one decision about ``plan`` in the run of ``log``, bound to the graph run it is made in
    (`run_binding`); None and empty extras left out."""
    thread, ns = run_binding() or (None, None)
    body: dict[str, Any] = {
        "kind": kind,
        "decision": decision,
        "policy": policy,
        "by": by,
        "plan_version": plan.version,
        "revision": plan.revision,
        "at": round(time.time(), 3),
        "run": current_run(log),
        "thread": thread,
        "ns": ns,
    }
    for key, value in extra.items():
        if value in (None, "", [], {}):
            continue
        body[key] = clean_text(value) if isinstance(value, str) else value
    return seal(body)


def grant(
    log: Any,
    kind: str,
    plan: Plan,
    *,
    policy: str,
    by: str,
    decision: str = "approved",
    steps: Iterable[Step] | None = None,
    hold: Iterable[str] = (),
    **extra: Any,
) -> dict[str, Any]:
    """A sealed grant: ``steps`` (default: the whole plan, whose shape it then records) approved as they are
    defined now, with the tools they declare, in the run of ``log``; ``hold`` lists steps that still need their
    own answer."""
    whole = steps is None
    chosen = list(plan.steps if steps is None else steps)
    return record(
        log,
        kind,
        decision,
        policy,
        by,
        plan,
        steps=definitions(chosen, plan.goal),
        tools={s.id: list(s.tools) for s in chosen},
        shape=plan.shape if whole else None,
        hold=sorted(set(hold)),
        **extra,
    )


def new_run_record(run: str, after: str | None = None) -> dict[str, Any]:
    """The sealed record that starts a run's log afresh (written by detect): ``after`` is the run it follows (the
    log's current run when detect started, None on a new thread), bound to the graph run it is made in."""
    thread, ns = run_binding() or (None, None)
    body = {"kind": "new_run", "decision": "started", "by": "planmode", "run": run, "after": after}
    return seal({**body, "thread": thread, "ns": ns, "at": round(time.time(), 3)})


def decisions(log: Any) -> list[dict[str, Any]]:
    """The decisions of a log, for people: every record but the one that starts the run, without the seals."""
    return [{k: v for k, v in r.items() if k != _SEAL} for r in _records(log) if r.get("kind") != "new_run"]
