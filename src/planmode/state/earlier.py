"""The compact summary of a thread's earlier run that a new run on the thread carries (a follow-up): its task,
its plan's steps with their statuses and results, the files it changed and its final answer.

detect writes it into the new run's ``earlier`` channel (`earlier_summary` of the state before the reset); the
planner and the default executor give it to the model, and the approval payload shows it. It is bounded: at most
`MAX_STEPS` steps, each field clipped, and the whole at most `MAX_CHARS` characters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from planmode.text import clip

__all__ = ["FINISHED_STATUSES", "MAX_CHARS", "MAX_STEPS", "earlier_summary"]

#: The statuses of a finished run: only a finished run is summarised for the next one.
FINISHED_STATUSES = frozenset({"completed", "failed", "answered", "cancelled"})
#: At most this many of the earlier plan's steps are listed (the rest are counted).
MAX_STEPS = 12
#: The whole summary is at most this many characters.
MAX_CHARS = 2400


def _final_answer(messages: Sequence[Any]) -> str:
    """The text of the last AI message of ``messages`` ("" when there is none)."""
    for message in reversed(messages):
        if getattr(message, "type", None) == "ai":
            content = getattr(message, "content", "")
            if isinstance(content, str):
                return content
            parts = [p.get("text", "") if isinstance(p, Mapping) else str(p) for p in content]
            return " ".join(str(p) for p in parts)
    return ""


def _step_line(step: Any) -> str:
    status = getattr(step.status, "value", step.status)
    line = f"- {step.id} ({status}): {clip(step.description, 160)}"
    outcome = step.result if step.result else step.error
    return line + (f" -> {clip(outcome, 160)}" if outcome else "")


def earlier_summary(values: Mapping[str, Any]) -> str | None:
    """The summary of the run whose state is ``values`` (a thread's state before a new run resets it), or None
    when that state holds no finished run (a new thread, a run that did not finish). The task, the status, the
    files and the answer are always in it; the steps are listed in order while they fit, the rest counted."""
    status = values.get("status")
    goal = values.get("goal")
    if status not in FINISHED_STATUSES or not isinstance(goal, str) or not goal.strip():
        return None
    head = [f"Task: {clip(goal, 400)}", f"Status: {status}"]
    report = values.get("report")
    files = report.get("files_changed") if isinstance(report, Mapping) else None
    if isinstance(files, list) and files:
        more = f" and {len(files) - 20} more" if len(files) > 20 else ""
        tail = [f"Files changed: {clip(', '.join(str(f) for f in files[:20]), 600)}{more}"]
    else:
        tail = ["Files changed: none"]
    answer = _final_answer(values.get("messages") or [])
    if answer.strip():
        tail.append(f"Final answer: {clip(answer, 800)}")
    plan = values.get("plan")
    steps = list(getattr(plan, "steps", None) or []) if getattr(plan, "version", 0) else []
    room = MAX_CHARS - len("\n".join([*head, "Plan steps:", *tail])) - 40  # 40: the "... and N more" line
    lines: list[str] = []
    for step in steps[:MAX_STEPS]:
        line = _step_line(step)
        if len(line) + 1 > room:
            break
        lines.append(line)
        room -= len(line) + 1
    if len(lines) < len(steps):
        lines.append(f"- ... and {len(steps) - len(lines)} more steps")
    middle = ["Plan steps:", *lines] if steps else []
    return "\n".join([*head, *middle, *tail])
