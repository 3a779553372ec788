"""Parsing model text into a `Plan` or a `PlanPatch`.

JSON is found inside prose or code fences by the one lenient reader (`planmode.state.lenient_json`). A full plan
(a ``steps`` list) is never mistaken for a patch (``add_steps`` / ``update_steps`` / ``remove_steps`` /
``reorder``), nor the reverse; anything else is a `PlanParseError` with a message a model can act on.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from planmode.errors import PlanParseError
from planmode.state.lenient_json import extract_json, repaired_json
from planmode.state.models import Plan, PlanPatch

__all__ = [
    "coerce_plan_or_patch",
    "extract_json",
    "parse_patch",
    "parse_plan",
    "parse_plan_or_patch",
    "repaired_json",
]

PATCH_KEYS = frozenset({"add_steps", "update_steps", "remove_steps", "reorder"})


def _kind(data: dict[str, Any]) -> str:
    is_plan = isinstance(data.get("steps"), list)
    # a new title alone is a patch too (a plan always has steps)
    is_patch = bool(PATCH_KEYS & data.keys()) or ("title" in data and "steps" not in data and "goal" not in data)
    if is_patch and is_plan:
        raise PlanParseError("the JSON has both 'steps' (a full plan) and patch fields; send one or the other")
    if is_patch:
        return "patch"
    if is_plan:
        return "plan"
    raise PlanParseError(
        "the JSON is neither a plan (needs a 'steps' list) nor a patch "
        "(needs add_steps, update_steps, remove_steps, reorder or a new title)"
    )


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:8]:
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def coerce_plan_or_patch(data: dict[str, Any], *, goal: str | None = None) -> Plan | PlanPatch:
    """Validate an already-decoded object as a plan or a patch (by its keys)."""
    kind = _kind(data)
    try:
        if kind == "patch":
            return PlanPatch.model_validate(data)
        if goal is not None and not data.get("goal"):
            data = {**data, "goal": goal}
        return Plan.model_validate(data)
    except ValidationError as exc:
        raise PlanParseError(f"invalid {kind}: {_validation_message(exc)}") from exc


def parse_plan_or_patch(text: str, *, goal: str | None = None) -> Plan | PlanPatch:
    """Parse model text into a `Plan` or a `PlanPatch`, whichever it is."""
    return coerce_plan_or_patch(extract_json(text), goal=goal)


def parse_plan(text: str, *, goal: str | None = None) -> Plan:
    """Parse model text that must be a full plan."""
    out = parse_plan_or_patch(text, goal=goal)
    if not isinstance(out, Plan):
        raise PlanParseError("expected a full plan with a 'steps' list, got a patch")
    return out


def parse_patch(text: str) -> PlanPatch:
    """Parse model text that must be a patch (use `parse_plan_or_patch` to accept a full plan too)."""
    out = parse_plan_or_patch(text)
    if not isinstance(out, PlanPatch):
        raise PlanParseError("expected a patch (add_steps/update_steps/remove_steps/reorder), got a full plan")
    return out
