"""tests/reliability: the trials that docs/reliability.md quotes (malformed model output, bad resume payloads,
crashes, concurrent resumes and edits, the lease, the store, tool abuse); ``bench.reliability`` runs them and
writes the table. Marked integration."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from planmode.persistence import sqlite_checkpointer
from tests._levels import mark_level
from tests.persistence.conftest import fork_server  # noqa: F401  (the crash trials share persistence's fixture)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_level(items, Path(__file__).parent, pytest.mark.integration)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """One SQLite file per test module: its threads survive from test to test, as a user's database does."""
    return tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]) / "threads.sqlite"


@pytest.fixture
def saver(db: Path) -> Iterator[SqliteSaver]:
    """A fresh connection to the module's file for each test."""
    s = sqlite_checkpointer(db)
    yield s
    s.conn.close()
