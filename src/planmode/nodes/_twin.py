"""A node written once, run sync or async.

The node's body is a generator: where it needs the model (or any IO), it yields a `Call` — a plain function and
its async twin — and receives the result (``x = yield from call(f, af)``; an exception of the call is raised
at the ``yield``). `twin_node` turns the body into a LangGraph node with both paths: ``invoke`` answers each
call with ``f()``, ``ainvoke`` with ``await af()`` (`planmode._drive`), so the async path never blocks the event
loop with a model call and the sync path is what it always was. The helpers below are the calls the nodes make;
the model layer's are its own loops (a structured call, asking until valid, the tool loop), composed with
``yield from``: the node's one driver makes every model call, with no driver or wrapper of their own between.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from functools import partial
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool
from pydantic import BaseModel

from planmode._compat import RunnableCallable
from planmode._drive import Call, adrive, drive
from planmode.context import PlanModeContext
from planmode.llm import Asked
from planmode.llm.retry import Accept, asking, show_json
from planmode.llm.structured import Structured, structured_steps
from planmode.nodes._deps import Deps, NodeRuntime
from planmode.tools.loop import LoopResult, tool_loop_steps

__all__ = ["Body", "Call", "ask", "call", "chat", "inline_node", "model_for", "structured", "tool_loop", "twin_node"]

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
R = TypeVar("R")
In = TypeVar("In")
Out = TypeVar("Out")


#: A node body: yields calls (what `planmode._drive.drive` answers), receives their results, returns the node's
#: update.
Body = Generator[Any, Any, T]


def call(run: Callable[[], T], arun: Callable[[], Awaitable[T]]) -> Body[T]:
    """``x = yield from call(f, af)``: ``x`` is ``f()`` on the sync path and ``await af()`` on the async path."""
    value: T = yield Call(run, arun)
    return value


def twin_node(name: str, body: Callable[[In, NodeRuntime], Body[Out]]) -> RunnableCallable:
    """The node running ``body``: a sync function for ``invoke`` and an async one for ``ainvoke``, each one
    driver (`drive` / `adrive`) that answers every call the body and the loops it composes yield."""

    def func(state: In, runtime: NodeRuntime) -> Out:
        return drive(body(state, runtime))

    async def afunc(state: In, runtime: NodeRuntime) -> Out:
        return await adrive(body(state, runtime))

    func.__name__, afunc.__name__ = name, f"a{name}"
    return RunnableCallable(func, afunc, name=name, trace=False)


def inline_node(name: str, func: Callable[[In, NodeRuntime], Out]) -> RunnableCallable:
    """The node running ``func``, a node without IO (no model, no file, no database): ``ainvoke`` calls it on
    the event loop instead of sending it to a worker thread. ``interrupt()`` works on both paths."""

    async def afunc(state: In, runtime: NodeRuntime) -> Out:
        return func(state, runtime)

    afunc.__name__ = f"a{name}"
    return RunnableCallable(func, afunc, name=name, trace=False)


# The calls the nodes make, each with its async twin (the same arguments, checks and results).


def model_for(deps: Deps, settings: PlanModeContext, negotiated: str | None = None) -> Body[BaseChatModel]:
    """The run's chat model (`ModelProvider.get` / `aget`); ``negotiated``: the run's ``negotiated_output``."""
    return call(partial(deps.models.get, settings, negotiated), partial(deps.models.aget, settings, negotiated))


def structured(
    model: BaseChatModel, schema: type[M], messages: Sequence[BaseMessage], settings: PlanModeContext
) -> Body[Structured[M]]:
    """One structured call (what `call_structured` / `acall_structured` do: their loop, composed)."""
    return structured_steps(model, schema, messages, settings)


def ask(
    model: BaseChatModel,
    schema: type[M],
    messages: Sequence[BaseMessage],
    settings: PlanModeContext,
    *,
    attempts: int,
    accept: Accept[M, R],
    retry_prompt: Callable[[list[str]], str],
    show: Callable[[M], str] = show_json,
    show_chars: int = 4000,
    first: Structured[M] | None = None,
    on_reject: Callable[[list[str]], None] | None = None,
) -> Body[Asked[R]]:
    """Ask until valid (what `ask_until_valid` / `aask_until_valid` do, with the same arguments: their loop,
    composed)."""
    return asking(
        model,
        schema,
        messages,
        settings,
        attempts=attempts,
        accept=accept,
        retry_prompt=retry_prompt,
        show=show,
        show_chars=show_chars,
        first=first,
        on_reject=on_reject,
    )


def tool_loop(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    messages: Sequence[BaseMessage],
    settings: PlanModeContext,
    *,
    allow_writes: bool,
    max_iterations: int,
    max_tool_calls: int | None = None,
) -> Body[LoopResult]:
    """The tool-calling loop (what `run_tool_loop` / `arun_tool_loop` do, with the same arguments: their loop,
    composed)."""
    return tool_loop_steps(
        model,
        tools,
        messages,
        settings,
        allow_writes=allow_writes,
        max_iterations=max_iterations,
        max_tool_calls=max_tool_calls,
    )


def chat(model: BaseChatModel, messages: list[BaseMessage]) -> Body[BaseMessage]:
    """A plain model call (``invoke`` / ``ainvoke``)."""
    return call(partial(model.invoke, messages), partial(model.ainvoke, messages))
