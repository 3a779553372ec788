"""The ``approvals`` state key: the run's one approval record, append-only, and its never-raising reducer.

Every approval decision is a record (a dict, JSON data in every checkpoint)::

    {"kind": "plan" | "step" | "stale" | "patch" | "refused" | "new_run", "decision", "policy",
     "by": "policy" | "human" | "settings", "plan_version", "revision", "at", "run",
     "steps": {"<step id>": "<definition digest>", ...},   # what an approval covers (grants only)
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
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from planmode.state.models import Plan, Step, clean_text, definition_values

__all__ = [
    "GRANT_DECISIONS",
    "MAX_RECORDS",
    "add_approval_records",
    "covering_grant",
    "current_run",
    "decisions",
    "definition_digest",
    "definitions",
    "grant",
    "granted_shape",
    "held_steps",
    "is_sealed",
    "new_run_record",
    "record",
    "seal",
]

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


def add_approval_records(current: Any, update: Any) -> list[dict[str, Any]]:
    """Reducer of the ``approvals`` record: appends the sealed records of ``update``; a sealed ``new_run`` record
    starts the log afresh. A record without a valid seal (anything ``update_state`` sends) is dropped. Never
    raises: anything that is not a record is dropped, and the current log is read as far as it can be."""
    out = [dict(r) for r in _records(current)]
    for record in _records(update):
        if not is_sealed(record):
            continue
        if record.get("kind") == "new_run":
            out = []
        out.append(dict(record))
    if len(out) > MAX_RECORDS:  # keep the run's start and its grants; drop the oldest other records first
        keep = {0} | {i for i, r in enumerate(out) if _is_grant(r)}
        drop = len(out) - MAX_RECORDS
        dropped = [i for i in range(len(out)) if i not in keep][:drop]
        out = [r for i, r in enumerate(out) if i not in set(dropped)][-MAX_RECORDS:]
    return out


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
    return _index(log).run


class _Index:
    """What a log grants, its seals verified once: per kind, each step id's covered digests."""

    def __init__(self, log: Any) -> None:
        records = list(_records(log))
        self.run: str | None = None
        for record in reversed(records):
            if record.get("kind") == "new_run" and is_sealed(record):
                self.run = record.get("run") if isinstance(record.get("run"), str) else None
                break
        self.covered: dict[str, dict[str, dict[str, Mapping[str, Any]]]] = {}
        self.shape: str | None = None
        for record in records:  # oldest first: a later grant of the same definition wins
            if not _is_grant(record) or record.get("run") != self.run or not is_sealed(record):
                continue
            kind = str(record.get("kind"))
            per_step = self.covered.setdefault(kind, {})
            for step_id, digest in record["steps"].items():
                per_step.setdefault(str(step_id), {})[str(digest)] = record
            if kind in ("plan", "patch") and isinstance(record.get("shape"), str):
                self.shape = record["shape"]


_INDEX_CACHE: dict[tuple[str, ...], _Index] = {}


def _index(log: Any) -> _Index:
    key = tuple(str(r.get(_SEAL)) for r in _records(log))
    index = _INDEX_CACHE.get(key)
    if index is None:
        index = _Index(log)
        if len(_INDEX_CACHE) > 64:
            _INDEX_CACHE.clear()
        _INDEX_CACHE[key] = index
    return index


def covering_grant(
    log: Any, step: Step, goal: str, *, kinds: Sequence[str] = ("plan", "patch")
) -> Mapping[str, Any] | None:
    """The latest sealed grant of one of ``kinds`` in this run's log that covers ``step``'s exact definition."""
    index = _index(log)
    digest = definition_digest(step, goal)
    found: Mapping[str, Any] | None = None
    for kind in kinds:
        record = index.covered.get(kind, {}).get(step.id, {}).get(digest)
        if record is not None and (found is None or float(record.get("at") or 0) >= float(found.get("at") or 0)):
            found = record
    return found


def granted_shape(log: Any) -> str | None:
    """The plan shape (`Plan.shape`) the latest plan or patch grant covered whole (a fast path: a plan of that
    shape is covered step by step)."""
    return _index(log).shape


def held_steps(grant: Mapping[str, Any] | None) -> frozenset[str]:
    """The steps a grant holds for their own answer (``step_approval="writes"`` when it was given)."""
    hold = grant.get("hold") if grant else None
    return frozenset(str(h) for h in hold) if isinstance(hold, list) else frozenset()


def record(log: Any, kind: str, decision: str, policy: str, by: str, plan: Plan, **extra: Any) -> dict[str, Any]:
    """A sealed record of one decision about ``plan`` in the run of ``log`` (None and empty extras left out)."""
    body: dict[str, Any] = {
        "kind": kind,
        "decision": decision,
        "policy": policy,
        "by": by,
        "plan_version": plan.version,
        "revision": plan.revision,
        "at": round(time.time(), 3),
        "run": current_run(log),
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
    defined now, in the run of ``log``; ``hold`` lists steps that still need their own answer."""
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
        shape=plan.shape if whole else None,
        hold=sorted(set(hold)),
        **extra,
    )


def new_run_record(run: str) -> dict[str, Any]:
    """The sealed record that starts a run's log afresh (written by detect)."""
    return seal({"kind": "new_run", "decision": "started", "by": "planmode", "run": run, "at": round(time.time(), 3)})


def decisions(log: Any) -> list[dict[str, Any]]:
    """The decisions of a log, for people: every record but the one that starts the run, without the seals."""
    return [{k: v for k, v in r.items() if k != _SEAL} for r in _records(log) if r.get("kind") != "new_run"]
