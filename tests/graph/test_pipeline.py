"""Each node's pipeline is data (issue 22, item 1): one table in graph/pipeline.py, applied by one helper, held
against the table a newcomer reads in docs/architecture.md."""

from __future__ import annotations

import re
from pathlib import Path

from planmode.graph import build_state_graph
from planmode.graph.pipeline import PIPELINES

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def _doc_table() -> dict[str, list[str]]:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Each node's pipeline") :]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines()[4:]:
        if not line.startswith("| "):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] in ("node", "---"):
            continue
        rows[cells[0]] = re.findall(r"`(\w+)` →", cells[1])
    return rows


def test_the_documented_pipelines_are_the_pipelines_the_graph_is_built_with() -> None:
    assert _doc_table() == {name: list(wrappers) for name, wrappers in PIPELINES.items()}


def test_every_node_of_the_graph_has_a_pipeline_and_data_writes_is_outermost() -> None:
    assert set(PIPELINES) == set(build_state_graph().nodes)
    assert all(wrappers[0] == "data_writes" for wrappers in PIPELINES.values())
    assert "trusted_task" in PIPELINES["execute_step"]  # the step's budget and usage come from the channels
