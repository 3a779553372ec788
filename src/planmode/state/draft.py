"""`PlanDraft`: the plan as a planner writes it, and `draft_to_plan`, which makes a `Plan` of it."""

from __future__ import annotations

from pydantic import BaseModel, Field

from planmode.state.models import Plan, Step, StepDefinition

__all__ = ["PlanDraft", "draft_to_plan"]


class PlanDraft(BaseModel):
    """What the planner emits: a title and the steps."""

    title: str = Field(default="", description="A short title for the plan.")
    steps: list[StepDefinition] = Field(description="The steps, in a sensible order.")


def draft_to_plan(draft: PlanDraft, goal: str, max_steps: int, current: Plan | None = None) -> Plan:
    """A plan from a draft. Statuses and records are never taken from a model: new steps are pending, and a
    step whose id is a done step of ``current`` keeps that step's record (so an unchanged done step diffs as
    unchanged, and a changed one is refused by `apply_patch`)."""
    done = {s.id: s for s in current.steps if s.status.value == "done"} if current is not None else {}
    steps = []
    for d in draft.steps:
        step = Step(**d.model_dump())
        old = done.get(step.id)
        if old is not None:
            step = step.model_copy(
                update=old.model_dump(include={"status", "attempts", "result", "error", "output_ref"})
            )
        steps.append(step)
    return Plan(goal=goal, title=draft.title, steps=steps, max_steps=max_steps)
