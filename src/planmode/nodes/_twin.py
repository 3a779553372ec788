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
from pydantic import BaseModel

from planmode._compat import RunnableCallable
from planmode._drive import Call, adrive, drive
from planmode.context import PlanModeContext
from planmode.llm.retry import asking
from planmode.llm.structured import Structured, structured_steps
from planmode.nodes._deps import Deps, NodeRuntime
from planmode.tools.loop import tool_loop_steps

__all__ = ["Body", "Call", "ask", "call", "chat", "inline_node", "model_for", "structured", "tool_loop", "twin_node"]

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
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


#: Ask until valid: `ask_until_valid`'s own loop (`planmode.llm.retry.asking`, the same arguments), composed.
ask = asking

#: The tool-calling loop: `run_tool_loop`'s own loop (`planmode.tools.loop.tool_loop_steps`, the same arguments),
#: composed.
tool_loop = tool_loop_steps


def chat(model: BaseChatModel, messages: list[BaseMessage]) -> Body[BaseMessage]:
    """A plain model call (``invoke`` / ``ainvoke``)."""
    return call(partial(model.invoke, messages), partial(model.ainvoke, messages))
