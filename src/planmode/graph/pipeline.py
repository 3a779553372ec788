"""Each node's pipeline, in one table (`PIPELINES`): what wraps which node, outermost first, applied by one helper
(`pipeline`) that serves both of a node's paths (``invoke`` and ``ainvoke``). The order is data: a test holds it
against the table in docs/architecture.md.

The parts (each is plain before/after calls in `around`, not a wrapper of its own):

- ``data_writes`` (`to_data`, here): every write of the node is plain JSON data, never a planmode class (below);
- ``resolved_once`` (`settings_resolved`, `settings_written`, here): a runtime context that brings new settings
  (a resume with another endpoint) is resolved against the run's settings once, and the result written to state
  (`planmode.context.settings_of` reads them);
- ``trusted_task`` (`planmode.nodes.execute_step.trusted`): execute_step's ``Send`` payload gets the run's usage,
  budget and settings from the graph's channels, not from the ``Send``;
- ``accounted`` (`planmode.budget.accounts_open` ... `accounts_result`): the node's model calls are counted, each
  checked against the budget, and the nodes that start work check the budget first;
- ``pausable`` (`planmode.nodes.model_unavailable.paused`): a model that cannot be reached pauses the run
  resumably.

For a graph of your own: `pipeline` puts one of planmode's nodes in its pipeline; `data_writes` (a wrapper, and
`data_sends` for a router) makes any node's writes JSON data, so that a stock saver reads them back.

Approval is no wrapper: approve calls the policy and asks a human in the node, and execute_step's execution
guard is in the node too (docs/approval-gates.md).

What planmode puts in a checkpoint is plain JSON data, never a planmode class. Every stock LangGraph saver
(``InMemorySaver``, ``SqliteSaver``, ``PostgresSaver`` and their async twins) serializes with
``JsonPlusSerializer``, which stores a Pydantic model as "class + fields" and, when reading it back, warns about a
class it does not know ("Deserializing unregistered type ...") or, under ``LANGGRAPH_STRICT_MSGPACK``, refuses
to build it. So the channels that hold models checkpoint their JSON form and rebuild the models when a
checkpoint is read (`planmode.state.channel.PlanChannel`, `planmode.state.graph_state.StepOutcomesChannel`); a
node's writes (saved as pending writes before any channel sees them) are made data by `data_writes`, and the
``Send`` tasks of a router by `data_sends`; the plan and outcome channels read the JSON forms as the models they
were (`plan_reducer` and `merge_outcomes` accept both). Nodes and the public API keep seeing the typed models.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Awaitable, Callable, Generator, Mapping
from enum import Enum
from typing import Any, Literal

from langgraph.types import Command, Send
from pydantic import BaseModel

from planmode._compat import GraphNode, RunnableCallable
from planmode._drive import per_path

__all__ = [
    "ORDER",
    "PIPELINES",
    "Wrapper",
    "around",
    "data_sends",
    "data_writes",
    "pipeline",
    "settings_resolved",
    "settings_written",
    "to_data",
]


#: Types whose values are data as they are (exact types: a planmode ``str`` enum is not one of them).
_PLAIN: frozenset[type] = frozenset({str, int, float, bool, type(None), bytes})
#: Per model class: its field names when the class is planmode's, else None (left to its own serializer).
_FIELDS: dict[type, tuple[str, ...] | None] = {}


def _fields(cls: type[BaseModel]) -> tuple[str, ...] | None:
    try:
        return _FIELDS[cls]
    except KeyError:
        names = tuple(cls.model_fields) if cls.__module__.startswith("planmode.") else None
        _FIELDS[cls] = names
        return names


def to_data(value: Any) -> Any:
    """``value`` with every planmode model in it turned into its JSON data (recursively, losslessly).

    Every field is kept, excluded ones too (a `NewStep`'s ``status`` is excluded from its dumps, but the
    patch logic reads it to record a warning), so ``Model.model_validate(to_data(m)) == m``. Values that are
    not planmode's (messages, a user's own models) are left as they are: their own serializer handles them.
    Runs on every write of every node, so the common shapes (plain values, dicts, lists) are answered by their
    exact type first, and a model class's field names are looked up once.
    """
    cls = type(value)
    if cls in _PLAIN:
        return value
    if cls is dict:
        return {k: to_data(v) for k, v in value.items()}
    if cls is list or cls is tuple:
        return [to_data(v) for v in value]
    if isinstance(value, BaseModel):
        names = _fields(cls)
        if names is None:
            return value
        return {name: to_data(getattr(value, name)) for name in names}
    if isinstance(value, Enum) and cls.__module__.startswith("planmode."):
        return value.value
    if isinstance(value, Send):
        return Send(value.node, to_data(value.arg))
    if isinstance(value, Mapping):
        return {k: to_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_data(v) for v in value]
    return value


def _update_data(out: Any) -> Any:
    """A node's return value with its updates and ``Send`` targets made data."""
    if isinstance(out, Command):
        goto = out.goto
        if isinstance(goto, Send | list | tuple):
            goto = to_data(goto)
        return dataclasses.replace(out, update=to_data(out.update), goto=goto)
    if isinstance(out, Mapping | list | tuple | Send):
        return to_data(out)
    return out


def data_writes(node: GraphNode) -> GraphNode:
    """``node`` whose writes (an update dict, or a ``Command``'s update and sends) are JSON data: every planmode
    model in them becomes its data (`to_data`: every field, recursively), a planmode enum its value; a value that
    is not planmode's is left to its own serializer. So a stock saver reads the checkpoints back without
    "Deserializing unregistered type" (see the module docstring).

    Wraps a function, an ``async def`` function, or a `RunnableCallable` (each of its paths); keeps ``node``'s
    signature (LangGraph reads it to inject ``runtime``, ``config``, ...). The graph's routers get it as
    `data_sends`, its nodes as the ``data_writes`` part of their pipeline.
    """

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def awrapped(*args: Any, **kwargs: Any) -> Any:
                return _update_data(await fn(*args, **kwargs))

            return awrapped

        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            return _update_data(fn(*args, **kwargs))

        return wrapped

    return per_path(node, wrap)


def settings_resolved(state: Any, runtime: Any) -> tuple[Any, Any, dict[str, Any] | None]:
    """Before a node (the ``resolved_once`` part): the state with the run's settings resolved against a runtime
    context that brings new values, the runtime without that context, and the settings to write (None: nothing
    new)."""
    import planmode.context as run_settings

    if runtime is None or not isinstance(state, Mapping) or not state.get("settings"):
        return state, runtime, None
    if not run_settings.brings_news(state, runtime):
        return state, runtime, None
    stored = state["settings"]
    resolved = run_settings.resolve_settings(runtime.context, stored, on_ignored=_emit_settings_ignored)
    written = None if resolved is stored else run_settings.settings_dict(resolved)  # only ignored values: as is
    return {**state, "settings": resolved}, runtime.override(context=None), written


def settings_written(out: Any, written: dict[str, Any] | None) -> Any:
    """After the node: its update with the resolved settings (`settings_resolved`) written first."""
    if written is None or written == {}:
        return out
    if isinstance(out, Command) and (out.update is None or isinstance(out.update, Mapping)):
        return dataclasses.replace(out, update={"settings": written, **(out.update or {})})
    if isinstance(out, Mapping):
        return {"settings": written, **out}
    return out


def _emit_settings_ignored(message: str, kept: dict[str, Any], given: dict[str, Any]) -> None:
    """A ``settings_ignored`` event: a resume's context tried to loosen the run's settings."""
    from planmode.observability.events import emit

    emit("settings_ignored", message, ignored=kept, given=given)


def data_sends(router: GraphNode) -> GraphNode:
    """``router`` whose ``Send`` packets carry JSON data (they are saved as writes too)."""
    return data_writes(router)


Wrapper = Literal["data_writes", "resolved_once", "trusted_task", "accounted", "pausable"]

#: Each node's pipeline, outermost first (the node itself, ``make_<node>`` of ``nodes/<node>.py``, is innermost).
PIPELINES: dict[str, tuple[Wrapper, ...]] = {
    "detect": ("data_writes", "accounted"),
    "respond": ("data_writes", "resolved_once", "accounted", "pausable"),
    "plan": ("data_writes", "resolved_once", "accounted", "pausable"),
    "approve": ("data_writes", "resolved_once"),
    "dispatch": ("data_writes", "resolved_once", "accounted"),
    "execute_step": ("data_writes", "trusted_task", "resolved_once", "accounted"),
    "verify": ("data_writes", "resolved_once", "accounted", "pausable"),
    "reflect": ("data_writes", "resolved_once", "accounted", "pausable"),
    "patch": ("data_writes", "resolved_once", "accounted", "pausable"),
    "finalize": ("data_writes", "resolved_once", "accounted"),
    "model_unavailable": ("data_writes", "resolved_once"),
}


#: The order the pipeline's parts run in, outermost first: every row of `PIPELINES` keeps it.
ORDER: tuple[Wrapper, ...] = ("data_writes", "trusted_task", "resolved_once", "accounted", "pausable")


def pipeline(name: str, node: GraphNode) -> GraphNode:
    """``node`` inside its pipeline (`PIPELINES`), for its sync and its async path alike: one function per path,
    one frame, which runs the row's parts around the node (`around`) — not a wrapper per part."""
    parts = PIPELINES[name]
    if [p for p in ORDER if p in parts] != list(parts):
        raise ValueError(f"the pipeline of {name} is out of the order {ORDER}: {parts}")
    if isinstance(node, RunnableCallable):
        func, afunc, node_name, trace = node.func, node.afunc, node.name, node.trace
    elif inspect.iscoroutinefunction(node):
        func, afunc, node_name, trace = None, node, name, False
    else:
        func, afunc, node_name, trace = node, None, name, False
    sync = _sync(name, parts, func) if func is not None else None
    asynchronous = _async(name, parts, afunc) if afunc is not None else None
    return RunnableCallable(sync, asynchronous, name=node_name, trace=trace)


_Around = Generator[tuple[Any, Any], Any, Any]


def around(name: str, parts: tuple[Wrapper, ...], state: Any, runtime: Any) -> _Around:
    """A node's pipeline, written once for both paths: yields the ``(state, runtime)`` the node runs with and
    receives its result (or its exception, thrown in), returns what the node writes. Each part is plain calls to
    its own module, before and after the node:

    - ``trusted_task`` (`planmode.nodes.execute_step.trusted`): the task's usage, budget and settings from the
      graph's channels;
    - ``resolved_once`` (`settings_resolved`, `settings_written`): a context that brings new settings resolved
      once, and written;
    - ``accounted`` (`planmode.budget.accounts_open` ... `accounts_result`): the usage count, the budget check
      before the node and before each of its model calls; a run stopped at the check does not run the node;
    - ``pausable`` (`planmode.nodes.model_unavailable.paused`): a lost model becomes the pause's record;
    - ``data_writes`` (`to_data`): the writes made JSON data.
    """
    from planmode.budget import accounts_close, accounts_failed, accounts_open, accounts_result
    from planmode.nodes.execute_step import trusted
    from planmode.nodes.model_unavailable import paused

    if "trusted_task" in parts:
        state = trusted(state)
    written = None
    if "resolved_once" in parts:
        state, runtime, written = settings_resolved(state, runtime)
    acc = accounts_open(name, state, runtime) if "accounted" in parts else None
    result: Any = None
    try:
        if acc is None or acc.runs:
            try:
                result = yield state, runtime
            except Exception as exc:
                update = paused(name, state, exc) if "pausable" in parts else None
                if update is not None:
                    result = update
                elif acc is None or not accounts_failed(acc):
                    raise
                # else: stopped at a call's budget pause: the stop is the node's result (accounts_result)
    finally:
        if acc is not None:
            accounts_close(acc)
    if acc is not None:
        result = accounts_result(acc, state, result)
    result = settings_written(result, written)
    return _update_data(result) if "data_writes" in parts else result


def _sync(name: str, parts: tuple[Wrapper, ...], func: Callable[..., Any]) -> Callable[..., Any]:
    def run(state: Any, runtime: Any) -> Any:
        steps = around(name, parts, state, runtime)
        try:
            state, runtime = next(steps)
        except StopIteration as stop:  # the node does not run (the run was stopped at the budget check)
            return stop.value
        try:
            result = func(state, runtime=runtime)
        except Exception as exc:
            return _finish(steps, exc, raised=True)
        except BaseException:  # a cancellation, an exit: the parts' clean-up only, then on it goes
            steps.close()
            raise
        return _finish(steps, result)

    run.__name__ = run.__qualname__ = name
    return run


def _async(name: str, parts: tuple[Wrapper, ...], afunc: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    async def arun(state: Any, runtime: Any) -> Any:
        steps = around(name, parts, state, runtime)
        try:
            state, runtime = next(steps)
        except StopIteration as stop:
            return stop.value
        try:
            result = await afunc(state, runtime=runtime)
        except Exception as exc:
            return _finish(steps, exc, raised=True)
        except BaseException:  # a cancellation, an exit: the parts' clean-up only, then on it goes
            steps.close()
            raise
        return _finish(steps, result)

    arun.__name__ = arun.__qualname__ = f"a{name}"
    return arun


def _finish(steps: _Around, result: Any, *, raised: bool = False) -> Any:
    """The pipeline's end: ``result`` (or the exception, when ``raised``) sent in, its return value out."""
    try:
        if raised:
            steps.throw(result)
        else:
            steps.send(result)
    except StopIteration as stop:
        return stop.value
    raise RuntimeError("a pipeline yields once")  # pragma: no cover - `around` yields once
