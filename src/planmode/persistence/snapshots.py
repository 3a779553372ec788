"""Snapshots of a run: list them with a readable label, roll a thread back to one, fork a new thread from one.

A snapshot is a LangGraph checkpoint: the graph writes one after every super-step, so every moment of a run
is kept. Nothing here deletes a checkpoint.

- `list_snapshots`: the thread's checkpoints, newest first, each with a label saying what happened
  ("plan v1 created (3 steps); awaiting approval", "step b done", "patched to v2", "finished: completed").
- `rollback`: makes an earlier snapshot the thread's head, with LangGraph's copy-checkpoint update
  (``graph.update_state(snapshot.config, None, as_node="__copy__")``): a new checkpoint holding the
  snapshot's values and its pending tasks (so the same ``next``), stored under the snapshot's parent. It is
  the newest checkpoint of the thread, so ``graph.invoke(None, {"configurable": {"thread_id": ...}})``
  continues from there. The plan is not written through the plan reducer (which refuses edits to done
  steps): this is the one way a done step becomes not done again. Writes pending on the snapshot are not
  copied, so a node interrupted there runs again — rolling back to a plan awaiting approval asks again.
- `fork`: copies a snapshot into a new thread with the checkpointer's ``put`` (the graph's ``update_state``
  would send the plan through its reducer and reset its statuses); both threads then go on independently.

Labels are derived from what a checkpoint changed compared with its parent (plan version, step statuses,
route, approval, reflection), from the nodes that ran to produce it (the parent's ``next``) and from its
own ``next``: LangGraph 1.x no longer stores a super-step's writes in the checkpoint metadata.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointMetadata, copy_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.pregel import Pregel
from langgraph.types import StateSnapshot

from planmode.context import settings_dict
from planmode.errors import ConfigurationError, PlanModeError, SnapshotNotFoundError, ThreadNotFoundError
from planmode.state.models import Plan, PlanSource, StepStatus
from planmode.state.reducer import restore_plan
from planmode.text import clip

__all__ = ["FORK_METADATA_KEY", "Snapshot", "fork", "list_snapshots", "rollback"]

#: Checkpoint metadata key of a forked thread's first checkpoint: where it was forked from.
FORK_METADATA_KEY = "planmode_fork"

#: LangGraph's ``as_node`` for "copy this checkpoint" in ``update_state``.
_COPY = "__copy__"

_FINISHED = ("completed", "failed", "answered", "cancelled")


@dataclass(frozen=True)
class Snapshot:
    """One checkpoint of a thread, as a person reads it."""

    checkpoint_id: str
    """The checkpoint's id (pass it to `rollback` or `fork`)."""
    parent_id: str | None
    """The id of the checkpoint it follows (None for a thread's first one)."""
    created_at: datetime | None
    """When the checkpoint was written (UTC)."""
    step: int
    """LangGraph's super-step number (-1 for the input)."""
    label: str
    """What happened, e.g. "plan v1 created (3 steps); awaiting approval", "step b done", "finished: completed"."""
    plan_version: int | None
    """The plan's version (None before there is a plan)."""
    counts: dict[str, int]
    """How many steps have each status (every status present; empty before there is a plan)."""
    next: tuple[str, ...]
    """The nodes that run next from here (empty when the run is finished)."""
    awaiting_approval: bool
    """True when the approval runs next and the thread asks a human (its settings are not approval="auto"):
    the approval interrupt shows when the run continues from here."""
    config: RunnableConfig
    """The checkpoint's config (thread id, namespace, checkpoint id)."""
    source: str
    """LangGraph's source of the checkpoint: input, loop, update or fork."""
    status: str | None
    """The run status in state (planning, awaiting_approval, running, completed, ...)."""

    @property
    def summary(self) -> str:
        """One line for a history listing: plan version, step counts, label."""
        counts = ", ".join(f"{n} {status}" for status, n in self.counts.items() if n)
        version = f"plan v{self.plan_version}" if self.plan_version is not None else "no plan"
        return f"{version}" + (f" ({counts})" if counts else "") + f": {self.label}"


Target = str | int
"""A snapshot: its checkpoint id, or N = N snapshots back in `list_snapshots` order (0 is the head)."""


def list_snapshots(graph: Pregel[Any, Any, Any, Any], thread_id: str, *, limit: int | None = None) -> list[Snapshot]:
    """The thread's snapshots, newest first (every branch: rolled-back ones stay listed).

    Raises:
        ThreadNotFoundError: the thread has no checkpoint.
        ConfigurationError: the graph was compiled without a checkpointer.
    """
    _saver(graph)
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive number, got {limit}")
    fetch = None if limit is None else limit + 1  # one more: the parent of the last one, usually
    states = list(graph.get_state_history(_thread_config(thread_id), limit=fetch))
    if not states:
        raise ThreadNotFoundError(f"no thread {thread_id!r} in this database")
    labeler = _Labeler(graph, thread_id, states)
    shown = states if limit is None else states[:limit]
    return [labeler.snapshot(s) for s in shown]


def rollback(graph: Pregel[Any, Any, Any, Any], thread_id: str, target: Target) -> RunnableConfig:
    """Make a snapshot the thread's head, so the run continues from there; returns the new head's config.

    ``target`` is a checkpoint id, or N for the snapshot N entries back in `list_snapshots` (1 is the one
    before the head). The history is kept: the new head is a copy of the snapshot, added to the thread.
    Continue with ``graph.invoke(None, config)`` (the thread's plain config works too).

    Raises:
        ThreadNotFoundError: the thread has no checkpoint.
        SnapshotNotFoundError: no such checkpoint id in the thread, or N is out of range.
    """
    config = _resolve(graph, thread_id, target)
    return graph.update_state(config, None, as_node=_COPY)


def fork(graph: Pregel[Any, Any, Any, Any], thread_id: str, target: Target, new_thread_id: str | None = None) -> str:
    """Copy a snapshot into a new thread and return its id; both threads then go on independently.

    The new thread starts at the snapshot (same values, same ``next``); continue it with
    ``graph.invoke(None, {"configurable": {"thread_id": new_id}})``. The original thread is not changed.

    Raises:
        ThreadNotFoundError: the thread has no checkpoint.
        SnapshotNotFoundError: no such checkpoint id in the thread, or N is out of range.
        PlanModeError: ``new_thread_id`` already has checkpoints.
    """
    saver = _saver(graph)
    config = _resolve(graph, thread_id, target)
    saved = saver.get_tuple(config)
    if saved is None:  # resolved a moment ago; only a concurrent deletion gets here
        raise SnapshotNotFoundError(f"snapshot {target!r} of thread {thread_id!r} disappeared")
    new_id = new_thread_id or f"{thread_id}-fork-{uuid.uuid4().hex[:8]}"
    new_config = _thread_config(new_id)
    if saver.get_tuple(new_config) is not None:
        raise PlanModeError(f"thread {new_id!r} already exists; fork into a new thread id")
    step = int(saved.metadata.get("step", -1))
    # Same values, versions and format version, a new id: `langgraph.checkpoint.base.create_checkpoint` would
    # stamp an old format version, and StateGraph's migration of old checkpoints then drops the value of a
    # state key named like a node (``plan``).
    checkpoint = copy_checkpoint(saved.checkpoint)
    checkpoint["id"] = str(uuid6(clock_seq=step))
    checkpoint["ts"] = datetime.now(UTC).isoformat()
    origin = {
        "thread_id": thread_id,
        "checkpoint_id": saved.config["configurable"]["checkpoint_id"],
        "step": step,
        "label": _label_at(graph, thread_id, config),
    }
    metadata = cast(CheckpointMetadata, {"source": "fork", "step": step, "parents": {}, FORK_METADATA_KEY: origin})
    # Every channel counts as new in this thread (savers that store channel blobs per thread store them all).
    saver.put(new_config, checkpoint, metadata, dict(checkpoint["channel_versions"]))
    return new_id


def _label_at(graph: Pregel[Any, Any, Any, Any], thread_id: str, config: RunnableConfig) -> str:
    """The label of one snapshot, given its config."""
    state = graph.get_state(config)
    return _Labeler(graph, thread_id, [state]).label(state)


# -- resolving targets ------------------------------------------------------------------------------------


def _saver(graph: Pregel[Any, Any, Any, Any]) -> BaseCheckpointSaver[Any]:
    saver = graph.checkpointer
    if not isinstance(saver, BaseCheckpointSaver):
        raise ConfigurationError(
            "the graph has no checkpointer: build it with build_graph(..., checkpointer=sqlite_checkpointer(path))"
        )
    return saver


def _thread_config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def _resolve(graph: Pregel[Any, Any, Any, Any], thread_id: str, target: Target) -> RunnableConfig:
    """The config of the snapshot ``target`` names (checkpoint id or N back)."""
    saver = _saver(graph)
    if saver.get_tuple(_thread_config(thread_id)) is None:
        raise ThreadNotFoundError(f"no thread {thread_id!r} in this database")
    if isinstance(target, bool) or not isinstance(target, str | int):
        raise TypeError(f"a snapshot is a checkpoint id (str) or a number of snapshots back (int), not {target!r}")
    if isinstance(target, int):
        if target < 0:
            raise SnapshotNotFoundError(f"cannot go {target} snapshots back: give a number >= 0")
        states = list(graph.get_state_history(_thread_config(thread_id), limit=target + 1))
        if len(states) <= target:
            raise SnapshotNotFoundError(f"thread {thread_id!r} has {len(states)} snapshot(s); cannot go {target} back")
        return states[target].config
    config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": target}}
    saved = saver.get_tuple(config)
    if saved is None or saved.config["configurable"].get("checkpoint_id") != target:
        raise SnapshotNotFoundError(f"no snapshot {target!r} in thread {thread_id!r}")
    return saved.config


# -- labels -----------------------------------------------------------------------------------------------


def _checkpoint_id(config: RunnableConfig | None) -> str | None:
    if not config:
        return None
    value = config.get("configurable", {}).get("checkpoint_id")
    return str(value) if value else None


def _plan_of(values: Mapping[str, Any]) -> Plan | None:
    return restore_plan(values.get("plan"))


def _ids(ids: Sequence[str]) -> str:
    return ", ".join(ids)


class _Labeler:
    """Labels snapshots of one thread, fetching parents (and the originals of rollback copies) as needed."""

    def __init__(self, graph: Pregel[Any, Any, Any, Any], thread_id: str, states: Sequence[StateSnapshot]) -> None:
        self.graph = graph
        self.thread_id = thread_id
        self.states: dict[str, StateSnapshot | None] = {}
        for s in states:
            cid = _checkpoint_id(s.config)
            if cid:
                self.states[cid] = s
        self._copies: dict[str, str | None] | None = None
        self._numbers: dict[str, dict[str, int]] = {}

    def snapshot(self, s: StateSnapshot) -> Snapshot:
        plan = _plan_of(s.values)
        created = datetime.fromisoformat(s.created_at) if s.created_at else None
        return Snapshot(
            checkpoint_id=_checkpoint_id(s.config) or "",
            parent_id=_checkpoint_id(s.parent_config),
            created_at=created,
            step=int(s.metadata.get("step", -1)) if s.metadata else -1,
            label=self.label(s),
            plan_version=plan.version if plan is not None else None,
            counts=plan.counts() if plan is not None else {},
            next=tuple(s.next),
            awaiting_approval=_asks_approval(s),
            config=s.config,
            source=str((s.metadata or {}).get("source", "")),
            status=s.values.get("status"),
        )

    def state(self, checkpoint_id: str | None) -> StateSnapshot | None:
        if checkpoint_id is None:
            return None
        if checkpoint_id not in self.states:
            config: RunnableConfig = {
                "configurable": {"thread_id": self.thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}
            }
            found = self.graph.get_state(config)
            self.states[checkpoint_id] = found if found.created_at else None
        return self.states[checkpoint_id]

    def label(self, s: StateSnapshot, depth: int = 0) -> str:
        metadata: Mapping[str, Any] = s.metadata or {}
        source = metadata.get("source")
        parent = self.state(_checkpoint_id(s.parent_config))
        if source == "fork":
            origin = metadata.get(FORK_METADATA_KEY)
            if isinstance(origin, dict):
                where = self.number(str(origin.get("checkpoint_id") or ""), str(origin.get("thread_id") or ""))
                at = f" at #{where}" if where is not None else ""
                return f"forked from thread {origin.get('thread_id')!r}{at}: {origin.get('label')}"
            original = self.state(self._original_of(s))
            if original is not None and depth < 3:
                number = self.number(_checkpoint_id(original.config))
                return f"rolled back to #{number}: {self.label(original, depth + 1)}"
            return self._with_next(s, ["copied from an earlier snapshot"])
        if source == "input":
            return self._with_next(s, ["run started" if parent is None else "new input", *_changes(s, parent)])
        parts = _changes(s, parent)
        if source == "update":
            parts.insert(0, "state edited")
        if not parts:
            ran = sorted(set(parent.next)) if parent is not None else []
            parts = [f"{', '.join(ran)} ran" if ran else "checkpoint"]
        return self._with_next(s, parts)

    @staticmethod
    def _with_next(s: StateSnapshot, parts: list[str]) -> str:
        if _asks_approval(s):
            parts = [*parts, "awaiting approval"]
        return "; ".join(parts)

    def number(self, checkpoint_id: str | None, thread_id: str | None = None) -> int | None:
        """A checkpoint's place in its thread's whole lineage (this thread's unless ``thread_id`` names another),
        oldest first, from 1 (``planmode history``'s #): checkpoints are only ever added, so the number of a
        checkpoint never changes. None when the checkpoint is not there."""
        thread = thread_id or self.thread_id
        if thread not in self._numbers:
            ids = sorted(str(t.checkpoint["id"]) for t in _saver(self.graph).list(_thread_config(thread)))
            self._numbers[thread] = {cid: n for n, cid in enumerate(ids, start=1)}
        return self._numbers[thread].get(checkpoint_id or "")

    def _original_of(self, s: StateSnapshot) -> str | None:
        """For a rollback copy: the checkpoint it copies (same parent, same channel versions, not a copy)."""
        if self._copies is None:
            self._copies = {}
            saver = _saver(self.graph)
            groups: dict[tuple[str | None, tuple[tuple[str, str], ...]], list[tuple[str, str]]] = {}
            for t in saver.list(_thread_config(self.thread_id)):
                key = (_checkpoint_id(t.parent_config), _versions_key(t.checkpoint["channel_versions"]))
                groups.setdefault(key, []).append((t.checkpoint["id"], str(t.metadata.get("source"))))
            for members in groups.values():
                originals = sorted(cid for cid, src in members if src != "fork")
                for cid, src in members:
                    if src == "fork":
                        self._copies[cid] = originals[0] if originals else None
        return self._copies.get(_checkpoint_id(s.config) or "")


def _asks_approval(s: StateSnapshot) -> bool:
    """The approval node runs next and the thread's settings ask a human (not the headless "auto" policy)."""
    settings = settings_dict(s.values.get("settings"))
    return "approve" in s.next and settings.get("approval", "ask") != "auto"


def _versions_key(versions: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in versions.items()))


def _task_text(values: Mapping[str, Any]) -> str:
    if values.get("task"):
        return str(values["task"])
    for m in reversed(list(values.get("messages") or [])):
        if getattr(m, "type", None) == "human":
            return str(getattr(m, "content", ""))
    return ""


def _excerpt(text: str, limit: int = 60) -> str:
    return repr(clip(text, limit))


_TRANSITION_WORDS: dict[StepStatus, tuple[str, str]] = {
    # new status: (one step, several steps) — "{}" is the id list
    StepStatus.RUNNING: ("started {}", "started {}"),
    StepStatus.DONE: ("step {} done", "steps {} done"),
    StepStatus.FAILED: ("step {} failed", "steps {} failed"),
    StepStatus.PENDING: ("step {} to retry", "steps {} to retry"),
    StepStatus.BLOCKED: ("step {} blocked", "steps {} blocked"),
    StepStatus.SKIPPED: ("step {} skipped", "steps {} skipped"),
}

#: How a new plan version is labelled, by the source of its update (`PlanSource`); other sources: "patched to".
_VERSION_VERBS: dict[str, str] = {
    PlanSource.PLANNER.value: "plan revised to",
    PlanSource.HUMAN_FEEDBACK.value: "plan revised from human feedback to",
    PlanSource.HUMAN_EDIT.value: "plan edited to",
    PlanSource.PATCH.value: "patched to",
    PlanSource.DIFF.value: "patched (full-plan fallback) to",
    PlanSource.DISPATCH.value: "plan changed to",
    PlanSource.UNKNOWN.value: "plan changed to",
}


def _changes(s: StateSnapshot, parent: StateSnapshot | None) -> list[str]:
    """What ``s`` changed compared with ``parent``, in words."""
    values: Mapping[str, Any] = s.values
    before: Mapping[str, Any] = parent.values if parent is not None else {}
    ran = set(parent.next) if parent is not None else set()
    parts: list[str] = []
    if "__start__" in ran and _task_text(values):
        parts.append(f"task received: {_excerpt(_task_text(values))}")
    if "detect" in ran and values.get("route") and values.get("route") != before.get("route"):
        parts.append("task needs a plan" if values["route"] == "plan" else "simple request: answering directly")
    plan, old = _plan_of(values), _plan_of(before)
    parts += _version_change_words(plan, old)
    if "approve" in ran:
        parts += _approval_words(s, values, before, plan)
    if "execute_step" in ran:
        parts += _execution_words(values, before)
    if plan is not None and old is not None:
        parts += _status_change_words(plan, old)
    if "reflect" in ran and values.get("reflection") and values.get("reflection") != before.get("reflection"):
        assessment = (values.get("reflection") or {}).get("assessment", "?")
        parts.append(f"reflection: {assessment}")
    return parts + _next_move_words(s, ran, values, plan)


def _version_change_words(plan: Plan | None, old: Plan | None) -> list[str]:
    """The plan's new version (or its absence) compared with ``old``, in words; empty when the version is the
    same."""
    if plan is None:
        return ["plan cleared"] if old is not None else []
    if old is not None and plan.version == old.version:
        return []
    if plan.version == 0:
        return ["no valid plan"]
    if old is None or old.version == 0:
        return [f"plan v{plan.version} created ({len(plan.steps)} steps)"]
    if plan.version > old.version:
        source = plan.history[-1].source if plan.history else PlanSource.PATCH.value
        return [f"{_VERSION_VERBS.get(source, 'patched to')} v{plan.version}"]
    return [f"new plan v{plan.version}"]


def _approval_words(
    s: StateSnapshot, values: Mapping[str, Any], before: Mapping[str, Any], plan: Plan | None
) -> list[str]:
    """What the approval gate decided, in words: an answer refused, a rejection with feedback, or an approval."""
    error = values.get("approval_error")
    if error and error != before.get("approval_error"):
        return [f"approval answer refused: {_excerpt(str(error))}"]
    if values.get("feedback") and "plan" in s.next:
        return ["plan rejected with feedback"]
    if plan is not None and "dispatch" in s.next:
        return [f"plan v{plan.version} approved"]
    return []


def _execution_words(values: Mapping[str, Any], before: Mapping[str, Any]) -> list[str]:
    """The steps with a new outcome, and those of them that failed, in words."""
    outcomes = values.get("step_outcomes") or {}
    old_outcomes = before.get("step_outcomes") or {}
    fresh = [k for k in outcomes if outcomes[k] != old_outcomes.get(k)]
    if not fresh:
        return []
    failed = [k for k in fresh if not getattr(outcomes[k], "ok", True)]
    return [f"executed {_ids(fresh)}" + (f" ({_ids(failed)} failed)" if failed else "")]


def _status_change_words(plan: Plan, old: Plan) -> list[str]:
    """The steps whose status changed from ``old`` to ``plan``, grouped by their new status, in words."""
    moved: dict[StepStatus, list[str]] = {}
    for step in plan.steps:
        prev = old.get(step.id)
        if prev is not None and prev.status is not step.status:
            moved.setdefault(step.status, []).append(step.id)
        elif prev is not None and step.status is StepStatus.RUNNING and step.attempts > prev.attempts:
            # verify judged an attempt and started the next one in one update: a retry, then a start
            moved.setdefault(StepStatus.PENDING, []).append(step.id)
            moved.setdefault(StepStatus.RUNNING, []).append(step.id)
    words: list[str] = []
    for new_status, ids in moved.items():
        one, many = _TRANSITION_WORDS[new_status]
        words.append((one if len(ids) == 1 else many).format(_ids(ids)))
    return words


def _next_move_words(s: StateSnapshot, ran: set[str], values: Mapping[str, Any], plan: Plan | None) -> list[str]:
    """Where the run goes next, in words: finalizing, reflecting on trouble, or finished."""
    parts: list[str] = []
    status = values.get("status")
    decided = "dispatch" in ran or "verify" in ran  # both decide what runs next (nodes.dispatch.next_batch)
    if decided and "finalize" in s.next:
        parts.append("all steps done, finalizing" if plan is not None and plan.is_complete else f"finalizing: {status}")
    if decided and "reflect" in s.next and values.get("trouble"):
        parts.append(f"trouble: {_excerpt(str(values['trouble']))}")
    if not s.next and status in _FINISHED:
        parts.append(f"finished: {status}")
    return parts
