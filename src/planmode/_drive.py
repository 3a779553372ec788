"""Write a model-calling loop once, run it sync or async.

The loop is a generator that yields what it wants called and receives the answer (an exception of the call is
thrown back into it at the ``yield``); `drive` answers with plain calls, `adrive` with awaited ones. So the
validation and retry logic of a structured call exists once for ``invoke`` and ``ainvoke``.

What a loop yields (answered by `drive` / `adrive` without a ``call`` of the caller's):

- a `Call`: a plain function and its async twin (``run()`` / ``await arun()``);
- a ``(runnable, input)`` pair: ``runnable.invoke(input)`` / ``await runnable.ainvoke(input)`` (what a structured
  call yields, `planmode.llm.structured`);
- `Calls`: calls made together, at most ``limit`` at a time (a thread pool / tasks on the event loop), answered
  with a list, in order, of each call's result or the exception it raised (an `Exception` is a value there).

Loops compose with ``yield from``: a node's body (`planmode.nodes._twin`) yields from the model layer's loops
(`planmode.llm.structured.structured_steps`, `planmode.llm.retry.asking`, `planmode.tools.loop.tool_loop_steps`),
so one driver, the node's, answers every model call of the node, and the loops suspended in the ``yield from``
chain are no frames on the stack while the call runs."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from langgraph.errors import GraphBubbleUp

if TYPE_CHECKING:
    from planmode._compat import GraphNode

__all__ = ["Call", "Calls", "adrive", "drive", "per_path", "together"]

Y = TypeVar("Y")
S = TypeVar("S")
R = TypeVar("R")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One call a loop needs: ``run()`` on the sync path, ``await arun()`` on the async path."""

    run: Callable[[], T]
    arun: Callable[[], Awaitable[T]]


@dataclass(frozen=True, slots=True)
class Calls:
    """Calls made together, at most ``limit`` at a time: the answer is a list, in order, of each call's result or
    the `Exception` it raised. An interrupt (`GraphBubbleUp`) is raised as itself, the calls still running on the
    event loop cancelled."""

    calls: tuple[Call[Any], ...]
    limit: int


def drive(gen: Generator[Y, S, R], call: Callable[[Y], S] | None = None) -> R:
    """Run ``gen`` to its return value, answering each request with ``call(request)``, or, without ``call``, as
    the request says (a `Call`, a ``(runnable, input)`` pair, `Calls`)."""
    try:
        request: Any = next(gen)
        while True:
            try:
                if call is not None:
                    answer: Any = call(request)
                elif type(request) is Call:
                    answer = request.run()
                elif type(request) is Calls:
                    answer = _together(request)
                else:
                    answer = request[0].invoke(request[1])
            except Exception as exc:  # the loop decides what a failed call means
                request = gen.throw(exc)
            except BaseException:  # a cancellation, an exit: the loop's clean-up runs here, then on it goes
                gen.close()
                raise
            else:
                request = gen.send(answer)
    except StopIteration as stop:
        result: R = stop.value
        return result


async def adrive(gen: Generator[Y, S, R], call: Callable[[Y], Awaitable[S]] | None = None) -> R:
    """Run ``gen`` to its return value, answering each request with ``await call(request)``, or, without
    ``call``, as the request says (``await arun()``, ``await runnable.ainvoke(input)``, `Calls` as tasks)."""
    try:
        request: Any = next(gen)
        while True:
            try:
                if call is not None:
                    answer: Any = await call(request)
                elif type(request) is Call:
                    answer = await request.arun()
                elif type(request) is Calls:
                    answer = await _atogether(request)
                else:
                    answer = await request[0].ainvoke(request[1])
            except Exception as exc:  # the loop decides what a failed call means
                request = gen.throw(exc)
            except BaseException:  # a cancellation, an exit: the loop's clean-up runs here, then on it goes
                gen.close()
                raise
            else:
                request = gen.send(answer)
    except StopIteration as stop:
        result: R = stop.value
        return result


def together(
    loops: Sequence[Generator[Any, Any, Any]], limit: int, wrap: Callable[[int, Call[Any]], Call[Any]] | None = None
) -> Generator[Calls, list[Any], list[Any]]:
    """Loops run side by side, as one loop: each round yields the calls the loops still running wait for as one
    `Calls` (at most ``limit`` at a time), sends each loop its answer (or throws its exception in); returns their
    results in order. ``wrap(i, call)``: the call of loop ``i`` as it is made (verify counts a judge's calls for
    its step). The first loop that raises (in order) ends them all: the others are closed, its exception raised."""
    results: list[Any] = [None] * len(loops)
    waiting: dict[int, Any] = {}
    try:
        for i, loop in enumerate(loops):
            try:
                waiting[i] = next(loop)
            except StopIteration as stop:
                results[i] = stop.value
        while waiting:
            order = list(waiting)
            calls = tuple(_as_call(waiting[i]) if wrap is None else wrap(i, _as_call(waiting[i])) for i in order)
            answers = yield Calls(calls, limit)
            failure: Exception | None = None
            for i, answer in zip(order, answers, strict=True):
                loop = loops[i]
                try:
                    waiting[i] = loop.throw(answer) if isinstance(answer, Exception) else loop.send(answer)
                except StopIteration as stop:
                    del waiting[i]
                    results[i] = stop.value
                except Exception as exc:
                    del waiting[i]
                    failure = failure or exc
            if failure is not None:
                raise failure
    finally:
        for i in waiting:
            loops[i].close()
    return results


def _as_call(request: Any) -> Call[Any]:
    """A request as a `Call` (what `Calls` holds)."""
    if type(request) is Call:
        return request
    if isinstance(request, tuple) and len(request) == 2:
        runnable, given = request
        return Call(partial(runnable.invoke, given), partial(runnable.ainvoke, given))
    raise TypeError(f"a loop run with others yields a Call or a (runnable, input) pair, not {type(request).__name__}")


def _together(batch: Calls) -> list[Any]:
    """`Calls` on the sync path: in a thread pool that keeps the run's context (its config, its callbacks)."""
    from langchain_core.runnables.config import ContextThreadPoolExecutor

    if len(batch.calls) == 1:
        try:
            return [batch.calls[0].run()]
        except GraphBubbleUp:
            raise
        except Exception as exc:
            return [exc]
    with ContextThreadPoolExecutor(max_workers=max(1, min(batch.limit, len(batch.calls)))) as pool:
        futures = [pool.submit(c.run) for c in batch.calls]
    out: list[Any] = []
    for future in futures:
        err = future.exception()
        if isinstance(err, GraphBubbleUp) or (err is not None and not isinstance(err, Exception)):
            raise err
        out.append(err if err is not None else future.result())
    return out


async def _atogether(batch: Calls) -> list[Any]:
    """`Calls` on the async path: tasks (each copies the run's context), at most ``limit`` at a time."""
    if len(batch.calls) == 1:
        try:
            return [await batch.calls[0].arun()]
        except GraphBubbleUp:
            raise
        except Exception as exc:
            return [exc]
    gate = asyncio.Semaphore(max(1, batch.limit))

    async def one(c: Call[Any]) -> Any:
        async with gate:
            return await c.arun()

    tasks = [asyncio.ensure_future(one(c)) for c in batch.calls]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in tasks:
            err = task.exception() if task.done() and not task.cancelled() else None
            if isinstance(err, GraphBubbleUp) or (err is not None and not isinstance(err, Exception)):
                raise err
        done = await asyncio.gather(*tasks, return_exceptions=True)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    for item in done:
        if not isinstance(item, Exception) and isinstance(item, BaseException):
            raise item
    return list(done)


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
