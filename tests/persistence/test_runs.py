"""Run queries (``planmode.list_runs`` and ``planmode ls``) on real SQLite files.

Runs in every status are made by the real graph; the fast SQLite path is checked against the generic
``BaseCheckpointSaver.list`` path, and against an in-memory saver; a database of many threads is made by
copying real checkpoints under new thread ids, and the time to list it is printed (not asserted).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command
from typer.testing import CliRunner

import planmode.persistence.runs
from planmode.cli.app import app
from planmode.context import PlanModeContext
from planmode.errors import ConfigurationError
from planmode.executors import StepContext
from planmode.graph import build_graph
from planmode.persistence import sqlite_checkpointer, with_planmode_types
from planmode.persistence.runs import RUN_STATUSES, RunInfo, list_runs
from planmode.persistence.snapshots import list_snapshots, rollback
from planmode.state import Step
from planmode.state.graph_state import OutputState
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

pytestmark = pytest.mark.integration

PLAN = {
    "title": "Release",
    "steps": [
        {"id": "changelog", "description": "Collect the changelog"},
        {"id": "notes", "description": "Write the notes", "dependencies": ["changelog"]},
        {"id": "docs", "description": "Update the docs", "dependencies": ["changelog"]},
    ],
}
PLAN_MODE = PlanModeContext(mode="plan")
AUTO = PlanModeContext(mode="plan", approval="auto")


class Crash(BaseException):
    """Stands in for the process dying in the middle of a step."""


def executor(step: Step, ctx: StepContext) -> str:
    if "crash" in ctx.goal and step.id == "notes":
        raise Crash
    if "broken" in ctx.goal and step.id == "notes":
        raise RuntimeError("the notes could not be written")
    return f"{step.id} finished"


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[SqliteSaver]:
    s = sqlite_checkpointer(tmp_path / "runs.sqlite")
    yield s
    s.conn.close()


def cfg(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def make_runs(checkpointer: Any) -> Any:
    """One run in each status, oldest first: completed, awaiting approval, cancelled, failed, answered,
    running (crashed mid-step), and a thread whose second run replaced its first."""
    script = PurposeScript(plan=PLAN, reflect={"assessment": "failed", "reasoning": "cannot write notes"})
    graph = build_graph(ScriptedChatModel(responder=script), executor=executor, checkpointer=checkpointer)
    graph.invoke({"task": "Ship the release"}, cfg("t-completed"), context=AUTO)
    graph.invoke({"task": "Plan the next release"}, cfg("t-awaiting"), context=PLAN_MODE)
    graph.invoke({"task": "Plan the cancelled release"}, cfg("t-cancelled"), context=PLAN_MODE)
    graph.invoke(Command(resume={"action": "cancel", "feedback": "not now"}), cfg("t-cancelled"))
    graph.invoke(
        {"task": "Ship the broken release"},
        cfg("t-failed"),
        context=PlanModeContext(mode="plan", approval="auto", max_attempts=1),
    )
    graph.invoke({"task": "What is a release?"}, cfg("t-answered"), context=PlanModeContext(mode="direct"))
    with pytest.raises(Crash):
        graph.invoke({"task": "Ship the crash release"}, cfg("t-running"), context=AUTO)
    graph.invoke({"task": "First task of the thread"}, cfg("t-reused"), context=AUTO)
    graph.invoke({"task": "Second task of the thread"}, cfg("t-reused"), context=PLAN_MODE)
    return graph


ORDER = ["t-reused", "t-running", "t-answered", "t-failed", "t-cancelled", "t-awaiting", "t-completed"]


def test_lists_every_run_newest_first_with_its_goal_status_plan_and_steps(saver: SqliteSaver) -> None:
    make_runs(saver)

    runs = list_runs(saver, limit=None)

    assert [r.thread_id for r in runs] == ORDER
    by_id = {r.thread_id: r for r in runs}
    assert {t: r.status for t, r in by_id.items()} == {
        "t-reused": "awaiting_approval",
        "t-running": "running",
        "t-answered": "answered",
        "t-failed": "failed",
        "t-cancelled": "cancelled",
        "t-awaiting": "awaiting_approval",
        "t-completed": "completed",
    }
    done = by_id["t-completed"]
    assert done.goal == "Ship the release" and done.title == "Release" and done.plan_version == 1
    assert done.steps["done"] == 3 and done.total_steps == 3 and done.checkpoint_ns == ""
    assert by_id["t-awaiting"].steps["pending"] == 3
    assert by_id["t-running"].steps["done"] == 1 and by_id["t-running"].steps["running"] == 2
    assert by_id["t-failed"].error and by_id["t-failed"].steps["failed"] == 1
    assert by_id["t-answered"].plan_version is None and by_id["t-answered"].steps == {}
    assert by_id["t-reused"].goal == "Second task of the thread"  # the thread's latest run
    stamps = [r.updated_at for r in runs]
    assert all(s is not None for s in stamps) and stamps == sorted(stamps, reverse=True)  # type: ignore[type-var]
    # Each run is its thread's latest checkpoint, as get_state shows it.
    graph = build_graph(ScriptedChatModel(responder=PurposeScript(plan=PLAN)), checkpointer=saver)
    for run in runs:
        state = graph.get_state(cfg(run.thread_id))
        assert state.config["configurable"]["checkpoint_id"] == run.checkpoint_id
        assert state.values["status"] == run.status


def test_filters_by_status_and_limits(saver: SqliteSaver) -> None:
    make_runs(saver)

    assert [r.thread_id for r in list_runs(saver, status="awaiting_approval")] == ["t-reused", "t-awaiting"]
    assert [r.thread_id for r in list_runs(saver, status="awaiting approval", limit=1)] == ["t-reused"]
    assert [r.thread_id for r in list_runs(saver, status=["completed", "Failed"])] == ["t-failed", "t-completed"]
    assert [r.thread_id for r in list_runs(saver, status="cancelled")] == ["t-cancelled"]
    assert list_runs(saver, status="running")[0].thread_id == "t-running"
    assert [r.thread_id for r in list_runs(saver, limit=2)] == ORDER[:2]
    assert list_runs(saver, limit=0) == []
    with pytest.raises(ValueError, match=r"unknown run status 'done'.*awaiting_approval"):
        list_runs(saver, status="done")
    with pytest.raises(ValueError, match="limit"):
        list_runs(saver, limit=-1)
    assert set(RUN_STATUSES) >= {"awaiting_approval", "running", "completed", "failed", "cancelled"}


def test_the_sqlite_fast_path_agrees_with_the_generic_path_and_an_in_memory_saver(
    saver: SqliteSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_runs(saver)
    memory = with_planmode_types(InMemorySaver())
    make_runs(memory)
    fast = list_runs(saver, limit=None)
    in_memory = list_runs(memory, limit=None)

    monkeypatch.setattr(planmode.persistence.runs, "SqliteSaver", type("NotSqlite", (), {}))  # force the generic path
    generic = list_runs(saver, limit=None)

    assert generic == fast
    assert [_comparable(r) for r in in_memory] == [_comparable(r) for r in fast]


def _comparable(run: RunInfo) -> tuple[Any, ...]:
    return run.thread_id, run.checkpoint_ns, run.goal, run.status, run.plan_version, run.steps, run.error


def test_a_rollback_shows_the_rolled_back_state(saver: SqliteSaver) -> None:
    graph = make_runs(saver)
    snapshots = list_snapshots(graph, "t-completed", limit=None)
    awaiting = next(s for s in snapshots if s.next == ("approve",))  # this run's approval was automatic

    rollback(graph, "t-completed", awaiting.checkpoint_id)

    (run,) = [r for r in list_runs(saver, limit=None) if r.thread_id == "t-completed"]
    assert run.status == "awaiting_approval" and run.steps["pending"] == 3
    assert list_runs(saver, limit=1)[0].thread_id == "t-completed"  # the newest change


def test_nested_runs_are_listed_under_their_parent_thread(saver: SqliteSaver) -> None:
    planmode_graph = build_graph(ScriptedChatModel(responder=PurposeScript(plan=PLAN)), executor=executor)
    builder = StateGraph(OutputState)
    builder.add_node("planmode", planmode_graph)
    builder.add_edge(START, "planmode")
    parent = builder.compile(checkpointer=saver)
    parent.invoke({"messages": [("user", "Ship the release in the parent")]}, cfg("parent"), context=AUTO)

    (run,) = list_runs(saver)
    assert run.thread_id == "parent" and run.checkpoint_ns.startswith("planmode:")
    assert run.status == "completed" and run.goal == "Ship the release in the parent"
    assert list_runs(saver, nested=False) == []  # the parent's own state is not a planmode run


def test_a_graph_can_be_given_instead_of_its_checkpointer(saver: SqliteSaver) -> None:
    graph = make_runs(saver)
    assert list_runs(graph, limit=None) == list_runs(saver, limit=None)
    with pytest.raises(ConfigurationError, match="no checkpointer"):
        list_runs(build_graph(ScriptedChatModel(responder=PurposeScript(plan=PLAN))))
    with pytest.raises(ConfigurationError, match="checkpointer or a compiled graph"):
        list_runs("runs.sqlite")


@pytest.fixture
def pg_saver(pg_url: str) -> Iterator[Any]:
    """A PostgresSaver on a database of its own (the server is shared by the session's tests)."""
    import uuid

    import psycopg

    from planmode.persistence import postgres_checkpointer

    name = f"runs_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    saver = postgres_checkpointer(pg_url.rsplit("/", 1)[0] + "/" + name)
    yield saver
    saver.conn.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name}")


def test_postgres_lists_the_same_runs_as_sqlite_and_as_its_generic_path(
    pg_saver: Any, saver: SqliteSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_runs(pg_saver)
    make_runs(saver)
    runs = list_runs(pg_saver, limit=None)

    assert [r.thread_id for r in runs] == ORDER
    assert [_comparable(r) for r in runs] == [_comparable(r) for r in list_runs(saver, limit=None)]
    assert [r.thread_id for r in list_runs(pg_saver, status=["awaiting_approval", "cancelled"], limit=2)] == [
        "t-reused",
        "t-cancelled",
    ]
    assert list_runs(pg_saver, limit=3) == runs[:3]
    monkeypatch.setattr(planmode.persistence.runs, "is_postgres", lambda saver: False)  # force the generic path
    assert list_runs(pg_saver, limit=None) == runs


def copy_threads(db: Path, n: int) -> int:
    """Copy every thread of ``db`` under new ids until it holds about ``n`` threads; the number of rows."""
    with sqlite3.connect(db) as conn:
        threads = [t for (t,) in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")]
        copies = max(0, n - len(threads)) // len(threads) + 1
        for k in range(1, copies):
            for table in ("checkpoints", "writes"):
                cols = [c[1] for c in conn.execute(f"PRAGMA table_info({table})")]
                select = ", ".join(f"thread_id || '-copy{k}'" if c == "thread_id" else c for c in cols)
                conn.execute(
                    f"INSERT INTO {table} ({', '.join(cols)}) SELECT {select} FROM {table} "
                    "WHERE thread_id NOT LIKE '%-copy%'"
                )
        return int(conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0])


def test_many_threads_read_only_the_latest_checkpoint_of_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "many.sqlite"
    saver = sqlite_checkpointer(db)
    make_runs(saver)
    rows = copy_threads(db, 700)
    threads = 7 * 100
    loads = 0
    original = JsonPlusSerializer.loads_typed

    def counting(self: JsonPlusSerializer, data: tuple[str, bytes]) -> Any:
        nonlocal loads
        loads += 1
        return original(self, data)

    monkeypatch.setattr(JsonPlusSerializer, "loads_typed", counting)

    start = time.perf_counter()
    everything = list_runs(saver, limit=None)
    elapsed_all = time.perf_counter() - start
    assert len(everything) == threads and loads == threads  # one checkpoint per thread, not all `rows`

    loads = 0
    start = time.perf_counter()
    page = list_runs(saver, limit=20)
    elapsed_page = time.perf_counter() - start
    assert len(page) == 20 and loads == 20
    assert page == everything[:20]

    loads = 0
    start = time.perf_counter()
    awaiting = list_runs(saver, status="awaiting_approval", limit=None)
    elapsed_filtered = time.perf_counter() - start
    assert awaiting == [r for r in everything if r.status == "awaiting_approval"] and len(awaiting) == 2 * 100
    assert loads < threads  # blobs without the status string were skipped without deserialising them

    monkeypatch.setattr(planmode.persistence.runs, "SqliteSaver", type("NotSqlite", (), {}))
    start = time.perf_counter()
    generic = list_runs(saver, limit=None)
    elapsed_generic = time.perf_counter() - start
    assert generic == everything
    with capsys.disabled():
        print(
            f"\nlist_runs over {threads} threads ({rows} checkpoints): all {elapsed_all * 1000:.0f} ms, "
            f"newest 20 {elapsed_page * 1000:.1f} ms, awaiting approval {elapsed_filtered * 1000:.0f} ms; "
            f"generic list() path {elapsed_generic * 1000:.0f} ms"
        )
    saver.conn.close()


def test_ls_command_prints_a_table_and_filters(saver: SqliteSaver, tmp_path: Path) -> None:
    make_runs(saver)
    db = tmp_path / "runs.sqlite"
    runner = CliRunner()

    result = runner.invoke(app, ["ls", "--db", str(db)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for thread_id in ORDER:
        assert thread_id in result.output
    assert "Ship the release" in result.output and "awaiting approval" in result.output
    assert result.output.index("t-reused") < result.output.index("t-completed")

    result = runner.invoke(app, ["ls", "--db", str(db), "--status", "cancelled"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "t-cancelled" in result.output and "t-completed" not in result.output

    result = runner.invoke(app, ["ls", "--db", str(db), "--limit", "1"], env={"COLUMNS": "200"})
    assert "t-reused" in result.output and "t-running" not in result.output

    result = runner.invoke(app, ["ls", "--db", str(db), "--status", "done"])
    assert result.exit_code == 2 and "unknown run status" in result.output

    result = runner.invoke(app, ["ls", "--db", str(tmp_path / "missing.sqlite")])
    assert result.exit_code == 2 and "no database" in result.output
    assert not (tmp_path / "missing.sqlite").exists()
