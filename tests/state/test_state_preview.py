"""`preview`: what an update to the plan channel would do, decided by the reducer's own code.

Nodes call it before they write (the patch node, the planner's revision check, an edit at the approval);
the reducer then applies the same update. So the preview must be exactly the reducer's answer.
"""

from __future__ import annotations

from typing import Any

import pytest

import planmode.nodes.patch as patch_node
import planmode.state.patch as pure_patch
from planmode.graph.builder import build_graph
from planmode.state import Plan, PlanPatch, PlanSource, PlanUpdate, StepStatus, StepTransition, plan_reducer, preview
from planmode.state.reducer import restore_plan
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

FIRST = {
    "goal": "g",
    "title": "T",
    "steps": [
        {"id": "a", "description": "A"},
        {"id": "b", "description": "B", "dependencies": ["a"]},
    ],
}


def first_plan() -> Plan:
    plan = plan_reducer(None, FIRST)
    assert isinstance(plan, Plan)
    return plan


UPDATES: list[Any] = [
    None,
    FIRST,
    {"steps": []},
    PlanPatch(add_steps=[{"id": "c", "description": "C", "dependencies": ["b"]}]),  # type: ignore[list-item]  # JSON form
    PlanPatch(remove_steps=["zzz"]),
    PlanPatch(title="T"),
    PlanUpdate(patch=PlanPatch(title="New"), source=PlanSource.HUMAN_EDIT, expected_revision="stale"),
    [StepTransition(id="a", status=StepStatus.RUNNING)],
    [StepTransition(id="a", status=StepStatus.DONE)],
    {"reset": True},
    "garbage",
    5,
]


@pytest.mark.parametrize("update", UPDATES, ids=range(len(UPDATES)))
def test_preview_is_exactly_what_the_reducer_does(update: Any) -> None:
    current = first_plan()
    seen = preview(current, update)
    assert seen.plan == plan_reducer(current, update)
    assert seen.outcome in ("applied", "unchanged", "refused", "reset")
    if seen.outcome == "refused":
        assert seen.plan is not None and seen.reasons == seen.plan.rejections[-1].reasons
    else:
        assert seen.reasons == []


def test_preview_names_the_outcome_the_reasons_and_the_record() -> None:
    current = first_plan()
    added = preview(current, PlanUpdate(patch=PlanPatch(title="New"), source=PlanSource.PATCH))
    assert added.applied and added.record is not None
    assert (added.record.version, added.record.source, added.record.retitled) == (2, "patch", True)
    assert preview(current, PlanPatch(title="T")).outcome == "refused"  # the same title: a patch changing nothing
    assert preview(current, dict(FIRST)).outcome == "unchanged"  # the same whole plan again is no change
    stale = preview(current, PlanUpdate(patch=PlanPatch(title="X"), expected_revision="old", source="bob"))
    assert stale.outcome == "refused" and "stale edit" in stale.reasons[0]
    assert stale.plan is not None and stale.plan.rejections[-1].source == "bob"
    moved = preview(current, [StepTransition(id="a", status=StepStatus.RUNNING)])
    assert moved.applied and moved.record is None  # transitions add no history record
    assert preview(current, {"reset": True}).outcome == "reset"
    assert preview(None, PlanUpdate(plan=Plan.model_validate(FIRST), source=PlanSource.PLANNER)).record is not None


def test_a_typed_source_is_kept_as_its_plain_value() -> None:
    update = PlanUpdate(patch=PlanPatch(title="New"), source=PlanSource.HUMAN_FEEDBACK)
    assert type(update.source) is str and update.source == "planner (revision)"
    plan = plan_reducer(first_plan(), update)
    assert plan is not None and type(plan.history[-1].source) is str


def test_restore_plan_reads_a_plan_or_its_json_and_nothing_else() -> None:
    plan = first_plan()
    assert restore_plan(plan) is plan
    assert restore_plan(plan.model_dump(mode="json")) == plan
    assert restore_plan({"version": 1, "steps": "not a list"}) is None
    assert restore_plan({"goal": "no version"}) is None
    assert restore_plan(None) is None


def test_the_patch_node_applies_a_patch_once_through_the_preview(monkeypatch: pytest.MonkeyPatch) -> None:
    """The patch node decides with `preview` (one apply per candidate); only the reducer applies it again."""
    plan = {
        "title": "Two",
        "steps": [{"id": "a", "description": "Do a"}, {"id": "b", "description": "Do b", "dependencies": ["a"]}],
    }
    patch = {
        "reason": "b cannot work",
        "remove_steps": ["b"],
        "add_steps": [{"id": "b2", "description": "Do b another way", "dependencies": ["a"]}],
    }
    calls: list[str] = []
    real = pure_patch.apply_patch

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs.get("source", "?"))
        return real(*args, **kwargs)

    monkeypatch.setattr("planmode.state.reducer.apply_patch", counting)
    monkeypatch.setattr(patch_node, "apply_patch", counting, raising=False)  # the node had its own (two calls)
    model = ScriptedChatModel(responder=PurposeScript(plan=plan, patch=patch))
    graph = build_graph(model, executor=lambda step, ctx: "ok", verifier=lambda s, o, c: (s.id != "b", "wrong"))
    out = graph.invoke({"messages": [("user", "do a then b")]}, context={"mode": "plan", "approval": "auto"})
    assert out["status"] == "completed"
    assert out["plan"].history[-1].source == "patch"
    # the node's preview, the router's read of the node's writes, the channel: once in the node, not twice
    assert calls.count("patch") == 3
