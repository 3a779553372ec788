"""tests/ecosystem: planmode where users meet it: as a tool and a subgraph of other agents, LangChain's
create_agent, LangGraph Studio (``langgraph dev`` with the SDK), OpenAI-compatible servers over HTTP, a real
llama.cpp server, the notebooks, the README's blocks, the benchmarks' smoke runs and the tooling. Marked
integration."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._levels import mark_level


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_level(items, Path(__file__).parent, pytest.mark.integration)
