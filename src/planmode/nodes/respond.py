"""respond: the direct path for simple requests — one tool-calling answer, no plan."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from planmode import prompts
from planmode._compat import RunnableCallable
from planmode.nodes._deps import Deps, NodeRuntime, StateUpdate, settings_of
from planmode.nodes._twin import Body, model_for, tool_loop, twin_node
from planmode.observability.events import emit
from planmode.state.graph_state import PlanModeState

__all__ = ["make_respond"]


def make_respond(deps: Deps) -> RunnableCallable:
    """Build the respond node: a sync path for ``invoke`` and an async one for ``ainvoke`` (the tool loop
    awaited)."""

    def respond(state: PlanModeState, runtime: NodeRuntime) -> Body[StateUpdate]:
        settings = settings_of(state, runtime)
        model = yield from model_for(deps, settings)
        history: list[BaseMessage] = [SystemMessage(content=prompts.RESPOND_SYSTEM), *state.get("messages", [])]
        if not state.get("messages"):
            history.append(HumanMessage(content=state.get("goal", "")))
        # No plan was approved on this path: world-changing tools are refused unless approval is automatic.
        res = yield from tool_loop(
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

    return twin_node("respond", respond)
