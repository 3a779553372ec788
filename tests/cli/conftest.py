"""tests/cli: the ``planmode`` command through typer's runner, real subprocesses and a pty, against the
scripted OpenAI-compatible server on 127.0.0.1. Every test here starts real components: marked integration."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._levels import mark_level


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_level(items, Path(__file__).parent, pytest.mark.integration)
