"""The CLI for issue 15 items 3-5: ``show --mermaid``, ``show --png`` (offline, Pillow), the approvals log, and
``run --step-approval writes`` answering the per-step question, through typer's CliRunner and a real SQLite file."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command
from typer.testing import CliRunner

from planmode.cli.app import app
from planmode.context import PlanModeContext
from planmode.graph import build_graph
from planmode.persistence import sqlite_checkpointer
from planmode.testing.openai_server import ScriptedOpenAIServer
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

pytestmark = pytest.mark.integration

HOSTILE = 'say "hi"] --> s9\n<b>[x]</b> & #1; `tick` \ud800'
PLAN = {
    "title": "Picture",
    "steps": [
        {"id": "a", "description": HOSTILE},
        {"id": "b", "description": "left", "dependencies": ["a"]},
        {"id": "c", "description": "right", "dependencies": ["a"]},
    ],
}


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[SqliteSaver]:
    s = sqlite_checkpointer(tmp_path / "runs.sqlite")
    yield s
    s.conn.close()


def make_run(saver: SqliteSaver) -> None:
    model = ScriptedChatModel(responder=PurposeScript(plan=[PLAN]))
    graph = build_graph(model, executor=lambda step, ctx: f"{step.id} ok", checkpointer=saver)
    cfg = {"configurable": {"thread_id": "pic"}}
    graph.invoke({"task": "draw"}, cfg, context=PlanModeContext(mode="plan"))
    revision = graph.get_state(cfg).values["plan"].revision
    graph.invoke(Command(resume={"action": "approve", "revision": revision}), cfg)


def test_show_mermaid_prints_the_diagram_with_statuses(saver: SqliteSaver, tmp_path: Path) -> None:
    make_run(saver)
    result = CliRunner().invoke(app, ["show", "pic", "--db", str(tmp_path / "runs.sqlite"), "--mermaid"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith("flowchart LR\n")
    assert ":::done" in out and "s0 --> s1" in out and "s0 --> s2" in out
    assert "<b>" not in out and '"hi"' not in out and "\n  s9" not in out
    assert 'subgraph L1["layer 2"]' in out  # b and c in one column


def test_show_png_draws_offline(saver: SqliteSaver, tmp_path: Path, network_guard: Any) -> None:
    from PIL import Image

    make_run(saver)
    png = tmp_path / "plan.png"
    result = CliRunner().invoke(app, ["show", "pic", "--db", str(tmp_path / "runs.sqlite"), "--png", str(png)])
    assert result.exit_code == 0, result.output
    with Image.open(png) as image:
        assert image.format == "PNG"
        width, height = image.size
        assert width > height > 0  # two columns side by side
        colours = {c for _, c in image.getcolors(maxcolors=1 << 16) or []}
    assert (0xD3, 0xF9, 0xD8) in colours  # done steps are green


def test_show_png_without_pillow_names_the_extra(
    saver: SqliteSaver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_run(saver)
    monkeypatch.setitem(sys.modules, "PIL", None)
    png = tmp_path / "plan.png"
    result = CliRunner().invoke(app, ["show", "pic", "--db", str(tmp_path / "runs.sqlite"), "--png", str(png)])
    assert result.exit_code != 0
    assert "planmode[png]" in result.output and not png.exists()


def test_show_lists_the_approvals(saver: SqliteSaver, tmp_path: Path) -> None:
    make_run(saver)
    result = CliRunner().invoke(app, ["show", "pic", "--db", str(tmp_path / "runs.sqlite")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "plan v1: approved by human (policy settings)" in result.output


def _responder(body: dict[str, Any]) -> Any:
    first = body["messages"][0]
    text = first["content"] if isinstance(first["content"], str) else json.dumps(first["content"])
    purpose = text.split("\n", 1)[0].removeprefix("planmode:")
    if purpose == "plan":
        return json.dumps(
            {
                "title": "Notes",
                "steps": [
                    {"id": "look", "description": "List the files", "tools": ["list_files"]},
                    {"id": "note", "description": "Note it", "tools": ["write_file"], "dependencies": ["look"]},
                ],
            }
        )
    if purpose == "verify":
        return json.dumps({"passed": True, "reason": ""})
    if purpose == "explore":
        return "empty workspace"
    return "done"


def test_auto_approve_with_step_approval_still_asks_each_write_step_of_a_human(tmp_path: Path) -> None:
    """--auto-approve approves the plan (by the policy); the per-step question is the human's: without a
    terminal it is left open, never answered in the human's name (issue 21, item 3)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    db = tmp_path / "cli.sqlite"
    with ScriptedOpenAIServer(_responder) as srv:
        result = CliRunner().invoke(
            app,
            [
                "run",
                "Note the files",
                "--workspace",
                str(ws),
                "--db",
                str(db),
                "--thread",
                "st",
                "--mode",
                "plan",
                "--auto-approve",
                "--step-approval",
                "writes",
                "--base-url",
                srv.base_url,
            ],
            env={"OPENAI_API_KEY": "test", "COLUMNS": "200"},
        )
    assert result.exit_code == 3, result.output  # left for later, resumable
    assert "Run step note?" in result.output and "changes things: write_file" in result.output
    assert "```" not in result.output  # rendered, not Markdown and Mermaid source (issue 23, item 11)
    assert "needs an answer at a terminal" in result.output
    shown = CliRunner().invoke(app, ["show", "st", "--db", str(db)], env={"COLUMNS": "200"})
    assert "plan v1: approved by policy" in shown.output
    assert "step note" not in shown.output and "by human" not in shown.output


def test_step_approval_env_var_is_validated(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["run", "x", "--workspace", str(tmp_path), "--db", str(tmp_path / "x.sqlite")],
        env={"PLANMODE_STEP_APPROVAL": "sometimes", "OPENAI_API_KEY": "test"},
    )
    assert result.exit_code == 2 and "sometimes" in result.output
