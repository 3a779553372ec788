"""The CLI's answers to the ``planmode.stale`` and ``planmode.step_approval`` questions, and ``show``'s
diagram options (``--mermaid``, ``--png``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text

from planmode.approval.staleness import STALE_TYPE
from planmode.cli.ui import YES, ask_text, choose, console, interactive
from planmode.nodes._gates import STEP_APPROVAL_TYPE
from planmode.state.models import Plan

__all__ = ["GATE_TYPES", "answer_gate", "print_approvals", "show_picture"]

GATE_TYPES = (STALE_TYPE, STEP_APPROVAL_TYPE)


def _screen(payload: dict[str, Any]) -> None:
    console.print(Text(str(payload.get("markdown") or "")))  # literal text: the step text is data, not markup
    if payload.get("error"):
        console.print(Text(f"Your previous answer was refused: {payload['error']}", style="red"))


def answer_gate(payload: dict[str, Any], auto: bool) -> dict[str, Any] | None:
    """The answer to a staleness or per-step question: asked at a terminal; None (left for later) otherwise.
    ``--auto-approve`` answers the staleness question; a per-step question (``--step-approval writes``) always
    asks the human at the terminal: auto-approving it would turn off the very question the user asked for."""
    stale = payload.get("type") == STALE_TYPE
    _screen(payload)
    step_id = (payload.get("step") or {}).get("id")
    approve: dict[str, Any] = (
        {"action": "approve", "fingerprint": payload.get("fingerprint")}
        if stale
        else {"action": "approve", "step": step_id, "definition": payload.get("definition")}
    )
    if auto and stale:
        console.print(Text("Approved automatically (--auto-approve).", style="green"))
        return approve
    if not interactive():
        hint = "or pass --auto-approve" if stale else "(--step-approval writes asks a human for each write step)"
        console.print(Text(f"This needs an answer at a terminal {hint}.", style="yellow"))
        return None
    other = "replan" if stale else "skip"
    choice = choose("Go on?", ["approve", other, "cancel", "quit"], synonyms=YES)
    if choice in ("quit", None):  # Ctrl-D too: left for later, resumable
        return None
    if choice == "approve":
        return approve
    feedback = ask_text("Why (optional)?", default="")
    if feedback is None:
        return None
    if choice == "cancel":
        return {"action": "cancel", "feedback": feedback}
    return {**approve, "action": other, "feedback": feedback}


def show_picture(plan: Any, *, mermaid: bool, png: Path | None) -> None:
    """Print the Mermaid text and/or draw the PNG of ``plan``."""
    from planmode.errors import PlanModeError
    from planmode.state.mermaid import plan_to_mermaid

    if not isinstance(plan, Plan):
        raise PlanModeError("this run has no plan to draw")
    if mermaid:
        console.print(Text(plan_to_mermaid(plan)), soft_wrap=True)
    if png is not None:
        from planmode.plan_png import plan_to_png

        out = plan_to_png(plan, png)
        console.print(Text(f"drew the plan into {out}"), soft_wrap=True)


def print_approvals(records: Any) -> None:
    """The approvals log, one line each."""
    from planmode.state.approvals import decisions

    records = decisions(records)
    if not records:
        return
    console.print(Text("Approvals", style="bold"))
    for r in records:
        if not isinstance(r, dict):
            continue
        what = r.get("kind", "?") + (f" {r['step']}" if r.get("step") else "")
        line = f"- {what} v{r.get('plan_version')}: {r.get('decision')} by {r.get('by')} (policy {r.get('policy')})"
        if r.get("reason") or r.get("feedback"):
            line += f": {r.get('reason') or r.get('feedback')}"
        console.print(Text(line), soft_wrap=True)
