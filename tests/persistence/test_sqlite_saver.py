"""`SqliteCheckpointSaver` syncs the file where it matters: every checkpoint that changes the plan (a step
done, an edit, an approval) commits with ``synchronous=FULL``; checkpoints that only carry executed outcomes
and pending writes commit with NORMAL (durable against a killed process, synced by the next FULL commit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from planmode.graph import build_graph
from planmode.persistence import sqlite_checkpointer
from planmode.persistence._sqlite_saver import SqliteCheckpointSaver, needs_sync
from planmode.state.models import StepStatus
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

PLAN = {
    "goal": "g",
    "title": "t",
    "steps": [
        {"id": "a", "description": "do a"},
        {"id": "b", "description": "do b", "dependencies": ["a"]},
    ],
}


def test_needs_sync_only_skips_outcomes_their_usage_and_trigger_channels() -> None:
    assert not needs_sync({"step_outcomes": 3, "branch:to:verify": 2, "__pregel_tasks": 4})
    assert not needs_sync({"step_outcomes": 3, "usage": 2, "branch:to:verify": 2})  # execute_step's super-step
    assert needs_sync({"step_outcomes": 3, "plan": 5})
    assert needs_sync({"status": 1})
    assert needs_sync({"messages": 1, "__start__": 1})
    assert needs_sync({})  # nothing known: sync


def test_checkpoints_that_change_the_plan_are_synced_before_a_dependent_starts(tmp_path: Path) -> None:
    saver = sqlite_checkpointer(tmp_path / "s.db")
    assert isinstance(saver, SqliteCheckpointSaver)
    assert saver.conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL between checkpoints
    statements: list[str] = []
    saver.conn.set_trace_callback(statements.append)
    events: list[tuple[str, int]] = []

    def executor(step: Any, ctx: Any) -> str:
        # how many FULL checkpoint commits happened before this step started
        events.append((step.id, sum("PRAGMA synchronous=FULL" in s for s in statements)))
        return f"{step.id} ok"

    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    graph = build_graph(model, checkpointer=saver, executor=executor, verifier=lambda s, o, c: (True, "ok"))
    out = graph.invoke(
        {"messages": [("user", "do a then b")]},
        {"configurable": {"thread_id": "t"}},
        context={"mode": "plan", "approval": "auto"},
    )
    assert out["status"] == "completed"
    assert all(s.status is StepStatus.DONE for s in out["plan"].steps)
    inserts = [i for i, s in enumerate(statements) if s.startswith("INSERT OR REPLACE INTO checkpoints")]
    pragmas = [i for i, s in enumerate(statements) if s.startswith("PRAGMA synchronous=")]
    synced = [i for i in inserts if statements[max(p for p in pragmas if p < i)] == "PRAGMA synchronous=FULL"]
    history = list(graph.get_state_history({"configurable": {"thread_id": "t"}}))
    assert len(inserts) == len(history)
    # Two checkpoints only carried executed outcomes (after each execute_step super-step): not synced alone.
    assert len(inserts) - len(synced) == 2
    # b started after the checkpoint recording a done was synced (more FULL commits than when a started).
    (a_at,) = [n for sid, n in events if sid == "a"]
    (b_at,) = [n for sid, n in events if sid == "b"]
    assert b_at > a_at
    assert saver.conn.execute("PRAGMA synchronous").fetchone()[0] == 1


@pytest.mark.parametrize("reads", [1, 3])
def test_a_second_connection_reads_every_checkpoint(tmp_path: Path, reads: int) -> None:
    db = tmp_path / "r.db"
    saver = sqlite_checkpointer(db)
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    graph = build_graph(model, checkpointer=saver, executor=lambda s, c: "ok", verifier=lambda s, o, c: (True, ""))
    graph.invoke({"messages": [("user", "x")]}, {"configurable": {"thread_id": "t"}}, context={"approval": "auto"})
    n = len(list(graph.get_state_history({"configurable": {"thread_id": "t"}})))
    for _ in range(reads):
        other = build_graph(model, checkpointer=sqlite_checkpointer(db))
        assert len(list(other.get_state_history({"configurable": {"thread_id": "t"}}))) == n


@pytest.mark.parametrize("n", [0, 1, 3, 400])
def test_a_plan_encoded_once_is_written_byte_for_byte_as_the_serializer_writes_it(n: int) -> None:
    from planmode.persistence import planmode_serializer
    from planmode.persistence._sqlite_saver import _as_ext
    from planmode.state.models import Plan, Step

    serde = planmode_serializer()
    plan = Plan(goal="g", steps=[Step(id=f"s{i}", description="d" * 50, result="r" * 400) for i in range(n)])
    encoded = _as_ext(serde.dumps_typed(plan))
    assert encoded is not None
    assert serde.dumps_typed({"x": 1, "plan": encoded}) == serde.dumps_typed({"x": 1, "plan": plan})
    assert serde.loads_typed(serde.dumps_typed({"plan": encoded}))["plan"] == plan
    assert _as_ext(("msgpack", b"\x93\x01\x02\x03")) is None  # not an extension value: not embedded
    assert _as_ext(("json", b"{}")) is None


def test_every_checkpoint_of_a_run_reads_back_its_plan(tmp_path: Path) -> None:
    """The execute_step checkpoints reuse the plan's encoding: each reads back the plan of its run."""
    saver = sqlite_checkpointer(tmp_path / "p.db")
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    graph = build_graph(model, checkpointer=saver, executor=lambda s, c: "ok", verifier=lambda s, o, c: (True, ""))
    cfg: Any = {"configurable": {"thread_id": "t"}}
    seen: list[tuple[str, ...]] = []
    for _ in graph.stream({"messages": [("user", "x")]}, cfg, context={"approval": "auto"}):
        plan = graph.get_state(cfg).values.get("plan")
        seen.append(tuple(s.status.value for s in plan.steps) if plan is not None else ())
    history = [h.values.get("plan") for h in graph.get_state_history(cfg)]
    statuses = {tuple(s.status.value for s in p.steps) for p in history if p is not None}
    assert {s for s in seen if s} <= statuses
    assert ("running", "pending") in statuses and ("done", "running") in statuses and ("done", "done") in statuses
