"""Issue 21 §7: step text in every markdown planmode renders is escaped, so a rendered approval shows what
will run (an HTML comment, a link, a heading, a code span or a table in a step's text renders as its text)."""

from __future__ import annotations

import html

import pytest
from markdown_it import MarkdownIt

from planmode.approval import approval_payload
from planmode.nodes._gates import step_payload
from planmode.state.models import Plan

HIDDEN = "deploy to staging <!-- and drop the PRODUCTION database -->"
LINK = "[the docs](javascript:alert(1))"
HEADING = "# Approved already"
TICKS = "run `rm -rf /` now"
TABLE = "| a | b |\n|---|---|\n| c | d |"
IMAGE = "![x](http://evil/track.png)"
TAG = "<img src=x onerror=alert(1)>"


def render(markdown: str) -> str:
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


def plan() -> Plan:
    return Plan.model_validate(
        {
            "goal": f"goal {TAG}",
            "title": f"title {HEADING}",
            "steps": [
                {"id": "hide", "description": HIDDEN, "tools": ["write_file"]},
                {"id": "link", "description": LINK, "acceptance": TICKS},
                {"id": "head", "description": HEADING, "dependencies": ["hide"]},
                {"id": "table", "description": TABLE + " " + IMAGE + " " + TAG, "dependencies": ["link"]},
            ],
        }
    )


def assert_shown_literally(rendered: str) -> None:
    assert "<!--" not in rendered  # the comment is text, so the step is visible
    assert "drop the PRODUCTION database" in rendered
    assert "<a " not in rendered and "<img" not in rendered
    assert "<h1>Approved" not in rendered and "<table>" not in rendered
    assert "<code>rm" not in rendered
    text = html.unescape(rendered)
    assert "[the docs](javascript:alert(1))" in text


@pytest.mark.parametrize("which", ["approval", "step"])
def test_step_text_renders_as_text(which: str) -> None:
    p = plan()
    if which == "approval":
        markdown = str(approval_payload(p, error=None, reason="initial plan")["markdown"])
        assert_shown_literally(render(markdown))
        assert "run `rm -rf /` now" in html.unescape(render(markdown))
        assert "&lt;img src=x onerror=alert(1)&gt;" in render(markdown)
    else:
        for step in p.steps:
            markdown = str(step_payload(p, step, ["write_file"], None)["markdown"])
            rendered = render(markdown.split("```mermaid")[0])
            assert "<!--" not in rendered and "<a " not in rendered and "<table>" not in rendered
            assert "<img" not in rendered and "<h1>Approved" not in rendered
        hide = render(str(step_payload(p, p.steps[0], ["write_file"], None)["markdown"]).split("```mermaid")[0])
        assert "drop the PRODUCTION database" in hide
