"""Pure state functions behind edits and approvals: `merge_outcomes` is total, `plan_changes`, the reducer's
``expected_revision``, and `clean_text` on every text field."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from langgraph.checkpoint.sqlite import SqliteSaver

from planmode.graph import build_graph
from planmode.state import Plan, PlanPatch, StepStatus, StepTransition, plan_reducer
from planmode.state.diff import plan_changes, plan_snapshot
from planmode.state.graph_state import StepOutcome, merge_outcomes
from planmode.state.models import NewStep, Rejection, StepUpdate, clean_text
from planmode.state.reducer import PlanUpdate
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

S = StepStatus

ANY_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=4),
    max_leaves=12,
)
OUTCOME = st.builds(StepOutcome, step_id=st.text(max_size=5), ok=st.booleans(), output=st.text(max_size=10))


# -- merge_outcomes: total ------------------------------------------------------------------------------------


@given(
    current=st.none() | st.dictionaries(st.text(max_size=5), OUTCOME, max_size=3) | ANY_VALUE,
    update=ANY_VALUE | st.dictionaries(st.text(max_size=5), st.none() | OUTCOME | ANY_VALUE, max_size=4),
)
def test_merge_outcomes_never_raises_and_returns_outcomes_by_id(current: Any, update: Any) -> None:
    out = merge_outcomes(current, update)
    assert isinstance(out, dict)
    assert all(isinstance(k, str) and isinstance(v, StepOutcome) for k, v in out.items())
    if isinstance(update, dict):
        for key, value in update.items():
            if value is None:
                assert str(key) not in out
            elif isinstance(value, StepOutcome):
                assert out[str(key)] is value


def test_merge_outcomes_ignores_updates_that_are_not_mappings() -> None:
    kept = {"a": StepOutcome(step_id="a", ok=True, output="x")}
    for garbage in ("garbage", 5, ["a"], 2.5, b"x", object()):
        assert merge_outcomes(kept, garbage) == kept  # type: ignore[arg-type]
    out = merge_outcomes(kept, {"b": "garbage", "c": {"step_id": "c", "ok": True}})  # type: ignore[dict-item]
    assert out["a"] == kept["a"] and out["c"].ok
    assert out["b"] == StepOutcome(step_id="b", ok=False, error="unreadable step outcome")


def test_update_state_with_garbage_outcomes_leaves_the_thread_readable(checkpointer: SqliteSaver) -> None:
    plan = {"title": "t", "steps": [{"id": "a", "description": "do a"}]}
    graph = build_graph(
        ScriptedChatModel(responder=PurposeScript(plan=plan)),
        executor=lambda step, ctx: "ok",
        checkpointer=checkpointer,
    )
    cfg: Any = {"configurable": {"thread_id": "g"}}
    graph.invoke({"messages": [("user", "do a then b then c")]}, cfg, context={"mode": "plan"})
    for garbage in ("garbage", 5, ["a"], {"a": 7}):
        graph.update_state(cfg, {"step_outcomes": garbage})  # must not raise
        assert isinstance(graph.get_state(cfg).values["step_outcomes"], dict)
    revision = graph.get_state(cfg).values["plan"].revision
    graph.invoke(None, cfg)  # the approval asks again; approve and finish
    from langgraph.types import Command

    graph.invoke(Command(resume={"action": "approve", "revision": revision}), cfg)
    assert graph.get_state(cfg).values["status"] == "completed"


# -- plan_changes -----------------------------------------------------------------------------------------


def _plan(*steps: dict[str, Any], title: str = "t") -> Plan:
    return Plan(goal="g", title=title, steps=list(steps))  # type: ignore[arg-type]


A = {"id": "a", "description": "do a"}
B = {"id": "b", "description": "do b", "dependencies": ["a"]}
C = {"id": "c", "description": "do c"}


def test_plan_changes_reports_added_removed_updated_and_reordered() -> None:
    old = _plan(A, B, C)
    new = _plan(C, {**A, "complexity": "high", "tools": ["x"]}, {"id": "d", "description": "new"})
    changes = plan_changes(old, new)
    assert changes == {
        "since_revision": old.revision,
        "added": ["d"],
        "removed": ["b"],
        "updated": {"a": {"tools": [[], ["x"]], "complexity": ["medium", "high"]}},
        "reordered": True,
    }
    assert json.loads(json.dumps(changes)) == changes
    assert plan_changes(plan_snapshot(old), new) == changes  # the snapshot kept in state gives the same
    assert plan_changes(old, old)["updated"] == {} and not plan_changes(old, old)["reordered"]


def test_plan_changes_shows_skips_but_not_execution_progress() -> None:
    old = _plan(A, B, C)
    done = old.model_copy(
        update={
            "steps": [
                old.steps[0].model_copy(update={"status": S.DONE}),
                old.steps[1].model_copy(update={"status": S.SKIPPED}),
                old.steps[2],
            ]
        }
    )
    assert plan_changes(old, done)["updated"] == {"b": {"status": ["pending", "skipped"]}}


def test_plan_changes_has_nothing_to_compare_without_a_base() -> None:
    empty = {"since_revision": None, "added": [], "removed": [], "updated": {}, "reordered": False}
    assert plan_changes(None, _plan(A)) == empty
    assert plan_changes("junk", _plan(A)) == empty  # type: ignore[arg-type]
    assert plan_changes({"steps": "junk"}, _plan(A))["added"] == ["a"]


# -- the reducer's expected_revision ----------------------------------------------------------------------


def test_a_stale_update_is_refused_and_recorded_never_raised() -> None:
    plan = plan_reducer(None, _plan(A, B))
    assert plan is not None and plan.version == 1
    patch = PlanPatch(add_steps=[NewStep(id="c", description="c")])
    fresh = plan_reducer(plan, PlanUpdate(patch=patch, expected_revision=plan.revision, source="human"))
    assert fresh is not None and fresh.version == 2 and fresh.ids() == ["a", "b", "c"]
    stale = PlanUpdate(
        patch=PlanPatch(update_steps=[StepUpdate(id="a", description="x")]),
        expected_revision=plan.revision,
        source="alice",
    )
    out = plan_reducer(fresh, stale)
    assert out is not None and out.version == 2 and out.get("a").description == "do a"  # type: ignore[union-attr]
    assert out.rejections[-1].source == "alice" and out.rejections[-1].kind == "patch"
    assert "stale edit" in out.rejections[-1].reasons[0] and plan.revision in out.rejections[-1].reasons[0]
    # as JSON (Studio, the SDK) too, and against no plan at all
    as_json = json.loads(stale.model_dump_json())
    assert plan_reducer(fresh, as_json).rejections[-1].reasons == out.rejections[-1].reasons  # type: ignore[union-attr]
    none = plan_reducer(None, as_json)
    assert none is not None and none.version == 0 and "stale edit" in none.rejections[-1].reasons[0]
    moved = plan_reducer(
        fresh, PlanUpdate(transitions=[StepTransition(id="a", status=S.RUNNING)], expected_revision="0" * 16)
    )
    assert moved is not None and moved.get("a").status is S.PENDING  # type: ignore[union-attr]


# -- clean_text ----------------------------------------------------------------------------------------------


@given(st.text())
def test_clean_text_keeps_encodable_text_and_makes_any_text_encodable(text: str) -> None:
    out = clean_text(text)
    out.encode("utf-8")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        assert "\ufffd" in out or len(out) < len(text)  # a surrogate pair became one character
    else:
        assert out is text


def test_every_text_field_is_cleaned_where_it_enters() -> None:
    bad = "x\ud800y"
    plan = Plan.model_validate(
        {
            "goal": bad,
            "title": bad,
            "steps": [{"id": "a", "description": bad, "tools": [bad], "acceptance": bad, "result": bad, "error": bad}],
        }
    )
    dumped = plan.model_dump_json()
    assert "\\ud800" not in dumped and plan.title == "x\ufffdy"
    patch = PlanPatch.model_validate(
        {
            "reason": bad,
            "title": bad,
            "add_steps": [{"id": "n", "description": bad}],
            "update_steps": [{"id": "a", "description": bad, "tools": [bad]}],
        }
    )
    patch.model_dump_json()
    StepTransition(id="a", status=S.DONE, result=bad, error=bad).model_dump_json()
    Rejection(version=1, kind=bad, reasons=[bad]).model_dump_json()
    StepOutcome(step_id="a", ok=True, output=bad, error=bad).model_dump_json()


# -- the approval protocol is total --------------------------------------------------------------------------

IDS = st.sampled_from(["a", "b", "c", "d", "e"])
STEP = st.fixed_dictionaries(
    {
        "id": IDS,
        "description": st.sampled_from(["x", "y", "z \ud800"]),
        "complexity": st.sampled_from(["low", "medium", "high"]),
    }
)


def _plan_of(steps: list[dict[str, Any]]) -> Plan:
    seen: dict[str, dict[str, Any]] = {}
    for s in steps:
        seen.setdefault(s["id"], s)
    return Plan(goal="g", steps=list(seen.values()) or [{"id": "a", "description": "x"}])  # type: ignore[list-item]


@given(old=st.lists(STEP, max_size=5), new=st.lists(STEP, max_size=5))
def test_plan_changes_accounts_for_every_step(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> None:
    before, after = _plan_of(old), _plan_of(new)
    changes = plan_changes(before, after)
    assert set(changes["added"]) == set(after.ids()) - set(before.ids())
    assert set(changes["removed"]) == set(before.ids()) - set(after.ids())
    old_steps = {s["id"]: s for s in plan_snapshot(before)["steps"]}
    new_steps = {s["id"]: s for s in plan_snapshot(after)["steps"]}
    for sid in set(old_steps) & set(new_steps):
        differ = {
            k: [old_steps[sid][k], new_steps[sid][k]]
            for k in ("description", "complexity")
            if old_steps[sid][k] != new_steps[sid][k]
        }
        assert changes["updated"].get(sid, {}) == differ
    common = [i for i in before.ids() if i in new_steps]
    assert changes["reordered"] == (common != [i for i in after.ids() if i in old_steps])
    json.dumps(changes)


@given(
    value=ANY_VALUE
    | st.fixed_dictionaries(
        {"action": st.sampled_from(["approve", "edit", "reject", "cancel"])},
        optional={
            "revision": ANY_VALUE | st.just("REV"),
            "patch": ANY_VALUE,
            "plan": ANY_VALUE,
            "feedback": ANY_VALUE,
            "reason": ANY_VALUE,
        },
    )
)
def test_parse_resume_never_raises(value: Any) -> None:
    from planmode.approval import Approve, Cancel, Edit, Reject, approval_payload, approval_reason, parse_resume

    plan = _plan_of([{"id": "a", "description": "x"}, {"id": "b", "description": "y"}])
    if isinstance(value, dict) and value.get("revision") == "REV":
        value = {**value, "revision": plan.revision}
    out = parse_resume(value, plan)
    assert isinstance(out, str | Approve | Edit | Reject | Cancel)
    if isinstance(out, Approve | Edit):  # only an answer naming the revision shown approves
        assert isinstance(value, dict) and value["revision"] == plan.revision
    if isinstance(out, str):
        out.encode("utf-8")
        payload = approval_payload(plan, error=out, reason=approval_reason(plan, None, error=out))
        json.dumps(payload, ensure_ascii=False).encode("utf-8")
