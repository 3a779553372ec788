"""respond: the direct path for simple requests — one tool-calling answer, no plan."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from planmode import prompts
from planmode._agent import run_tool_loop
from planmode.events import emit
from planmode.nodes._deps import Deps, NodeRuntime, StateNode, settings_of
from planmode.state.graph_state import PlanModeState

__all__ = ["make_respond"]


def make_respond(deps: Deps) -> StateNode:
    """Build the respond node."""

    def respond(state: PlanModeState, runtime: NodeRuntime) -> dict[str, Any]:
        settings = settings_of(state, runtime)
        model = deps.models.get(settings)
        history: list[BaseMessage] = [SystemMessage(content=prompts.RESPOND_SYSTEM), *state.get("messages", [])]
        if not state.get("messages"):
            from langchain_core.messages import HumanMessage

            history.append(HumanMessage(content=state.get("goal", "")))
        # No plan was approved on this path: world-changing tools are refused unless approval is automatic.
        res = run_tool_loop(
            model,
            deps.tools,
            history,
            settings,
            allow_writes=settings.approval == "auto",
            max_iterations=settings.max_executor_iterations,
        )
        if res.error:
            text = f"I could not answer: {res.error}"
            emit("run_finished", text, status="failed")
            return {"messages": [AIMessage(content=text)], "status": "failed", "error": res.error}
        emit("direct_answer", res.text)
        return {"messages": [AIMessage(content=res.text)], "status": "answered"}

    return respond
