"""What every level's conftest shares: marking the level's tests (used by each ``tests/<level>/conftest.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest


def mark_level(items: list[pytest.Item], level_dir: Path, *marks: pytest.MarkDecorator) -> None:
    """Add ``marks`` to the collected tests under ``level_dir`` (a conftest's hook sees the whole session)."""
    for item in items:
        if item.path.is_relative_to(level_dir):
            for mark in marks:
                item.add_marker(mark)
