"""A scripted chat model for tests and the offline demo: supports ``bind_tools`` and structured output.

Every planmode system prompt starts with ``planmode:<purpose>`` (detect, respond, explore, plan, execute,
verify, reflect, patch, final), so a script can answer by purpose rather than by call order — which matters
because steps run in parallel. `PurposeScript` is such a responder; any callable taking a `ScriptRequest`
works too.
"""

from __future__ import annotations

import inspect
import itertools
import json
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, PrivateAttr

from planmode.llm.trim import CHARS_PER_TOKEN

__all__ = ["SCRIPTED_MODEL_NAME", "PurposeScript", "ScriptRequest", "ScriptedChatModel", "estimated_usage", "tool_call"]

_PURPOSE = re.compile(r"^planmode:(\w+)")
_STEP = re.compile(r"Step `([^`]+)`")
_ids = itertools.count(1)


@dataclass
class ScriptRequest:
    """One call to the scripted model, as a script sees it."""

    messages: list[BaseMessage]
    tools: list[dict[str, Any]]
    tool_choice: Any
    purpose: str
    step_id: str | None
    schema: str | None
    """The name of the structured-output schema requested (e.g. ``PlanDraft``), if any."""

    def text(self) -> str:
        """All message text, joined (for scripts that look for a word)."""
        return "\n".join(str(m.content) for m in self.messages)

    def tool_results(self) -> list[ToolMessage]:
        """Tool results already in this call's transcript."""
        return [m for m in self.messages if isinstance(m, ToolMessage)]


def tool_call(name: str, **args: Any) -> dict[str, Any]:
    """A tool call a script can return inside ``{"tool_calls": [...]}``."""
    return {"name": name, "args": args}


Reply = AIMessage | str | dict[str, Any] | BaseModel
Responder = Callable[[ScriptRequest], Reply]


class ScriptedChatModel(BaseChatModel):
    """A chat model whose answers come from a responder function. Thread-safe; records every request."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    responder: Any
    """A callable taking a `ScriptRequest` and returning an AIMessage, text, a tool-call dict or a model (or, for
    ``ainvoke``, an awaitable of one: an ``async def`` responder)."""
    _requests: list[ScriptRequest] = PrivateAttr(default_factory=list)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "planmode-scripted"

    @property
    def requests(self) -> list[ScriptRequest]:
        """Every request so far, in order."""
        with self._lock:
            return list(self._requests)

    def calls(self, purpose: str, step_id: str | None = None) -> int:
        """How many calls had this purpose (and step)."""
        return sum(1 for r in self.requests if r.purpose == purpose and (step_id is None or r.step_id == step_id))

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        formatted = [convert_to_openai_tool(t) for t in tools]
        if kwargs.get("ls_structured_output_format") and formatted:
            # langchain-core strips ``ls_structured_output_format`` before ``_generate``; keep the schema name.
            kwargs["planmode_schema"] = formatted[0]["function"]["name"]
        return self.bind(tools=formatted, tool_choice=tool_choice, **kwargs)

    def _request(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> ScriptRequest:
        system = next((m for m in messages if isinstance(m, SystemMessage)), None)
        purpose_match = _PURPOSE.match(str(system.content)) if system is not None else None
        step_match = _STEP.search("\n".join(str(m.content) for m in messages[:3]))
        req = ScriptRequest(
            messages=list(messages),
            tools=list(kwargs.get("tools") or []),
            tool_choice=kwargs.get("tool_choice"),
            purpose=purpose_match.group(1) if purpose_match else "unknown",
            step_id=step_match.group(1) if step_match else None,
            schema=kwargs.get("planmode_schema"),
        )
        with self._lock:
            self._requests.append(req)
        return req

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        req = self._request(messages, kwargs)
        reply = self.responder(req)
        if inspect.isawaitable(reply):
            if inspect.iscoroutine(reply):
                reply.close()  # never awaited: no "coroutine was never awaited" warning
            raise TypeError("this scripted model's responder is async: call the model with ainvoke (or astream)")
        return _result(req, reply)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """The async call, on the event loop (no worker thread); an async responder is awaited."""
        req = self._request(messages, kwargs)
        reply = self.responder(req)
        if inspect.isawaitable(reply):
            reply = await reply
        return _result(req, reply)


def _result(req: ScriptRequest, reply: Reply) -> ChatResult:
    message = _to_message(reply, req.schema)
    if message.usage_metadata is None:  # a scripted reply that names no usage gets an estimate
        message = message.model_copy(update={"usage_metadata": estimated_usage(req.messages, req.tools, message)})
    if not (message.response_metadata or {}).get("model_name"):
        meta = {**(message.response_metadata or {}), "model_name": SCRIPTED_MODEL_NAME}
        message = message.model_copy(update={"response_metadata": meta})
    return ChatResult(generations=[ChatGeneration(message=message)])


#: The model name a scripted reply reports: it is a test double, and its token counts are estimates.
SCRIPTED_MODEL_NAME = "scripted-test-double (usage estimated)"


def estimated_usage(messages: Sequence[BaseMessage], tools: Sequence[Any], reply: AIMessage) -> UsageMetadata:
    """The usage a scripted call reports: an estimate, a token per three characters of the prompt (messages
    and tool schemas) and of the reply (text and tool calls). Not a tokenizer's count."""
    prompt = sum(len(str(m.content)) + 8 for m in messages) + len(json.dumps(list(tools), default=str))
    answer = len(str(reply.content)) + len(json.dumps([c.get("args") for c in reply.tool_calls], default=str))
    i, o = prompt // CHARS_PER_TOKEN, max(1, answer // CHARS_PER_TOKEN)
    return UsageMetadata(input_tokens=i, output_tokens=o, total_tokens=i + o)


def _to_message(reply: Reply, schema: str | None) -> AIMessage:
    if isinstance(reply, AIMessage):
        return reply
    if isinstance(reply, str):
        return AIMessage(content=reply)
    if isinstance(reply, BaseModel):
        reply = reply.model_dump(mode="json", exclude_none=True)
    if isinstance(reply, dict) and "tool_calls" in reply:
        calls = [
            {
                "name": c["name"],
                "args": c.get("args", {}),
                "id": c.get("id") or f"call_{next(_ids)}",
                "type": "tool_call",
            }
            for c in reply["tool_calls"]
        ]
        return AIMessage(content=str(reply.get("content", "")), tool_calls=calls)
    if isinstance(reply, dict) and schema is not None:
        return AIMessage(
            content="", tool_calls=[{"name": schema, "args": reply, "id": f"call_{next(_ids)}", "type": "tool_call"}]
        )
    return AIMessage(content=json.dumps(reply))


@dataclass
class PurposeScript:
    """A responder that answers by purpose. Each entry is a value, a list (served in order; the last one
    repeats), or a callable taking the `ScriptRequest`. Unscripted purposes get sensible defaults: plans
    must be scripted; verification passes; execution echoes the step; the final answer says done."""

    plan: Any = None
    patch: Any = None
    reflect: Any = None
    verify: Any = None
    execute: Any = None
    detect: Any = None
    respond: Any = "Here is the answer."
    explore: Any = "Nothing further to explore."
    final: Any = "All steps are done."
    _served: dict[str, Iterator[Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, req: ScriptRequest) -> Reply:
        entry = getattr(self, req.purpose, None) if req.purpose in _PURPOSES else None
        if entry is None:
            return self._default(req)
        if callable(entry) and not isinstance(entry, BaseModel | AIMessage):
            return entry(req)  # type: ignore[no-any-return]  # a script entry is a user callable typed Any
        if isinstance(entry, list):
            with self._lock:
                it = self._served.setdefault(req.purpose, _repeat_last(entry))
                value = next(it)
            reply: Reply = value(req) if callable(value) and not isinstance(value, BaseModel | AIMessage) else value
            return reply
        return entry  # type: ignore[no-any-return]  # getattr on the script returns Any

    def _default(self, req: ScriptRequest) -> Reply:
        if req.purpose == "verify":
            return {"passed": True, "reason": ""}
        if req.purpose == "execute":
            return f"Completed step {req.step_id}."
        if req.purpose == "detect":
            return {"needs_plan": True, "reason": "scripted"}
        if req.purpose == "reflect":
            return {"assessment": "needs_adjustment", "reasoning": "scripted", "guidance": ""}
        raise AssertionError(f"the script has no answer for a {req.purpose!r} call")


_PURPOSES = {"plan", "patch", "reflect", "verify", "execute", "detect", "respond", "explore", "final"}


def _repeat_last(items: list[Any]) -> Iterator[Any]:
    yield from items
    while True:
        yield items[-1]
