"""No blind retry: an attempt that fails exactly as the attempt before sends the step to reflection at once.

The same declared check failing with the same output says a retry cannot help; the attempts left are not spent
blind. A failure that differs from the one before is retried as before, within ``max_attempts``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from planmode.graph import build_graph
from planmode.persistence import sqlite_checkpointer
from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest, tool_call
from planmode.tools import workspace_tools

PLAN = {
    "title": "say",
    "steps": [
        {
            "id": "write_say",
            "description": "Write say.py",
            "tools": ["write_file"],
            "checks": [{"kind": "run", "command": "python say.py", "stdout": "ok"}],
        }
    ],
}
GIVE_UP = {"assessment": "failed", "reasoning": "stop"}


def attempts_before_reflection(tmp_path: Path, drafts: list[str], max_attempts: int) -> list[str]:
    """The model's calls, as ``E`` (an attempt starts) and ``R`` (a reflection), of a run whose attempts write
    ``drafts`` in turn (the last one again once they run out)."""
    written: list[str] = []

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "Wrote say.py."
        content = drafts[min(len(written), len(drafts) - 1)]
        written.append(content)
        return {"tool_calls": [tool_call("write_file", path="say.py", content=content)]}

    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, execute=execute, reflect=GIVE_UP))
    saver = sqlite_checkpointer(tmp_path / "runs.sqlite")
    try:
        ws = tmp_path / "ws"
        ws.mkdir()
        graph = build_graph(model, tools=workspace_tools(ws), checkpointer=saver)
        context = {"mode": "plan", "approval": "auto", "max_explore_calls": 0, "max_attempts": max_attempts}
        graph.invoke({"task": "write say.py"}, {"configurable": {"thread_id": "t"}}, context=context)
    finally:
        saver.conn.close()
    return [
        "R" if r.purpose == "reflect" else "E"
        for r in model.requests
        if r.purpose == "reflect" or (r.purpose == "execute" and not any(isinstance(m, AIMessage) for m in r.messages))
    ]


@pytest.mark.parametrize("max_attempts", [2, 4])
def test_the_same_failure_twice_goes_to_reflection_without_spending_the_attempts_left(
    tmp_path: Path, max_attempts: int
) -> None:
    calls = attempts_before_reflection(tmp_path, ["print('no')\n"], max_attempts)
    assert calls[:3] == ["E", "E", "R"], calls  # the second identical failure: reflect, not a third attempt


def test_a_failure_that_differs_from_the_one_before_is_retried(tmp_path: Path) -> None:
    drafts = [f"print({n!r})\n" for n in ("one", "two", "three", "three")]  # the check's output differs, then not
    calls = attempts_before_reflection(tmp_path, drafts, 6)
    assert calls[:5] == ["E", "E", "E", "E", "R"], calls  # three different failures retried; the repeat reflects
