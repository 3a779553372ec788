"""Plan mode as one tool, ``plan_mode(task)``, for a parent tool-calling agent, and the gate that refuses the
parent's write tools while plan mode is on (`guard_tools`, `PlanModeGuard`, `plan_mode_refusal`).

    plan_mode = as_tool(model, tools=[...])
    agent = create_react_agent(parent_model, guard_tools([plan_mode, *parent_tools]), checkpointer=...)

Why one tool and not an enter/exit pair, how approval and rejection reach the parent, and how the gate
decides: docs/architecture.md, "Plan mode as a tool".
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.store.base import BaseStore
from langgraph.types import Command
from pydantic import BaseModel, Field

from planmode.approval.policy import ApprovalPolicy
from planmode.context import PlanModeContext
from planmode.errors import ConfigurationError
from planmode.executors import Executor, Verifier
from planmode.graph import build_graph
from planmode.state.models import Plan, StepStatus
from planmode.tools import is_read_only

__all__ = [
    "DEFAULT_DESCRIPTION",
    "PLAN_MODE_METADATA_KEY",
    "REFUSAL_ARTIFACT",
    "PlanModeGuard",
    "PlanModeInput",
    "as_tool",
    "guard_tools",
    "in_plan_mode",
    "is_plan_mode_tool",
    "plan_mode_refusal",
]

#: Tool metadata key marking a tool made by `as_tool` (the guard recognises plan-mode calls by it).
PLAN_MODE_METADATA_KEY = "planmode_plan_mode"

DEFAULT_DESCRIPTION = (
    "Enter plan mode for a task that needs several steps or changes things: a planner explores with read-only "
    "tools, writes a step-by-step plan, and a human approves, edits, rejects or cancels it before anything "
    "runs; the approved plan is then executed and verified. Returns the run's report. Give only the task, in "
    "full. While plan mode is on, your own tools that change things are refused."
)

ToolResult = ToolMessage | Command[Any]


class PlanModeInput(BaseModel):
    """The plan-mode tool's arguments: the task and nothing else (the plan comes from planmode's state)."""

    task: str = Field(description="The task to plan and carry out, stated in full.")


def is_plan_mode_tool(tool: BaseTool | None) -> bool:
    """Whether ``tool`` was made by `as_tool`."""
    return tool is not None and (tool.metadata or {}).get(PLAN_MODE_METADATA_KEY) is True


def as_tool(
    model: BaseChatModel | None = None,
    *,
    tools: Sequence[BaseTool] = (),
    executor: Executor | None = None,
    verifier: Verifier | None = None,
    store: BaseStore | None = None,
    settings: PlanModeContext | None = None,
    graph: CompiledStateGraph[Any, Any, Any, Any] | None = None,
    name: str = "plan_mode",
    description: str = DEFAULT_DESCRIPTION,
    approval_policy: ApprovalPolicy | None = None,
) -> BaseTool:
    """A LangChain tool ``plan_mode(task)`` that runs planmode as a nested graph of the calling agent.

    Args:
        model: planmode's chat model (as in `planmode.build_graph`).
        tools: the tools planmode explores with (read-only ones, before approval) and executes with.
        executor: runs one step instead of the default tool-calling agent.
        verifier: judges a step's outcome instead of the default LLM judge.
        store: a LangGraph store for full step outputs.
        settings: planmode's run settings; default ``PlanModeContext(mode="plan")`` — the parent chose plan mode,
            so detection does not route the task to a direct answer. ``approval="auto"`` skips the human.
        graph: a planmode graph built already (instead of ``model``/``tools``/...); it must be compiled
            *without* a checkpointer, or its interrupt would not reach the parent.
        name: the tool's name.
        description: what the parent's model reads about the tool.
        approval_policy: decides plan approvals (`planmode.approval.policy`, as in `planmode.build_graph`); default: the
            ``approval`` setting. With ``graph``, give the policy to `build_graph` instead.

    Returns:
        A tool whose result is a tool message: the readable report as content, and ``{"status", "report",
        "plan"}`` as its ``artifact``. Add it to the parent's tools through `guard_tools`.

    Raises:
        ConfigurationError: ``graph`` brings its own checkpointer, or comes with an ``approval_policy`` (the
            graph has its policy already).
    """
    if graph is None:
        graph = build_graph(
            model, tools=tools, executor=executor, verifier=verifier, store=store, approval_policy=approval_policy
        )
    elif approval_policy is not None:
        raise ConfigurationError(
            "as_tool(graph=..., approval_policy=...): a graph built already has its policy; pass approval_policy "
            "to planmode.build_graph instead"
        )
    elif graph.checkpointer not in (None, False):
        raise ConfigurationError(
            "as_tool(graph=...) needs a planmode graph compiled without a checkpointer: it runs on the parent "
            "agent's checkpointer (build it with planmode.build_graph(model, ...) and no checkpointer)"
        )
    run_settings = settings if settings is not None else PlanModeContext(mode="plan")
    nested = graph

    # Nothing with side effects runs before the nested invoke: on resume the parent's tool node calls this
    # again from its start, and the nested graph resumes from its checkpoint.
    def plan_mode(task: str, config: RunnableConfig) -> tuple[str, dict[str, Any]]:
        return _result(nested.invoke({"task": task}, config, context=run_settings))

    async def aplan_mode(task: str, config: RunnableConfig) -> tuple[str, dict[str, Any]]:
        return _result(await nested.ainvoke({"task": task}, config, context=run_settings))

    return StructuredTool.from_function(
        func=plan_mode,
        coroutine=aplan_mode,
        name=name,
        description=description,
        args_schema=PlanModeInput,
        response_format="content_and_artifact",
        metadata={PLAN_MODE_METADATA_KEY: True},
    )


def _result(out: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The tool's content and artifact, read from the nested run's output (planmode's own state)."""
    status = str(out.get("status") or "unknown")
    report: dict[str, Any] = dict(out.get("report") or {})
    plan = out.get("plan")
    plan = plan if isinstance(plan, Plan) else None
    messages = out.get("messages") or []
    answer = next((str(m.content) for m in reversed(messages) if isinstance(m, AIMessage)), "")
    artifact = {
        "status": status,
        "report": report,
        "plan": json.loads(plan.model_dump_json(exclude={"rejections"})) if plan is not None else None,
    }
    return _content(status, report, plan, answer), artifact


def _content(status: str, report: dict[str, Any], plan: Plan | None, answer: str) -> str:
    lines: list[str] = []
    if status == "cancelled":
        feedback = report.get("feedback")
        lines.append(
            "Plan mode ended: the human cancelled the plan"
            + (f" with this feedback: {feedback}" if feedback else " (no feedback given)")
            + "."
        )
        done = report.get("done") or []
        lines.append(f"Steps already done before the cancel: {', '.join(done)}." if done else "Nothing was executed.")
        lines.append("Plan mode is off: your tools are available again.")
    else:
        lines.append(f"Plan mode finished: {status}.")
        if report.get("error"):
            lines.append(f"Error: {report['error']}")
    if plan is not None and plan.version > 0:
        counts = plan.counts()
        done_n = counts.get(StepStatus.DONE.value, 0)
        lines.append(
            f"Plan {plan.title or plan.goal!r} (version {plan.version}): {done_n} of {len(plan.steps)} step(s) done."
        )
        for s in plan.steps:
            detail = s.result or s.error or ""
            lines.append(f"- {s.id} [{s.status.value}]: {s.description}" + (f" — {detail}" if detail else ""))
        revisions = [
            r.reason.removeprefix("human feedback: ") for r in plan.history if r.reason.startswith("human feedback: ")
        ]
        if revisions:
            lines.append(
                "The human rejected earlier versions of the plan with this feedback: "
                + "; ".join(repr(f) for f in revisions)
            )
    if answer and status != "cancelled":
        lines.append(f"Answer: {answer}")
    return "\n".join(lines)


# -- the guard ---------------------------------------------------------------------------------------------

#: ``artifact`` of the error tool messages the guard answers refused calls with (how a refusal of a plan-mode
#: call is told apart from the end of a plan-mode run; the model cannot write tool messages).
REFUSAL_ARTIFACT: dict[str, Any] = {"planmode": "refused"}


def _messages_of(state: Any) -> list[BaseMessage]:
    if isinstance(state, dict):
        found = state.get("messages") or []
    elif isinstance(state, list):
        found = state
    else:
        found = getattr(state, "messages", None) or []
    return [m for m in found if isinstance(m, BaseMessage)]


def _same_call(a: ToolCall, b: ToolCall) -> bool:
    return a["name"] == b["name"] and a.get("id") == b.get("id") and a.get("args") == b.get("args")


def _runnable_plan_mode_call(message: AIMessage, names: set[str]) -> ToolCall | None:
    """The plan-mode call of ``message`` that may run: its first one, unless an identical copy of it (same name,
    id and arguments) is in the message too — two calls that cannot be told apart are both refused."""
    first = next((c for c in message.tool_calls if c["name"] in names), None)
    if first is None or sum(_same_call(c, first) for c in message.tool_calls) > 1:
        return None
    return first


def _ends_plan_mode(message: ToolMessage) -> bool:
    """Whether a tool message of a plan-mode tool ends plan mode: only planmode's report does (a tool message
    with ``status="success"``). The guard's refusal does not, and neither does an error tool message (the tool
    node's answer to a call that failed validation, or a run that raised): a plan approved earlier may still
    wait for its approval, so writes stay refused until a plan-mode run reports."""
    return message.status != "error" and message.artifact != REFUSAL_ARTIFACT


def in_plan_mode(messages: Sequence[BaseMessage], plan_mode_names: Sequence[str]) -> bool:
    """Whether a parent agent whose transcript is ``messages`` is in plan mode while its tool node runs the calls
    of the last AI message. Tool-call ids play no part: they come from the model.

    The agent is in plan mode when the last AI message holds a plan-mode call (so every call dispatched with it
    sees plan mode on), and also when an earlier one entered plan mode (a plan-mode call of it ran) and no tool
    message of a plan-mode tool ended it (`_ends_plan_mode`: planmode's report; not a refusal, not an error for a
    call that failed validation) — a run whose approval was left pending when new input arrived (``create_agent``
    then drops the interrupted tool call and runs the model again; the nested plan still waits for its approval).
    """
    names = set(plan_mode_names)
    ai = [(i, m) for i, m in enumerate(messages) if isinstance(m, AIMessage)]
    if not ai:
        return False
    last, current = ai[-1]
    if any(c["name"] in names for c in current.tool_calls):
        return True  # even when no plan-mode call of it runs (exact duplicates): the model asked for plan mode
    on = False
    for m in messages[:last]:
        if isinstance(m, AIMessage) and _runnable_plan_mode_call(m, names) is not None:
            on = True
        elif isinstance(m, ToolMessage) and m.name in names and _ends_plan_mode(m):
            on = False  # the plan-mode run ended: planmode's report came back
    return on


def plan_mode_refusal(
    call: ToolCall, tool: BaseTool | None, messages: Sequence[BaseMessage], plan_mode_names: Sequence[str]
) -> str | None:
    """Why ``call`` (a call of the last AI message in ``messages``) must not run now, or None when it may.

    In plan mode (`in_plan_mode`) only the plan-mode call that runs (`_runnable_plan_mode_call`: the first of
    the message) and read-only tools run; every other plan-mode call (one plan at a time) and every tool that is
    not marked read-only is refused. Out of plan mode everything runs. An unknown tool is left to the tool
    node's own error.
    """
    names = set(plan_mode_names)
    if not in_plan_mode(messages, plan_mode_names):
        return None
    name = call["name"]
    if name in names:
        last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        runnable = _runnable_plan_mode_call(last, names) if last is not None else None
        if runnable is not None and _same_call(call, runnable):
            return None
        if runnable is None and last is not None and any(c["name"] in names for c in last.tool_calls):
            return (
                f"refused: {name!r} was called more than once in this turn with the same id and arguments; call it once"
            )
        return "refused: plan mode is already on for another call of this turn; one plan at a time"
    if tool is None or is_read_only(tool):
        return None
    return (
        f"refused: {name!r} changes things and the agent is in plan mode; it is available again when plan "
        "mode ends (the human approves and the plan runs, or cancels it)"
    )


class PlanModeGuard:
    """A tool-call wrapper (``ToolNode(wrap_tool_call=..., awrap_tool_call=...)``) that, while the agent is in plan
    mode (`in_plan_mode`), refuses every tool that is not marked read-only and every plan-mode call but the one
    that runs. It reads the agent's messages, never the tool-call ids.

    Args:
        plan_mode_names: the names of the plan-mode tools (as made by `as_tool`).
    """

    def __init__(self, plan_mode_names: Sequence[str]) -> None:
        if not plan_mode_names:
            raise ConfigurationError("PlanModeGuard needs the name of at least one plan-mode tool (see as_tool)")
        self.plan_mode_names = tuple(plan_mode_names)

    def refusal(self, request: ToolCallRequest) -> ToolMessage | None:
        """The error tool message answering a call that must not run now, or None when it may run."""
        call = request.tool_call
        reason = plan_mode_refusal(call, request.tool, _messages_of(request.state), self.plan_mode_names)
        if reason is None:
            return None
        return ToolMessage(
            content=reason,
            tool_call_id=call.get("id") or "",
            name=call["name"],
            status="error",
            artifact=dict(REFUSAL_ARTIFACT),
        )

    def __call__(self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], ToolResult]) -> ToolResult:
        """The synchronous wrapper."""
        refused = self.refusal(request)
        return refused if refused is not None else execute(request)

    async def awrap(
        self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Awaitable[ToolResult]]
    ) -> ToolResult:
        """The asynchronous wrapper."""
        refused = self.refusal(request)
        return refused if refused is not None else await execute(request)


def guard_tools(tools: Sequence[BaseTool | Callable[..., Any]], **tool_node_kwargs: Any) -> ToolNode:
    """The parent agent's `ToolNode` over ``tools`` (which include the tool made by `as_tool`), with a
    `PlanModeGuard` at dispatch, for LangGraph's ``create_react_agent``:
    ``create_react_agent(model, guard_tools([...]))``. For langchain's ``create_agent`` use
    `planmode.PlanModeMiddleware` instead (``create_agent`` takes a list of tools, not a tool node).

    Extra keyword arguments go to `ToolNode` (e.g. ``handle_tool_errors``).

    Raises:
        ConfigurationError: none of ``tools`` is a plan-mode tool.
    """
    tool_list = list(tools)
    names = [t.name for t in tool_list if isinstance(t, BaseTool) and is_plan_mode_tool(t)]
    if not names:
        raise ConfigurationError("guard_tools needs the plan-mode tool among the tools: add planmode.as_tool(...)")
    guard = PlanModeGuard(names)
    return ToolNode(tool_list, wrap_tool_call=guard, awrap_tool_call=guard.awrap, **tool_node_kwargs)
