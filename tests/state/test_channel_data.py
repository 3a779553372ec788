"""The plan channel's checkpoint is the plan's JSON dump, packed: unpacked, exactly the dump, also when the data
reuses that of unchanged steps and plans (made once per object, not at every checkpoint). A stock saver reads the
packed form (plain msgpack data), which is a fraction of the dump's size; checkpoints written before (the plain
dump, the `Plan` object) are read too; a damaged packed plan never raises."""

from __future__ import annotations

import zlib

import ormsgpack
import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from planmode import _packed as packed
from planmode._packed import is_packed, unpack_plan
from planmode.state import Plan, PlanPatch, Step, StepStatus, StepTransition, apply_patch, apply_transitions
from planmode.state.channel import PlanChannel, _plan_data
from planmode.state.reducer import restore_plan


def _channel(plan: Plan) -> PlanChannel:
    channel = PlanChannel(Plan)
    channel.value = plan
    return channel


def test_checkpoint_data_equals_the_dump_through_transitions_and_patches() -> None:
    plan = Plan(
        goal="g",
        title="t",
        steps=[Step(id=f"s{i}", description=f"do {i}", dependencies=[f"s{i - 1}"] if i else []) for i in range(6)],
    )
    seen = [plan]
    running = apply_transitions(plan, [StepTransition(id="s0", status=StepStatus.RUNNING, attempts=1)]).plan
    done = apply_transitions(running, [StepTransition(id="s0", status=StepStatus.DONE, result="ok")]).plan
    patched = apply_patch(
        done, PlanPatch(reason="more", add_steps=[{"id": "extra", "description": "one more"}]), max_steps=20
    ).plan
    seen += [running, done, patched]
    for p in seen:
        assert unpack_plan(_channel(p).checkpoint()) == p.model_dump(mode="json")
        assert _channel(p).checkpoint() is _channel(p).checkpoint()  # the second read comes from the cache
    # an unchanged step keeps its object across versions, so its data is reused: the same dict
    assert done.steps[3] is patched.steps[3]
    assert _plan_data(done)["steps"][3] is _plan_data(patched)["steps"][3]
    # a changed step is dumped again
    assert _plan_data(running)["steps"][0]["status"] == "running"
    assert _plan_data(done)["steps"][0]["status"] == "done"


def _big_plan(n: int) -> Plan:
    return Plan(
        goal="g",
        steps=[
            Step(id=f"s{i}", description=f"Tally the ledger of region {i} against the cost sheet", result=f"{i} rows")
            for i in range(n)
        ],
    )


def test_a_stock_saver_reads_the_packed_plan_and_it_is_a_fraction_of_the_dump() -> None:
    plan = _big_plan(400)
    packed = _channel(plan).checkpoint()
    serde = JsonPlusSerializer()
    stored = serde.dumps_typed({"plan": packed})
    assert serde.loads_typed(stored)["plan"] == packed  # plain msgpack data: a stock serializer reads it back
    assert restore_plan(serde.loads_typed(stored)["plan"]) == plan
    assert len(stored[1]) * 4 < len(serde.dumps_typed({"plan": plan.model_dump(mode="json")})[1])


def test_checkpoints_written_before_are_read() -> None:
    plan = _big_plan(3)
    for old in (plan.model_dump(mode="json"), plan):
        assert _channel(plan).from_checkpoint(old).get() == plan
        assert restore_plan(old) == plan


def test_a_damaged_or_oversized_packed_plan_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    good = _channel(_big_plan(3)).checkpoint()
    monkeypatch.setattr(packed, "MAX_PLAN_BYTES", 100_000)
    bomb = {**good, "data": zlib.compress(b"\0" * (packed.MAX_PLAN_BYTES + 1), 9)}  # inflates past the bound
    not_a_dict = {**good, "data": zlib.compress(ormsgpack.packb([1, 2, 3]))}
    for bad in ({**good, "data": b"not zlib"}, {**good, "data": good["data"][:-5]}, bomb, not_a_dict):
        assert is_packed(bad)
        assert unpack_plan(bad) is None and restore_plan(bad) is None
        assert _channel(_big_plan(1)).from_checkpoint(bad).get() == bad  # kept as it is: the thread stays readable
