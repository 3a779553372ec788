"""Token accounting: every model call's usage, per node, per step and per model, kept in the run's state.

Capture. `metered` wraps a graph node: while the node runs, a `UsageRecorder` callback handler is attached to
every LangChain run started in its context (through `register_configure_hook`, the mechanism of LangChain's
own ``get_usage_metadata_callback``), so the node's model calls are counted wherever they are made --
structured calls, the tool-calling loop (a subgraph run inside the node), the detect classifier, verify's
judges in their thread pool (`ContextThreadPoolExecutor` copies the context), reflect, patch, finalize --
without touching the model layer. A call's usage is its ``AIMessage.usage_metadata`` (input, output, and
``input_token_details.cache_read`` as cached); a server that reports none gets an estimate (a token per three
characters, `planmode.llm.trim.CHARS_PER_TOKEN`), counted as ``estimated`` calls so the numbers say so.

State. ``usage`` (see `merge_usage`) holds counters only, a few hundred bytes per step::

    {"total": {"calls", "input", "output", "cached", "estimated"}, "nodes": {node: {...}},
     "steps": {step_id: {...}}, "models": {model: {...}}}

A node returns its calls as a delta in that shape and the reducer adds it. The usage of a node that is
interrupted (a tool's ``interrupt()``) before it returns is not recorded: the calls it made are in its
subgraph's checkpoints, not repeated on resume, and not counted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import threading
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import LLMResult
from langchain_core.tracers.context import register_configure_hook
from langgraph.types import Command

from planmode._drive import per_path
from planmode.llm.trim import CHARS_PER_TOKEN
from planmode.state.usage import COUNTERS, _count, add_counters, merge_usage, total_tokens

if TYPE_CHECKING:
    from planmode._compat import GraphNode

__all__ = [
    "COUNTERS",
    "UsageRecorder",
    "add_counters",
    "count_start",
    "count_stop",
    "counted",
    "event_usage",
    "format_usage",
    "merge_usage",
    "metered",
    "spent_usage",
    "step_scope",
    "total_tokens",
]


_recorder: ContextVar[UsageRecorder | None] = ContextVar("planmode_usage_recorder", default=None)
_step: ContextVar[str | None] = ContextVar("planmode_usage_step", default=None)
register_configure_hook(_recorder, inheritable=True)


def _message_text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(i if isinstance(i, str) else str(i.get("text", "")) if isinstance(i, dict) else "" for i in content)


def _estimate(message: BaseMessage) -> int:
    chars = len(_message_text(message))
    if isinstance(message, AIMessage) and message.tool_calls:
        chars += len(str([c.get("args") for c in message.tool_calls]))
    return chars // CHARS_PER_TOKEN + 4


class UsageRecorder(BaseCallbackHandler):
    """Counts the model calls of one node run (thread-safe: verify's judges run in a pool)."""

    raise_error = False
    run_inline = True

    def __init__(self, node: str, step_id: str | None = None) -> None:
        self.node = node
        self.step_id = step_id
        self._lock = threading.Lock()
        self._started: dict[UUID, tuple[str, int, str | None]] = {}
        self.delta: dict[str, Any] = {"total": {}, "nodes": {}, "steps": {}, "models": {}}
        self.base: Any = None
        """The run's usage before this node (for the run_finished event)."""

    def on_chat_model_start(
        self,
        serialized: Any,
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        invocation_params: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        params = invocation_params or kwargs.get("kwargs") or {}
        model = params.get("model") or params.get("model_name") or params.get("_type") or "unknown"
        prompt = sum(_estimate(m) for batch in messages for m in batch)
        with self._lock:
            self._started[run_id] = (str(model), prompt, _step.get() or self.step_id)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            model, prompt, step = self._started.pop(run_id, ("unknown", 0, _step.get() or self.step_id))
        for batch in response.generations:
            for gen in batch:
                message = getattr(gen, "message", None)
                if isinstance(message, AIMessage):
                    self._add(message, model, prompt, step)

    def _add(self, message: AIMessage, model: str, prompt: int, step: str | None) -> None:
        meta = message.usage_metadata
        named = (message.response_metadata or {}).get("model_name") or (message.response_metadata or {}).get("model")
        model = str(named or model)
        if meta:
            details: Any = meta.get("input_token_details") or {}
            counters = {
                "calls": 1,
                "input": meta.get("input_tokens", 0),
                "output": meta.get("output_tokens", 0),
                "cached": details.get("cache_read", 0) if isinstance(details, Mapping) else 0,
            }
        else:  # the server reported no usage: an estimate, counted as such
            counters = {"calls": 1, "input": prompt, "output": _estimate(message), "estimated": 1}
        with self._lock:
            d = self.delta
            d["total"] = add_counters(d["total"], counters)
            d["nodes"][self.node] = add_counters(d["nodes"].get(self.node), counters)
            d["models"][model] = add_counters(d["models"].get(model), counters)
            if step:
                d["steps"][step] = add_counters(d["steps"].get(step), counters)

    @property
    def calls(self) -> int:
        with self._lock:
            return _count(self.delta["total"].get("calls"))


def event_usage(kind: str, step_id: str | None) -> dict[str, int] | None:
    """The usage an event carries (`planmode.observability.events.emit`): the run's total for run_finished, the step's
    calls in this node for a step event, else this node's calls so far; None outside a metered node or with none."""
    recorder = _recorder.get()
    if recorder is None:
        return None
    with recorder._lock:
        delta = {k: dict(v) for k, v in recorder.delta.items()}
    if kind == "run_finished":
        total = merge_usage(recorder.base, delta)["total"]
        return total if total["calls"] else None
    bucket = delta["steps"].get(step_id) if step_id else delta["total"]
    return add_counters(bucket, None) if bucket and _count(bucket.get("calls")) else None


def spent_usage() -> Any:
    """The run's usage so far as a node sees it in the middle of its work: the usage in state when it started
    plus its own calls so far (None outside a metered node)."""
    recorder = _recorder.get()
    if recorder is None:
        return None
    with recorder._lock:
        delta = {k: dict(v) for k, v in recorder.delta.items()}
    return merge_usage(recorder.base, delta)


@contextlib.contextmanager
def step_scope(step_id: str) -> Iterator[None]:
    """Attribute the model calls made inside this block to ``step_id`` (verify judges several steps)."""
    token = _step.set(step_id)
    try:
        yield
    finally:
        _step.reset(token)


def _with_update(result: Any, extra: dict[str, Any]) -> Any:
    if isinstance(result, Command):
        update = result.update if isinstance(result.update, dict) else {}
        return dataclasses.replace(result, update={**update, **extra})
    if isinstance(result, dict):
        return {**result, **extra}
    return result


def _step_of(state: Any) -> str | None:
    step = state.get("step") if isinstance(state, Mapping) else None
    return getattr(step, "id", None)


def count_start(name: str, state: Any, *, reset: bool = False) -> tuple[UsageRecorder, Token[UsageRecorder | None]]:
    """Before node ``name``: its `UsageRecorder`, attached to every model call started in this context until
    `count_stop` (``reset``: the node starts a new run's count)."""
    recorder = UsageRecorder(name, _step_of(state))
    recorder.base = None if reset or not isinstance(state, Mapping) else state.get("usage")
    return recorder, _recorder.set(recorder)


def count_stop(token: Token[UsageRecorder | None]) -> None:
    """When node ``name`` ends (returns or raises): its calls are no longer counted."""
    _recorder.reset(token)


def counted(
    state: Any,
    result: Any,
    recorder: UsageRecorder,
    *,
    reset: bool = False,
    after: Callable[[Any, Any, dict[str, Any]], Any] | None = None,
) -> Any:
    """After the node: its result with its calls as a ``usage`` delta (``after(state, result, delta)`` may add to
    the result first: finalize writes usage into its report)."""
    delta = recorder.delta
    if after is not None:
        result = after(state, result, delta)
    if not recorder.calls and not reset:
        return result
    return _with_update(result, {"usage": {**delta, "reset": True} if reset else delta})


def metered(
    name: str,
    node: GraphNode,
    *,
    reset: bool = False,
    after: Callable[[Any, Any, dict[str, Any]], Any] | None = None,
) -> GraphNode:
    """``node`` with its model calls counted into the ``usage`` state key (``reset``: the node starts a new
    run's count). ``after(state, result, delta)`` may add to the result (finalize writes usage into its report).
    The graph's nodes get the same through their pipeline (`planmode.graph.pipeline`: `count_start`, `count_stop`,
    `counted` in its one frame); this wrapper serves a node of one's own."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(fn):  # an async path: the context variable follows its awaits

            @functools.wraps(fn)
            async def awrapped(state: Any, runtime: Any) -> Any:
                recorder, token = count_start(name, state, reset=reset)
                try:
                    result = await fn(state, runtime=runtime)
                finally:
                    count_stop(token)
                return counted(state, result, recorder, reset=reset, after=after)

            return awrapped

        @functools.wraps(fn)
        def wrapped(state: Any, runtime: Any) -> Any:
            recorder, token = count_start(name, state, reset=reset)
            try:
                result = fn(state, runtime=runtime)
            finally:
                count_stop(token)
            return counted(state, result, recorder, reset=reset, after=after)

        return wrapped

    return per_path(node, wrap)


def format_usage(usage: Any, cost: float | None = None) -> str:
    """One line: calls, input (cached), output, and what was estimated."""
    total = usage.get("total") if isinstance(usage, Mapping) else None
    if not isinstance(total, Mapping) or not _count(total.get("calls")):
        return "tokens: no model calls recorded"
    c = {k: _count(total.get(k)) for k in COUNTERS}
    text = f"tokens: {c['input'] + c['output']} ({c['input']} in"
    text += f", {c['cached']} cached" if c["cached"] else ""
    text += f", {c['output']} out) in {c['calls']} call(s)"
    if c["estimated"]:
        text += f"; {c['estimated']} call(s) estimated (no usage reported)"
    if cost is not None:
        text += f"; cost ${cost:.4f}"
    return text
