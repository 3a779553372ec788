"""When a run may end ``completed``: every step is done, or was skipped by a human.

A step is skipped by a human when the latest change to the plan that names it came from a human: an edit at the
approval, a skip answered at a step's own question (`planmode.nodes._gates`), or `planmode.edit_plan` (a history
record whose source is ``human`` or a person's name). A skip the run made itself — a repair patch, the full-plan
fallback, a reflection — is not a decision anybody took: the run then ends ``failed``, naming those steps and
the ones that never ran (`unfinished`). finalize applies it where the run's status is written.
"""

from __future__ import annotations

from planmode.state.models import Plan, PlanSource, StepStatus

__all__ = ["human_skipped", "unfinished", "unfinished_error"]

S = StepStatus

#: Sources of plan changes that are not a human's (`PlanSource`); any other source names a person.
_NOT_A_HUMAN = frozenset(s.value for s in PlanSource) - {PlanSource.HUMAN_EDIT.value}


def human_skipped(plan: Plan, step_id: str) -> bool:
    """Whether the latest change to ``plan`` that names ``step_id`` (added or updated) was a human's."""
    for record in reversed(plan.history):
        if step_id in record.updated or step_id in record.added:
            return str(record.source) not in _NOT_A_HUMAN
    return False


def unfinished(plan: Plan) -> dict[str, list[str]]:
    """The steps that keep ``plan`` from being completed: ``skipped`` (by the run itself, not by a human),
    ``failed``, and ``never_ran`` (pending, running or blocked). All empty: the run may be completed."""
    return {
        "skipped": [s.id for s in plan.by_status(S.SKIPPED) if not human_skipped(plan, s.id)],
        "failed": [s.id for s in plan.by_status(S.FAILED)],
        "never_ran": [s.id for s in plan.by_status(S.PENDING, S.RUNNING, S.BLOCKED)],
    }


def unfinished_error(plan: Plan) -> str | None:
    """The one-line reason ``plan`` is not completed (None when every step is done or skipped by a human)."""
    left = unfinished(plan)
    parts = []
    if left["skipped"]:
        parts.append(f"skipped by the run's repair, not by a human: {', '.join(left['skipped'])}")
    if left["failed"]:
        parts.append(f"failed: {', '.join(left['failed'])}")
    if left["never_ran"]:
        parts.append(f"never ran: {', '.join(left['never_ran'])}")
    if not parts and plan.steps:
        return None
    done = len(plan.by_status(S.DONE))
    return f"the run is not complete ({done} of {len(plan.steps)} steps done): " + "; ".join(parts or ["no steps"])
