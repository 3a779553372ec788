"""Exact values of the approval protocol (`planmode.approval`): the refusal messages, the boundaries, each
action's required fields, the revision checks of approve and edit, the refused status edits and the payload's
fields. Fast unit tests, so that the mutation run (docs/mutation.md, ``python -m bench.mutation``) can run them
against every mutant; the graph tests (test_graph_approval.py, test_approval_integrity.py) show the same
protocol end to end.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from planmode.approval import (
    APPROVAL_TYPE,
    Approve,
    Cancel,
    Edit,
    Reject,
    _validation_reasons,
    approval_payload,
    approval_reason,
    parse_resume,
)
from planmode.state import Plan, PlanPatch, Rejection, Step, StepStatus
from planmode.state.mermaid import plan_to_mermaid
from planmode.state.models import PatchRecord

S = StepStatus


def step(sid: str, *deps: str, status: S = S.PENDING) -> Step:
    return Step(id=sid, description=f"do {sid}", dependencies=list(deps), status=status)


def make_plan(*steps: Step, history: list[PatchRecord] | None = None, **kw: Any) -> Plan:
    steps = steps or (step("a"), step("b", "a"))
    return Plan(goal="g", title="T", steps=list(steps), history=history or [], **kw)


def rec(version: int, source: str, reason: str = "", **kw: Any) -> PatchRecord:
    return PatchRecord(version=version, source=source, reason=reason, **kw)


NOTHING = {"since_revision": None, "added": [], "removed": [], "updated": {}, "reordered": False}


# -- the payload --------------------------------------------------------------------------------------------


def test_the_payload_has_every_field_and_no_rejections() -> None:
    plan = make_plan(rejections=[Rejection(version=1, kind="patch", reasons=["no"])])
    payload = approval_payload(plan, error=None, reason="initial plan")
    assert list(payload) == ["type", "plan", "markdown", "revision", "actions", "error", "reason", "changes"]
    assert payload["type"] == APPROVAL_TYPE == "planmode.approval"
    assert payload["plan"] == json.loads(plan.model_dump_json(exclude={"rejections"}))
    assert "rejections" not in payload["plan"] and payload["plan"]["goal"] == "g"
    assert payload["markdown"] == plan.to_markdown() + "\n" + plan_to_mermaid(plan, fenced=True) + "\n"
    assert payload["revision"] == plan.revision
    assert payload["actions"] == ["approve", "edit", "reject", "cancel"]
    assert payload["error"] is None
    assert payload["reason"] == "initial plan"
    assert payload["changes"] == NOTHING
    json.dumps(payload)


def test_the_payload_keeps_the_error_and_changes_given_and_cleans_text() -> None:
    plan = make_plan()
    changes: dict[str, Any] = {}
    payload = approval_payload(plan, error="bad \ud800", reason="why \udfff", changes=changes)
    assert payload["error"] == "bad \ufffd"
    assert payload["reason"] == "why \ufffd"
    assert payload["changes"] is changes  # an empty dict given is kept, not replaced by "nothing to compare"
    assert approval_payload(plan, error="", reason="r")["error"] == ""  # an empty error is not None


# -- why the approval is asked -----------------------------------------------------------------------------


def test_the_first_plan_is_the_initial_plan_and_junk_bases_count_as_none() -> None:
    plan = make_plan(history=[rec(1, "planner")])
    assert approval_reason(plan, None) == "initial plan"
    assert approval_reason(plan, "junk") == "initial plan"  # type: ignore[arg-type]
    assert approval_reason(plan, ["junk"]) == "initial plan"  # type: ignore[arg-type]


def test_a_base_with_nothing_newer_is_asked_again() -> None:
    plan = make_plan(version=2, history=[rec(1, "planner"), rec(2, "human", added=["c"])])
    assert approval_reason(plan, {"version": 2}) == "asked again"
    # the record of the version a human answered is not newer than it
    assert approval_reason(plan, {"version": 1}) == "the plan was edited (by human: added c)"


def test_without_a_usable_base_version_the_planners_latest_plan_is_the_base() -> None:
    history = [rec(1, "planner"), rec(2, "planner (revision)", "human feedback: shorter"), rec(3, "studio")]
    plan = make_plan(version=3, history=history)
    assert approval_reason(plan, None) == "the plan was edited (by studio)"
    assert approval_reason(plan, {"version": "2"}) == "the plan was edited (by studio)"
    assert approval_reason(plan, {}) == "the plan was edited (by studio)"
    # no planner record: every record is newer than version 0
    plan = make_plan(history=[rec(1, "studio", updated=["a"])])
    assert approval_reason(plan, None) == "the plan was edited (by studio: updated a)"


def test_a_revision_after_feedback_names_the_last_feedback() -> None:
    history = [
        rec(1, "planner"),
        rec(2, "planner (revision)", "human feedback: shorter"),
        rec(3, "planner (revision)", "human feedback: no tests"),
    ]
    plan = make_plan(version=3, history=history)
    assert approval_reason(plan, {"version": 1}) == "revised after your feedback: no tests"
    assert approval_reason(plan, {"version": 2}) == "revised after your feedback: no tests"
    assert approval_reason(plan, {"version": 3}) == "asked again"
    assert approval_reason(plan, None) == "initial plan"  # the planner's latest plan is the one seen first


def test_a_repair_lists_every_patch_reason() -> None:
    history = [rec(1, "planner"), rec(2, "patch", "off track"), rec(3, "diff", ""), rec(4, "patch", "again")]
    plan = make_plan(version=4, history=history)
    assert approval_reason(plan, {"version": 1}) == ("re-approval after a patch: off track; no reason given; again")
    assert approval_reason(plan, None) == "re-approval after a patch: off track; no reason given; again"


def test_an_outside_edit_is_summarised_field_by_field() -> None:
    history = [
        rec(1, "planner"),
        rec(2, "human", added=["c", "d"], updated=["a"], removed=["b"], reordered=True, retitled=True),
        rec(3, "studio", reordered=True),
        rec(4, "studio", retitled=True),
        rec(5, "api"),
    ]
    plan = make_plan(version=5, history=history)
    assert approval_reason(plan, {"version": 1}) == (
        "the plan was edited (by human: added c, d, updated a, removed b, reordered, retitled; "
        "by studio: reordered; by studio: retitled; by api)"
    )


def test_every_part_is_joined_in_order_and_an_error_asks_again() -> None:
    history = [
        rec(1, "planner"),
        rec(2, "planner (revision)", "human feedback: fb"),
        rec(3, "patch", "fix"),
        rec(4, "human", removed=["x"]),
    ]
    plan = make_plan(version=4, history=history)
    assert approval_reason(plan, {"version": 1}, error="stale") == (
        "revised after your feedback: fb; re-approval after a patch: fix; the plan was edited (by human: "
        "removed x); asked again (see error)"
    )
    assert approval_reason(plan, {"version": 4}, error="stale") == "asked again (see error)"
    assert approval_reason(plan, None, error="stale") == (
        "re-approval after a patch: fix; the plan was edited (by human: removed x); asked again (see error)"
    )
    assert approval_reason(plan, {"version": 4}, error="") == "asked again"
    assert approval_reason(plan, {"version": 4}, error=None) == "asked again"


# -- the resume value: its shape ----------------------------------------------------------------------------


def test_an_unreadable_string_is_refused_with_an_example_naming_the_revision() -> None:
    plan = make_plan()
    example = f'{{"action": "approve", "revision": "{plan.revision}"}}'
    assert parse_resume("yes", plan) == f"unreadable answer 'yes': resume with a JSON object such as {example}"
    assert parse_resume("y" * 100, plan) == (
        f"unreadable answer '{'y' * 80}': resume with a JSON object such as {example}"
    )
    deep = "[" * 100_000
    assert parse_resume(deep, plan) == (f"unreadable answer '{'[' * 80}': resume with a JSON object such as {example}")


def test_a_json_string_is_decoded() -> None:
    plan = make_plan()
    assert parse_resume(json.dumps({"action": "approve", "revision": plan.revision}), plan) == Approve(plan.revision)
    assert parse_resume('"approve"', plan) == "the answer must be a JSON object with an 'action', got str"


@pytest.mark.parametrize(("value", "kind"), [(3, "int"), ([1], "list"), (None, "NoneType"), (1.5, "float")])
def test_a_value_that_is_not_an_object_is_refused(value: Any, kind: str) -> None:
    assert parse_resume(value, make_plan()) == f"the answer must be a JSON object with an 'action', got {kind}"


@pytest.mark.parametrize(
    ("value", "shown"),
    [({}, "None"), ({"action": "go"}, "'go'"), ({"action": "APPROVE"}, "'APPROVE'"), ({"action": 1}, "1")],
)
def test_an_unknown_action_is_refused_with_the_actions(value: Any, shown: str) -> None:
    assert parse_resume(value, make_plan()) == f"unknown action {shown}; use one of approve, edit, reject, cancel"


@pytest.mark.parametrize("action", ["approve", "edit", "reject", "cancel"])
def test_a_revision_that_is_not_a_string_is_refused_for_every_action(action: str) -> None:
    value = {"action": action, "revision": 5, "feedback": "f", "patch": {"remove_steps": ["b"]}}
    assert parse_resume(value, make_plan()) == "'revision' must be a string"


# -- reject and cancel ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("feedback", [None, "", "   \n", 5, ["x"]])
def test_reject_needs_non_empty_feedback(feedback: Any) -> None:
    value: dict[str, Any] = {"action": "reject"}
    if feedback is not None:
        value["feedback"] = feedback
    assert parse_resume(value, make_plan()) == "reject needs non-empty 'feedback' telling the planner what to change"


def test_reject_keeps_the_feedback_stripped_and_cleaned_without_a_revision() -> None:
    plan = make_plan()
    assert parse_resume({"action": "reject", "feedback": "  shorter \ud800 "}, plan) == Reject("shorter \ufffd")
    assert parse_resume({"action": "reject", "feedback": "x", "revision": "old"}, plan) == Reject("x")


def test_cancel_feedback_is_optional_and_must_be_a_string() -> None:
    plan = make_plan()
    assert parse_resume({"action": "cancel"}, plan) == Cancel("")
    assert parse_resume({"action": "cancel", "feedback": None}, plan) == Cancel("")
    assert parse_resume({"action": "cancel", "feedback": ""}, plan) == Cancel("")
    assert parse_resume({"action": "cancel", "feedback": " stop \udfff "}, plan) == Cancel("stop \ufffd")
    assert parse_resume({"action": "cancel", "feedback": "x", "revision": "old"}, plan) == Cancel("x")
    assert parse_resume({"action": "cancel", "feedback": ["x"]}, plan) == "cancel's 'feedback' must be a string"


# -- approve and edit name the revision shown ----------------------------------------------------------------


@pytest.mark.parametrize("revision", [None, ""])
def test_approve_without_a_revision_is_refused_with_an_example(revision: str | None) -> None:
    plan = make_plan()
    value: dict[str, Any] = {"action": "approve"} if revision is None else {"action": "approve", "revision": ""}
    assert parse_resume(value, plan) == (
        f'approve must name the revision shown: {{"action": "approve", "revision": "{plan.revision}"}}'
    )


def test_edit_without_a_revision_is_refused_with_an_example_with_a_patch() -> None:
    plan = make_plan()
    assert parse_resume({"action": "edit", "patch": {"remove_steps": ["b"]}}, plan) == (
        f'edit must name the revision shown: {{"action": "edit", "revision": "{plan.revision}", '
        f'"patch": {{"...": "..."}}}}'
    )


@pytest.mark.parametrize("action", ["approve", "edit"])
def test_a_stale_revision_is_refused_with_the_current_one(action: str) -> None:
    plan = make_plan()
    value = {"action": action, "revision": "0123abcd", "patch": {"remove_steps": ["b"]}}
    assert parse_resume(value, plan) == (
        f"stale revision '0123abcd': the plan changed since; the plan shown now has revision '{plan.revision}'"
    )
    long = "r" * 100 + "\ud800"
    assert parse_resume({**value, "revision": long}, plan) == (
        f"stale revision '{'r' * 80}': the plan changed since; the plan shown now has revision '{plan.revision}'"
    )
    assert parse_resume({**value, "revision": "\ud800"}, plan) == (
        f"stale revision '\ufffd': the plan changed since; the plan shown now has revision '{plan.revision}'"
    )


def test_approve_with_the_revision_shown_is_an_approval_of_it() -> None:
    plan = make_plan()
    out = parse_resume({"action": "approve", "revision": plan.revision, "patch": {"remove_steps": ["b"]}}, plan)
    assert out == Approve(revision=plan.revision)


# -- edit ------------------------------------------------------------------------------------------------------


def edit(current: Plan, /, **body: Any) -> Edit | str:
    return parse_resume({"action": "edit", "revision": current.revision, **body}, current)


def test_an_edit_needs_exactly_one_of_plan_or_patch() -> None:
    plan = make_plan()
    message = "edit needs exactly one of 'plan' (a full plan) or 'patch' (a plan patch)"
    assert edit(plan) == message
    assert edit(plan, plan=None, patch=None) == message
    assert edit(plan, plan={"steps": []}, patch={"remove_steps": ["b"]}) == message
    out = edit(plan, plan=None, patch={"remove_steps": ["b"]})  # a null field is an absent field
    assert isinstance(out, Edit) and out.plan.ids() == ["a"]


@pytest.mark.parametrize("field", ["plan", "patch"])
def test_an_edit_body_as_a_string_must_be_a_json_object(field: str) -> None:
    plan = make_plan()
    assert edit(plan, **{field: "{nope"}) == (
        f"the edited {field} is not valid JSON: Expecting property name enclosed in double quotes"
    )
    assert edit(plan, **{field: "[" * 100_000}) == f"the edited {field} is JSON nested too deeply"
    assert edit(plan, **{field: "[1]"}) == f"the edited {field} must be a JSON object"
    assert edit(plan, **{field: [1]}) == f"the edited {field} must be a JSON object"
    assert edit(plan, **{field: 7}) == f"the edited {field} must be a JSON object"


def test_a_patch_as_a_json_string_is_applied() -> None:
    plan = make_plan()
    out = edit(plan, patch=json.dumps({"remove_steps": ["b"], "reason": "less"}))
    assert out == Edit(patch=PlanPatch(remove_steps=["b"], reason="less"), plan=out.plan, revision=plan.revision)
    assert isinstance(out, Edit) and out.plan.ids() == ["a"]


def test_an_invalid_patch_lists_each_validation_error_with_its_location() -> None:
    plan = make_plan()
    assert edit(plan, patch={"remove_steps": 5}) == "invalid edit: remove_steps: Input should be a valid list"
    bad = {"update_steps": [{"description": ""} for _ in range(4)]}
    out = edit(plan, patch=bad)
    assert isinstance(out, str)
    assert out.startswith("invalid edit: update_steps.0.id: Field required; update_steps.0.description: ")
    assert out.count("; ") == 4  # at most five errors (there are eight)
    assert out.endswith("; update_steps.2.id: Field required")


def test_a_validation_error_without_a_location_is_named_root() -> None:
    # unreachable through parse_resume (the body is checked to be an object first), kept as a defence
    with pytest.raises(ValidationError) as info:
        PlanPatch.model_validate(3)
    assert _validation_reasons(info.value) == ("(root): Input should be a valid dictionary or instance of PlanPatch")


def test_an_invalid_full_plan_names_its_first_problem() -> None:
    plan = make_plan()
    assert edit(plan, plan={"steps": [{"id": "a"}]}) == (
        "invalid edit: invalid plan: steps.0.description: Field required"
    )


def test_a_full_plan_that_is_really_a_patch_is_refused() -> None:
    plan = make_plan()
    assert edit(plan, plan={"remove_steps": ["b"]}) == "the edited plan looks like a patch; send it as 'patch'"


def test_a_patch_may_not_set_a_new_steps_status() -> None:
    plan = make_plan()
    new = [
        {"id": "c", "description": "do c", "status": "done"},
        {"id": "d", "description": "do d", "status": "skipped"},
    ]
    assert edit(plan, patch={"add_steps": new}) == (
        "the edit is refused: new step 'c': a new step starts pending, its status cannot be set (done); "
        "new step 'd': a new step starts pending, its status cannot be set (skipped)"
    )
    out = edit(plan, patch={"add_steps": [{"id": "c", "description": "do c", "status": "pending"}]})
    assert isinstance(out, Edit) and out.plan.ids() == ["a", "b", "c"]


def test_a_full_plan_edit_may_not_change_a_status() -> None:
    plan = make_plan(step("a", status=S.DONE), step("b", "a"))
    steps = [
        {"id": "a", "description": "do a", "status": "done"},
        {"id": "b", "description": "do b", "dependencies": ["a"], "status": "skipped"},
        {"id": "c", "description": "do c", "status": "done"},
        {"id": "d", "description": "do d", "status": "pending"},
    ]
    hint = 'to skip a step, send a patch: {"update_steps": [{"id": "...", "status": "skipped"}]}'
    assert edit(plan, plan={"steps": steps}) == (
        "the edit is refused: step 'b': its status cannot be edited (pending -> skipped); statuses change only "
        "when steps run; new step 'c': its status cannot be edited (pending -> done); statuses change only "
        f"when steps run; {hint}"
    )
    steps[1]["status"] = "pending"
    steps[2]["status"] = "pending"
    out = edit(plan, plan={"steps": steps})
    assert isinstance(out, Edit) and out.plan.ids() == ["a", "b", "c", "d"]


def test_a_full_plan_edit_keeps_the_goal_and_records_its_reason() -> None:
    plan = make_plan()
    steps = [{"id": "a", "description": "do a"}]
    out = edit(plan, plan={"steps": steps}, reason="just a")  # the reason is the answer's, beside the plan
    assert isinstance(out, Edit)
    assert out.patch == PlanPatch(remove_steps=["b"], reason="just a")
    assert out.plan.goal == "g" and out.plan.ids() == ["a"] and out.revision == plan.revision
    assert out.plan.history[-1].source == "human" and out.plan.history[-1].reason == "just a"
    for reason in (None, "", 5):
        out = edit(plan, plan={"steps": steps}, reason=reason)
        assert isinstance(out, Edit) and out.patch.reason == "edited by a human"
    out = edit(plan, plan={"steps": steps}, reason="tidy \ud800")
    assert isinstance(out, Edit) and out.patch.reason == "tidy \ufffd"
    out = edit(plan, plan={"goal": "other", "steps": steps})
    assert isinstance(out, Edit) and out.plan.goal == "g"  # the goal is not the human's to edit


def test_an_edit_that_changes_nothing_is_refused() -> None:
    plan = make_plan()
    message = f"the edit changes nothing; to accept the plan as it is, approve revision {plan.revision}"
    assert edit(plan, patch={}) == message
    assert edit(plan, patch={"reason": "nothing"}) == message
    same = [{"id": "a", "description": "do a"}, {"id": "b", "description": "do b", "dependencies": ["a"]}]
    assert edit(plan, plan={"steps": same}) == message


def test_an_edit_the_patch_rules_refuse_is_refused_with_their_reasons() -> None:
    plan = make_plan(max_steps=2)
    out = edit(plan, patch={"add_steps": [{"id": "c", "description": "do c"}]})
    # the step cap truncates the added step, so the patch changes nothing and is refused
    assert out == "the edit is invalid: the patch changes nothing"
    out = edit(plan, patch={"update_steps": [{"id": "zz", "description": "x"}, {"id": "yy", "description": "x"}]})
    assert out == "the edit is invalid: cannot update unknown step 'zz'; cannot update unknown step 'yy'"


def test_a_valid_patch_edit_is_the_approval_of_the_patched_plan() -> None:
    plan = make_plan()
    out = edit(plan, patch={"update_steps": [{"id": "b", "description": "do b well"}], "reason": "r"})
    assert isinstance(out, Edit)
    assert out.patch == PlanPatch.model_validate(
        {"update_steps": [{"id": "b", "description": "do b well"}], "reason": "r"}
    )
    assert out.revision == plan.revision != out.plan.revision
    assert out.plan.get("b").description == "do b well"  # type: ignore[union-attr]
    assert out.plan.version == plan.version + 1
    assert out.plan.history[-1].source == "human"
