"""What planmode puts in a checkpoint: plain JSON data, never a planmode class.

Every stock LangGraph saver (``InMemorySaver``, ``SqliteSaver``, ``PostgresSaver`` and their async twins)
serializes with ``JsonPlusSerializer``, which stores a Pydantic model as "class + fields" and, when reading it
back, warns about a class it does not know ("Deserializing unregistered type ...") or, under
``LANGGRAPH_STRICT_MSGPACK``, refuses to build it. planmode's checkpoints therefore hold data only:

- the channels that hold models checkpoint their JSON form and rebuild the models when a checkpoint is read
  (`planmode.state.channel.PlanChannel`, `planmode.state.graph_state.StepOutcomesChannel`);
- a node's writes (saved as pending writes before any channel sees them) are made data by `data_writes`,
  and the ``Send`` tasks of a router by `data_sends`; the plan and outcome channels read the JSON forms as
  the models they were (`plan_reducer` and `merge_outcomes` accept both);
- execute_step gets its step as a `Step` again (`planmode.nodes.execute_step.trusted_task`).

Nodes and the public API keep seeing the typed models.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

from langgraph.types import Command, Send
from pydantic import BaseModel

from planmode._drive import per_path

__all__ = ["data_sends", "data_writes", "to_data"]


def to_data(value: Any) -> Any:
    """``value`` with every planmode model in it turned into its JSON data (recursively, losslessly).

    Every field is kept, excluded ones too (a `NewStep`'s ``status`` is excluded from its dumps, but the
    patch logic reads it to record a warning), so ``Model.model_validate(to_data(m)) == m``. Values that are
    not planmode's (messages, a user's own models) are left as they are: their own serializer handles them.
    """
    if isinstance(value, BaseModel):
        if not type(value).__module__.startswith("planmode."):
            return value
        return {name: to_data(getattr(value, name)) for name in type(value).model_fields}
    if isinstance(value, Enum) and type(value).__module__.startswith("planmode."):
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


def data_writes(node: Any) -> Any:
    """``node`` whose writes (an update dict, or a ``Command``'s update and sends) are JSON data.

    The wrapper keeps ``node``'s signature (LangGraph reads it to inject ``runtime``, ``config``, ...).
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


def data_sends(router: Any) -> Any:
    """``router`` whose ``Send`` packets carry JSON data (they are saved as writes too)."""
    return data_writes(router)
