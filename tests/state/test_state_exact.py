"""Exact values of the patch logic and the reducer: the reasons, sources, defaults and edge cases that the
mutation run (docs/mutation.md, ``python -m bench.mutation``) found unpinned.

The invariant tests (test_state_patch.py, test_state_reducer.py, the properties) say *whether* an update is
refused; these say *exactly what* is recorded: every reason a patch collects (not only the first), which source
a rejection names, where a boundary sits.
"""

from __future__ import annotations

from typing import Any

import pytest

from planmode.state import (
    PatchRecord,
    Plan,
    PlanPatch,
    PlanUpdate,
    Rejection,
    Step,
    StepStatus,
    StepTransition,
    apply_patch,
    apply_transitions,
    diff_to_patch,
    find_cycle,
    plan_reducer,
    validate_plan,
)
from planmode.state.patch import _done_steps_intact, validate_steps
from planmode.state.reducer import Preview, new_plan, preview, reject

S = StepStatus


def step(sid: str, *deps: str, status: S = S.PENDING, **kw: Any) -> Step:
    return Step(id=sid, description=kw.pop("description", f"do {sid}"), dependencies=list(deps), status=status, **kw)


def plan(*steps: Step, version: int = 1, **kw: Any) -> Plan:
    return Plan(goal="g", title=kw.pop("title", "T"), steps=list(steps), version=version, **kw)


def first(*steps: Step, source: str = "planner") -> Plan:
    p, reasons = new_plan(Plan(goal="g", title="T", steps=list(steps)), source=source)
    assert not reasons
    return p


# -- find_cycle and validation ---------------------------------------------------------------------------


def test_find_cycle_reports_the_cycle_from_where_the_search_entered_it() -> None:
    assert find_cycle([step("a", "b"), step("b", "a")]) == ["a", "b", "a"]
    assert find_cycle([step("a", "b"), step("b", "c"), step("c", "b")]) == ["b", "c", "b"]


def test_find_cycle_keeps_searching_after_an_already_visited_root() -> None:
    # a is searched first and visits b; b is then skipped as a root, and the c <-> d cycle must still be found
    assert find_cycle([step("a", "b"), step("b"), step("c", "d"), step("d", "c")]) == ["c", "d", "c"]


def test_a_self_dependency_is_reported_once_not_also_as_a_cycle() -> None:
    assert validate_steps([step("a", "a")]) == ["step 'a' depends on itself"]


def test_the_step_cap_allows_exactly_max_steps() -> None:
    assert validate_steps([step("a"), step("b")], max_steps=2) == []
    assert validate_steps([step("a"), step("b")], max_steps=1) == ["the plan has 2 steps; at most 1 are allowed"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: validate_plan({"steps": []}), "validate_plan expects a Plan, got dict"),  # type: ignore[arg-type]
        (lambda: apply_patch({}, PlanPatch(remove_steps=["a"])), "apply_patch expects a Plan, got dict"),  # type: ignore[arg-type]
        (lambda: apply_patch(plan(step("a")), {}), "apply_patch expects a PlanPatch, got dict"),  # type: ignore[arg-type]
        (lambda: apply_transitions([], []), "apply_transitions expects a Plan, got list"),  # type: ignore[arg-type]
        (
            lambda: apply_transitions(plan(step("a")), [{"id": "a"}]),  # type: ignore[list-item]
            "apply_transitions expects StepTransition items, got dict",
        ),
        (lambda: diff_to_patch(plan(step("a")), None), "diff_to_patch expects two Plans"),  # type: ignore[arg-type]
    ],
)
def test_programmer_errors_name_what_was_expected_and_what_came(call: Any, message: str) -> None:
    with pytest.raises(TypeError) as info:
        call()
    assert str(info.value) == message


# -- apply_patch: every reason is collected, exactly ------------------------------------------------------


def test_a_refused_patch_is_applied_false_and_keeps_its_warnings() -> None:
    p = plan(step("a", status=S.DONE, result="r"), step("b"), max_steps=3)
    patch = PlanPatch(
        add_steps=[{"id": "x", "description": "x"}, {"id": "y", "description": "y"}],  # type: ignore[list-item]
        remove_steps=["a"],
    )
    res = apply_patch(p, patch)
    assert res.applied is False
    assert res.plan is p
    assert res.reasons == ["step 'a' is done and cannot be removed"]
    assert res.warnings == ["step cap 3 reached: 1 added step(s) truncated (y)"]


def test_an_empty_patch_is_refused_with_no_warnings() -> None:
    res = apply_patch(plan(step("a")), PlanPatch())
    assert (res.applied, res.reasons, res.warnings) == (False, ["the patch changes nothing"], [])


def test_a_patch_that_sets_what_is_already_there_changes_nothing() -> None:
    p = plan(step("a", description="same"), step("b"))
    for patch in (
        PlanPatch(update_steps=[{"id": "a", "description": "same"}]),  # type: ignore[list-item]
        PlanPatch(update_steps=[{"id": "a", "status": "pending"}]),  # type: ignore[list-item]
    ):
        res = apply_patch(p, patch)
        assert (res.applied, res.reasons, res.warnings) == (False, ["the patch changes nothing"], [])
        assert res.plan is p


def test_re_opening_a_pending_step_changes_nothing_not_even_its_attempts() -> None:
    p = plan(step("a", attempts=1), step("b"))
    res = apply_patch(p, PlanPatch(update_steps=[{"id": "a", "status": "pending"}]))  # type: ignore[list-item]
    assert (res.applied, res.reasons) == (False, ["the patch changes nothing"])
    assert res.plan.get("a").attempts == 1  # type: ignore[union-attr]


def test_every_bad_update_is_reported_not_only_the_first() -> None:
    p = plan(step("a"), step("b"), step("c"))
    patch = PlanPatch(
        update_steps=[
            {"id": "a", "description": "one"},
            {"id": "a", "description": "two"},
            {"id": "c", "description": "gone"},
            {"id": "zz", "description": "who"},
            {"id": "yy", "description": "who"},
        ],  # type: ignore[list-item]
        remove_steps=["c"],
    )
    assert apply_patch(p, patch).reasons == [
        "step 'a' is updated twice",
        "step 'c' is both updated and removed",
        "cannot update unknown step 'zz'",
        "cannot update unknown step 'yy'",
    ]


def test_every_bad_addition_is_reported_not_only_the_first() -> None:
    p = plan(step("a"), step("b"))
    patch = PlanPatch(
        add_steps=[
            {"id": "a", "description": "dup"},
            {"id": "n", "description": "new"},
            {"id": "n", "description": "new again"},
            {"id": "b", "description": "dup"},
        ]  # type: ignore[list-item]
    )
    assert apply_patch(p, patch).reasons == [
        "duplicate step id 'a': a step with that id already exists",
        "duplicate step id 'n': a step with that id already exists",
        "duplicate step id 'b': a step with that id already exists",
    ]


def test_a_done_step_edit_names_every_field_it_touches() -> None:
    p = plan(step("a", status=S.DONE, result="r"), step("b"))
    patch = PlanPatch(update_steps=[{"id": "a", "description": "new", "acceptance": "new"}])  # type: ignore[list-item]
    assert apply_patch(p, patch).reasons == [
        "step 'a' is done and cannot be modified (fields: acceptance, description)"
    ]


def test_updating_a_failed_step_clears_its_whole_record() -> None:
    p = plan(step("a", status=S.FAILED, result="half", error="boom", attempts=2, output_ref="k1"), step("b"))
    res = apply_patch(p, PlanPatch(update_steps=[{"id": "a", "description": "try again"}]))  # type: ignore[list-item]
    assert res.applied
    a = res.plan.get("a")
    assert a is not None
    assert (a.status, a.result, a.error, a.attempts, a.output_ref) == (S.PENDING, None, None, 0, None)


def test_a_forbidden_status_change_says_from_what_to_what() -> None:
    p = plan(step("a", status=S.RUNNING), step("b"))
    res = apply_patch(p, PlanPatch(update_steps=[{"id": "a", "status": "skipped"}]))  # type: ignore[list-item]
    assert res.applied  # running -> skipped is allowed
    p = plan(step("a", status=S.SKIPPED), step("b"))
    res = apply_patch(p, PlanPatch(update_steps=[{"id": "a", "status": "skipped", "description": "x"}]))  # type: ignore[list-item]
    assert res.applied
    p = plan(step("a", status=S.DONE), step("b"))
    res = apply_patch(p, PlanPatch(update_steps=[{"id": "a", "status": "pending"}]))  # type: ignore[list-item]
    assert res.reasons == ["step 'a' is done and cannot be modified (fields: status)"]


def test_a_transition_the_table_forbids_is_named() -> None:
    p = plan(step("a", status=S.SKIPPED), step("b"))
    res = apply_transitions(p, [StepTransition(id="a", status=S.DONE)])
    assert res.reasons == ["step 'a' cannot go from skipped to done"]


def test_reorder_names_every_unknown_id() -> None:
    res = apply_patch(plan(step("a"), step("b")), PlanPatch(reorder=["b", "x", "y"]))
    assert res.reasons == ["reorder names unknown steps: x, y"]


def test_a_position_at_the_end_is_not_past_it() -> None:
    p = plan(step("a"), step("b"))
    res = apply_patch(p, PlanPatch(add_steps=[{"id": "n", "description": "n", "position": 2}]))  # type: ignore[list-item]
    assert res.applied and res.warnings == [] and res.plan.ids()[-1] == "n"
    res = apply_patch(p, PlanPatch(add_steps=[{"id": "n", "description": "n", "position": 3}]))  # type: ignore[list-item]
    assert res.applied and res.warnings == ["position 3 of new step 'n' is past the end; appended"]


def test_a_patch_without_a_title_keeps_the_plan_title() -> None:
    res = apply_patch(plan(step("a"), title="Keep me"), PlanPatch(add_steps=[{"id": "n", "description": "n"}]))  # type: ignore[list-item]
    assert res.applied and res.plan.title == "Keep me" and res.reasons == []


def test_done_steps_intact_names_each_problem() -> None:
    a, b = step("a", status=S.DONE, result="r"), step("b", status=S.DONE, result="r")
    assert _done_steps_intact([a, b], [b]) == ["done step 'a' would be removed"]
    assert _done_steps_intact([a, b], [a.model_copy(update={"result": "x"}), b]) == ["done step 'a' would be modified"]
    assert _done_steps_intact([a, b], [b, a]) == ["done steps cannot be moved: a, b must keep their order"]


def test_a_reorder_that_moves_done_steps_is_refused_with_the_done_order() -> None:
    p = plan(step("a", status=S.DONE, result="r"), step("b", "a", status=S.DONE, result="r"), step("c"))
    res = apply_patch(p, PlanPatch(reorder=["c", "b", "a"]))
    assert not res.applied
    assert "done steps cannot be moved: a, b must keep their order" in res.reasons


# -- transitions ------------------------------------------------------------------------------------------


def test_every_bad_transition_is_reported_not_only_the_first() -> None:
    p = plan(step("a", status=S.DONE, result="r"), step("b", status=S.SKIPPED), step("c"))
    res = apply_transitions(
        p,
        [
            StepTransition(id="zz", status=S.RUNNING),
            StepTransition(id="a", status=S.FAILED),
            StepTransition(id="b", status=S.DONE),
            StepTransition(id="yy", status=S.RUNNING),
        ],
    )
    assert res.reasons == [
        "transition for unknown step 'zz'",
        "step 'a' is done; its status and record cannot change",
        "step 'b' cannot go from skipped to done",
        "transition for unknown step 'yy'",
    ]


# -- diff_to_patch ----------------------------------------------------------------------------------------


def test_diff_to_patch_reason_defaults_and_new_steps_never_carry_a_status() -> None:
    cur = plan(step("a"))
    proposed = plan(step("a"), step("n", status=S.DONE, result="claimed"))
    patch = diff_to_patch(cur, proposed)
    assert patch.reason == "whole plan converted into a patch by diff"
    assert diff_to_patch(cur, proposed, reason="mine").reason == "mine"
    [new] = patch.add_steps
    assert new.status is None and new.after == "a"
    res = apply_patch(cur, patch)
    assert res.warnings == [] and res.plan.get("n").status is S.PENDING  # type: ignore[union-attr]


# -- reducer: defaults, sources and messages ---------------------------------------------------------------


def test_reject_defaults() -> None:
    empty = reject(None, "patch", [])
    assert (empty.goal, empty.steps, empty.version) == ("(no plan yet)", [], 0)
    [rej] = empty.rejections
    assert (rej.kind, rej.source, rej.reasons, rej.version) == ("patch", "unknown", ["rejected"], 0)
    assert reject(None, "plan", ["r"], goal="mine").goal == "mine"


def test_new_plan_keeps_the_definition_and_starts_a_clean_record() -> None:
    raw = Plan(
        goal="g",
        steps=[Step(id="a", description="d", tools=["shell"], complexity="high", acceptance="ok", status=S.DONE)],
        rejections=[Rejection(version=0, kind="plan", reasons=["old"])],
    )
    p, reasons = new_plan(raw)
    assert reasons == []
    a = p.steps[0]
    assert (a.tools, a.complexity.value, a.acceptance, a.status) == (["shell"], "high", "ok", S.PENDING)
    assert p.version == 1 and p.rejections == []
    [record] = p.history
    assert (record.version, record.source, record.reason, record.added) == (1, "planner", "initial plan", ["a"])
    assert new_plan(raw, source="human")[0].history[0].source == "human"


def test_unsupported_updates_are_named_by_type() -> None:
    p = first(step("a"))
    assert plan_reducer(p, 42).rejections[-1].reasons == ["unsupported plan update of type int"]  # type: ignore[union-attr]


def test_a_dict_with_an_id_but_no_status_is_not_read_as_a_transition() -> None:
    p = first(step("a"))
    reasons = plan_reducer(p, {"id": "a", "description": "x"}).rejections[-1].reasons  # type: ignore[union-attr]
    assert reasons[0].startswith("the JSON is neither a plan")


def test_a_plan_dict_with_id_and_status_keys_is_read_as_a_plan() -> None:
    out = plan_reducer(None, {"id": "p1", "status": "draft", "goal": "g", "steps": [{"id": "a", "description": "x"}]})
    assert out is not None and out.version == 1 and out.ids() == ["a"]


def test_parse_errors_are_recorded_as_they_are_and_validation_errors_with_a_prefix() -> None:
    p = first(step("a"))
    parse = plan_reducer(p, {"foo": 1}).rejections[-1].reasons[0]  # type: ignore[union-attr]
    assert parse.startswith("the JSON is neither a plan")
    invalid = plan_reducer(p, {"kind": "plan_update", "transitions": "nope"}).rejections[-1].reasons[0]  # type: ignore[union-attr]
    assert invalid.startswith("invalid update: ")


def test_refusals_a_node_decided_are_kept_with_the_update_it_carries() -> None:
    p = first(step("a"), step("b"))
    decided = Rejection(version=1, kind="patch", source="patch", reasons=["model patch was bad"])
    out = plan_reducer(p, PlanUpdate(patch=PlanPatch(remove_steps=["b"]), rejections=[decided], source="patch"))
    assert out is not None
    assert out.ids() == ["a"] and out.version == 2
    assert out.rejections == [decided]
    assert plan_reducer(None, PlanUpdate(rejections=[decided])).rejections[0].reasons == [  # type: ignore[union-attr]
        "there is no plan to change yet"
    ]


def test_sources_are_recorded_on_first_plans_whole_plans_and_refusals() -> None:
    draft = Plan(goal="g", steps=[step("a"), step("b")])
    p = plan_reducer(None, PlanUpdate(plan=draft, source="human"))
    assert p is not None and p.history[0].source == "human"
    bad = Plan(goal="g", steps=[step("a", "zz")])
    refused = plan_reducer(None, PlanUpdate(plan=bad, source="planner"))
    assert refused is not None and refused.rejections[-1].source == "planner"
    assert refused.rejections[-1].kind == "plan"
    again = plan_reducer(refused, PlanUpdate(plan=bad, source="planner"))
    assert again is not None and len(again.rejections) == 2, "a version-0 plan keeps its earlier rejections"
    whole = plan_reducer(p, PlanUpdate(plan=Plan(goal="g", steps=[step("a"), step("c")]), source="human"))
    assert whole is not None and whole.history[-1].source == "human"
    assert whole.history[-1].reason == "whole plan converted into a patch by diff"
    reasoned = plan_reducer(
        p,
        PlanUpdate(plan=Plan(goal="g", steps=[step("a"), step("c")]), patch=PlanPatch(reason="edited"), source="human"),
    )
    assert reasoned is not None and reasoned.history[-1].reason == "edited"
    done = plan_reducer(p, [{"id": "a", "status": "running"}])
    done = plan_reducer(done, [{"id": "a", "status": "done", "result": "r"}])
    cyclic = Plan(goal="g", steps=[step("a", status=S.DONE), step("b", "c"), step("c", "b")])
    bad_whole = plan_reducer(done, PlanUpdate(plan=cyclic, source="human"))
    assert bad_whole is not None and bad_whole.rejections[-1].source == "human"
    no_plan = plan_reducer(None, PlanUpdate(patch=PlanPatch(remove_steps=["a"]), source="patch"))
    assert no_plan is not None
    assert (no_plan.rejections[-1].source, no_plan.rejections[-1].reasons) == (
        "patch",
        ["there is no plan to change yet"],
    )
    bad_move = plan_reducer(p, PlanUpdate(transitions=[StepTransition(id="a", status=S.DONE)], source="executor"))
    assert bad_move is not None and bad_move.rejections[-1].source == "executor"
    assert bad_move.rejections[-1].kind == "transition"


# -- a stale expected_revision (PlanUpdate.expected_revision, used by edit_plan and the approval) --------------


def test_a_stale_expected_revision_is_refused_naming_its_kind_the_revisions_and_the_source() -> None:
    p = first(step("a"), step("b"))
    updates = {
        "plan": PlanUpdate(plan=plan(step("a")), expected_revision="old", source="human"),
        "patch": PlanUpdate(patch=PlanPatch(remove_steps=["b"]), expected_revision="old", source="human"),
        "transition": PlanUpdate(
            transitions=[StepTransition(id="a", status=S.RUNNING)], expected_revision="old", source="human"
        ),
    }
    why = (
        f"stale edit: it was made against revision 'old', but the plan is now at revision {p.revision!r} "
        f"(version {p.version}); read the plan again and redo the edit"
    )
    for kind, upd in updates.items():
        out = plan_reducer(p, upd)
        assert out is not None and out.ids() == ["a", "b"] and out.version == p.version
        assert out.rejections == [Rejection(version=p.version, kind=kind, source="human", reasons=[why])]
    fresh = plan_reducer(p, PlanUpdate(patch=PlanPatch(remove_steps=["b"]), expected_revision=p.revision))
    assert fresh is not None and fresh.ids() == ["a"] and not fresh.rejections


def test_an_expected_revision_with_no_plan_is_refused_as_stale() -> None:
    out = plan_reducer(None, PlanUpdate(patch=PlanPatch(remove_steps=["b"]), expected_revision="old", source="cli"))
    assert out is not None and out.version == 0 and out.steps == []
    assert out.rejections == [
        Rejection(
            version=0,
            kind="patch",
            source="cli",
            reasons=[
                "stale edit: it was made against revision 'old', but the plan is now at no plan; read the plan again "
                "and redo the edit"
            ],
        )
    ]


# -- an approval in the plan's history (PlanUpdate.approved_by, from planmode.approval.approver) ----------------


def test_an_approval_alone_is_a_record_of_its_own_that_changes_nothing_else() -> None:
    p = first(step("a"), step("b"))
    out = plan_reducer(p, PlanUpdate(approved_by="alice", source="human"))
    assert out is not None
    assert out.steps == p.steps and out.version == p.version and out.revision == p.revision
    record = PatchRecord(version=1, reason=f"approved revision {p.revision}", source="approval", approved_by="alice")
    assert out.history == [*p.history, record]
    assert not out.rejections


def test_an_edit_given_as_the_approval_carries_the_approver_on_its_own_record() -> None:
    p = first(step("a"), step("b"))
    edit = PlanPatch(remove_steps=["b"], reason="drop b")
    plain = plan_reducer(p, PlanUpdate(patch=edit, source="human"))
    out = plan_reducer(p, PlanUpdate(patch=edit, approved_by="bob", source="human"))
    assert plain is not None and out is not None
    assert out.ids() == ["a"] and out.version == 2 and out.steps == plain.steps
    assert out.history[:-1] == plain.history[:-1] == p.history  # no record of its own, the earlier ones untouched
    assert out.history[-1] == plain.history[-1].model_copy(update={"approved_by": "bob"})
    assert plain.history[-1].approved_by is None and out.history[-1].removed == ["b"]


def test_an_approval_with_transitions_only_is_a_record_of_its_own() -> None:
    p = first(step("a"), step("b"))
    out = plan_reducer(
        p, PlanUpdate(transitions=[StepTransition(id="a", status=S.RUNNING)], approved_by="carol", source="human")
    )
    assert out is not None and out.get("a").status == S.RUNNING  # type: ignore[union-attr]
    assert out.history[:-1] == p.history
    assert out.history[-1] == PatchRecord(
        version=1, reason=f"approved revision {out.revision}", source="approval", approved_by="carol"
    )


def test_the_approver_is_recorded_cleaned_and_cut_at_200_characters() -> None:
    p = first(step("a"))
    long = plan_reducer(p, PlanUpdate(approved_by="x" * 199 + "yz"))
    assert long is not None and long.history[-1].approved_by == "x" * 199 + "y"
    lone = plan_reducer(p, PlanUpdate(approved_by="eve\ud800"))
    assert lone is not None and lone.history[-1].approved_by == "eve\ufffd"


# -- preview: what a node reads before it writes (outcome, reasons, warnings, the history record) -------------


def _seen(pv: Preview) -> tuple[str, list[str], list[str], PatchRecord | None]:
    return pv.outcome, pv.reasons, pv.warnings, pv.record


def test_preview_says_what_each_kind_of_update_would_do() -> None:
    p = first(step("a"), step("b"))
    assert _seen(preview(p, None)) == ("unchanged", [], [], None) and preview(p, None).plan is p
    assert _seen(preview(p, PlanUpdate(reset=True))) == ("reset", [], [], None)
    made = preview(None, PlanUpdate(plan=Plan(goal="g", steps=[step("a")])))
    assert made.plan is not None and _seen(made) == ("applied", [], [], made.plan.history[-1])
    assert _seen(preview(p, PlanUpdate(plan=plan(step("a"), step("b"))))) == ("unchanged", [], [], None)
    whole = preview(p, PlanUpdate(plan=plan(step("a"))))
    assert whole.plan is not None and len(whole.plan.history) == 2
    assert _seen(whole) == ("applied", [], [], whole.plan.history[-1])
    moved = preview(p, PlanUpdate(transitions=[StepTransition(id="a", status=S.RUNNING)]))
    assert moved.plan is not None and moved.plan.get("a").status == S.RUNNING  # type: ignore[union-attr]
    assert _seen(moved) == ("applied", [], [], None)  # transitions add no history record
    approved = preview(p, PlanUpdate(approved_by="alice"))
    assert approved.plan is not None and _seen(approved) == ("applied", [], [], approved.plan.history[-1])
    assert approved.plan.history[-1].approved_by == "alice" and len(approved.plan.history) == 2
    refused = preview(p, PlanUpdate(patch=PlanPatch(remove_steps=["zz"])))
    assert _seen(refused) == ("refused", ["cannot remove unknown step 'zz'"], [], None)


def test_preview_of_a_patch_keeps_its_warnings_and_its_record() -> None:
    p = first(step("a"), step("b")).model_copy(update={"max_steps": 3})
    adds = [{"id": "x", "description": "x"}, {"id": "y", "description": "y"}]
    pv = preview(p, PlanUpdate(patch=PlanPatch(add_steps=adds)))  # type: ignore[arg-type]
    assert pv.plan is not None and pv.plan.ids() == ["a", "b", "x"]
    assert _seen(pv) == ("applied", [], ["step cap 3 reached: 1 added step(s) truncated (y)"], pv.plan.history[-1])
    assert pv.plan.history[-1].added == ["x"] and len(pv.plan.history) == 2
    whole = preview(p, PlanUpdate(plan=plan(step("a"), step("b"), step("x"), step("y"))))
    assert whole.plan is not None and whole.plan.ids() == ["a", "b", "x"]
    assert _seen(whole) == (
        "applied",
        [],
        ["step cap 3 reached: 1 added step(s) truncated (y)"],
        whole.plan.history[-1],
    )


def test_preview_of_an_update_that_breaks_the_reducer_is_refused_with_the_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import planmode.state.reducer as reducer_module

    def explode(current: Any, update: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(reducer_module, "_reduce", explode)
    pv = preview(first(step("a")), PlanUpdate(approved_by="x"))
    why = ["internal error while applying the update: RuntimeError('boom')"]
    assert _seen(pv) == ("refused", why, [], None)
    assert pv.plan is not None and pv.plan.rejections[-1].reasons == why


def test_an_update_that_asks_for_nothing_leaves_the_plan_unchanged() -> None:
    p = first(step("a"))
    nothing = preview(p, PlanUpdate(source="human"))
    assert _seen(nothing) == ("unchanged", [], [], None) and nothing.plan == p


def test_a_refusal_on_an_empty_channel_names_no_goal_but_the_placeholder() -> None:
    out = plan_reducer(None, PlanUpdate(patch=PlanPatch(remove_steps=["a"])))
    assert out is not None and out.goal == "(no plan yet)" and out.version == 0


def test_approvals_and_records_touch_the_last_record_of_a_longer_history() -> None:
    p = plan_reducer(first(step("a"), step("b"), step("c")), PlanPatch(remove_steps=["c"], reason="one"))
    assert p is not None and len(p.history) == 2
    edited = preview(p, PlanUpdate(patch=PlanPatch(remove_steps=["b"], reason="two"), approved_by="bob"))
    assert edited.plan is not None and [r.reason for r in edited.plan.history] == ["initial plan", "one", "two"]
    assert [r.approved_by for r in edited.plan.history] == [None, None, "bob"]
    assert edited.record == edited.plan.history[-1]
    whole = preview(p, PlanUpdate(plan=plan(step("a"))))
    assert whole.plan is not None and len(whole.plan.history) == 3 and whole.record == whole.plan.history[-1]
    approved = preview(p, PlanUpdate(approved_by="alice"))
    assert approved.plan is not None and len(approved.plan.history) == 3
    assert approved.record == approved.plan.history[-1] and approved.record.approved_by == "alice"  # type: ignore[union-attr]


def test_the_same_whole_plan_with_only_steps_past_the_cap_added_is_no_change_not_a_refusal() -> None:
    # diff_to_patch makes a non-empty patch (add "c"), apply_patch truncates "c" at the plan's cap and finds
    # that the patch changes nothing: the reducer reads that as the same plan sent again
    p = first(step("a"), step("b")).model_copy(update={"max_steps": 2})
    proposed = plan(step("a"), step("b"), step("c"))
    assert not diff_to_patch(p, proposed).is_empty()
    pv = preview(p, PlanUpdate(plan=proposed, source="planner"))
    assert _seen(pv) == ("unchanged", [], [], None) and pv.plan is p
    assert plan_reducer(p, proposed) is p
