"""Write a model-calling loop once, run it sync or async.

The loop is a generator that yields what it wants called and receives the answer (an exception of the call is
thrown back into it at the ``yield``); `drive` answers with plain calls, `adrive` with awaited ones. So the
validation and retry logic of a structured call exists once for ``invoke`` and ``ainvoke``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from planmode._compat import GraphNode

__all__ = ["adrive", "drive", "per_path"]

Y = TypeVar("Y")
S = TypeVar("S")
R = TypeVar("R")


def drive(gen: Generator[Y, S, R], call: Callable[[Y], S]) -> R:
    """Run ``gen`` to its return value, answering each request with ``call(request)``."""
    try:
        request = next(gen)
        while True:
            try:
                answer = call(request)
            except Exception as exc:  # the loop decides what a failed call means
                request = gen.throw(exc)
            else:
                request = gen.send(answer)
    except StopIteration as stop:
        result: R = stop.value
        return result


async def adrive(gen: Generator[Y, S, R], call: Callable[[Y], Awaitable[S]]) -> R:
    """Run ``gen`` to its return value, answering each request with ``await call(request)``."""
    try:
        request = next(gen)
        while True:
            try:
                answer = await call(request)
            except Exception as exc:  # the loop decides what a failed call means
                request = gen.throw(exc)
            else:
                request = gen.send(answer)
    except StopIteration as stop:
        result: R = stop.value
        return result


def per_path(node: GraphNode, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> GraphNode:
    """``wrap`` applied to each path of a graph node: a `RunnableCallable`'s sync and async functions (a node
    with both, as LangGraph's prebuilt nodes are built), or the node function itself."""
    from planmode._compat import RunnableCallable

    if isinstance(node, RunnableCallable):
        return RunnableCallable(
            wrap(node.func) if node.func is not None else None,
            wrap(node.afunc) if node.afunc is not None else None,
            name=node.name,
            trace=node.trace,
        )
    return wrap(node)
