"""The default mode on a task that changes files (issue 44, item 5): in ``--mode auto`` with a tool that changes
things bound, a task the classifier declares ``changes_files`` never gets a direct answer, whatever its
``needs_plan``; the direct-answer prompt forbids claiming changes. Decided by the classifier's declared output,
not by reading the task's words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

from planmode import prompts
from planmode.context import PlanModeContext
from planmode.graph import build_graph
from planmode.nodes.detect import DetectDecision, heuristic_decision
from planmode.testing.scripted import PurposeScript, ScriptedChatModel
from planmode.tools import read_only_workspace_tools, workspace_tools

TASK = "move parse_line out of app.py into a new module parsing.py"
PLAN = {"title": "Move", "steps": [{"id": "move", "description": "move parse_line into parsing.py"}]}
SAYS_DIRECT = {"needs_plan": False, "changes_files": True, "reason": "a small refactor"}


def _route(checkpointer: SqliteSaver, tools: list[Any], detect: Any, thread: str) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, detect=detect))
    graph = build_graph(model, tools=tools, checkpointer=checkpointer)
    cfg: Any = {"configurable": {"thread_id": thread}}
    graph.invoke({"messages": [("user", TASK)]}, cfg, context=PlanModeContext(mode="auto"))
    return graph.get_state(cfg).values, model


def test_a_task_that_changes_files_is_planned_while_write_tools_are_bound(
    tmp_path: Path, checkpointer: SqliteSaver
) -> None:
    assert heuristic_decision(TASK) is None  # the classifier decides, not the words
    values, model = _route(checkpointer, workspace_tools(tmp_path), SAYS_DIRECT, "writes")
    assert values["route"] == "plan" and model.calls("respond") == 0
    assert values["status"] == "awaiting_approval"  # the plan is shown before anything changes
    # without a tool that changes things, a direct answer is allowed (it can change nothing, and says so)
    values, model = _route(checkpointer, read_only_workspace_tools(tmp_path), SAYS_DIRECT, "reads")
    assert values["route"] == "direct" and model.calls("respond") == 1
    # with write tools bound, a task declared not to change files may still be answered directly
    question = {"needs_plan": False, "changes_files": False, "reason": "a question"}
    values, model = _route(checkpointer, workspace_tools(tmp_path), question, "question")
    assert values["route"] == "direct"


def test_the_classifier_declares_changes_and_the_direct_answer_may_not_claim_them() -> None:
    assert "changes_files" in DetectDecision.model_json_schema()["properties"]
    assert "changes_files" in prompts.DETECT_SYSTEM
    assert "Never say that a file was created, changed, moved or deleted" in prompts.RESPOND_SYSTEM
