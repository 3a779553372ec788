"""What changed between two versions of a plan, as JSON-able data (for the approval payload, the CLI, Studio).

    plan_changes(old, new) -> {"since_revision": str | None, "added": [step ids], "removed": [step ids],
                               "updated": {step_id: {field: [old, new]}}, "reordered": bool}

``old`` is the plan a human last saw and answered (or approved), as a `Plan` or as the `plan_snapshot` data
the approve node keeps in state; None when there is nothing to compare (``since_revision`` is then None and
everything is empty). ``updated`` compares a step's definition fields (and see statuses below); values are JSON
(statuses and complexities as strings). ``reordered`` is True when the steps present in both plans are in a
different relative order. Statuses are compared only where a plan decision shows in them: a step skipped or
un-skipped (``"status": ["pending", "skipped"]``); progress made by execution (pending -> done, a failed
attempt) is not a change of the plan. Pure: never raises for any plan content.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planmode.state.models import DEFINITION_FIELDS, Plan

__all__ = ["COMPARED_FIELDS", "no_changes", "plan_changes", "plan_snapshot"]

#: The step fields `plan_changes` compares, in the order they are reported.
COMPARED_FIELDS: tuple[str, ...] = (*DEFINITION_FIELDS, "status")


def plan_snapshot(plan: Plan) -> dict[str, Any]:
    """The part of ``plan`` a later `plan_changes` needs: revision, version, goal, title, and each step's
    compared fields (JSON). Small enough to keep in state; no step results or logs."""
    steps = [step.model_dump(mode="json", include={"id", *COMPARED_FIELDS}) for step in plan.steps]
    return {"revision": plan.revision, "version": plan.version, "goal": plan.goal, "title": plan.title, "steps": steps}


def no_changes() -> dict[str, Any]:
    """The answer when there is nothing to compare."""
    return {"since_revision": None, "added": [], "removed": [], "updated": {}, "reordered": False}


def _steps_of(plan: Plan | Mapping[str, Any]) -> tuple[str | None, dict[str, dict[str, Any]], list[str]]:
    snap = plan_snapshot(plan) if isinstance(plan, Plan) else dict(plan)
    steps: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    raw = snap.get("steps")
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, Mapping) and isinstance(item.get("id"), str) and item["id"] not in steps:
            steps[item["id"]] = dict(item)
            order.append(item["id"])
    revision = snap.get("revision")
    return (revision if isinstance(revision, str) else None), steps, order


def plan_changes(old: Plan | Mapping[str, Any] | None, new: Plan) -> dict[str, Any]:
    """The changes from ``old`` to ``new``; see the module docstring for the shape."""
    if not isinstance(old, Plan | Mapping):  # None, or a value a hand edit of the state left there
        return no_changes()
    since, before, order_before = _steps_of(old)
    _, after, order_after = _steps_of(new)
    added = [sid for sid in order_after if sid not in before]
    removed = [sid for sid in order_before if sid not in after]
    updated: dict[str, dict[str, list[Any]]] = {}
    for sid in order_after:
        if sid not in before:
            continue
        fields = {
            f: [before[sid].get(f), after[sid].get(f)]
            for f in COMPARED_FIELDS
            if before[sid].get(f) != after[sid].get(f)
        }
        status = fields.get("status")
        if status is not None and "skipped" not in status:
            del fields["status"]
        if fields:
            updated[sid] = fields
    common_before = [sid for sid in order_before if sid in after]
    common_after = [sid for sid in order_after if sid in before]
    return {
        "since_revision": since,
        "added": added,
        "removed": removed,
        "updated": updated,
        "reordered": common_before != common_after,
    }
