"""Plan mode for langchain's ``create_agent``: a middleware that adds the ``plan_mode`` tool and its write gate.

    from langchain.agents import create_agent
    from planmode import PlanModeMiddleware
    from planmode.persistence import sqlite_checkpointer

    agent = create_agent(parent_model, tools=[...], checkpointer=sqlite_checkpointer("runs.sqlite"),
                         middleware=[PlanModeMiddleware(model, tools=[...])])

It plugs in the way langchain's own ``TodoListMiddleware`` and ``HumanInTheLoopMiddleware`` do:

- ``tools``: the ``plan_mode(task)`` tool made by `planmode.as_tool` (planmode runs as a nested graph inside the
  tool call; its approval interrupt reaches the agent's caller, who answers with
  ``agent.invoke(Command(resume={...}), config)``; the run's report is the tool's result);
- ``wrap_model_call``: a short paragraph on plan mode appended to the system message;
- ``wrap_tool_call``: the gate. ``create_agent`` dispatches each tool call of a turn as its own task, in
  parallel; while the agent is in plan mode (`planmode.agent_tool.in_plan_mode`: decided from the transcript
  and planmode's own answers, never from tool-call ids) every tool that is not marked read-only
  (`planmode.tools.read_only`) and every plan-mode call but the one that runs is answered with an error tool
  message instead of running. Read-only tools run.

The agent needs a checkpointer (the approval interrupt needs one); use `planmode.persistence`'s
``sqlite_checkpointer``, or pass yours through ``with_planmode_types``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.tools import BaseTool
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

from planmode.agent_tool import DEFAULT_DESCRIPTION, PlanModeGuard, ToolResult, as_tool, is_plan_mode_tool
from planmode.approval.policy import ApprovalPolicy
from planmode.context import PlanModeContext
from planmode.errors import ConfigurationError
from planmode.executors import Executor, Verifier

__all__ = ["PLAN_MODE_SYSTEM_PROMPT", "PlanModeMiddleware"]

PLAN_MODE_SYSTEM_PROMPT = (
    "## Plan mode\n"
    "For a task that needs several steps or changes things, call `{name}` with the whole task: a planner writes "
    "a plan, a human approves it, and it is carried out; you get the report. While plan mode is on, your own "
    "tools that change things are refused; read-only ones still work. Call `{name}` once per turn."
)


class PlanModeMiddleware(AgentMiddleware):
    """Plan mode for langchain's ``create_agent``: adds the ``plan_mode`` tool and refuses the agent's write tools
    while plan mode is on.

    Args:
        model: planmode's chat model (as in `planmode.as_tool`); or pass ``tool``.
        tools: the tools planmode explores with (read-only ones, before approval) and executes with.
        executor: runs one step instead of the default tool-calling agent.
        verifier: judges a step's outcome instead of the default LLM judge.
        store: a LangGraph store for full step outputs.
        settings: planmode's run settings (default ``PlanModeContext(mode="plan")``).
        graph: a planmode graph built already, compiled without a checkpointer.
        tool: a plan-mode tool made by `planmode.as_tool` (instead of the arguments above).
        name: the tool's name.
        description: what the agent's model reads about the tool.
        system_prompt: appended to the agent's system message; None leaves the system message alone.
        approval_policy: decides plan approvals (`planmode.approval.policy`); default: the ``approval`` setting.

    Raises:
        ConfigurationError: ``tool`` was not made by `as_tool`.
    """

    def __init__(
        self,
        model: BaseChatModel | None = None,
        *,
        tools: Sequence[BaseTool] = (),
        executor: Executor | None = None,
        verifier: Verifier | None = None,
        store: BaseStore | None = None,
        settings: PlanModeContext | None = None,
        graph: CompiledStateGraph[Any, Any, Any, Any] | None = None,
        tool: BaseTool | None = None,
        name: str = "plan_mode",
        description: str = DEFAULT_DESCRIPTION,
        system_prompt: str | None = PLAN_MODE_SYSTEM_PROMPT,
        approval_policy: ApprovalPolicy | None = None,
    ) -> None:
        super().__init__()
        if tool is None:
            tool = as_tool(
                model,
                tools=tools,
                executor=executor,
                verifier=verifier,
                store=store,
                settings=settings,
                graph=graph,
                name=name,
                description=description,
                approval_policy=approval_policy,
            )
        elif approval_policy is not None:
            raise ConfigurationError(
                "PlanModeMiddleware(tool=..., approval_policy=...): give the policy to planmode.as_tool instead"
            )
        elif not is_plan_mode_tool(tool):
            raise ConfigurationError("PlanModeMiddleware(tool=...) needs a tool made by planmode.as_tool(...)")
        self.plan_mode_tool = tool
        self.tools = [tool]
        self.guard = PlanModeGuard([tool.name])
        self.system_prompt = system_prompt.format(name=tool.name) if system_prompt else None

    # -- the system prompt ---------------------------------------------------------------------------------

    def _with_prompt(self, request: ModelRequest) -> ModelRequest:
        if not self.system_prompt:
            return request
        blocks: list[str | dict[str, Any]] = []
        if request.system_message is not None:
            blocks = [*request.system_message.content_blocks, {"type": "text", "text": "\n\n"}]  # type: ignore[list-item]  # content blocks are TypedDicts, the list is plain dicts
        blocks.append({"type": "text", "text": self.system_prompt})
        return request.override(system_message=SystemMessage(content=blocks))

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse | AIMessage:
        """Append the plan-mode paragraph to the system message."""
        return handler(self._with_prompt(request))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse | AIMessage:
        """Append the plan-mode paragraph to the system message."""
        return await handler(self._with_prompt(request))

    # -- the gate ------------------------------------------------------------------------------------------

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], ToolResult]) -> ToolResult:
        """Refuse the call while plan mode is on unless it is read-only or the plan-mode call that runs."""
        return self.guard(request, handler)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[ToolResult]]) -> ToolResult:
        """The asynchronous gate."""
        return await self.guard.awrap(request, handler)
