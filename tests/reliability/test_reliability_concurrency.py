"""Reliability: many threads running planmode against one SQLite file at once.

Each worker thread has its own connection (``sqlite_checkpointer`` on the same file) and its own graph, and
runs planmode runs one after another on new thread ids. Every checkpoint a run reports on the
``checkpoints`` stream must be in the database afterwards (read from a fresh connection), every run must
complete, and no worker may see an error — "database is locked" included.

The normal suite runs 4 workers x 3 runs; ``-m slow`` runs 8 workers x 25 runs.
"""

from __future__ import annotations

import sqlite3
import threading
import traceback
from pathlib import Path
from typing import Any

import pytest

from planmode.context import PlanModeContext
from planmode.graph import build_graph
from planmode.persistence import sqlite_checkpointer
from planmode.state.models import Step, StepStatus
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

PLAN = {
    "title": "Parallel",
    "steps": [
        {"id": "a", "description": "first"},
        {"id": "b", "description": "second"},
        {"id": "c", "description": "third", "dependencies": ["a", "b"]},
        {"id": "d", "description": "fourth", "dependencies": ["c"]},
    ],
}
AUTO = PlanModeContext(mode="plan", approval="auto", max_parallel=4)


def work(step: Step, ctx: Any) -> str:
    return f"{step.id} ok"


def run_workers(db: Path, workers: int, runs: int) -> dict[str, list[str]]:
    """Run ``workers`` threads x ``runs`` runs; returns the checkpoint ids each run reported, by thread id."""
    seen: dict[str, list[str]] = {}
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(workers)

    def worker(index: int) -> None:
        saver = None
        try:
            saver = sqlite_checkpointer(db)
            graph = build_graph(
                ScriptedChatModel(responder=PurposeScript(plan=PLAN)), executor=work, checkpointer=saver
            )
            barrier.wait(timeout=60)
            for run in range(runs):
                tid = f"w{index}-r{run}"
                config = {"configurable": {"thread_id": tid}}
                ids = [
                    chunk["config"]["configurable"]["checkpoint_id"]
                    for chunk in graph.stream(
                        {"messages": [("user", "Do a and b, then c, then d")]},
                        config,
                        context=AUTO,
                        stream_mode="checkpoints",
                    )
                ]
                with lock:
                    seen[tid] = ids
        except BaseException:  # collected and reported by the test; a worker must not die silently
            with lock:
                errors.append(f"worker {index}: {traceback.format_exc()}")
        finally:
            if saver is not None:
                saver.conn.close()

    threads = [threading.Thread(target=worker, args=(i,), name=f"worker-{i}") for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    assert not errors, "\n".join(errors)
    return seen


def check_database(db: Path, seen: dict[str, list[str]], expected_runs: int) -> None:
    assert len(seen) == expected_runs
    saver = sqlite_checkpointer(db)  # a fresh connection: what a restarted process reads
    try:
        graph = build_graph(ScriptedChatModel(responder=PurposeScript()), checkpointer=saver)
        for tid, ids in seen.items():
            config = {"configurable": {"thread_id": tid}}
            stored = [s.config["configurable"]["checkpoint_id"] for s in graph.get_state_history(config)]
            assert ids and set(ids) <= set(stored), f"{tid}: lost checkpoints {set(ids) - set(stored)}"
            assert len(stored) == len(ids), (tid, len(stored), len(ids))
            values = graph.get_state(config).values
            assert values["status"] == "completed", (tid, values.get("error"))
            assert all(s.status is StepStatus.DONE for s in values["plan"].steps)
    finally:
        saver.conn.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        threads = conn.execute("SELECT count(DISTINCT thread_id) FROM checkpoints").fetchone()[0]
    conn.close()
    assert threads == expected_runs


def test_four_workers_share_one_sqlite_file(tmp_path: Path) -> None:
    db = tmp_path / "shared.sqlite"
    seen = run_workers(db, workers=4, runs=3)
    check_database(db, seen, 12)


@pytest.mark.slow
def test_eight_workers_times_twenty_five_runs_share_one_sqlite_file(tmp_path: Path) -> None:
    db = tmp_path / "shared.sqlite"
    seen = run_workers(db, workers=8, runs=25)
    check_database(db, seen, 200)
