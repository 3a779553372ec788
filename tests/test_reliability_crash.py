"""Reliability: 30 SIGKILL crash-resume trials, as a figure for the README.

Reuses the crash-resume machinery of ``tests/test_crash_resume.py`` and its worker ``tests/crash_worker.py``
(a six-step run killed with SIGKILL one to three times, then resumed to completion; checked: every run
completes, no done step runs again, the database stays readable). This file only adds the 30-trial run the
README's reliability figures quote, with its own seed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

crash = pytest.importorskip("test_crash_resume", reason="tests/test_crash_resume.py provides the crash machinery")

TRIALS = 30


@pytest.fixture
def fork_server() -> Iterator[crash.ForkServer]:
    server = crash.ForkServer()
    try:
        yield server
    finally:
        server.close()


@pytest.mark.slow
@pytest.mark.integration
def test_thirty_killed_runs_resume_to_completion(fork_server: crash.ForkServer, tmp_path: Path) -> None:
    results = crash.run_trials(fork_server.launch, tmp_path, trials=TRIALS, seed=30)
    assert len(results) == TRIALS
    assert all(not t.problems for t in results)
    assert sum(len(t.killed) for t in results) >= TRIALS
