"""The plan reducer's outer safety net, and the SQLite file's journal mode.

`plan_reducer` wraps its inner function in a last ``except``: whatever goes wrong inside, the plan is left
unchanged and the failure recorded as a rejection, so the thread stays readable (a reducer that raises in
LangGraph 1.2 leaves every later ``get_state`` raising). These tests force the inner function to raise.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Annotated, Any

import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

import planmode.state.reducer as reducer_module
from planmode.persistence import sqlite_checkpointer
from planmode.state import Plan, PlanPatch, Step, StepStatus, plan_reducer
from planmode.state.channel import PlanChannel
from planmode.state.reducer import new_plan


class Boom(RuntimeError):
    """What the forced inner failure raises."""


def _plan() -> Plan:
    first, reasons = new_plan(
        Plan(
            goal="ship it",
            steps=[Step(id="a", description="do a"), Step(id="b", description="do b", dependencies=["a"])],
        )
    )
    assert not reasons
    return first


def _explode(*_args: Any, **_kwargs: Any) -> Any:
    raise Boom("inner reducer blew up <b>[red]x[/red]</b> {0}")


def test_inner_failure_leaves_the_plan_unchanged_and_records_it(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan()
    monkeypatch.setattr(reducer_module, "_reduce", _explode)
    out = plan_reducer(plan, PlanPatch(reason="x", remove_steps=["b"]))
    assert out is not None
    assert out.steps == plan.steps
    assert out.version == plan.version
    assert out.history == plan.history
    assert len(out.rejections) == len(plan.rejections) + 1
    rej = out.rejections[-1]
    assert rej.kind == "unknown"
    assert rej.version == plan.version
    assert any("internal error" in r and "Boom" in r and "{0}" in r for r in rej.reasons)


def test_inner_failure_on_an_empty_channel_gives_a_readable_empty_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reducer_module, "_reduce", _explode)
    out = plan_reducer(None, {"goal": "g", "steps": [{"id": "a", "description": "x"}]})
    assert out is not None
    assert out.steps == [] and out.version == 0
    assert len(out.rejections) == 1 and "Boom" in out.rejections[0].reasons[0]


def test_inner_failure_on_a_restored_dict_plan_does_not_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    """A current value that is not a `Plan` (a JSON-restored dict) falls back to an empty plan, never raises."""
    monkeypatch.setattr(reducer_module, "_reduce", _explode)
    out = plan_reducer(_plan().model_dump(mode="json"), None)  # type: ignore[arg-type]
    assert out is not None and out.version == 0 and len(out.rejections) == 1


class _State(TypedDict, total=False):
    plan: Annotated[Plan | None, PlanChannel]
    note: str


def test_thread_stays_readable_when_the_inner_reducer_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through a real graph and a real SQLite file: the write that blows up is recorded, the thread reads."""
    plan = _plan()

    def first(state: _State) -> dict[str, Any]:
        return {"plan": plan}

    def second(state: _State) -> dict[str, Any]:
        monkeypatch.setattr(reducer_module, "_reduce", _explode)  # from here on the inner function raises
        return {"plan": PlanPatch(reason="drop b", remove_steps=["b"]), "note": "after"}

    g: StateGraph[Any, Any, Any, Any] = StateGraph(_State)
    g.add_node("first", first)
    g.add_node("second", second)
    g.add_edge(START, "first")
    g.add_edge("first", "second")
    g.add_edge("second", END)
    saver = sqlite_checkpointer(tmp_path / "net.sqlite")
    try:
        graph = g.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "t"}}
        graph.invoke({}, config)
        monkeypatch.undo()
        snap = graph.get_state(config)
        got = snap.values["plan"]
        assert isinstance(got, Plan)
        assert [s.id for s in got.steps] == ["a", "b"], "the plan is unchanged"
        assert got.version == 1
        assert got.rejections and "internal error" in got.rejections[-1].reasons[0]
        assert snap.values["note"] == "after", "the rest of the write went through"
        assert len(list(graph.get_state_history(config))) >= 3
        # and the thread keeps working once the inner function is back
        graph.update_state(config, {"plan": [{"id": "a", "status": "running"}]})
        assert graph.get_state(config).values["plan"].get("a").status == StepStatus.RUNNING
    finally:
        saver.conn.close()


def test_sqlite_checkpointer_puts_the_file_in_wal_mode(tmp_path: Path) -> None:
    db = tmp_path / "wal.sqlite"
    saver = sqlite_checkpointer(db)
    try:
        assert saver.conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"
    finally:
        saver.conn.close()
    other = sqlite3.connect(str(db))  # WAL is a property of the file: a fresh connection sees it too
    try:
        assert other.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"
    finally:
        other.close()


def test_sqlite_checkpointer_switches_an_existing_rollback_journal_file_to_wal(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    conn = sqlite3.connect(str(db))
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    saver = sqlite_checkpointer(db)
    try:
        assert saver.conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"
    finally:
        saver.conn.close()
