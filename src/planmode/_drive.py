"""Write a model-calling loop once, run it sync or async.

The loop is a generator that yields what it wants called and receives the answer (an exception of the call is
thrown back into it at the ``yield``); `drive` answers with plain calls, `adrive` with awaited ones. So the
validation and retry logic of a structured call exists once for ``invoke`` and ``ainvoke``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import TypeVar

__all__ = ["adrive", "drive"]

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
