"""The plan channel's reducer: every update goes through it, and it never raises."""

from __future__ import annotations

from typing import Any

import pytest

from planmode.state import (
    Plan,
    PlanPatch,
    PlanUpdate,
    Rejection,
    ResetPlan,
    Step,
    StepStatus,
    StepTransition,
    plan_reducer,
)
from planmode.state.models import MAX_REJECTIONS_KEPT

S = StepStatus

FIRST = {
    "goal": "g",
    "title": "T",
    "steps": [
        {"id": "a", "description": "A"},
        {"id": "b", "description": "B", "dependencies": ["a"]},
        {"id": "c", "description": "C", "dependencies": ["b"]},
    ],
}


def first_plan() -> Plan:
    plan = plan_reducer(None, FIRST)
    assert isinstance(plan, Plan)
    return plan


def with_a_done() -> Plan:
    plan = plan_reducer(
        first_plan(), [{"id": "a", "status": "running"}, {"id": "a", "status": "done", "result": "A ok"}]
    )
    assert isinstance(plan, Plan) and plan.get("a").status is S.DONE  # type: ignore[union-attr]
    return plan


def assert_rejected(before: Plan | None, after: Plan | None, kind: str, *fragments: str) -> Rejection:
    assert isinstance(after, Plan)
    if before is None:
        assert after.version == 0 and after.steps == []
        prior: list[Rejection] = []
    else:
        assert after.model_dump(exclude={"rejections"}) == before.model_dump(exclude={"rejections"})
        prior = before.rejections
    assert after.rejections[:-1] == prior
    rej = after.rejections[-1]
    assert rej.kind == kind
    assert rej.reasons
    text = " | ".join(rej.reasons)
    for f in fragments:
        assert f in text
    return rej


# -- the first plan -------------------------------------------------------------------------------------


def test_first_plan_from_a_dict() -> None:
    plan = first_plan()
    assert plan.version == 1
    assert plan.ids() == ["a", "b", "c"]
    assert len(plan.history) == 1 and plan.history[0].added == ["a", "b", "c"]
    assert plan.rejections == []


def test_first_plan_forces_steps_pending_and_clears_records() -> None:
    forged = Plan.model_validate(
        {
            **FIRST,
            "version": 7,
            "steps": [{"id": "a", "description": "A", "status": "done", "result": "forged", "attempts": 4}],
        }
    )
    plan = plan_reducer(None, forged)
    assert isinstance(plan, Plan)
    a = plan.steps[0]
    assert (a.status, a.result, a.attempts) == (S.PENDING, None, 0)
    assert plan.version == 1


def test_invalid_first_plan_is_rejected_into_an_empty_version_zero_plan() -> None:
    bad = {
        "goal": "g",
        "steps": [
            {"id": "a", "description": "A", "dependencies": ["b"]},
            {"id": "b", "description": "B", "dependencies": ["a"]},
        ],
    }
    out = plan_reducer(None, bad)
    rej = assert_rejected(None, out, "plan", "dependency cycle")
    assert out.goal == "g"  # type: ignore[union-attr]
    assert rej.version == 0
    # a later valid plan replaces the placeholder
    plan = plan_reducer(out, FIRST)
    assert isinstance(plan, Plan) and plan.version == 1 and plan.ids() == ["a", "b", "c"]


def test_first_plan_over_its_cap_is_rejected() -> None:
    out = plan_reducer(None, {**FIRST, "max_steps": 2})
    assert_rejected(None, out, "plan", "at most 2")


def test_patch_or_transition_without_a_plan_is_rejected() -> None:
    assert_rejected(None, plan_reducer(None, {"remove_steps": ["a"]}), "patch", "no plan")
    assert_rejected(None, plan_reducer(None, {"id": "a", "status": "running"}), "transition", "no plan")


# -- patches, transitions, whole plans ----------------------------------------------------------------------


def test_patch_dict_applies() -> None:
    plan = with_a_done()
    out = plan_reducer(plan, {"reason": "more", "add_steps": [{"id": "d", "description": "D", "after": "b"}]})
    assert isinstance(out, Plan)
    assert out.ids() == ["a", "b", "d", "c"]
    assert out.version == plan.version + 1
    assert out.history[-1].reason == "more"


def test_patch_object_applies_and_respects_the_plan_cap() -> None:
    plan = plan_reducer(None, {**FIRST, "max_steps": 4})
    assert isinstance(plan, Plan)
    out = plan_reducer(
        plan,
        PlanPatch.model_validate({"add_steps": [{"id": "d", "description": "D"}, {"id": "e", "description": "E"}]}),
    )
    assert isinstance(out, Plan)
    assert out.ids() == ["a", "b", "c", "d"]
    assert any("truncated" in w for w in out.history[-1].warnings)


def test_patch_editing_a_done_step_is_rejected_and_recorded() -> None:
    plan = with_a_done()
    out = plan_reducer(plan, {"update_steps": [{"id": "a", "description": "rewrite"}]})
    rej = assert_rejected(plan, out, "patch", "'a' is done")
    assert rej.version == plan.version
    assert out.get("a") == plan.get("a")  # type: ignore[union-attr]


def test_transition_dict_and_list_apply() -> None:
    plan = first_plan()
    out = plan_reducer(plan, {"id": "a", "status": "running", "attempts": 1})
    assert isinstance(out, Plan)
    assert out.get("a").status is S.RUNNING and out.get("a").attempts == 1  # type: ignore[union-attr]
    assert out.version == plan.version  # progress, not a change of plan
    out2 = plan_reducer(out, [StepTransition(id="a", status=S.DONE, result="ok")])
    assert out2.get("a").status is S.DONE  # type: ignore[union-attr]
    assert [s.id for s in out2.ready_steps()] == ["b"]  # type: ignore[union-attr]


def test_illegal_transition_is_rejected() -> None:
    plan = first_plan()
    assert_rejected(plan, plan_reducer(plan, {"id": "a", "status": "done"}), "transition", "pending to done")
    done = with_a_done()
    assert_rejected(done, plan_reducer(done, StepTransition(id="a", status=S.FAILED)), "transition", "is done")


def test_whole_plan_update_is_diffed_and_keeps_done_steps() -> None:
    plan = with_a_done()
    proposal = {
        "goal": "g",
        "title": "T2",
        "steps": [
            {"id": "b", "description": "B", "dependencies": ["a"]},
            {"id": "x", "description": "X", "dependencies": ["b"]},
        ],
    }
    out = plan_reducer(plan, proposal)
    assert isinstance(out, Plan)
    assert out.ids() == ["a", "b", "x"]
    assert out.get("a") == plan.get("a")
    assert out.title == "T2" and out.version == plan.version + 1
    assert out.history[-1].removed == ["c"] and out.history[-1].added == ["x"]


def test_whole_plan_update_changing_a_done_step_is_rejected() -> None:
    plan = with_a_done()
    proposal = {**FIRST, "steps": [{"id": "a", "description": "A but different"}, *FIRST["steps"][1:]]}
    assert_rejected(plan, plan_reducer(plan, proposal), "plan", "'a' is done")


def test_identical_whole_plan_is_a_no_op() -> None:
    plan = with_a_done()
    assert plan_reducer(plan, plan.model_dump(mode="json")) is plan
    assert plan_reducer(plan, plan) is plan


def test_whole_plan_listing_a_done_step_as_pending_is_refused() -> None:
    # diff_to_patch's documented rule: a changed status of a done step is an update, which is refused.
    plan = with_a_done()
    assert_rejected(plan, plan_reducer(plan, FIRST), "plan", "'a' is done")


def test_empty_transition_list_is_no_change() -> None:
    plan = first_plan()
    assert plan_reducer(plan, []) is plan


def test_title_only_patch_dict_applies() -> None:
    plan = with_a_done()
    out = plan_reducer(plan, {"reason": "clearer", "title": "Better"})
    assert isinstance(out, Plan)
    assert out.title == "Better" and out.version == plan.version + 1 and out.history[-1].retitled


def test_plan_update_envelope_carries_its_source() -> None:
    plan = with_a_done()
    out = plan_reducer(plan, PlanUpdate(source="human", patch=PlanPatch(title="Mine")))
    assert isinstance(out, Plan) and out.history[-1].source == "human"
    out2 = plan_reducer(
        out, {"kind": "plan_update", "source": "executor", "transitions": [{"id": "b", "status": "running"}]}
    )
    assert out2.get("b").status is S.RUNNING  # type: ignore[union-attr]
    bad = plan_reducer(out2, {"kind": "plan_update", "source": "human", "patch": {"remove_steps": ["a"]}})
    assert assert_rejected(out2, bad, "patch", "'a' is done").source == "human"


def test_envelope_patch_and_transitions_are_all_or_nothing() -> None:
    plan = with_a_done()
    upd = PlanUpdate(patch=PlanPatch(title="New"), transitions=[StepTransition(id="c", status=S.DONE)])
    out = plan_reducer(plan, upd)
    assert_rejected(plan, out, "transition", "pending to done")
    assert out.title == plan.title  # type: ignore[union-attr]


def test_reset_clears_the_plan() -> None:
    plan = with_a_done()
    assert plan_reducer(plan, {"reset": True}) is None
    assert plan_reducer(plan, ResetPlan(reason="new task")) is None
    assert plan_reducer(plan, PlanUpdate(reset=True)) is None
    assert plan_reducer(None, {"reset": True}) is None


def test_none_update_is_no_change() -> None:
    plan = first_plan()
    assert plan_reducer(plan, None) is plan
    assert plan_reducer(None, None) is None


def test_current_value_restored_as_a_dict_is_read_as_a_plan() -> None:
    plan = with_a_done()
    out = plan_reducer(plan.model_dump(mode="json"), {"id": "b", "status": "running"})  # type: ignore[arg-type]
    assert isinstance(out, Plan)
    assert out.get("b").status is S.RUNNING  # type: ignore[union-attr]
    assert out.history == plan.history and out.get("a") == plan.get("a")


def test_raw_first_write_stored_without_the_reducer_is_validated_on_the_next_write() -> None:
    # LangGraph stores the first write to an empty `Plan | None` channel as-is, without the reducer.
    out = plan_reducer(FIRST, {"id": "a", "status": "running"})  # type: ignore[arg-type]
    assert isinstance(out, Plan)
    assert out.version == 1 and out.history[0].reason == "initial plan"
    assert out.get("a").status is S.RUNNING  # type: ignore[union-attr]
    bad_first = {"goal": "g", "steps": [{"id": "a", "description": "A", "dependencies": ["a"]}]}
    out = plan_reducer(bad_first, {"id": "a", "status": "running"})  # type: ignore[arg-type]
    assert isinstance(out, Plan) and out.version == 0 and out.steps == []
    assert [r.kind for r in out.rejections] == ["plan", "transition"]


# -- rejections --------------------------------------------------------------------------------------------


def test_rejections_are_bounded() -> None:
    plan: Plan | None = first_plan()
    for i in range(MAX_REJECTIONS_KEPT + 10):
        plan = plan_reducer(plan, {"remove_steps": [f"ghost{i}"]})
    assert isinstance(plan, Plan)
    assert len(plan.rejections) == MAX_REJECTIONS_KEPT
    assert "ghost59" in plan.rejections[-1].reasons[0]
    assert plan.version == 1


JUNK: list[Any] = [
    0,
    42,
    -1.5,
    True,
    "a plan please",
    "",
    b"bytes",
    [1, 2, 3],
    ["running"],
    [{"id": "a"}],
    [{"id": "a", "status": "nope"}],
    [None],
    {},
    {"id": "a"},
    {"id": "a", "status": "exploded"},
    {"id": "not an id!", "status": "running"},
    {"steps": "many"},
    {"steps": [1, 2]},
    {"steps": [{"id": "a"}]},
    {"goal": None, "steps": []},
    {"add_steps": [{"id": "x"}]},
    {"add_steps": "x"},
    {"update_steps": [{"description": "no id"}]},
    {"remove_steps": [None]},
    {"reorder": 5},
    {"steps": [], "add_steps": []},
    {"kind": "plan_update", "patch": 3},
    {"kind": "plan_update", "transitions": "x"},
    {"reset": "yes"},
    {1: 2},
    {None: None},
    {"update_steps": [{"id": "a", "status": "done"}]},
    Step(id="a", description="A"),
    Rejection(version=1, kind="x"),
    object(),
    {"x": object()},
    float("nan"),
    ...,
]


@pytest.mark.parametrize("current_kind", ["none", "plan", "done"])
@pytest.mark.parametrize("update", JUNK, ids=[f"junk{i}" for i in range(len(JUNK))])
def test_reducer_never_raises_and_records_junk(current_kind: str, update: Any) -> None:
    current = {"none": None, "plan": first_plan(), "done": with_a_done()}[current_kind]
    out = plan_reducer(current, update)
    assert isinstance(out, Plan)
    if current is None:
        assert out.version == 0 and out.steps == [] and len(out.rejections) == 1
    else:
        assert out.steps == current.steps and out.version == current.version
        assert out.history == current.history
        assert len(out.rejections) == len(current.rejections) + 1
    assert out.rejections[-1].reasons and all(isinstance(r, str) and r for r in out.rejections[-1].reasons)


@pytest.mark.parametrize(
    "current",
    [
        42,
        "text",
        [1, 2],
        {"junk": True},
        object(),
        Step(id="a", description="A"),
        ResetPlan(),
        StepTransition(id="a", status=S.RUNNING),
    ],
    ids=lambda v: type(v).__name__,
)
@pytest.mark.parametrize(
    "update", [None, FIRST, {"remove_steps": ["a"]}, {"id": "a", "status": "running"}, {"reset": True}, 5]
)
def test_reducer_never_raises_for_a_junk_current_value(current: Any, update: Any) -> None:
    out = plan_reducer(current, update)
    if update is None:
        assert out is current
    elif update == {"reset": True}:
        assert out is None
    elif update is FIRST:
        assert isinstance(out, Plan) and out.ids() == ["a", "b", "c"]
    else:
        assert out is None or isinstance(out, Plan)
        if isinstance(out, Plan):
            assert out.rejections
