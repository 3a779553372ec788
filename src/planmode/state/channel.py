"""`PlanChannel`: the plan's channel, so that *every* write goes through `plan_reducer`.

A plain ``Annotated[Plan | None, plan_reducer]`` is not enough in LangGraph 1.2: a reducer channel whose type
cannot be constructed empty stores the *first* write as it is, without calling the reducer, and an
``Overwrite`` value skips the reducer altogether. Either would let an unvalidated plan (or an edit to a done
step) into state. This channel starts from ``None`` and passes every write — ``Overwrite`` included — to
`plan_reducer`, which never raises.

Use it as ``plan: Annotated[Plan | None, PlanChannel]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.types import Overwrite

from planmode.state.reducer import plan_reducer

__all__ = ["PlanChannel"]

_OVERWRITE_KEY = "__overwrite__"


def _unwrap(value: Any) -> Any:
    """The value inside an ``Overwrite`` (typed or JSON form); the value itself otherwise."""
    if isinstance(value, Overwrite):
        return value.value
    if isinstance(value, dict):
        if len(value) == 1 and _OVERWRITE_KEY in value:
            return value[_OVERWRITE_KEY]
        if value.get("type") == _OVERWRITE_KEY and "value" in value:
            return value["value"]
    return value


class PlanChannel(BinaryOperatorAggregate[Any]):
    """A reducer channel that starts at ``None`` and reduces every write, the first and overwrites included."""

    def __init__(self, typ: Any, operator: Callable[[Any, Any], Any] = plan_reducer) -> None:
        super().__init__(typ, operator)
        self.value = None

    def update(self, values: Sequence[Any]) -> bool:
        if not values:
            return False
        for value in values:
            self.value = self.operator(self.value, _unwrap(value))
        return True
