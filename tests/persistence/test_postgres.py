"""The persistence guarantees on a real PostgreSQL server: resume in a new process, rollback, concurrent
runs, crash-resume, and the CLI on a postgresql:// URL."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from langgraph.types import Command

from planmode.graph import build_graph
from planmode.persistence import postgres_checkpointer
from planmode.state.models import StepStatus
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

pytestmark = pytest.mark.integration

PLAN = {
    "title": "Three steps",
    "steps": [
        {"id": "a", "description": "first"},
        {"id": "b", "description": "second", "dependencies": ["a"]},
        {"id": "c", "description": "third", "dependencies": ["a"]},
    ],
}


def _graph(url: str, executed: list[str] | None = None) -> tuple[Any, Any]:
    saver = postgres_checkpointer(url)

    def executor(step: Any, ctx: Any) -> str:
        if executed is not None:
            executed.append(step.id)
        return f"did {step.id}"

    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    return build_graph(model, executor=executor, verifier=lambda s, o, c: True, checkpointer=saver), saver


def test_interrupt_then_resume_with_a_new_saver(pg_url: str) -> None:
    cfg: Any = {"configurable": {"thread_id": uuid.uuid4().hex}}
    g1, saver1 = _graph(pg_url)
    g1.invoke({"messages": [("user", "do a, then b and c")]}, cfg, context={"mode": "plan"})
    rev = g1.get_state(cfg).interrupts[0].value["revision"]
    saver1.conn.close()  # as if the process ended
    executed: list[str] = []
    g2, saver2 = _graph(pg_url, executed)
    g2.invoke(Command(resume={"action": "approve", "revision": rev}), cfg)
    values = g2.get_state(cfg).values
    assert values["status"] == "completed"
    assert sorted(executed) == ["a", "b", "c"]
    assert len(list(g2.get_state_history(cfg))) > 5
    saver2.conn.close()


def test_rollback_on_postgres(pg_url: str) -> None:
    from planmode.persistence.snapshots import list_snapshots, rollback

    tid = uuid.uuid4().hex
    executed: list[str] = []
    g, saver = _graph(pg_url, executed)
    cfg: Any = {"configurable": {"thread_id": tid}}
    g.invoke({"messages": [("user", "do a, then b and c")]}, cfg, context={"mode": "plan", "approval": "auto"})
    assert g.get_state(cfg).values["status"] == "completed"
    before = list_snapshots(g, tid)
    target = next(s for s in reversed(before) if s.counts.get("done") == 1)
    rollback(g, tid, target.checkpoint_id)
    plan = g.get_state(cfg).values["plan"]
    assert [s.status for s in plan.steps].count(StepStatus.DONE) == 1
    g.invoke(None, cfg)
    assert g.get_state(cfg).values["status"] == "completed"
    assert len(list_snapshots(g, tid)) > len(before)  # nothing deleted
    saver.conn.close()


def test_concurrent_runs_share_one_database(pg_url: str) -> None:
    g, saver = _graph(pg_url)

    def one(i: int) -> tuple[str, int]:
        cfg: Any = {"configurable": {"thread_id": f"conc-{uuid.uuid4().hex}-{i}"}}
        g.invoke({"messages": [("user", "do a, then b and c")]}, cfg, context={"mode": "plan", "approval": "auto"})
        return g.get_state(cfg).values["status"], len(list(g.get_state_history(cfg)))

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(one, range(12)))
    assert all(status == "completed" for status, _ in results)
    assert len({n for _, n in results}) == 1  # every run stored the same number of checkpoints: none lost
    saver.conn.close()


def test_cli_on_a_postgres_url(pg_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    tid = uuid.uuid4().hex
    cfg: Any = {"configurable": {"thread_id": tid}}
    g, saver = _graph(pg_url)
    g.invoke({"messages": [("user", "do a, then b and c")]}, cfg, context={"mode": "plan", "approval": "auto"})
    saver.conn.close()
    proc = subprocess.run(
        [sys.executable, "-m", "planmode.cli", "show", tid, "--db", pg_url],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "completed" in proc.stdout


def test_unreachable_postgres_is_a_clear_error() -> None:
    from planmode.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="PostgreSQL"):
        postgres_checkpointer("postgresql://nobody:secret@127.0.0.1:1/none")


def _database_per_trial(pg_url: str) -> Any:
    import psycopg

    base = pg_url.rsplit("/", 1)[0]
    prefix = f"crash_{uuid.uuid4().hex[:8]}"

    def db_for(i: int) -> str:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{prefix}_{i}"')
        return f"{base}/{prefix}_{i}"

    return db_for


def test_crash_resume_on_postgres(pg_url: str, tmp_path: Any) -> None:
    """The SIGKILL crash-resume trials of tests/persistence/test_crash_resume.py, each on its own PostgreSQL database:
    every run completes, no done step runs again, every database stays readable."""

    from tests.persistence.test_crash_resume import ForkServer, run_trials

    server = ForkServer()
    try:
        results = run_trials(server.launch, tmp_path, trials=20, seed=5432, db_for=_database_per_trial(pg_url))
    finally:
        server.close()
    assert all(t.checkpoints > 0 for t in results)


def test_killed_just_after_a_dependent_started_on_postgres(pg_url: str, tmp_path: Any) -> None:
    """The durability trials (chain a -> b -> c, killed 0-100 ms after b or c began, LangGraph's default
    "async" durability) on PostgreSQL: 30 trials, no done step runs again."""

    from tests.persistence.test_crash_resume import ForkServer, run_trials

    server = ForkServer()
    try:
        results = run_trials(
            server.launch,
            tmp_path,
            trials=30,
            seed=15,
            db_for=_database_per_trial(pg_url),
            kill_after="dependent",
            plan="chain",
        )
    finally:
        server.close()
    assert sum(t.re_runs_of_done_steps for t in results) == 0
    assert sum(t.kills_after_dependent for t in results) >= 27


def test_two_processes_on_one_thread_postgres(pg_url: str, tmp_path: Any) -> None:
    """The per-thread lease on PostgreSQL: a second process is refused while the first runs."""
    from tests.reliability.test_reliability_lease import two_processes_on_one_thread

    two_processes_on_one_thread(_database_per_trial(pg_url)(0), tmp_path)


def test_a_sigkilled_holder_is_taken_over_postgres(pg_url: str, tmp_path: Any) -> None:
    """The per-thread lease on PostgreSQL: a holder killed with SIGKILL is taken over at once."""
    from tests.reliability.test_reliability_lease import sigkilled_holder_is_taken_over

    sigkilled_holder_is_taken_over(_database_per_trial(pg_url)(0), tmp_path)


def test_a_stopped_holder_is_fenced_postgres(pg_url: str, tmp_path: Any) -> None:
    """The lease's fence on PostgreSQL: a holder stopped past its expiry and taken over writes nothing and
    starts no step once continued."""
    from tests.reliability.test_reliability_lease import stopped_holder_is_fenced

    stopped_holder_is_fenced(_database_per_trial(pg_url)(0), tmp_path)


def test_a_write_with_a_stale_epoch_is_refused_and_the_epoch_increments_postgres(pg_url: str) -> None:
    """The fence's unit checks on PostgreSQL: a stale-epoch write refused in its transaction; the epoch grows."""
    import psycopg

    from tests.reliability.test_reliability_lease import FENCED, epoch_increments, stale_epoch_write_is_refused

    url = _database_per_trial(pg_url)(0)

    def sql(statement: str) -> None:
        with psycopg.connect(url, autocommit=True) as other:
            other.execute(statement)  # type: ignore[arg-type]  # a test's literal statement

    def epoch_of() -> int:
        with psycopg.connect(url, autocommit=True) as other:
            row = other.execute("SELECT epoch FROM planmode_leases WHERE thread_id = %s", (FENCED,)).fetchone()
        assert row is not None
        return int(row[0])

    saver = postgres_checkpointer(url)
    try:
        stale_epoch_write_is_refused(saver, sql)
        sql("DELETE FROM planmode_leases")
        epoch_increments(saver, sql, epoch_of)
    finally:
        saver.conn.close()
