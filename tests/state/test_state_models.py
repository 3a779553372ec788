"""The plan model: field names, validation, derived values, the revision hash and the renderings."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import planmode
from planmode.state import (
    Complexity,
    NewStep,
    Plan,
    PlanPatch,
    Step,
    StepStatus,
    StepUpdate,
)


def _plan() -> Plan:
    return Plan(
        goal="Ship the report",
        title="Report",
        steps=[
            Step(id="fetch", description="Fetch the data", status=StepStatus.DONE, result="fetched 10 rows"),
            Step(id="clean", description="Clean the data", dependencies=["fetch"], tools=["pandas"]),
            Step(id="chart", description="Draw the chart", dependencies=["clean"], acceptance="a PNG exists"),
            Step(id="notes", description="Write notes", dependencies=["fetch"]),
        ],
    )


# -- the public protocol ----------------------------------------------------------------------------


def test_public_api_is_importable_from_the_package() -> None:
    assert planmode.Plan is Plan
    assert planmode.Step is Step
    assert planmode.StepStatus is StepStatus
    assert planmode.PlanPatch is PlanPatch
    from planmode.state import apply_patch

    assert planmode.apply_patch is apply_patch


def test_status_values_are_the_protocol_strings() -> None:
    assert [s.value for s in StepStatus] == ["pending", "running", "done", "failed", "blocked", "skipped"]
    assert StepStatus("done") is StepStatus.DONE
    assert str(StepStatus.RUNNING) == "running"
    assert isinstance(StepStatus.PENDING, str)


def test_step_field_names_and_defaults() -> None:
    step = Step.model_validate({"id": "s1", "description": "do it"})
    assert set(step.model_dump()) >= {
        "id",
        "description",
        "dependencies",
        "tools",
        "complexity",
        "acceptance",
        "status",
        "attempts",
        "result",
        "error",
    }
    assert step.status is StepStatus.PENDING
    assert step.complexity is Complexity.MEDIUM
    assert step.dependencies == [] and step.tools == [] and step.attempts == 0
    assert step.result is None and step.error is None


def test_plan_accepts_plain_json_dicts() -> None:
    plan = Plan.model_validate(
        {
            "goal": "g",
            "title": "t",
            "steps": [
                {"id": "a", "description": "A", "complexity": "high", "status": "done"},
                {"id": "b", "description": "B", "dependencies": ["a"]},
            ],
            "version": 3,
        }
    )
    assert plan.version == 3
    assert plan.steps[0].complexity is Complexity.HIGH
    assert plan.steps[0].status is StepStatus.DONE
    assert plan.ids() == ["a", "b"]


def test_patch_accepts_plain_json_dicts() -> None:
    patch = PlanPatch.model_validate(
        {
            "reason": "r",
            "title": "New",
            "add_steps": [
                {"id": "x", "description": "X", "after": "a"},
                {"id": "y", "description": "Y", "position": 0},
            ],
            "update_steps": [{"id": "a", "description": "A2"}],
            "remove_steps": ["b"],
            "reorder": ["c", "a"],
        }
    )
    assert isinstance(patch.add_steps[0], NewStep) and patch.add_steps[0].after == "a"
    assert patch.add_steps[1].position == 0
    assert isinstance(patch.update_steps[0], StepUpdate)
    assert patch.update_steps[0].changes() == {"description": "A2"}
    assert patch.remove_steps == ["b"] and patch.reorder == ["c", "a"]
    assert not patch.is_empty()
    assert PlanPatch(reason="nothing").is_empty()


@pytest.mark.parametrize("bad_id", ["", "1abc", "has space", "semi;colon", "a" * 65, "../etc"])
def test_step_ids_must_be_safe_identifiers(bad_id: str) -> None:
    with pytest.raises(ValidationError):
        Step(id=bad_id, description="x")


@pytest.mark.parametrize("good_id", ["a", "_x", "read_config", "step-2", "A" * 64])
def test_safe_step_ids_are_accepted(good_id: str) -> None:
    assert Step(id=good_id, description="x").id == good_id


def test_step_rejects_empty_description_and_negative_attempts() -> None:
    with pytest.raises(ValidationError):
        Step(id="a", description="")
    with pytest.raises(ValidationError):
        Step(id="a", description="x", attempts=-1)


def test_step_update_may_only_reopen_or_skip() -> None:
    assert StepUpdate(id="a", status="pending").status == "pending"
    assert StepUpdate(id="a", status="skipped").status == "skipped"
    with pytest.raises(ValidationError):
        StepUpdate.model_validate({"id": "a", "status": "done"})


# -- derived values ---------------------------------------------------------------------------------


def test_ready_steps_are_pending_steps_whose_dependencies_are_done() -> None:
    plan = _plan()
    assert [s.id for s in plan.ready_steps()] == ["clean", "notes"]
    running = plan.model_copy(
        update={
            "steps": [plan.steps[0], plan.steps[1].model_copy(update={"status": StepStatus.RUNNING}), *plan.steps[2:]]
        }
    )
    assert [s.id for s in running.ready_steps()] == ["notes"]
    assert "ready" not in {s.value for s in StepStatus}


def test_lookups_counts_and_completion() -> None:
    plan = _plan()
    assert plan.get("clean") is plan.steps[1]
    assert plan.get("nope") is None
    assert [s.id for s in plan.by_status(StepStatus.DONE)] == ["fetch"]
    counts = plan.counts()
    assert counts == {"pending": 3, "running": 0, "done": 1, "failed": 0, "blocked": 0, "skipped": 0}
    assert not plan.is_complete
    finished = plan.model_copy(
        update={
            "steps": [s.model_copy(update={"status": StepStatus.DONE}) for s in plan.steps[:3]]
            + [plan.steps[3].model_copy(update={"status": StepStatus.SKIPPED})]
        }
    )
    assert finished.is_complete
    assert not Plan(goal="g").is_complete


# -- revision -----------------------------------------------------------------------------------------


def test_revision_is_stable_across_dump_and_validate() -> None:
    plan = _plan()
    assert Plan.model_validate(plan.model_dump()).revision == plan.revision
    assert Plan.model_validate_json(plan.model_dump_json()).revision == plan.revision
    assert Plan.model_validate(plan.model_dump(mode="json")).revision == plan.revision
    assert len(plan.revision) == 16
    assert plan.revision == _plan().revision


def test_revision_changes_when_a_step_changes() -> None:
    plan = _plan()
    changed_description = plan.model_copy(
        update={
            "steps": [
                plan.steps[0],
                plan.steps[1].model_copy(update={"description": "Clean it better"}),
                *plan.steps[2:],
            ]
        }
    )
    changed_status = plan.model_copy(
        update={
            "steps": [plan.steps[0], plan.steps[1].model_copy(update={"status": StepStatus.RUNNING}), *plan.steps[2:]]
        }
    )
    reordered = plan.model_copy(update={"steps": [plan.steps[0], plan.steps[3], plan.steps[1], plan.steps[2]]})
    bumped = plan.model_copy(update={"version": plan.version + 1})
    revisions = {
        plan.revision,
        changed_description.revision,
        changed_status.revision,
        reordered.revision,
        bumped.revision,
    }
    assert len(revisions) == 5


def test_revision_ignores_the_logs() -> None:
    from planmode.state import Rejection

    plan = _plan()
    logged = plan.model_copy(update={"rejections": [Rejection(version=1, kind="patch", reasons=["no"])]})
    assert logged.revision == plan.revision


# -- renderings ---------------------------------------------------------------------------------------


def test_markdown_rendering_shows_every_step_with_its_details() -> None:
    plan = _plan()
    md = plan.to_markdown()
    assert md.startswith("# Report\n")
    assert "**Goal:** Ship the report" in md
    assert plan.revision in md
    assert "1. [x] **fetch** — Fetch the data" in md
    assert "2. [ ] **clean** — Clean the data" in md
    assert "after: clean" in md
    assert "tools: pandas" in md
    assert "acceptance: a PNG exists" in md
    assert "result: fetched 10 rows" in md


def test_prompt_rendering_gives_done_steps_one_short_line() -> None:
    long_result = "row " * 200
    plan = Plan(
        goal="g",
        title="T",
        steps=[
            Step(
                id="a",
                description="A " * 100,
                status=StepStatus.DONE,
                result=long_result,
                tools=["t1"],
                acceptance="never shown",
            ),
            Step(
                id="b",
                description="Do B",
                dependencies=["a"],
                tools=["t2"],
                acceptance="B works",
                status=StepStatus.FAILED,
                error="boom",
            ),
        ],
    )
    text = plan.to_prompt()
    lines = text.splitlines()
    assert lines[0] == "Goal: g"
    assert lines[1] == "Plan v1: T"
    done_lines = [ln for ln in lines if ln.startswith("- a ")]
    assert len(done_lines) == 1
    assert done_lines[0].startswith("- a [done]: row")
    assert len(done_lines[0]) <= 100
    assert "never shown" not in text and "t1" not in text
    b_line = next(ln for ln in lines if ln.startswith("- b "))
    assert "Do B" in b_line and "after a" in b_line and "tools=t2" in b_line
    assert "accept: B works" in b_line and "error: boom" in b_line
    assert len(lines) == 4


def test_the_shape_follows_what_the_plan_asks_to_do_not_how_far_it_got() -> None:
    """`Plan.shape` (what execution is bound to after the approval): statuses, attempts, results, errors, the
    version and the title leave it unchanged; a step's id, description, dependencies, tools, complexity or
    acceptance, an added or removed step, and the goal change it."""
    plan = _plan()
    shape = plan.shape
    ran = plan.model_copy(
        update={
            "version": plan.version + 3,
            "title": "Another title",
            "steps": [
                s.model_copy(update={"status": StepStatus.DONE, "attempts": 2, "result": "ok", "error": "e"})
                for s in plan.steps
            ],
        }
    )
    assert ran.shape == shape and ran.revision != plan.revision
    first = plan.steps[1]
    changes = [
        {"id": "clean2"},
        {"description": "Clean the data twice"},
        {"dependencies": []},
        {"tools": ["polars"]},
        {"complexity": Complexity.HIGH},
        {"acceptance": "no nulls"},
    ]
    for change in changes:
        steps = [*plan.steps[:1], first.model_copy(update=change), *plan.steps[2:]]
        assert plan.model_copy(update={"steps": steps}).shape != shape, change
    assert plan.model_copy(update={"steps": plan.steps[:-1]}).shape != shape
    assert plan.model_copy(update={"goal": "Ship another report"}).shape != shape
    lone = plan.model_copy(update={"goal": "bad \ud800 goal"})
    assert lone.shape != shape  # a lone surrogate hashes too


def test_transitions_hand_the_shape_on_and_the_lookups_follow_the_new_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Execution (`apply_transitions`) changes no step definition: the plan it makes has the shape of the plan it
    started from without hashing every step again (verify asks for it before every batch: O(plan) per step on a
    long chain). Its lookups (`get`, `by_status`, `ready_steps`, `is_complete`, `counts`) answer for the new
    plan, not for the one its index was first built from; a plan given other steps is hashed again."""
    import planmode.state.models as models
    from planmode.state import StepTransition, apply_transitions

    plan = _plan()
    shape = plan.shape
    assert [s.id for s in plan.ready_steps()] == ["clean", "notes"]  # the old plan's index is built
    hashed: list[object] = []
    digest = models._digest

    def counted(content: object) -> str:
        hashed.append(content)
        return digest(content)

    monkeypatch.setattr(models, "_digest", counted)
    ran = apply_transitions(plan, [StepTransition(id="clean", status=StepStatus.RUNNING, attempts=1)]).plan
    done = apply_transitions(ran, [StepTransition(id="clean", status=StepStatus.DONE, result="ok")]).plan
    assert done.shape == shape and ran.shape == shape
    assert hashed == []  # handed on, not hashed again
    assert [s.id for s in ran.ready_steps()] == ["notes"] and [s.id for s in ran.by_status(StepStatus.RUNNING)] == [
        "clean"
    ]
    assert [s.id for s in done.ready_steps()] == ["chart", "notes"]
    assert done.get("clean") is not None and done.get("clean").status is StepStatus.DONE  # type: ignore[union-attr]
    assert plan.get("clean").status is StepStatus.PENDING  # type: ignore[union-attr]  # the old plan is unchanged
    assert done.counts()["done"] == 2 and not done.is_complete
    edited = done.model_copy(update={"steps": [*done.steps[:2], done.steps[2].model_copy(update={"tools": ["x"]})]})
    assert edited.shape != shape and hashed  # other steps: hashed
    assert [s.id for s in edited.ready_steps()] == ["chart"] and edited.get("notes") is None
