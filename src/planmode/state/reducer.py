"""The plan channel's reducer: the one place every change to the plan goes through.

    plan: Annotated[Plan | None, plan_reducer]

A reducer runs on replay too, and in LangGraph 1.2 a reducer that raises leaves the thread unreadable
(every ``get_state`` raises again). So `plan_reducer` **never raises**: an update it cannot apply leaves
the plan unchanged and is recorded in ``plan.rejections`` with its reasons, where nodes, Studio and tests
see it.

Accepted updates (objects or their JSON dicts, as Studio and the SDK send them):

- a `Plan`: the first plan (validated; steps forced to ``pending``), or a whole new plan that is converted
  into a patch by diff against the current one (so it cannot touch done steps);
- a `PlanPatch`; a `StepTransition` or a list of them; a `PlanUpdate` envelope naming its source and,
  optionally, the ``expected_revision`` it was made against (a stale one is refused and recorded: see
  `planmode.edit_plan` for edits that may race);
- a `ResetPlan` (``{"reset": true}``): clears the plan for a new task on the same thread;
- ``None``: no change.

The *current* value may not be a `Plan` either: LangGraph stores the first write to an empty
``Plan | None`` channel as-is, without calling the reducer, and a JSON serializer restores plans as dicts.
A dict with a ``version`` is read as a restored plan; anything else is replayed through the reducer as
the update it was (so a raw first plan is validated, and a junk one is recorded as a rejection).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from planmode._packed import is_packed, unpack_plan
from planmode.errors import PlanParseError
from planmode.state.models import (
    DEFINITION_FIELDS,
    MAX_REJECTIONS_KEPT,
    PatchRecord,
    Plan,
    PlanPatch,
    PlanSource,
    Rejection,
    ResetPlan,
    Step,
    StepTransition,
    clean_text,
)
from planmode.state.parse import coerce_plan_or_patch
from planmode.state.patch import apply_patch, apply_transitions, diff_to_patch, validate_plan

__all__ = ["PlanUpdate", "Preview", "UpdateOutcome", "new_plan", "plan_reducer", "preview", "reject", "restore_plan"]


class PlanUpdate(BaseModel):
    """An update to the plan channel with its source (shown in history and rejections)."""

    kind: Literal["plan_update"] = "plan_update"
    source: str = Field(
        default=PlanSource.UNKNOWN.value,
        description="Who made it: a `PlanSource` value (planner, patch, human, ...) or any other name.",
    )
    plan: Plan | None = None
    patch: PlanPatch | None = None
    transitions: list[StepTransition] = Field(default_factory=list)
    reset: bool = False
    rejections: list[Rejection] = Field(
        default_factory=list, description="Refusals a node already decided (e.g. invalid model patches)."
    )
    expected_revision: str | None = Field(
        default=None,
        description="The revision of the plan this update was made against. When set and the plan is at another "
        "revision, the update is refused and recorded (a stale edit: the plan changed since it was read).",
    )
    approved_by: str | None = Field(
        default=None,
        description="Who approved (`planmode.approval.approver`): recorded on the patch's history record, or alone as "
        "a "
        "record with source 'approval' that changes nothing else.",
    )


def reject(plan: Plan | None, kind: str, reasons: list[str], *, source: str = "unknown", goal: str = "") -> Plan:
    """``plan`` unchanged but for one more recorded rejection (an empty version-0 plan if there is none)."""
    base = plan if plan is not None else Plan(goal=goal or "(no plan yet)", version=0)
    rej = Rejection(version=base.version, kind=kind, source=source, reasons=reasons or ["rejected"])
    kept = [*base.rejections, rej][-MAX_REJECTIONS_KEPT:]
    return base.model_copy(update={"rejections": kept})


def new_plan(plan: Plan, *, source: str = PlanSource.PLANNER, reason: str = "") -> tuple[Plan, list[str]]:
    """``plan`` made into a first version (steps pending, version 1), or the reasons it is invalid. Its history
    record's reason is ``reason``, or "initial plan"."""
    reasons = validate_plan(plan, max_steps=plan.max_steps)
    if reasons:
        return plan, reasons
    steps = [Step(**s.model_dump(include={"id", *DEFINITION_FIELDS})) for s in plan.steps]
    record = PatchRecord(version=1, reason=reason or "initial plan", source=source, added=[s.id for s in steps])
    return plan.model_copy(update={"steps": steps, "version": 1, "history": [record], "rejections": []}), []


def _coerce(update: Any) -> PlanUpdate | str:
    """The update as a `PlanUpdate`, or a message saying why it cannot be read."""
    if isinstance(update, PlanUpdate):
        return update
    if isinstance(update, Plan):
        return PlanUpdate(plan=update)
    if isinstance(update, PlanPatch):
        return PlanUpdate(patch=update)
    if isinstance(update, StepTransition):
        return PlanUpdate(transitions=[update])
    if isinstance(update, ResetPlan):
        return PlanUpdate(reset=True)
    if isinstance(update, list | tuple):
        try:
            return PlanUpdate(transitions=[StepTransition.model_validate(t) for t in update])
        except ValidationError as exc:
            return f"a list update must be step transitions: {exc.errors()[0]['msg']}"
    if isinstance(update, dict):
        try:
            if update.get("kind") == "plan_update":
                return PlanUpdate.model_validate(update)
            if update.get("reset") is True:
                return PlanUpdate(reset=True)
            if "id" in update and "status" in update and "steps" not in update:
                return PlanUpdate(transitions=[StepTransition.model_validate(update)])
            parsed = coerce_plan_or_patch(update)
        except (ValidationError, PlanParseError) as exc:
            return str(exc).splitlines()[0] if isinstance(exc, PlanParseError) else f"invalid update: {exc}"
        return PlanUpdate(plan=parsed) if isinstance(parsed, Plan) else PlanUpdate(patch=parsed)
    return f"unsupported plan update of type {type(update).__name__}"


UpdateOutcome = Literal["applied", "unchanged", "refused", "reset"]


@dataclass(frozen=True)
class Preview:
    """What an update would do to the plan channel: the plan it leaves, and whether (and why not) it changes.

    ``plan`` is exactly what `plan_reducer` returns for the same value and update: a refused update leaves
    the plan unchanged but for the recorded rejection; ``reasons`` says why it was refused; ``warnings``
    what an applied patch truncated or ignored. Nodes call `preview` to decide before they write: the
    reducer then applies the same update the same way.
    """

    plan: Plan | None
    outcome: UpdateOutcome
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    record: PatchRecord | None = None
    """The history record an applied plan change adds (None for transitions alone and for no change)."""

    @property
    def applied(self) -> bool:
        """True when the update changes the plan (a new version, or step transitions)."""
        return self.outcome == "applied"


def preview(current: Plan | None, update: Any) -> Preview:
    """What writing ``update`` to a plan channel holding ``current`` would do. Never raises."""
    try:
        return _reduce(current, update)
    except Exception as exc:  # the reducer must never raise: record it instead
        base = current if isinstance(current, Plan) else None
        reasons = [f"internal error while applying the update: {exc!r}"]
        return Preview(reject(base, "unknown", reasons), "refused", reasons)


def plan_reducer(current: Plan | None, update: Any) -> Plan | None:
    """Reduce one write to the plan channel. Never raises; see the module docstring."""
    return preview(current, update).plan


def restore_plan(value: Any) -> Plan | None:
    """A plan as a checkpoint holds it: a `Plan`, its packed form (`planmode._packed`), or its JSON dict (with a
    ``version``) as a JSON serializer restores it; None for anything else."""
    if isinstance(value, Plan):
        return value
    if is_packed(value):
        value = unpack_plan(value)
    if isinstance(value, dict) and "version" in value:
        try:
            return Plan.model_validate(value)
        except ValidationError:
            return None
    return None


def _restore(current: Any) -> Plan | None:
    """The current channel value as a `Plan` (or None) when it is not one already; see the module docstring."""
    plan = restore_plan(current)
    if plan is not None:
        return plan
    return _reduce(None, current).plan  # a raw first write that bypassed the reducer


def _refused(current: Plan | None, kind: str, reasons: list[str], *, source: str, goal: str = "") -> Preview:
    rejected = reject(current, kind, reasons, source=source, goal=goal)
    return Preview(rejected, "refused", list(rejected.rejections[-1].reasons))


def _reduce(current: Plan | None, update: Any) -> Preview:
    if update is None:
        return Preview(current, "unchanged")
    if not isinstance(current, Plan):
        current = _restore(current)  # None stays None
    upd = _coerce(update)
    if isinstance(upd, str):
        return _refused(current, "unknown", [upd], source=PlanSource.UNKNOWN)
    if upd.reset:
        return Preview(None, "reset")
    if upd.rejections and current is not None:
        kept = [*current.rejections, *upd.rejections][-MAX_REJECTIONS_KEPT:]
        current = current.model_copy(update={"rejections": kept})
    if (stale := _stale_edit_refusal(current, upd)) is not None:
        return stale
    if upd.plan is not None:
        return _whole_plan_preview(current, upd.plan, upd)
    if current is None or current.version == 0:
        kind = "patch" if upd.patch else "transition"
        return _refused(current, kind, ["there is no plan to change yet"], source=upd.source)
    if upd.patch is None and not upd.transitions and upd.approved_by is None:
        return Preview(current, "unchanged")  # an update that asks for nothing
    return _edit_preview(current, upd)


def _stale_edit_refusal(current: Plan | None, upd: PlanUpdate) -> Preview | None:
    """The refusal of an update made against another revision than ``current``'s; None when it names none, or
    the current one."""
    if upd.expected_revision is None:
        return None
    now = current.revision if current is not None else None
    if upd.expected_revision == now:
        return None
    kind = "plan" if upd.plan is not None else "patch" if upd.patch is not None else "transition"
    at = f"revision {now!r} (version {current.version})" if current is not None else "no plan"
    return _refused(
        current,
        kind,
        [
            f"stale edit: it was made against revision {upd.expected_revision!r}, "
            f"but the plan is now at {at}; read the plan again and redo the edit"
        ],
        source=upd.source,
    )


def _whole_plan_preview(current: Plan | None, proposed: Plan, upd: PlanUpdate) -> Preview:
    """What a whole proposed plan makes of ``current``: the first plan when there is none yet (or only a draft),
    else the patch it differs by, applied."""
    src = upd.source
    reason = upd.patch.reason if upd.patch else ""
    if current is None or current.version == 0:
        plan, reasons = new_plan(proposed, source=src, reason=reason)
        if reasons:
            return _refused(current, "plan", reasons, source=src, goal=proposed.goal)
        return Preview(plan, "applied", record=plan.history[-1])
    patch = diff_to_patch(current, proposed, reason=reason)
    if patch.is_empty():
        return Preview(current, "unchanged")
    res = apply_patch(current, patch, source=src)  # held to the plan's own max_steps
    if res.reasons == ["the patch changes nothing"]:
        # e.g. the same plan with only steps past the cap added: the same plan sent again is no change
        return Preview(current, "unchanged")
    if not res.applied:
        return _refused(current, "plan", res.reasons, source=src)
    return Preview(res.plan, "applied", warnings=res.warnings, record=res.plan.history[-1])


def _edit_preview(current: Plan, upd: PlanUpdate) -> Preview:
    """What ``upd``'s patch, transitions and approval, in that order, make of ``current``; all or nothing."""
    src = upd.source
    original = current
    warnings: list[str] = []
    record: PatchRecord | None = None
    if upd.patch is not None:
        res = apply_patch(current, upd.patch, source=src)  # held to the plan's own max_steps
        if not res.applied:
            return _refused(current, "patch", res.reasons, source=src)
        current, warnings, record = res.plan, res.warnings, res.plan.history[-1]
    if upd.transitions:
        tres = apply_transitions(current, upd.transitions)
        if not tres.applied:
            return _refused(original, "transition", tres.reasons, source=src)
        current = tres.plan
    if upd.approved_by is not None:
        current = _record_approval(current, clean_text(upd.approved_by)[:200], edited=upd.patch is not None)
        record = current.history[-1]
    return Preview(current, "applied", warnings=warnings, record=record)


def _record_approval(plan: Plan, who: str, *, edited: bool) -> Plan:
    """``plan`` with its approval by ``who`` in its history: on the record of the edit just applied, or as a
    record of its own (same version: an approval changes no step, so the revision stays the same)."""
    if edited:
        last = plan.history[-1].model_copy(update={"approved_by": who})
        return plan.model_copy(update={"history": [*plan.history[:-1], last]})
    record = PatchRecord(
        version=plan.version, reason=f"approved revision {plan.revision}", source=PlanSource.APPROVAL, approved_by=who
    )
    return plan.model_copy(update={"history": [*plan.history, record]})
