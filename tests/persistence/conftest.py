"""tests/persistence: checkpoints on real SQLite files and PostgreSQL, crash-resume with SIGKILLed worker
processes (crash_worker.py), snapshots, rollback and run queries. Marked integration."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._levels import mark_level
from tests.persistence.test_crash_resume import ForkServer


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_level(items, Path(__file__).parent, pytest.mark.integration)


@pytest.fixture
def fork_server() -> Iterator[ForkServer]:
    """One interpreter that imports planmode once and forks a crash worker per run (killed with SIGKILL)."""
    server = ForkServer()
    try:
        yield server
    finally:
        server.close()
