"""Prompts are data, and the prompts the graph actually sends are snapshot-tested: a change to a prompt
constant or to how a node formats it shows up in review as a diff of tests/graph/snapshots/prompts.txt.

Regenerate after an intended change: ``PLANMODE_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest
tests/graph/llm/test_prompts_snapshot.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from langchain_core.tools import tool

from planmode.graph import build_graph
from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest, tool_call
from planmode.tools import read_only

SNAPSHOT = Path(__file__).parent.parent / "snapshots" / "prompts.txt"

PLAN = {
    "title": "Greeting",
    "steps": [
        {"id": "draft", "description": "Draft the greeting", "acceptance": "a greeting exists", "tools": ["lookup"]},
        {"id": "polish", "description": "Polish the greeting", "dependencies": ["draft"], "acceptance": "it is polite"},
    ],
}
PATCH = {
    "reason": "polish needs the name first",
    "add_steps": [{"id": "name", "description": "Look up the name", "after": "draft", "dependencies": ["draft"]}],
    "update_steps": [{"id": "polish", "dependencies": ["draft", "name"]}],
}


@tool
def lookup(key: str) -> str:
    """Look a value up (read-only)."""
    return f"value of {key}"


def _explore(req: ScriptRequest) -> Any:
    return "Found the template." if req.tool_results() else {"tool_calls": [tool_call("lookup", key="template")]}


def _verify(req: ScriptRequest) -> Any:
    text = req.text()
    if "Step `polish`" in text and "after name" not in text and "name" not in text.split("Outcome:")[-1]:
        return {"passed": False, "reason": "the name is missing"}
    return {"passed": True, "reason": ""}


def _execute(req: ScriptRequest) -> Any:
    return f"{req.step_id} done" + (
        " with the name"
        if req.step_id == "polish" and "Step `name`" not in req.text() and "- name:" in req.text()
        else ""
    )


def render(requests: list[ScriptRequest]) -> str:
    """Every request's messages; the first request with a structured-output schema also shows the schema's
    JSON (what the model is sent besides the messages, and a large share of a call's input tokens)."""
    out = []
    shown: set[str] = set()
    for n, req in enumerate(requests, 1):
        out.append(
            f"=== {n}. {req.purpose}"
            + (f" · step {req.step_id}" if req.step_id else "")
            + (f" · schema {req.schema}" if req.schema else "")
        )
        if req.schema and req.schema not in shown and req.tools:
            shown.add(req.schema)
            out.append(f"--- schema\n{json.dumps(req.tools[0]['function'], sort_keys=True)}")
        for m in req.messages:
            calls = getattr(m, "tool_calls", None)
            body = str(m.content) if m.content else f"(tool calls: {[c['name'] for c in calls or []]})"
            out.append(f"--- {m.type}\n{body}")
    return "\n".join(out) + "\n"


def test_the_prompts_sent_match_the_snapshot() -> None:
    model = ScriptedChatModel(
        responder=PurposeScript(
            plan=PLAN,
            patch=PATCH,
            explore=_explore,
            verify=_verify,
            execute=_execute,
            reflect={"assessment": "needs_adjustment", "reasoning": "polish lacks the name", "guidance": "add a step"},
            final="Hello, Ada!",
        )
    )
    graph = build_graph(model, tools=[read_only(lookup)])
    graph.invoke(
        {"messages": [("user", "Write a polite greeting for our new colleague, then polish it")]},
        context={"mode": "plan", "approval": "auto", "max_parallel": 1, "max_attempts": 1},
    )
    text = render(model.requests)
    if os.environ.get("PLANMODE_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(text, encoding="utf-8")
    assert SNAPSHOT.exists(), "no snapshot yet: run with PLANMODE_UPDATE_SNAPSHOTS=1"
    expected = SNAPSHOT.read_text(encoding="utf-8")
    assert text == expected, "the prompts changed; review the diff and regenerate the snapshot"
    purposes = {r.purpose for r in model.requests}
    assert purposes == {"explore", "plan", "execute", "verify", "reflect", "patch", "final"}, purposes
