"""`planmode.persistence.snapshots` on real SQLite files: labels, rollback (by id and by N), fork, and their errors.

The plan: ``a`` and ``c`` run in parallel, ``b`` depends on ``a``. A recording executor counts executions,
so "the run continued from the snapshot" is checked by what ran again, not only by what state says.
"""

from __future__ import annotations

import itertools
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from langgraph.types import Command

from planmode.errors import ConfigurationError, PlanModeError, SnapshotNotFoundError, ThreadNotFoundError
from planmode.graph.builder import build_graph
from planmode.persistence import sqlite_checkpointer
from planmode.persistence.snapshots import Snapshot, fork, list_snapshots, rollback
from planmode.state.models import Plan, Step, StepStatus
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

pytestmark = pytest.mark.integration

S = StepStatus
PLAN = {
    "title": "Three steps",
    "steps": [
        {"id": "a", "description": "Do a"},
        {"id": "b", "description": "Do b", "dependencies": ["a"]},
        {"id": "c", "description": "Do c"},
    ],
}
TASK = "Read the notes, then write the summary and file it"


class Recorder:
    """An executor that records which steps ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, step: Step, ctx: Any) -> str:
        with self._lock:
            self.ran.append(step.id)
        return f"did {step.id}"

    def count(self, step_id: str) -> int:
        with self._lock:
            return self.ran.count(step_id)


def make_graph(db: Path, recorder: Recorder) -> Any:
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    return build_graph(model, executor=recorder, checkpointer=sqlite_checkpointer(db))


def cfg(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def plan_of(graph: Any, thread: str) -> Plan:
    plan = graph.get_state(cfg(thread)).values["plan"]
    assert isinstance(plan, Plan)
    return plan


def statuses(plan: Plan) -> dict[str, str]:
    return {s.id: s.status.value for s in plan.steps}


def approve_pending(graph: Any, thread: str) -> dict[str, Any]:
    state = graph.get_state(cfg(thread))
    assert state.interrupts, f"expected the approval interrupt, next={state.next}"
    payload: dict[str, Any] = state.interrupts[0].value
    graph.invoke(Command(resume={"action": "approve", "revision": payload["revision"]}), cfg(thread))
    return payload


def run_to_end(graph: Any, thread: str) -> None:
    """Start a run that asks for approval, approve it, and run it to completion."""
    graph.invoke({"messages": [("user", TASK)]}, cfg(thread), context={"mode": "plan"})
    approve_pending(graph, thread)
    assert graph.get_state(cfg(thread)).values["status"] == "completed"


def count_checkpoints(db: Path, thread: str | None = None) -> int:
    with sqlite3.connect(db) as conn:
        if thread is None:
            return int(conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0])
        return int(conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id = ?", (thread,)).fetchone()[0])


def find(snaps: list[Snapshot], label: str) -> Snapshot:
    matches = [s for s in snaps if s.label == label]
    assert len(matches) == 1, f"{label!r} not found once in {[s.label for s in snaps]}"
    return matches[0]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


# -- listing ---------------------------------------------------------------------------------------------


def test_labels_are_readable_and_newest_first(db: Path) -> None:
    graph = make_graph(db, Recorder())
    run_to_end(graph, "t")
    snaps = list_snapshots(graph, "t")

    labels = [s.label for s in reversed(snaps)]  # oldest first, as the run went
    assert labels[0] == "run started"
    assert labels[1].startswith("task received: 'Read the notes")
    assert labels[2:] == [
        "task needs a plan",
        "plan v1 created (3 steps); awaiting approval",
        "plan v1 approved",
        "started a, c",
        "executed a, c",
        "steps a, c done; started b",  # verify judges a layer and starts the next one: one checkpoint
        "executed b",
        "step b done; all steps done, finalizing",
        "finished: completed",
    ]
    assert [s.step for s in snaps] == list(range(len(snaps) - 2, -2, -1))
    assert all(
        x.created_at is not None and y.created_at is not None and x.created_at >= y.created_at
        for x, y in itertools.pairwise(snaps)
    )
    assert len({s.checkpoint_id for s in snaps}) == len(snaps)
    assert [s.parent_id for s in snaps[:-1]] == [s.checkpoint_id for s in snaps[1:]]
    assert snaps[-1].parent_id is None

    asking = find(snaps, "plan v1 created (3 steps); awaiting approval")
    assert asking.awaiting_approval and asking.next == ("approve",) and asking.status == "awaiting_approval"
    assert asking.plan_version == 1 and asking.counts["pending"] == 3
    half = find(snaps, "steps a, c done; started b")
    assert half.summary == "plan v1 (1 running, 2 done): steps a, c done; started b"
    assert snaps[-1].summary == "no plan: run started"
    assert half.counts == {"pending": 0, "running": 1, "done": 2, "failed": 0, "blocked": 0, "skipped": 0}
    assert half.next == ("execute_step",) and not half.awaiting_approval
    assert snaps[0].next == () and snaps[0].counts["done"] == 3
    assert snaps[-1].plan_version is None and snaps[-1].counts == {} and snaps[-1].source == "input"
    assert sum(s.awaiting_approval for s in snaps) == 1


def test_limit_and_a_second_connection_see_the_same_snapshots(db: Path) -> None:
    graph = make_graph(db, Recorder())
    run_to_end(graph, "t")
    everything = list_snapshots(graph, "t")
    other = make_graph(db, Recorder())  # a new process would open the file like this
    assert [(s.checkpoint_id, s.label) for s in list_snapshots(other, "t")] == [
        (s.checkpoint_id, s.label) for s in everything
    ]
    first3 = list_snapshots(other, "t", limit=3)
    assert [(s.checkpoint_id, s.label) for s in first3] == [(s.checkpoint_id, s.label) for s in everything[:3]]
    with pytest.raises(ValueError, match="limit"):
        list_snapshots(graph, "t", limit=0)


def test_labels_of_a_failure_a_reflection_and_a_patch(db: Path) -> None:
    patch = {
        "reason": "b cannot work; replace it",
        "remove_steps": ["b"],
        "add_steps": [{"id": "b2", "description": "Do b another way", "dependencies": ["a"]}],
    }
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, patch=patch))
    graph = build_graph(
        model,
        executor=Recorder(),
        verifier=lambda step, output, ctx: (step.id != "b", "wrong"),
        checkpointer=sqlite_checkpointer(db),
    )
    graph.invoke({"messages": [("user", TASK)]}, cfg("t"), context={"mode": "plan", "approval": "auto"})
    labels = [s.label for s in reversed(list_snapshots(graph, "t"))]
    for expected in (
        "plan v1 created (3 steps)",
        "step b to retry; started b",  # verify judged b's first attempt and started its second
        "step b failed; trouble: \"step 'b' failed after 2 attempt(s): wrong\"",  # verify sends it to reflect
        "reflection: needs_adjustment",
        "patched to v2",
        "step b2 done; all steps done, finalizing",
        "finished: completed",
    ):
        assert expected in labels


# -- rollback --------------------------------------------------------------------------------------------


def test_rollback_by_id_reopens_a_done_step_keeps_history_and_continues(db: Path) -> None:
    rec = Recorder()
    graph = make_graph(db, rec)
    run_to_end(graph, "t")
    before = list_snapshots(graph, "t")
    n_before = count_checkpoints(db, "t")
    assert statuses(plan_of(graph, "t")) == {"a": "done", "b": "done", "c": "done"}

    target = find(before, "steps a, c done; started b")
    config = rollback(graph, "t", target.checkpoint_id)

    head = graph.get_state(cfg("t"))
    assert config["configurable"]["checkpoint_id"] == head.config["configurable"]["checkpoint_id"]
    # b is not done again: it runs again, as the attempt the snapshot started
    assert statuses(plan_of(graph, "t")) == {"a": "done", "b": "running", "c": "done"}
    assert head.next == ("execute_step",) and head.values["status"] == "running"
    assert count_checkpoints(db, "t") == n_before + 1  # nothing deleted, one added
    after = list_snapshots(graph, "t")
    assert {s.checkpoint_id for s in before} <= {s.checkpoint_id for s in after}
    number = sorted(s.checkpoint_id for s in before).index(target.checkpoint_id) + 1  # its place in the thread
    assert after[0].label == f"rolled back to #{number}: steps a, c done; started b"
    assert after[0].parent_id == target.parent_id and after[0].source == "fork"

    graph.invoke(None, cfg("t"))
    assert graph.get_state(cfg("t")).values["status"] == "completed"
    assert statuses(plan_of(graph, "t")) == {"a": "done", "b": "done", "c": "done"}
    assert (rec.count("a"), rec.count("b"), rec.count("c")) == (1, 2, 1)  # only b ran again
    assert count_checkpoints(db, "t") > n_before + 1
    assert {s.checkpoint_id for s in after} <= {s.checkpoint_id for s in list_snapshots(graph, "t")}


def test_rollback_by_n_and_continue_with_the_returned_config(db: Path) -> None:
    rec = Recorder()
    graph = make_graph(db, rec)
    run_to_end(graph, "t")
    snaps = list_snapshots(graph, "t")
    assert snaps[2].label == "executed b"

    config = rollback(graph, "t", 2)  # two snapshots back: b ran but is not verified yet
    head = graph.get_state(cfg("t"))
    assert head.next == ("verify",)
    assert statuses(head.values["plan"]) == {"a": "done", "b": "running", "c": "done"}
    assert head.values["plan"] == graph.get_state(snaps[2].config).values["plan"]

    graph.invoke(None, config)
    assert graph.get_state(cfg("t")).values["status"] == "completed"
    assert rec.ran.count("b") == 1  # the execution's outcome was in the snapshot; only verify ran again

    # N counts entries of list_snapshots: 1 is the snapshot before the head (here: back to the old head).
    n = count_checkpoints(db, "t")
    rollback(graph, "t", 1)
    assert count_checkpoints(db, "t") == n + 1
    assert list_snapshots(graph, "t")[0].label.startswith("rolled back to #")


def test_rollback_into_a_parallel_layer_runs_each_step_once_more(db: Path) -> None:
    rec = Recorder()
    graph = make_graph(db, rec)
    run_to_end(graph, "t")
    target = find(list_snapshots(graph, "t"), "started a, c")
    rollback(graph, "t", target.checkpoint_id)
    head = graph.get_state(cfg("t"))
    assert head.next == ("execute_step", "execute_step")
    assert statuses(head.values["plan"]) == {"a": "running", "b": "pending", "c": "running"}
    graph.invoke(None, cfg("t"))
    assert graph.get_state(cfg("t")).values["status"] == "completed"
    assert sorted(rec.ran) == ["a", "a", "b", "b", "c", "c"]


def test_rollback_to_a_pending_approval_asks_again(db: Path) -> None:
    rec = Recorder()
    graph = make_graph(db, rec)
    graph.invoke({"messages": [("user", TASK)]}, cfg("t"), context={"mode": "plan"})
    first = approve_pending(graph, "t")
    assert graph.get_state(cfg("t")).values["status"] == "completed"

    target = find(list_snapshots(graph, "t"), "plan v1 created (3 steps); awaiting approval")
    rollback(graph, "t", target.checkpoint_id)
    head = graph.get_state(cfg("t"))
    assert head.next == ("approve",) and statuses(head.values["plan"]) == dict.fromkeys("abc", "pending")
    assert list_snapshots(graph, "t")[0].awaiting_approval

    graph.invoke(None, cfg("t"))  # continues into the approval node, which asks again
    state = graph.get_state(cfg("t"))
    payload = state.interrupts[0].value
    assert payload["type"] == "planmode.approval" and payload["revision"] == first["revision"]
    assert rec.ran.count("a") == 1  # nothing ran before the new approval
    approve_pending(graph, "t")
    assert graph.get_state(cfg("t")).values["status"] == "completed"
    assert sorted(rec.ran) == ["a", "a", "b", "b", "c", "c"]


def test_rollback_while_waiting_for_approval_then_reject(db: Path) -> None:
    """A rollback from an interrupted head to the same kind of moment: the interrupt is asked again."""
    graph = make_graph(db, Recorder())
    graph.invoke({"messages": [("user", TASK)]}, cfg("t"), context={"mode": "plan"})
    assert graph.get_state(cfg("t")).interrupts
    rollback(graph, "t", 1)  # back to "task needs a plan": the planner runs again
    assert graph.get_state(cfg("t")).next == ("plan",)
    graph.invoke(None, cfg("t"))
    state = graph.get_state(cfg("t"))
    assert state.interrupts and state.values["plan"].version == 1
    graph.invoke(Command(resume={"action": "reject", "feedback": "shorter please"}), cfg("t"))
    assert graph.get_state(cfg("t")).interrupts  # the revised plan is asked for again


# -- fork ------------------------------------------------------------------------------------------------


def test_fork_is_independent_of_the_original(db: Path) -> None:
    rec = Recorder()
    graph = make_graph(db, rec)
    run_to_end(graph, "t")
    snaps = list_snapshots(graph, "t")
    head_id = snaps[0].checkpoint_id
    n_original = count_checkpoints(db, "t")
    target = find(snaps, "steps a, c done; started b")

    new = fork(graph, "t", target.checkpoint_id, "t-fork")
    assert new == "t-fork"
    forked = graph.get_state(cfg(new))
    assert forked.next == ("execute_step",)
    assert statuses(forked.values["plan"]) == {"a": "done", "b": "running", "c": "done"}
    assert forked.values["messages"] == graph.get_state(target.config).values["messages"]
    fork_snaps = list_snapshots(graph, new)
    assert len(fork_snaps) == 1
    number = sorted(s.checkpoint_id for s in list_snapshots(graph, "t")).index(target.checkpoint_id) + 1
    assert fork_snaps[0].label == f"forked from thread 't' at #{number}: steps a, c done; started b"

    graph.invoke(None, cfg(new))
    # the fork is another thread: the grants of "t" are bound to "t" and cover nothing there (issue 43); the
    # fork's own human approves the plan again before b runs in it
    assert rec.count("b") == 1
    approve_pending(graph, new)
    assert graph.get_state(cfg(new)).values["status"] == "completed"
    assert rec.count("b") == 2 and rec.count("a") == 1
    # The original thread did not move.
    assert count_checkpoints(db, "t") == n_original
    assert list_snapshots(graph, "t")[0].checkpoint_id == head_id
    assert statuses(plan_of(graph, "t")) == dict.fromkeys("abc", "done")

    # ...and the original can be rolled back without touching the fork.
    n_fork = count_checkpoints(db, new)
    rollback(graph, "t", target.checkpoint_id)
    graph.invoke(None, cfg("t"))
    assert count_checkpoints(db, new) == n_fork


def test_fork_of_a_pending_approval_asks_in_the_new_thread_only(db: Path) -> None:
    graph = make_graph(db, Recorder())
    run_to_end(graph, "t")
    target = find(list_snapshots(graph, "t"), "plan v1 created (3 steps); awaiting approval")
    new = fork(graph, "t", target.checkpoint_id)
    assert new.startswith("t-fork-")
    graph.invoke(None, cfg(new))
    assert graph.get_state(cfg(new)).interrupts
    assert not graph.get_state(cfg("t")).interrupts
    approve_pending(graph, new)
    assert graph.get_state(cfg(new)).values["status"] == "completed"


def test_fork_by_n_and_into_an_existing_thread(db: Path) -> None:
    graph = make_graph(db, Recorder())
    run_to_end(graph, "t")
    new = fork(graph, "t", 1, "copy")
    assert graph.get_state(cfg("copy")).next == ("finalize",)
    with pytest.raises(PlanModeError, match="already exists"):
        fork(graph, "t", 1, new)


# -- errors ----------------------------------------------------------------------------------------------


def test_errors_name_the_unknown_thread_or_snapshot(db: Path) -> None:
    graph = make_graph(db, Recorder())
    run_to_end(graph, "t")
    total = len(list_snapshots(graph, "t"))
    n = count_checkpoints(db)
    with pytest.raises(ThreadNotFoundError, match="nope"):
        list_snapshots(graph, "nope")
    with pytest.raises(ThreadNotFoundError):
        rollback(graph, "nope", 1)
    with pytest.raises(ThreadNotFoundError):
        fork(graph, "nope", 1)
    with pytest.raises(SnapshotNotFoundError, match="1f0"):
        rollback(graph, "t", "1f000000-0000-6000-8000-000000000000")
    with pytest.raises(SnapshotNotFoundError, match="cannot go"):
        rollback(graph, "t", total)
    with pytest.raises(SnapshotNotFoundError):
        rollback(graph, "t", -1)
    with pytest.raises(SnapshotNotFoundError):
        fork(graph, "t", "not-a-checkpoint")
    with pytest.raises(TypeError):
        rollback(graph, "t", True)
    assert count_checkpoints(db) == n  # failed calls wrote nothing
    # A checkpoint id of another thread is not a snapshot of this one.
    graph.invoke({"messages": [("user", TASK)]}, cfg("other"), context={"mode": "plan"})
    other_id = list_snapshots(graph, "other")[0].checkpoint_id
    with pytest.raises(SnapshotNotFoundError):
        rollback(graph, "t", other_id)


def test_a_graph_without_checkpointer_is_a_clear_error() -> None:
    graph = build_graph(ScriptedChatModel(responder=PurposeScript(plan=PLAN)))
    with pytest.raises(ConfigurationError, match="checkpointer"):
        list_snapshots(graph, "t")
    with pytest.raises(ConfigurationError, match="checkpointer"):
        rollback(graph, "t", 1)


def test_labels_name_the_source_of_each_new_plan_version(db: Path) -> None:
    """A revision the planner made from a human's feedback is labelled as such (it was "patched to v2"), and
    a human's edit at the approval as an edit."""
    revised = {**PLAN, "steps": [*PLAN["steps"], {"id": "d", "description": "Do d", "dependencies": ["c"]}]}
    model = ScriptedChatModel(responder=PurposeScript(plan=[PLAN, revised]))
    graph = build_graph(model, executor=Recorder(), checkpointer=sqlite_checkpointer(db))
    graph.invoke({"messages": [("user", TASK)]}, cfg("t"), context={"mode": "plan"})
    graph.invoke(Command(resume={"action": "reject", "feedback": "add a step d"}), cfg("t"))
    shown = graph.get_state(cfg("t")).interrupts[0].value
    edit = {"update_steps": [{"id": "d", "description": "Do d carefully"}]}
    graph.invoke(Command(resume={"action": "edit", "patch": edit, "revision": shown["revision"]}), cfg("t"))
    labels = [s.label for s in reversed(list_snapshots(graph, "t"))]
    assert any(label.startswith("plan revised from human feedback to v2") for label in labels), labels
    assert any(label.startswith("plan edited to v3") for label in labels), labels
    assert not any("patched to" in label for label in labels), labels
    assert [r.source for r in plan_of(graph, "t").history] == ["planner", "planner (revision)", "human"]
