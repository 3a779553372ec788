"""`PlanDraft`: the plan as a planner writes it, and `draft_to_plan`, which makes a `Plan` of it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from planmode.state.models import Plan, Step, StepDefinition, step_ids_read

__all__ = ["PlanDraft", "draft_to_plan", "free_id"]


class PlanDraft(BaseModel):
    """What the planner emits: a title and the steps."""

    title: str = Field(default="", description="A short title for the plan.")
    steps: list[StepDefinition] = Field(description="The steps, in a sensible order.")

    @model_validator(mode="before")
    @classmethod
    def _as_small_models_write_it(cls, data: Any) -> Any:
        """A plan as small models write it, read as meant: a bare list of steps, or the steps under another key
        (``plan``, ``tasks``: the one list of objects); step ids in backticks, quotes, with spaces or dots
        (`planmode.state.models.step_ids_read`), in ``id`` and ``dependencies``. What is still invalid is refused
        by validation, with its reasons, as before."""
        if isinstance(data, list):
            data = {"steps": data}
        if not isinstance(data, dict):
            return data
        if "steps" not in data:
            lists = [k for k, v in data.items() if isinstance(v, list) and v and all(isinstance(i, dict) for i in v)]
            inner = data.get("plan")
            if len(lists) == 1:
                data = {**{k: v for k, v in data.items() if k != lists[0]}, "steps": data[lists[0]]}
            elif isinstance(inner, dict) and isinstance(inner.get("steps"), list):
                data = {"title": data.get("title", ""), **inner}
        steps = data.get("steps")
        if isinstance(steps, list):
            data = {**data, "steps": [step_ids_read(s) for s in steps]}
        return data


def draft_to_plan(draft: PlanDraft, goal: str, max_steps: int, current: Plan | None = None) -> Plan:
    """A plan from a draft. Statuses and records are never taken from a model: new steps are pending, and a
    step whose id is a done step of ``current`` keeps that step's record (so an unchanged done step diffs as
    unchanged, and a changed one is refused by `apply_patch`)."""
    done = {s.id: s for s in current.steps if s.status.value == "done"} if current is not None else {}
    steps = []
    taken = {d.id for d in draft.steps}
    latest: dict[str, str] = {}  # a step id as written -> the id of the last step written with it, so far
    for d in draft.steps:
        step = Step(**d.model_dump())
        # an id written twice ("read_code", then other steps, then "read_code" again) is a new step: it gets a
        # free id, and a dependency names the step with that id written last
        dependencies = [latest.get(x, x) for x in step.dependencies]
        new_id = step.id
        if step.id in latest and step.id not in done:
            new_id = free_id(step.id, taken)
            taken.add(new_id)
        latest[step.id] = new_id
        if new_id != step.id or dependencies != list(step.dependencies):
            step = step.model_copy(update={"id": new_id, "dependencies": dependencies})
        old = done.get(step.id)
        if old is not None:
            step = step.model_copy(
                update=old.model_dump(include={"status", "attempts", "result", "error", "output_ref"})
            )
        steps.append(step)
    return Plan(goal=goal, title=draft.title, steps=steps, max_steps=max_steps)


def free_id(base: str, taken: set[str]) -> str:
    """``base`` when it is not in ``taken``, else ``base_2``, ``base_3``, ...: the first not in ``taken``."""
    if base not in taken:
        return base
    n = 2
    while f"{base[:58]}_{n}" in taken:  # a step id is at most 64 characters
        n += 1
    return f"{base[:58]}_{n}"
