"""What the repair calls show and ask for: a compact view of the plan and a compact, model-facing patch.

A repair (reflect, then patch) needs to know what is done, what the open steps depend on, and the open
steps themselves; it does not need every done step's result or every open step's acceptance criteria. The
model-facing patch schema (`ProposedStep`, `StepChange`) is a small subset of `PlanPatch` — the JSON schema
of `PlanPatch` itself costs about 830 tokens per call — and is converted into a `PlanPatch` before it is
validated by the same function the reducer uses. The patch node's own calls keep the full `PlanPatch`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ValidationError, model_validator

from planmode.state.models import Plan, PlanPatch, as_step_id, step_ids_read
from planmode.text import clip

__all__ = ["Assessment", "ProposedStep", "Reflection", "StepChange", "proposed_patch", "repair_view"]

_RESULT_CHARS = 80


class ProposedStep(BaseModel):
    """A new step."""

    id: str
    description: str
    dependencies: list[str] = []
    acceptance: str = ""
    after: str = ""

    @model_validator(mode="before")
    @classmethod
    def _as_small_models_write_it(cls, data: Any) -> Any:
        """``null`` for ``dependencies``, ``acceptance`` or ``after`` is read as the field's default, and one
        dependency given as its id alone as a list of that id (a blank id: no dependency)."""
        if not isinstance(data, dict):
            return data
        out = {k: v for k, v in data.items() if not (v is None and k in ("dependencies", "acceptance", "after"))}
        if isinstance(out.get("dependencies"), str):
            out["dependencies"] = [out["dependencies"]] if out["dependencies"].strip() else []
        return out


class StepChange(BaseModel):
    """An existing step's id and only the fields that change (empty text: unchanged)."""

    id: str
    description: str = ""
    dependencies: list[str] | None = None
    acceptance: str = ""
    status: Literal["pending", "skipped"] | None = None


Assessment = Literal["on_track", "needs_adjustment", "off_track", "complete", "failed"]


class Reflection(BaseModel):
    """The assessment of the run; with needs_adjustment or off_track, also the patch."""

    assessment: Assessment
    reasoning: str = ""
    guidance: str = ""
    add_steps: list[ProposedStep] = []
    update_steps: list[StepChange] = []
    remove_steps: list[str] = []

    @property
    def proposes_patch(self) -> bool:
        """True when the answer carries a patch (the patch node then starts from it, without a call)."""
        return bool(self.add_steps or self.update_steps or self.remove_steps)


def repair_view(plan: Plan, *, open_details: bool = False) -> str:
    """The plan for a repair prompt. Done steps: their ids on one line, plus a one-line result for the done
    steps an open step depends on. Open steps: status, description, dependencies and tools; failed and blocked
    steps also their acceptance criteria and error (every open step's, with ``open_details``)."""
    done = [s for s in plan.steps if s.status.value == "done"]
    open_steps = [s for s in plan.steps if s.status.value != "done"]
    used = {d for s in open_steps for d in s.dependencies}
    lines = [f"Goal: {plan.goal}", f"Plan v{plan.version}: {plan.title}".rstrip(": ")]
    if done:
        lines.append("Done: " + ", ".join(s.id for s in done))
        inputs = [s for s in done if s.id in used]
        if inputs:
            lines.append("Results the open steps use:")
            lines += [f"- {s.id}: {clip(s.result or s.description, _RESULT_CHARS)}" for s in inputs]
    lines.append("Open steps:" if open_steps else "Open steps: none")
    for s in open_steps:
        parts = [f"- {s.id} [{s.status.value}]: {s.description}"]
        if s.dependencies:
            parts.append(f" (after {', '.join(s.dependencies)})")
        if s.tools:
            parts.append(f" tools={','.join(s.tools)}")
        troubled = s.status.value in ("failed", "blocked")
        if s.acceptance and (open_details or troubled):
            parts.append(f" accept: {s.acceptance}")
        if s.error:
            parts.append(f" error: {clip(s.error, 200)}")
        lines.append("".join(parts))
    return "\n".join(lines)


def proposed_patch(
    reason: str, add: list[ProposedStep], change: list[StepChange], remove: list[str]
) -> tuple[PlanPatch | None, str | None]:
    """The compact proposal as a `PlanPatch` (``None`` when it proposes nothing), or why it cannot be one."""
    if not (add or change or remove):
        return None, None
    data: dict[str, Any] = {
        "reason": reason,
        "add_steps": [step_ids_read({k: v for k, v in a.model_dump().items() if k != "after" or v}) for a in add],
        "update_steps": [
            step_ids_read({k: v for k, v in c.model_dump().items() if v not in (None, "")}) for c in change
        ],
        "remove_steps": [as_step_id(r) for r in remove],
    }
    try:
        return PlanPatch.model_validate(data), None
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(root)"
        return None, f"the proposed patch is invalid: {loc}: {first['msg']}"
