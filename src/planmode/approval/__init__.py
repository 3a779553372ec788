"""The approval protocol: the interrupt payload and the validation of a human's resume value.

Payload (JSON)::

    {"type": "planmode.approval", "plan": {...}, "markdown": "...", "revision": "<hash>",
     "actions": ["approve", "edit", "reject", "cancel"], "error": null | "why the previous answer was refused",
     "reason": "why it is asked (again)", "changes": {...}}

``reason`` says why the approval is asked: ``"initial plan"``, ``"revised after your feedback: ..."``,
``"re-approval after a patch: ..."`` (an off_track repair, or any patch with ``reapprove_patches``),
``"the plan was edited (...)"`` (``update_state``, as Studio does) or
``"asked again (see error)"`` (a refused answer, e.g. a stale revision, or an approval that no longer holds);
several of these are joined with "; ".
``changes`` is what changed since the plan a human last answered or approved (`planmode.state.diff`)::

    {"since_revision": "<hash>" | null, "added": [ids], "removed": [ids],
     "updated": {"<id>": {"<field>": [old, new]}}, "reordered": false}

(``since_revision`` null and everything empty when there is nothing to compare, e.g. the first plan.)

Resume values::

    {"action": "approve", "revision": "<the revision shown>"}
    {"action": "edit", "revision": "<the revision shown>", "plan": {... a full plan ...}}
    {"action": "edit", "revision": "<the revision shown>", "patch": {... a PlanPatch ...}}
    {"action": "reject", "feedback": "what to change"}     # the planner revises the plan; asked again
    {"action": "cancel", "feedback": "why (optional)"}     # stop: the run ends "cancelled"

**Every answer that approves names the revision it was made against.** An approve or an edit is the approval
of a plan, so it must carry the ``revision`` of the payload the human read: when the plan changed meanwhile
(an ``update_state`` edit, a patch), the answer is stale and is refused — the approval is asked again with
the error and the plan as it is now, and nothing runs. An edit without a revision is refused the same way:
applied on top of a plan nobody saw, it would approve that plan.

Reject keeps the run in plan mode: the planner gets the feedback and the revised plan is shown again. Cancel
is how a human leaves plan mode without executing the plan: nothing more runs (at a re-approval after a
patch, the steps already done stay done), the run finishes with status ``cancelled`` and its report and
final message carry the feedback.

An edit is validated by the same rules as any patch and, when valid, is the approval of the edited plan. A
full plan edit may not change a step's status (statuses change by execution; to skip a step, send a patch
with ``{"update_steps": [{"id": "...", "status": "skipped"}]}``). Anything else is refused with a message
and the approval is asked again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from planmode.errors import PlanParseError
from planmode.state.diff import plan_changes
from planmode.state.mermaid import plan_to_mermaid
from planmode.state.models import Plan, PlanPatch, PlanSource, StepStatus, clean_text
from planmode.state.parse import coerce_plan_or_patch
from planmode.state.patch import diff_to_patch
from planmode.state.reducer import PlanUpdate, preview

__all__ = [
    "APPROVAL_TYPE",
    "Approve",
    "Cancel",
    "Edit",
    "Reject",
    "approval_payload",
    "approval_reason",
    "parse_resume",
]

APPROVAL_TYPE = "planmode.approval"
ACTIONS = ("approve", "edit", "reject", "cancel")

#: Sources of plan history records made by the planner and by repairs (anything else is an outside edit).
_PLANNER_SOURCES = ("planner", "planner (revision)")
_REPAIR_SOURCES = ("patch", "diff")


@dataclass(frozen=True)
class Approve:
    revision: str


@dataclass(frozen=True)
class Edit:
    patch: PlanPatch
    plan: Plan  # the plan after the edit (what is approved)
    revision: str  # the revision the edit was made against (the one shown)


@dataclass(frozen=True)
class Reject:
    feedback: str


@dataclass(frozen=True)
class Cancel:
    feedback: str  # may be empty


def approval_payload(
    plan: Plan, *, error: str | None, reason: str, changes: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The JSON payload of the approval interrupt; ``changes`` defaults to "nothing to compare"."""
    return {
        "type": APPROVAL_TYPE,
        "plan": json.loads(plan.model_dump_json(exclude={"rejections"})),
        "markdown": plan.to_markdown() + "\n" + plan_to_mermaid(plan, fenced=True) + "\n",
        "revision": plan.revision,
        "actions": list(ACTIONS),
        "error": clean_text(error) if error is not None else None,
        "reason": clean_text(reason),
        "changes": changes if changes is not None else plan_changes(None, plan),
    }


def approval_reason(plan: Plan, base: Mapping[str, Any] | None, *, error: str | None = None) -> str:
    """Why the approval of ``plan`` is asked, from the plan's history since ``base`` (the plan a human last
    answered or approved, as `planmode.state.diff.plan_snapshot` data; None before any answer) and the
    ``error`` of a refused previous answer. Parts are joined with "; "."""
    if not isinstance(base, Mapping):  # None, or junk a hand edit of the state left there
        base = None
    since = base.get("version") if base is not None else None
    if not isinstance(since, int):  # nothing answered yet: the human saw the planner's latest plan first
        since = max((r.version for r in plan.history if r.source in _PLANNER_SOURCES), default=0)
    newer = [r for r in plan.history if r.version > since]
    parts: list[str] = []
    revisions = [r for r in newer if r.source == "planner (revision)"]
    if revisions:
        parts.append("revised after your feedback: " + revisions[-1].reason.removeprefix("human feedback: "))
    repairs = [r for r in newer if r.source in _REPAIR_SOURCES]
    if repairs:
        parts.append("re-approval after a patch: " + "; ".join(r.reason or "no reason given" for r in repairs))
    outside = [r for r in newer if r.source not in (*_PLANNER_SOURCES, *_REPAIR_SOURCES)]
    if outside:
        what = "; ".join(_record_summary(r) for r in outside)
        parts.append(f"the plan was edited ({what})")
    if error:
        parts.append("asked again (see error)")
    if parts:
        return "; ".join(parts)
    return "asked again" if base is not None else "initial plan"


def _record_summary(record: Any) -> str:
    parts = [f"by {record.source}"]
    for name in ("added", "updated", "removed"):
        ids = getattr(record, name)
        if ids:
            parts.append(f"{name} {', '.join(ids)}")
    if record.reordered:
        parts.append("reordered")
    if record.retitled:
        parts.append("retitled")
    return ": ".join([parts[0], ", ".join(parts[1:])]) if len(parts) > 1 else parts[0]


def parse_resume(value: Any, plan: Plan) -> Approve | Edit | Reject | Cancel | str:
    """The decision in a resume value, or a message saying why it is refused (never raises)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: JSON nested too deeply
            return (
                f"unreadable answer {value[:80]!r}: resume with a JSON object such as "
                f'{{"action": "approve", "revision": "{plan.revision}"}}'
            )
    if not isinstance(value, dict):
        return f"the answer must be a JSON object with an 'action', got {type(value).__name__}"
    action = value.get("action")
    if action not in ACTIONS:
        return f"unknown action {action!r}; use one of {', '.join(ACTIONS)}"
    revision = value.get("revision")
    if revision is not None and not isinstance(revision, str):
        return "'revision' must be a string"
    if action == "reject":
        feedback = value.get("feedback")
        if not isinstance(feedback, str) or not feedback.strip():
            return "reject needs non-empty 'feedback' telling the planner what to change"
        return Reject(feedback=clean_text(feedback.strip()))
    if action == "cancel":
        feedback = value.get("feedback")
        if feedback is not None and not isinstance(feedback, str):
            return "cancel's 'feedback' must be a string"
        return Cancel(feedback=clean_text((feedback or "").strip()))
    # approve and edit approve a plan: they must name the revision that was shown, and it must be current
    if not revision:
        example = {"action": action, "revision": plan.revision}
        if action == "edit":
            example["patch"] = {"...": "..."}
        return f"{action} must name the revision shown: {json.dumps(example)}"
    if revision != plan.revision:
        return (
            f"stale revision {clean_text(revision)[:80]!r}: the plan changed since; the plan shown now has "
            f"revision {plan.revision!r}"
        )
    if action == "approve":
        return Approve(revision=revision)
    return _edit(value, plan)


def _validation_reasons(exc: ValidationError) -> str:
    """Each error of ``exc`` as ``location: message`` (at most five)."""
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def _status_changes(plan: Plan, edited: Plan) -> list[str]:
    """Why a full-plan edit that changes statuses is refused (statuses change by execution, not by edits)."""
    reasons = []
    for step in edited.steps:
        old = plan.get(step.id)
        was = old.status if old is not None else StepStatus.PENDING
        if step.status is not was:
            what = f"step {step.id!r}" if old is not None else f"new step {step.id!r}"
            reasons.append(
                f"{what}: its status cannot be edited ({was.value} -> {step.status.value}); "
                "statuses change only when steps run"
            )
    if reasons:
        reasons.append('to skip a step, send a patch: {"update_steps": [{"id": "...", "status": "skipped"}]}')
    return reasons


def _edit(value: dict[str, Any], plan: Plan) -> Edit | str:
    has_plan, has_patch = value.get("plan") is not None, value.get("patch") is not None
    if has_plan == has_patch:
        return "edit needs exactly one of 'plan' (a full plan) or 'patch' (a plan patch)"
    body = value["plan"] if has_plan else value["patch"]
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except json.JSONDecodeError as exc:
            return f"the edited {'plan' if has_plan else 'patch'} is not valid JSON: {exc.msg}"
        except RecursionError:
            return f"the edited {'plan' if has_plan else 'patch'} is JSON nested too deeply"
    if not isinstance(body, dict):
        return f"the edited {'plan' if has_plan else 'patch'} must be a JSON object"
    try:
        edited = coerce_plan_or_patch({"goal": plan.goal, **body}) if has_plan else PlanPatch.model_validate(body)
    except ValidationError as exc:
        return clean_text("invalid edit: " + _validation_reasons(exc))
    except PlanParseError as exc:
        return clean_text(f"invalid edit: {str(exc).splitlines()[0]}")
    if isinstance(edited, PlanPatch):
        given = [
            f"new step {n.id!r}: a new step starts pending, its status cannot be set ({n.status.value})"
            for n in edited.add_steps
            if n.status is not None and n.status is not StepStatus.PENDING
        ]
        if given:
            return "the edit is refused: " + "; ".join(given)
    if isinstance(edited, Plan):
        refused = _status_changes(plan, edited)
        if refused:
            return "the edit is refused: " + "; ".join(refused)
        reason = value.get("reason")
        patch = diff_to_patch(
            plan, edited, reason=clean_text(reason) if isinstance(reason, str) and reason else "edited by a human"
        )
    elif has_plan:
        return "the edited plan looks like a patch; send it as 'patch'"
    else:
        patch = edited
    if patch.is_empty():
        return f"the edit changes nothing; to accept the plan as it is, approve revision {plan.revision}"
    outcome = preview(plan, PlanUpdate(patch=patch, source=PlanSource.HUMAN_EDIT))
    if not outcome.applied or outcome.plan is None:
        return "the edit is invalid: " + "; ".join(outcome.reasons or ["the edit changes nothing"])
    return Edit(patch=patch, plan=outcome.plan, revision=plan.revision)
