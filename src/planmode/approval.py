"""The approval protocol: the interrupt payload and the validation of a human's resume value.

Payload (JSON)::

    {"type": "planmode.approval", "plan": {...}, "markdown": "...", "revision": "<hash>",
     "actions": ["approve", "edit", "reject", "cancel"], "error": null | "why the previous answer was refused",
     "reason": "initial plan" | "re-approval after a patch"}

Resume values::

    {"action": "approve", "revision": "<the revision shown>"}
    {"action": "edit", "plan": {... a full plan ...}}            # or "patch": {... a PlanPatch ...}
    {"action": "reject", "feedback": "what to change"}     # the planner revises the plan; asked again
    {"action": "cancel", "feedback": "why (optional)"}     # stop: the run ends "cancelled"

Reject keeps the run in plan mode: the planner gets the feedback and the revised plan is shown again. Cancel
is how a human leaves plan mode without executing the plan: nothing more runs (at a re-approval after a
patch, the steps already done stay done), the run finishes with status ``cancelled`` and its report and
final message carry the feedback.

An edit may carry ``revision`` too (it must then match). An edit is validated by the same rules as any
patch and, when valid, is the approval of the edited plan. Anything else is refused with a message and the
approval is asked again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from planmode.errors import PlanParseError
from planmode.state.models import Plan, PlanPatch
from planmode.state.parse import coerce_plan_or_patch
from planmode.state.patch import apply_patch, diff_to_patch

__all__ = ["APPROVAL_TYPE", "Approve", "Cancel", "Edit", "Reject", "approval_payload", "parse_resume"]

APPROVAL_TYPE = "planmode.approval"
ACTIONS = ("approve", "edit", "reject", "cancel")


@dataclass(frozen=True)
class Approve:
    revision: str


@dataclass(frozen=True)
class Edit:
    patch: PlanPatch
    plan: Plan  # the plan after the edit (what is approved)


@dataclass(frozen=True)
class Reject:
    feedback: str


@dataclass(frozen=True)
class Cancel:
    feedback: str  # may be empty


def approval_payload(plan: Plan, *, error: str | None, reason: str) -> dict[str, Any]:
    """The JSON payload of the approval interrupt."""
    return {
        "type": APPROVAL_TYPE,
        "plan": json.loads(plan.model_dump_json(exclude={"rejections"})),
        "markdown": plan.to_markdown(),
        "revision": plan.revision,
        "actions": list(ACTIONS),
        "error": error,
        "reason": reason,
    }


def parse_resume(value: Any, plan: Plan) -> Approve | Edit | Reject | Cancel | str:
    """The decision in a resume value, or a message saying why it is refused (never raises)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: JSON nested too deeply
            return (f"unreadable answer {value[:80]!r}: resume with a JSON object such as "
                    f'{{"action": "approve", "revision": "{plan.revision}"}}')
    if not isinstance(value, dict):
        return f"the answer must be a JSON object with an 'action', got {type(value).__name__}"
    action = value.get("action")
    if action not in ACTIONS:
        return f"unknown action {action!r}; use one of {', '.join(ACTIONS)}"
    revision = value.get("revision")
    if revision is not None and not isinstance(revision, str):
        return "'revision' must be a string"
    if action == "approve":
        if not revision:
            example = json.dumps({"action": "approve", "revision": plan.revision})
            return f"approve must name the revision shown: {example}"
        if revision != plan.revision:
            return f"stale revision {revision!r}: the plan shown now has revision {plan.revision!r}"
        return Approve(revision=revision)
    if action == "reject":
        feedback = value.get("feedback")
        if not isinstance(feedback, str) or not feedback.strip():
            return "reject needs non-empty 'feedback' telling the planner what to change"
        return Reject(feedback=feedback.strip())
    if action == "cancel":
        feedback = value.get("feedback")
        if feedback is not None and not isinstance(feedback, str):
            return "cancel's 'feedback' must be a string"
        return Cancel(feedback=(feedback or "").strip())
    if revision is not None and revision != plan.revision:
        return f"stale revision {revision!r}: the plan shown now has revision {plan.revision!r}"
    return _edit(value, plan)


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
    except (PlanParseError, ValidationError) as exc:
        return f"invalid edit: {str(exc).splitlines()[0]}"
    if isinstance(edited, Plan):
        patch = diff_to_patch(plan, edited, reason=value.get("reason") or "edited by a human")
    elif has_plan:
        return "the edited plan looks like a patch; send it as 'patch'"
    else:
        patch = edited
    if patch.is_empty():
        return f"the edit changes nothing; to accept the plan as it is, approve revision {plan.revision}"
    res = apply_patch(plan, patch, max_steps=plan.max_steps, source="human")
    if not res.applied:
        return "the edit is invalid: " + "; ".join(res.reasons)
    return Edit(patch=patch, plan=res.plan)
