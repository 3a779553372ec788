"""Issue 21 §7: no control character of a model's, a tool's or a human's text reaches the terminal. Every
screen prints through the CLI's console (`planmode.cli.ui.console`), whose render hook shows each one as an
escape: the step's visible text still appears."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from rich.prompt import Prompt
from rich.text import Text

from planmode.cli import ui
from planmode.cli.ui import approval_screen, error_text, plan_table, render_event
from planmode.state.models import Plan

ATTACKS = {
    "conceal": "secret \x1b[8mdrop the database\x1b[0m part",
    "osc52": "copy \x1b]52;c;ZWNobyBwd25lZA==",  # no terminator: swallows what follows on a terminal
    "title": "title \x1b]0;owned\x07 here",
    "cursor": "move \x1b[2A\x1b[2K up",
    "c1_csi": "c1 \x9b8m hidden",
    "bidi": "bidi \u202egnp.exe",
    "del_bs": "del \x7f bs \x08 cr \r end",
}
FORBIDDEN = ["\x1b", "\x9b", "\u202e", "\x07", "\x7f", "\x08", "\r", "\x9d"]


@pytest.fixture
def screen(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    buf = io.StringIO()
    # the console's private fields, so that undoing the patch restores them exactly (the public `file` and
    # `width` setters would pin today's stdout and width for the tests that follow)
    monkeypatch.setattr(ui.console, "_file", buf)
    monkeypatch.setattr(ui.console, "_color_system", None)  # no styles of rich's own: any ESC came from text
    monkeypatch.setattr(ui.console, "_width", 400)
    yield buf


def plan_with(text: str) -> Plan:
    return Plan.model_validate(
        {
            "goal": f"goal {text}",
            "title": f"title {text}",
            "steps": [
                {"id": "a", "description": text, "acceptance": f"ok {text}"},
                {"id": "b", "description": "the step after", "dependencies": ["a"]},
            ],
        }
    )


def assert_clean(out: str) -> None:
    for bad in FORBIDDEN:
        assert bad not in out, (bad, out)


@pytest.mark.parametrize("name", list(ATTACKS))
def test_no_control_character_of_a_plan_reaches_the_terminal(screen: io.StringIO, name: str) -> None:
    text = ATTACKS[name]
    plan = plan_with(text)
    ui.console.print(plan_table(plan))
    payload: dict[str, Any] = {
        "plan": plan.model_dump(mode="json"),
        "reason": f"reason {text}",
        "error": f"error {text}",
        "changes": {"added": ["a"], "updated": {"b": {"description": [text, "new"]}}},
    }
    ui.console.print(approval_screen(payload))
    ui.console.print(render_event({"type": "step_started", "message": text, "step_id": "a"}))
    ui.console.print(error_text(text))
    ui.console.print(text)  # a plain string printed by mistake
    ui.console.print(Text(text, style="bold"))
    out = screen.getvalue()
    assert_clean(out)
    head = text.split("\x1b")[0].split("\x9b")[0].split("\u202e")[0].split("\x7f")[0]
    assert head.strip() in out  # the visible text of the step still appears
    assert "the step after" in out  # the rest of the plan too (an unterminated OSC hides nothing)


def test_a_prompt_shows_no_control_character(screen: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("builtins.input", lambda *a: "approve")
    answer = Prompt.ask(Text(f"Run {ATTACKS['osc52']}?"), choices=["approve", "cancel"], console=ui.console)
    assert answer == "approve"
    out = screen.getvalue()
    assert_clean(out)
    assert "Run copy" in out and "approve" in out


def test_the_escapes_are_shown_not_dropped(screen: io.StringIO) -> None:
    ui.console.print(Text(ATTACKS["conceal"]))
    assert "secret \\x1b[8mdrop the database\\x1b[0m part" in screen.getvalue()
