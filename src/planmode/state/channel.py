"""`PlanChannel`: the plan's channel, so that *every* write goes through `plan_reducer`.

A plain ``Annotated[Plan | None, plan_reducer]`` is not enough in LangGraph 1.2: a reducer channel whose type
cannot be constructed empty stores the *first* write as it is, without calling the reducer, and an
``Overwrite`` value skips the reducer altogether. Either would let an unvalidated plan (or an edit to a done
step) into state. This channel starts from ``None`` and passes every write — ``Overwrite`` included — to
`plan_reducer`, which never raises.

Use it as ``plan: Annotated[Plan | None, PlanChannel]``.

Its checkpoint is the plan's JSON data, packed and compressed (`planmode._packed`), not the `Plan` object,
so any stock saver reads it back without an "unregistered type" warning, with ``LANGGRAPH_STRICT_MSGPACK`` on or
off, and a checkpoint holds a tenth of the plan's JSON size; the plan is rebuilt when the checkpoint is read.
Checkpoints written before held the plan's JSON data, or the `Plan` object (or, under a strict serializer, its
fields as a dict): all are read too.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Self

from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.types import Overwrite
from pydantic import ValidationError

from planmode._packed import is_packed, pack_plan_data, unpack_plan
from planmode.state.models import Plan, Step, moved_from
from planmode.state.reducer import plan_reducer

__all__ = ["PlanChannel"]

_OVERWRITE_KEY = "__overwrite__"


def _unwrap(value: Any) -> object:
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

    def checkpoint(self) -> Any:
        """The plan's JSON data, packed (``None`` when there is none)."""
        value = self.value
        if isinstance(value, Plan):
            return _packed(value)
        return value  # None, or a raw value the reducer has not read yet (it copes with it on the next write)

    def from_checkpoint(self, checkpoint: Any) -> Self:
        """A channel holding the checkpointed plan, rebuilt as a `Plan`; never raises (a thread stays readable)."""
        channel = super().from_checkpoint(checkpoint)
        channel.value = _restore_plan(channel.value)
        return channel


#: The JSON data of the last plans checkpointed, by identity: a plan is immutable (every change makes a new
#: one), and most super-steps leave it unchanged, so its data is made once, not at every checkpoint.
_DUMPED: OrderedDict[tuple[int, ...], tuple[Plan, dict[str, Any]]] = OrderedDict()
_DUMPED_SIZE = 16
_DUMPED_LOCK = threading.Lock()


def _plan_data(plan: Plan) -> dict[str, Any]:
    # the identity, plus what an in-place edit would change most likely (planmode never edits a plan in place)
    key = (id(plan), plan.version, len(plan.steps), len(plan.history), len(plan.rejections))
    with _DUMPED_LOCK:
        hit = _DUMPED.get(key)
        if hit is not None and hit[0] is plan:
            _DUMPED.move_to_end(key)
            return hit[1]
    data = _moved_data(plan)
    if data is None:
        data = plan.model_dump(mode="json", exclude={"steps"})
        data["steps"] = [_step_data(step) for step in plan.steps]
    with _DUMPED_LOCK:
        _DUMPED[key] = (plan, data)
        while len(_DUMPED) > _DUMPED_SIZE:
            _DUMPED.popitem(last=False)
    return data


#: The packed data of the last plans checkpointed, by identity (as `_DUMPED`).
_PACKED: OrderedDict[tuple[int, ...], tuple[Plan, dict[str, Any]]] = OrderedDict()


def _packed(plan: Plan) -> dict[str, Any]:
    key = (id(plan), plan.version, len(plan.steps), len(plan.history), len(plan.rejections))
    with _DUMPED_LOCK:
        hit = _PACKED.get(key)
        if hit is not None and hit[0] is plan:
            return hit[1]
    packed = pack_plan_data(_plan_data(plan))
    with _DUMPED_LOCK:
        _PACKED[key] = (plan, packed)
        while len(_PACKED) > _DUMPED_SIZE:
            _PACKED.popitem(last=False)
    return packed


def _moved_data(plan: Plan) -> dict[str, Any] | None:
    """The data of a plan made by execution updates from a plan whose data is remembered: that data with the
    changed steps' data replaced (a copy of the list, not a walk over every step); None otherwise."""
    origin = moved_from(plan)
    if origin is None:
        return None
    source, changed = origin
    key = (id(source), source.version, len(source.steps), len(source.history), len(source.rejections))
    with _DUMPED_LOCK:
        hit = _DUMPED.get(key)
    if hit is None or hit[0] is not source or len(hit[1]["steps"]) != len(plan.steps):
        return None
    data = dict(hit[1])
    steps = list(data["steps"])
    for i in changed:
        steps[i] = _step_data(plan.steps[i])
    data["steps"] = steps
    return data


#: The JSON data of steps, by identity: a new plan version keeps the `Step` objects it did not change, so a
#: checkpoint re-dumps only the steps that changed (a layer of steps), not the whole plan.
_STEPS: OrderedDict[int, tuple[Step, dict[str, Any]]] = OrderedDict()
_STEPS_SIZE = 8192


def _step_data(step: Step) -> dict[str, Any]:
    with _DUMPED_LOCK:
        hit = _STEPS.get(id(step))
        if hit is not None and hit[0] is step:
            _STEPS.move_to_end(id(step))
            return hit[1]
    data = step.model_dump(mode="json")
    with _DUMPED_LOCK:
        _STEPS[id(step)] = (step, data)
        while len(_STEPS) > _STEPS_SIZE:
            _STEPS.popitem(last=False)
    return data


def _restore_plan(value: Any) -> object:
    """A checkpointed plan value as a `Plan`: from its JSON data (this channel's checkpoints, and old ones read
    by a strict serializer) or as it is (an old checkpoint's `Plan`, ``None``). Data that is not a plan is
    left as it is, for `plan_reducer` to read or record on the next write."""
    if is_packed(value):  # an unreadable packed plan stays as it is (the reducer records it on the next write)
        value = unpack_plan(value) or value
    if isinstance(value, dict) and "version" in value:
        try:
            return Plan.model_validate(value)
        except ValidationError:
            return value
    return value
