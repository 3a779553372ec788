"""A small bounded tool-calling loop with a dispatch-time gate for tools that change the world."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.messages.tool import ToolCall
from langchain_core.tools import BaseTool

from planmode.context import PlanModeContext
from planmode.llm import fit_transcript, model_failure, normalize_messages, text_of
from planmode.tools import is_read_only

__all__ = ["LoopResult", "ToolGate", "is_read_only", "run_tool_loop"]



class ToolRaised(Exception):
    """A tool raised instead of returning; the step's attempt fails with this error."""


class ToolGate:
    """Dispatches tool calls, refusing world-changing tools unless writes are allowed (after approval)."""

    def __init__(self, tools: Sequence[BaseTool], *, allow_writes: bool) -> None:
        self.tools = {t.name: t for t in tools}
        self.allow_writes = allow_writes
        self.refused: list[str] = []

    def run(self, call: ToolCall) -> ToolMessage:
        """Run one call; raises `ToolRaised` when the tool itself raised."""
        name, call_id = call["name"], call.get("id") or ""
        tool = self.tools.get(name)
        if tool is None:
            return ToolMessage(
                content=f"error: unknown tool {name!r}; available: {', '.join(self.tools) or 'none'}",
                tool_call_id=call_id, name=name, status="error",
            )
        if not self.allow_writes and not is_read_only(tool):
            self.refused.append(name)
            return ToolMessage(
                content=f"refused: {name!r} changes the world and may only run in an approved plan",
                tool_call_id=call_id, name=name, status="error",
            )
        try:
            out = tool.invoke({**call, "type": "tool_call"})
        except Exception as exc:  # a raising tool fails the attempt; the caller records the error
            raise ToolRaised(f"tool {name!r} raised {type(exc).__name__}: {exc}") from exc
        if isinstance(out, ToolMessage):
            return out
        return ToolMessage(content=str(out), tool_call_id=call_id, name=name)


@dataclass
class LoopResult:
    """What a tool loop produced."""

    messages: list[BaseMessage]
    text: str = ""
    tool_calls: int = 0
    error: str | None = None
    tool_names: list[str] = field(default_factory=list)


def run_tool_loop(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    messages: Sequence[BaseMessage],
    settings: PlanModeContext,
    *,
    allow_writes: bool,
    max_iterations: int,
    max_tool_calls: int | None = None,
) -> LoopResult:
    """Call the model, run its tool calls through a `ToolGate`, repeat until it answers without tool calls
    or a bound is reached. Model failures and raising tools end the loop with ``error`` set."""
    gate = ToolGate(tools, allow_writes=allow_writes)
    bound = model.bind_tools(list(tools)) if tools else model
    history = list(messages)
    result = LoopResult(messages=history)
    for _ in range(max(1, max_iterations)):
        msgs = normalize_messages(history) if settings.normalize_messages else history
        msgs = fit_transcript(model, msgs, settings, tools)
        try:
            reply = bound.invoke(msgs)
        except Exception as exc:  # the caller turns this into a failed attempt; an unreachable model raises
            result.error = model_failure(exc, model, settings)
            return result
        if not isinstance(reply, AIMessage):
            reply = AIMessage(content=text_of(reply))
        history.append(reply)
        calls = list(reply.tool_calls or [])
        if max_tool_calls is not None and result.tool_calls + len(calls) > max_tool_calls:
            calls = calls[: max(0, max_tool_calls - result.tool_calls)]
            if not calls:
                _answer_unanswered(history, reply)
                result.text = text_of(reply)
                return result
        if not calls:
            result.text = text_of(reply)
            return result
        for call in calls:
            result.tool_calls += 1
            result.tool_names.append(call["name"])
            try:
                history.append(gate.run(call))
            except ToolRaised as exc:
                result.error = str(exc)
                return result
        if max_tool_calls is not None and result.tool_calls >= max_tool_calls:
            _answer_unanswered(history, reply)
            result.text = text_of(reply)
            return result
    result.error = result.error or f"no final answer after {max_iterations} model turns"
    return result


def _answer_unanswered(history: list[BaseMessage], reply: AIMessage) -> None:
    """Answer tool calls cut by the budget, so the transcript stays valid for the next model call."""
    answered = {m.tool_call_id for m in history if isinstance(m, ToolMessage)}
    for call in reply.tool_calls or []:
        if call.get("id") not in answered:
            history.append(ToolMessage(content="skipped: tool call budget used up",
                                       tool_call_id=call.get("id") or "", name=call["name"]))
