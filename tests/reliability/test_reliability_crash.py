"""Reliability: SIGKILL crash-resume trials, as figures for the README.

Reuses the crash-resume machinery of ``tests/persistence/test_crash_resume.py`` and its worker
``tests/persistence/crash_worker.py``
(a six-step run killed with SIGKILL one to three times, then resumed to completion; checked: every run
completes, no done step runs again, the database stays readable). This file only adds the trial runs the
reliability figures quote, with their own seeds: 30 random kills, and 30 durability trials per database (the
chain a -> b -> c under LangGraph's default "async" durability, killed 0-100 ms after a step with a
dependency began; no done step may run again).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.persistence import test_crash_resume as crash

TRIALS = 30


@pytest.mark.slow
@pytest.mark.integration
def test_thirty_killed_runs_resume_to_completion(fork_server: crash.ForkServer, tmp_path: Path) -> None:
    results = crash.run_trials(fork_server.launch, tmp_path, trials=TRIALS, seed=30)
    assert len(results) == TRIALS
    assert all(not t.problems for t in results)
    assert sum(len(t.killed) for t in results) >= TRIALS


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_durability_kills_just_after_a_dependent_started(
    fork_server: crash.ForkServer, tmp_path: Path, database: str, request: pytest.FixtureRequest
) -> None:
    db_for: Any = None
    if database == "postgres":
        import psycopg

        url: str = request.getfixturevalue("pg_url")
        base, prefix = url.rsplit("/", 1)[0], f"durable_{uuid.uuid4().hex[:8]}"

        def db_for(i: int) -> str:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{prefix}_{i}"')
            return f"{base}/{prefix}_{i}"

    results = crash.run_trials(
        fork_server.launch, tmp_path, trials=TRIALS, seed=31, db_for=db_for, kill_after="dependent", plan="chain"
    )
    assert sum(t.kills_after_dependent for t in results) >= TRIALS * 0.9
    assert sum(t.re_runs_of_done_steps for t in results) == 0
