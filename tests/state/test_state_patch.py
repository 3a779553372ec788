"""The pure patch logic: `apply_patch`, `apply_transitions`, `diff_to_patch`, `find_cycle`, `validate_plan`.

These are the seeds' regression cases plus the rules of the issue, one behaviour per test.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from planmode.state import (
    ALLOWED_TRANSITIONS,
    PatchRecord,
    Plan,
    PlanPatch,
    Step,
    StepStatus,
    StepTransition,
    apply_patch,
    apply_transitions,
    diff_to_patch,
    find_cycle,
    validate_plan,
)

S = StepStatus


def step(sid: str, *deps: str, status: StepStatus = S.PENDING, **kw: Any) -> Step:
    return Step(id=sid, description=kw.pop("description", f"do {sid}"), dependencies=list(deps), status=status, **kw)


def base_plan(**kw: Any) -> Plan:
    """a (done) -> b (done) -> c (pending), d (failed, depends on a), e (pending, depends on c)."""
    return Plan(
        goal="goal",
        title="title",
        steps=[
            step("a", status=S.DONE, result="A ok", attempts=1),
            step("b", "a", status=S.DONE, result="B ok", attempts=1),
            step("c", "b"),
            step("d", "a", status=S.FAILED, result="partial", error="boom", attempts=2),
            step("e", "c"),
        ],
        **kw,
    )


def patch(**kw: Any) -> PlanPatch:
    return PlanPatch.model_validate({"reason": "test", **kw})


def rejected(plan: Plan, p: PlanPatch, **kw: Any) -> list[str]:
    res = apply_patch(plan, p, **kw)
    assert not res.applied
    assert res.plan is plan
    assert res.reasons
    return res.reasons


def applied(plan: Plan, p: PlanPatch, **kw: Any) -> Plan:
    res = apply_patch(plan, p, **kw)
    assert res.applied, res.reasons
    assert res.reasons == []
    return res.plan


# -- done steps -----------------------------------------------------------------------------------------


def test_done_steps_are_preserved_by_an_unrelated_patch() -> None:
    plan = base_plan()
    new = applied(plan, patch(update_steps=[{"id": "c", "description": "do c differently"}]))
    assert new.steps[0] == plan.steps[0]
    assert new.steps[1] == plan.steps[1]
    assert new.get("c").description == "do c differently"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "update",
    [
        {"id": "a", "description": "rewrite history"},
        {"id": "a", "dependencies": ["c"]},
        {"id": "a", "tools": ["shell"]},
        {"id": "a", "complexity": "high"},
        {"id": "a", "acceptance": "something else"},
        {"id": "a", "status": "pending"},
        {"id": "b", "status": "skipped"},
    ],
)
def test_done_steps_cannot_be_updated(update: dict[str, Any]) -> None:
    reasons = rejected(base_plan(), patch(update_steps=[update]))
    assert any("is done and cannot be modified" in r and repr(update["id"]) in r for r in reasons)


def test_an_update_that_repeats_a_done_steps_values_is_not_a_modification() -> None:
    plan = base_plan()
    new = applied(plan, patch(update_steps=[{"id": "a", "description": "do a"}, {"id": "c", "description": "c2"}]))
    assert new.steps[0] == plan.steps[0]
    assert new.history[-1].updated == ["c"]


def test_done_step_cannot_be_removed_and_pending_step_can() -> None:
    plan = base_plan()
    reasons = rejected(plan, patch(remove_steps=["b"]))
    assert any("'b' is done and cannot be removed" in r for r in reasons)
    new = applied(plan, patch(remove_steps=["e"]))
    assert new.ids() == ["a", "b", "c", "d"]
    assert new.history[-1].removed == ["e"]


def test_done_steps_cannot_be_moved_by_reorder() -> None:
    reasons = rejected(base_plan(), patch(reorder=["b", "a"]))
    assert any("done steps cannot be moved" in r for r in reasons)


def test_reorder_of_pending_steps_around_done_steps_is_allowed() -> None:
    plan = base_plan()
    new = applied(plan, patch(reorder=["e", "d", "c"]))
    assert new.ids() == ["a", "b", "e", "d", "c"]
    assert new.history[-1].reordered


# -- dependencies, ids, cycles --------------------------------------------------------------------------


def test_missing_dependency_is_rejected_and_an_existing_one_accepted() -> None:
    plan = base_plan()
    reasons = rejected(plan, patch(add_steps=[{"id": "f", "description": "F", "dependencies": ["ghost"]}]))
    assert any("'f' depends on unknown step 'ghost'" in r for r in reasons)
    new = applied(plan, patch(add_steps=[{"id": "f", "description": "F", "dependencies": ["c"]}]))
    assert new.get("f").dependencies == ["c"]  # type: ignore[union-attr]


def test_update_to_a_missing_dependency_is_rejected() -> None:
    reasons = rejected(base_plan(), patch(update_steps=[{"id": "e", "dependencies": ["nope"]}]))
    assert any("unknown step 'nope'" in r for r in reasons)


def test_duplicate_ids_are_rejected() -> None:
    plan = base_plan()
    reasons = rejected(plan, patch(add_steps=[{"id": "c", "description": "again"}]))
    assert any("duplicate step id 'c'" in r for r in reasons)
    reasons = rejected(plan, patch(add_steps=[{"id": "z", "description": "1"}, {"id": "z", "description": "2"}]))
    assert any("duplicate step id 'z'" in r for r in reasons)
    assert validate_plan(Plan(goal="g", steps=[step("x"), step("x")])) == ["duplicate step id 'x'"]


def test_dependency_cycle_is_detected_and_reported_with_its_path() -> None:
    plan = base_plan()
    reasons = rejected(plan, patch(update_steps=[{"id": "c", "dependencies": ["b", "e"]}]))
    cycle = [r for r in reasons if r.startswith("dependency cycle: ")]
    assert len(cycle) == 1
    path = cycle[0].removeprefix("dependency cycle: ").split(" -> ")
    assert path[0] == path[-1]
    assert set(path) == {"c", "e"}


def test_self_dependency_is_rejected() -> None:
    reasons = rejected(base_plan(), patch(update_steps=[{"id": "e", "dependencies": ["e"]}]))
    assert "step 'e' depends on itself" in reasons


def test_find_cycle_returns_the_cycle_path_or_none() -> None:
    assert find_cycle([step("a"), step("b", "a"), step("c", "a", "b")]) is None
    cyc = find_cycle([step("a", "c"), step("b", "a"), step("c", "b"), step("d")])
    assert cyc is not None
    assert cyc[0] == cyc[-1]
    assert set(cyc) == {"a", "b", "c"} and len(cyc) == 4
    # every consecutive pair is a real dependency edge
    deps = {"a": ["c"], "b": ["a"], "c": ["b"]}
    for x, y in itertools.pairwise(cyc):
        assert y in deps[x]
    assert find_cycle([step("a", "a")]) == ["a", "a"]
    assert find_cycle([step("a", "unknown")]) is None


def test_find_cycle_handles_deep_chains_without_recursion_errors() -> None:
    n = 5000
    chain = [step("s0")] + [step(f"s{i}", f"s{i - 1}") for i in range(1, n)]
    assert find_cycle(chain) is None
    looped = [step("s0", f"s{n - 1}"), *chain[1:]]
    cyc = find_cycle(looped)
    assert cyc is not None and len(cyc) == n + 1


def test_validate_plan_reports_every_problem() -> None:
    bad = Plan(goal="g", steps=[step("a", "b"), step("b", "a"), step("c", "ghost", "ghost")])
    reasons = validate_plan(bad, max_steps=2)
    assert any(r.startswith("dependency cycle: ") for r in reasons)
    assert "step 'c' depends on unknown step 'ghost'" in reasons
    assert "step 'c' lists a dependency twice" in reasons
    assert "the plan has 3 steps; at most 2 are allowed" in reasons
    assert validate_plan(Plan(goal="g")) == ["the plan has no steps"]
    assert validate_plan(base_plan()) == []
    with pytest.raises(TypeError):
        validate_plan({"goal": "g"})  # type: ignore[arg-type]


# -- removal and rewiring -------------------------------------------------------------------------------


def test_removing_a_step_others_depend_on_is_rejected() -> None:
    reasons = rejected(base_plan(), patch(remove_steps=["c"]))
    assert any("'e' still depends on removed step 'c'" in r for r in reasons)


def test_removing_a_step_is_accepted_when_the_same_patch_rewires_its_dependents() -> None:
    plan = base_plan()
    new = applied(plan, patch(remove_steps=["c"], update_steps=[{"id": "e", "dependencies": ["b"]}]))
    assert new.ids() == ["a", "b", "d", "e"]
    assert new.get("e").dependencies == ["b"]  # type: ignore[union-attr]


def test_removing_a_step_is_accepted_when_the_same_patch_replaces_it() -> None:
    new = applied(
        base_plan(), patch(remove_steps=["c"], add_steps=[{"id": "c", "description": "new c", "dependencies": ["a"]}])
    )
    assert new.get("c").description == "new c"  # type: ignore[union-attr]


def test_unknown_removal_update_and_double_operations_are_rejected() -> None:
    plan = base_plan()
    assert "cannot remove unknown step 'zz'" in rejected(plan, patch(remove_steps=["zz"]))
    assert "cannot update unknown step 'zz'" in rejected(plan, patch(update_steps=[{"id": "zz", "description": "x"}]))
    assert "step 'e' is removed twice" in rejected(plan, patch(remove_steps=["e", "e"]))
    assert "step 'e' is updated twice" in rejected(
        plan, patch(update_steps=[{"id": "e", "description": "1"}, {"id": "e", "description": "2"}])
    )
    assert "step 'e' is both updated and removed" in rejected(
        plan, patch(remove_steps=["e"], update_steps=[{"id": "e", "description": "1"}])
    )


def test_a_patch_that_would_leave_no_steps_is_rejected() -> None:
    plan = Plan(goal="g", steps=[step("x"), step("y", "x")])
    assert "the patch would leave the plan without steps" in rejected(plan, patch(remove_steps=["x", "y"]))


def test_an_empty_patch_is_rejected() -> None:
    assert rejected(base_plan(), patch()) == ["the patch changes nothing"]


# -- adding, modifying, reordering ------------------------------------------------------------------------


def test_add_at_a_position() -> None:
    new = applied(base_plan(), patch(add_steps=[{"id": "f", "description": "F", "position": 2}]))
    assert new.ids() == ["a", "b", "f", "c", "d", "e"]
    first = applied(base_plan(), patch(add_steps=[{"id": "f", "description": "F", "position": 0}]))
    assert first.ids()[0] == "f"


def test_add_at_a_position_past_the_end_appends_with_a_warning() -> None:
    res = apply_patch(base_plan(), patch(add_steps=[{"id": "f", "description": "F", "position": 99}]))
    assert res.applied
    assert res.plan.ids()[-1] == "f"
    assert any("past the end" in w for w in res.warnings)


def test_add_after_a_step_and_at_the_end() -> None:
    new = applied(
        base_plan(),
        patch(
            add_steps=[
                {"id": "f", "description": "F", "after": "a"},
                {"id": "g", "description": "G", "after": "f"},
                {"id": "h", "description": "H"},
            ]
        ),
    )
    assert new.ids() == ["a", "f", "g", "b", "c", "d", "e", "h"]
    assert new.history[-1].added == ["f", "g", "h"]


def test_add_after_an_unknown_step_or_with_two_placements_is_rejected() -> None:
    plan = base_plan()
    assert any(
        "after unknown step 'zz'" in r
        for r in rejected(plan, patch(add_steps=[{"id": "f", "description": "F", "after": "zz"}]))
    )
    assert any(
        "both 'after' and 'position'" in r
        for r in rejected(plan, patch(add_steps=[{"id": "f", "description": "F", "after": "a", "position": 0}]))
    )


def test_new_steps_always_start_pending() -> None:
    res = apply_patch(
        base_plan(),
        patch(add_steps=[{"id": "f", "description": "F", "status": "done", "attempts": 3, "result": "forged"}]),
    )
    assert res.applied
    f = res.plan.get("f")
    assert f is not None
    assert f.status is S.PENDING and f.attempts == 0 and f.result is None
    assert any("new steps start pending" in w for w in res.warnings)


def test_modify_a_pending_step() -> None:
    new = applied(
        base_plan(),
        patch(
            update_steps=[
                {
                    "id": "e",
                    "description": "E2",
                    "tools": ["web"],
                    "complexity": "low",
                    "acceptance": "ok",
                    "dependencies": ["b", "c"],
                }
            ]
        ),
    )
    e = new.get("e")
    assert e is not None
    assert (e.description, e.tools, e.complexity.value, e.acceptance, e.dependencies) == (
        "E2",
        ["web"],
        "low",
        "ok",
        ["b", "c"],
    )
    assert e.status is S.PENDING


def test_reorder_with_a_subset_keeps_the_other_slots() -> None:
    plan = Plan(goal="g", steps=[step("p"), step("q"), step("r"), step("s")])
    new = applied(plan, patch(reorder=["s", "q"]))
    assert new.ids() == ["p", "s", "r", "q"]


def test_reorder_naming_unknown_or_repeated_steps_is_rejected() -> None:
    plan = base_plan()
    assert any("unknown steps: zz" in r for r in rejected(plan, patch(reorder=["c", "zz"])))
    assert "reorder names a step twice" in rejected(plan, patch(reorder=["c", "c"]))


def test_retitle() -> None:
    new = applied(base_plan(), patch(title="A better title"))
    assert new.title == "A better title"
    assert new.history[-1].retitled


# -- failed steps: selective clearing -------------------------------------------------------------------


def test_updating_a_failed_step_resets_it_and_leaves_other_results_alone() -> None:
    plan = base_plan()
    new = applied(plan, patch(update_steps=[{"id": "d", "description": "do d another way"}]))
    d = new.get("d")
    assert d is not None
    assert d.status is S.PENDING
    assert (d.result, d.error, d.attempts) == (None, None, 0)
    assert new.get("a") == plan.get("a") and new.get("a").result == "A ok"  # type: ignore[union-attr]
    assert new.get("b").result == "B ok"  # type: ignore[union-attr]


def test_updating_a_blocked_step_resets_it() -> None:
    plan = Plan(goal="g", steps=[step("x", status=S.BLOCKED, error="waiting", attempts=1)])
    x = applied(plan, patch(update_steps=[{"id": "x", "acceptance": "new criteria"}])).steps[0]
    assert (x.status, x.error, x.attempts) == (S.PENDING, None, 0)


def test_reopening_a_step_clears_its_record() -> None:
    plan = Plan(goal="g", steps=[step("x", status=S.SKIPPED, result="skipped because", attempts=1)])
    x = applied(plan, patch(update_steps=[{"id": "x", "status": "pending"}])).steps[0]
    assert (x.status, x.result, x.attempts) == (S.PENDING, None, 0)


def test_skipping_a_failed_step_while_changing_it_keeps_the_skip() -> None:
    plan = base_plan()
    d = applied(plan, patch(update_steps=[{"id": "d", "description": "d, no longer needed", "status": "skipped"}])).get(
        "d"
    )
    assert d is not None
    assert d.status is S.SKIPPED
    assert d.error is None


def test_updating_a_pending_step_keeps_its_record() -> None:
    plan = Plan(goal="g", steps=[step("x", attempts=1, result="earlier try")])
    x = applied(plan, patch(update_steps=[{"id": "x", "description": "X2"}])).steps[0]
    assert (x.status, x.attempts, x.result) == (S.PENDING, 1, "earlier try")


# -- cap and truncation ---------------------------------------------------------------------------------


def _adds(*ids: str) -> list[dict[str, str]]:
    return [{"id": i, "description": i.upper()} for i in ids]


def test_additions_past_the_cap_are_truncated_with_a_warning() -> None:
    res = apply_patch(base_plan(), patch(add_steps=_adds("f", "g", "h")), max_steps=6)
    assert res.applied
    assert res.plan.ids() == ["a", "b", "c", "d", "e", "f"]
    assert len(res.warnings) == 1
    assert "step cap 6" in res.warnings[0] and "g, h" in res.warnings[0]
    assert res.plan.history[-1].warnings == res.warnings
    assert res.plan.history[-1].added == ["f"]


def test_no_truncation_warning_under_the_cap() -> None:
    res = apply_patch(base_plan(), patch(add_steps=_adds("f", "g")), max_steps=7)
    assert res.applied and res.warnings == []
    assert len(res.plan.steps) == 7


def test_plan_max_steps_is_the_cap_when_none_is_passed() -> None:
    plan = base_plan(max_steps=6)
    res = apply_patch(plan, patch(add_steps=_adds("f", "g")))
    assert res.applied
    assert len(res.plan.steps) == 6
    assert any("step cap 6" in w for w in res.warnings)


def test_the_stricter_of_two_caps_holds() -> None:
    res = apply_patch(base_plan(max_steps=6), patch(add_steps=_adds("f", "g")), max_steps=10)
    assert len(res.plan.steps) == 6
    res = apply_patch(base_plan(max_steps=10), patch(add_steps=_adds("f", "g")), max_steps=6)
    assert len(res.plan.steps) == 6


def test_removals_make_room_under_the_cap() -> None:
    res = apply_patch(base_plan(), patch(remove_steps=["e"], add_steps=_adds("f")), max_steps=5)
    assert res.applied and res.warnings == []
    assert res.plan.ids() == ["a", "b", "c", "d", "f"]


# -- all or nothing, versions, history -------------------------------------------------------------------


def test_one_bad_operation_changes_nothing() -> None:
    plan = base_plan()
    p = patch(
        title="new title",
        add_steps=_adds("f"),
        update_steps=[{"id": "c", "description": "fine"}, {"id": "a", "description": "not allowed"}],
        remove_steps=["e"],
        reorder=["d", "c"],
    )
    reasons = rejected(plan, p)
    assert len(reasons) == 1 and "'a' is done" in reasons[0]
    assert plan == base_plan()


def test_applied_patch_bumps_version_and_records_history() -> None:
    plan = base_plan()
    assert plan.version == 1 and plan.history == []
    one = applied(plan, patch(reason="first", update_steps=[{"id": "c", "description": "c2"}]), source="human")
    two = applied(one, patch(reason="second", add_steps=_adds("f"), remove_steps=["e"]))
    assert (one.version, two.version) == (2, 3)
    assert two.history == [
        PatchRecord(version=2, reason="first", source="human", updated=["c"]),
        PatchRecord(version=3, reason="second", source="patch", added=["f"], removed=["e"]),
    ]
    assert plan.history == [] and plan.version == 1  # the input is never mutated


def test_apply_patch_raises_only_for_programmer_errors() -> None:
    with pytest.raises(TypeError):
        apply_patch({"goal": "g"}, patch(title="x"))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        apply_patch(base_plan(), {"title": "x"})  # type: ignore[arg-type]


# -- status transitions -------------------------------------------------------------------------------------


def _one(status: StepStatus, **kw: Any) -> Plan:
    return Plan(goal="g", steps=[step("x", status=status, **kw)])


@pytest.mark.parametrize("src", list(S))
@pytest.mark.parametrize("dst", list(S))
def test_transition_table(src: StepStatus, dst: StepStatus) -> None:
    res = apply_transitions(_one(src), [StepTransition(id="x", status=dst)])
    allowed = src is not S.DONE and (dst is src or dst in ALLOWED_TRANSITIONS[src])
    assert res.applied is allowed
    assert res.plan.steps[0].status is (dst if allowed else src)
    if not allowed:
        assert res.reasons


def test_transition_table_key_cases() -> None:
    assert ALLOWED_TRANSITIONS[S.DONE] == frozenset()
    assert S.DONE not in ALLOWED_TRANSITIONS[S.PENDING]
    assert S.DONE in ALLOWED_TRANSITIONS[S.RUNNING]
    res = apply_transitions(_one(S.PENDING), [StepTransition(id="x", status=S.DONE)])
    assert not res.applied and res.reasons == ["step 'x' cannot go from pending to done"]
    res = apply_transitions(_one(S.DONE), [StepTransition(id="x", status=S.DONE, result="again")])
    assert not res.applied and "is done" in res.reasons[0]


def test_transitions_record_progress_without_bumping_the_version() -> None:
    plan = _one(S.PENDING)
    res = apply_transitions(
        plan,
        [
            StepTransition(id="x", status=S.RUNNING, attempts=1),
            StepTransition(id="x", status=S.DONE, result="ok", output_ref="k1"),
        ],
    )
    assert res.applied
    x = res.plan.steps[0]
    assert (x.status, x.attempts, x.result, x.output_ref) == (S.DONE, 1, "ok", "k1")
    assert res.plan.version == plan.version and res.plan.history == plan.history


def test_transition_clear_flag_clears_result_and_error() -> None:
    plan = _one(S.FAILED, result="r", error="e")
    kept = apply_transitions(plan, [StepTransition(id="x", status=S.RUNNING)]).plan.steps[0]
    assert (kept.result, kept.error) == ("r", "e")
    cleared = apply_transitions(plan, [StepTransition(id="x", status=S.RUNNING, clear=True)]).plan.steps[0]
    assert (cleared.result, cleared.error) == (None, None)


def test_transitions_are_all_or_nothing() -> None:
    plan = Plan(goal="g", steps=[step("x"), step("y")])
    res = apply_transitions(plan, [StepTransition(id="x", status=S.RUNNING), StepTransition(id="y", status=S.DONE)])
    assert not res.applied and res.plan is plan
    res = apply_transitions(plan, [StepTransition(id="x", status=S.RUNNING), StepTransition(id="zz", status=S.RUNNING)])
    assert not res.applied and res.reasons == ["transition for unknown step 'zz'"]


def test_apply_transitions_raises_only_for_programmer_errors() -> None:
    with pytest.raises(TypeError):
        apply_transitions(_one(S.PENDING), [{"id": "x", "status": "running"}])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        apply_transitions(None, [])  # type: ignore[arg-type]


# -- the full-plan fallback ---------------------------------------------------------------------------------


def _proposed(*steps: Step, title: str = "title") -> Plan:
    return Plan(goal="goal", title=title, steps=list(steps))


def _definition(s: Step) -> Step:
    """The step as a planner would write it (statuses and records are not the planner's)."""
    return Step(**s.model_dump(include={"id", "description", "dependencies", "tools", "complexity", "acceptance"}))


def test_diff_identical_plan_is_an_empty_patch() -> None:
    plan = base_plan()
    assert diff_to_patch(plan, plan).is_empty()
    # statuses and results in the proposal are ignored for steps that are not done
    assert diff_to_patch(
        plan, _proposed(*[_definition(s) if s.status is not S.DONE else s for s in plan.steps])
    ).is_empty()


def test_diff_done_steps_omitted_are_kept() -> None:
    plan = base_plan()
    proposal = _proposed(*[_definition(s) for s in plan.steps if s.status is not S.DONE])
    p = diff_to_patch(plan, proposal)
    assert p.remove_steps == []
    assert p.is_empty()
    new = applied(plan, patch(**p.model_dump(exclude_none=True), title="t2"))
    assert new.steps[:2] == plan.steps[:2]


def test_diff_done_step_changed_is_refused() -> None:
    plan = base_plan()
    changed = plan.steps[0].model_copy(update={"description": "pretend it was different"})
    p = diff_to_patch(plan, _proposed(changed, *plan.steps[1:]))
    reasons = rejected(plan, p)
    assert any("'a' is done and cannot be modified" in r for r in reasons)
    reopened = _definition(plan.steps[1])  # status pending instead of done
    p = diff_to_patch(plan, _proposed(plan.steps[0], reopened, *plan.steps[2:]))
    assert any("'b' is done" in r for r in rejected(plan, p))


def test_diff_pending_step_omitted_is_removed_and_changed_is_updated() -> None:
    plan = base_plan()
    proposal = _proposed(*plan.steps[:3], _definition(plan.steps[3]).model_copy(update={"description": "d2"}))
    p = diff_to_patch(plan, proposal)
    assert p.remove_steps == ["e"]
    assert [u.id for u in p.update_steps] == ["d"]
    new = applied(plan, p, source="diff")
    assert new.ids() == ["a", "b", "c", "d"]
    d = new.get("d")
    assert d is not None and d.description == "d2" and d.status is S.PENDING and d.error is None
    assert new.history[-1].source == "diff"


def test_diff_new_steps_are_added_in_the_right_place() -> None:
    plan = base_plan()
    f, g, h = step("f", "a"), step("g", "f"), step("h")
    proposal = _proposed(h, *plan.steps[:2], f, g, *plan.steps[2:])
    new = applied(plan, diff_to_patch(plan, proposal))
    assert new.ids() == ["h", "a", "b", "f", "g", "c", "d", "e"]
    assert new.get("g").dependencies == ["f"]  # type: ignore[union-attr]


def test_diff_reorder_is_detected() -> None:
    plan = base_plan()
    a, b, c, d, e = plan.steps
    p = diff_to_patch(plan, _proposed(a, b, e, d, c))
    assert p.reorder == ["a", "b", "e", "d", "c"]
    assert applied(plan, p).ids() == ["a", "b", "e", "d", "c"]
    moved_done = diff_to_patch(plan, _proposed(b, a, c, d, e))
    assert moved_done.reorder is not None
    assert any("done steps cannot be moved" in r for r in rejected(plan, moved_done))


def test_diff_reorder_and_additions_together_land_where_proposed() -> None:
    plan = Plan(goal="goal", title="title", steps=[step("a"), step("b"), step("c")])
    proposal = _proposed(step("c"), step("x"), step("a"), step("y", "x"), step("b"))
    new = applied(plan, diff_to_patch(plan, proposal))
    assert new.ids() == ["c", "x", "a", "y", "b"]


def test_diff_with_truncation_keeps_the_order_of_what_fits() -> None:
    plan = Plan(goal="goal", title="title", steps=[step("a"), step("b")])
    proposal = _proposed(step("b"), step("x"), step("a"), step("y"))
    res = apply_patch(plan, diff_to_patch(plan, proposal), max_steps=3)
    assert res.applied, res.reasons
    assert res.plan.ids() == ["b", "x", "a"]
    assert any("truncated (y)" in w for w in res.warnings)


def test_diff_new_title() -> None:
    plan = base_plan()
    assert diff_to_patch(plan, _proposed(*plan.steps, title="Other")).title == "Other"
    assert diff_to_patch(plan, _proposed(*plan.steps, title="")).title is None


def test_diff_to_patch_raises_only_for_programmer_errors() -> None:
    with pytest.raises(TypeError):
        diff_to_patch(base_plan(), {"goal": "g"})  # type: ignore[arg-type]


def test_a_step_id_a_draft_writes_twice_is_a_new_step_and_dependencies_name_the_last_written() -> None:
    """The 1.5B's plan read calc.py, edited it, and read it again under the same id, "read_code": refused twice
    ("duplicate step id", "dependency cycle"), and the run failed with no plan. An id written again is a new
    step with a free id; a dependency names the step written last with that id. A done step's id is left: the
    repair that re-sends it twice is still refused."""
    from planmode.state.draft import PlanDraft, draft_to_plan

    draft = PlanDraft.model_validate(
        {
            "title": "t",
            "steps": [
                {"id": "read_code", "description": "Read calc.py"},
                {"id": "fix", "description": "Fix calc.py", "dependencies": ["read_code"]},
                {"id": "read_code", "description": "Read calc.py again", "dependencies": ["fix"]},
                {"id": "read_code_2", "description": "Taken already"},
                {"id": "check", "description": "Write check.py", "dependencies": ["read_code"]},
                {"id": "x" * 64, "description": "long"},
                {"id": "x" * 64, "description": "long again"},
            ],
        }
    )
    plan = draft_to_plan(draft, "g", 10)
    assert [(s.id, s.dependencies) for s in plan.steps][:5] == [
        ("read_code", []),
        ("fix", ["read_code"]),
        ("read_code_3", ["fix"]),
        ("read_code_2", []),
        ("check", ["read_code_3"]),
    ]
    assert plan.steps[6].id == "x" * 58 + "_2" and validate_plan(plan) == []

    done = Plan(goal="g", version=1, steps=[step("a").model_copy(update={"status": StepStatus.DONE})])
    again = PlanDraft.model_validate({"title": "t", "steps": [{"id": "a", "description": "a"}] * 2})
    assert any("duplicate step id 'a'" in r for r in validate_plan(draft_to_plan(again, "g", 10, done)))
