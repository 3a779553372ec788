"""The plan channel's checkpoint data is exactly the plan's JSON dump, also when it reuses the data of
unchanged steps and plans (made once per object, not at every checkpoint)."""

from __future__ import annotations

from planmode.state import Plan, PlanPatch, Step, StepStatus, StepTransition, apply_patch, apply_transitions
from planmode.state.channel import PlanChannel


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
        assert _channel(p).checkpoint() == p.model_dump(mode="json")
        assert _channel(p).checkpoint() == p.model_dump(mode="json")  # the second read comes from the cache
    # an unchanged step keeps its object across versions, so its data is reused: the same dict
    assert done.steps[3] is patched.steps[3]
    assert _channel(done).checkpoint()["steps"][3] is _channel(patched).checkpoint()["steps"][3]
    # a changed step is dumped again
    assert _channel(running).checkpoint()["steps"][0]["status"] == "running"
    assert _channel(done).checkpoint()["steps"][0]["status"] == "done"
