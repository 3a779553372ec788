"""The CLI's answers to the ``planmode.stale`` and ``planmode.step_approval`` questions, and ``show``'s
diagram options (``--mermaid``, ``--png``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from planmode.approval.staleness import STALE_TYPE
from planmode.cli.ask import YES, ask_text, choose, interactive
from planmode.cli.ui import console, plan_table
from planmode.nodes._gates import STEP_APPROVAL_TYPE
from planmode.state.models import Plan
from planmode.text import clip

__all__ = ["GATE_TYPES", "answer_gate", "gate_screen", "print_approvals", "show_picture"]

GATE_TYPES = (STALE_TYPE, STEP_APPROVAL_TYPE)


def _plan_of(payload: dict[str, Any]) -> Plan | None:
    try:
        return Plan.model_validate(payload["plan"]) if isinstance(payload.get("plan"), dict) else None
    except ValueError:  # a payload from another version: the screen goes on without the plan
        return None


def _names(items: Any) -> list[str]:
    return [str(x) for x in items] if isinstance(items, list) else []


def gate_screen(payload: dict[str, Any]) -> Group:
    """What a human reads before answering a staleness or per-step question, rendered as the plan approval is
    (rich: the plan as a table or stacked, no Markdown or Mermaid source). Every text is data (`Text`)."""
    plan = _plan_of(payload)
    parts: list[RenderableType] = []
    if payload.get("type") == STALE_TYPE:
        if plan is not None:
            parts.append(plan_table(plan))
        parts.append(Text("The workspace changed since the plan was approved:", style="bold yellow"))
        changed = _names(payload.get("changed"))
        for path in changed[:30]:
            parts.append(Text("  ~ " + path))
        if len(changed) > 30:
            parts.append(Text(f"  ... and {len(changed) - 30} more", style="dim"))
        parts.append(
            Text(
                "approve: go on with the plan as it is · replan: revise the plan with this change · cancel: stop",
                style="dim",
            )
        )
    else:
        given = payload.get("step")
        step: dict[str, Any] = given if isinstance(given, dict) else {}
        sid = str(step.get("id") or "?")
        writes = set(_names(payload.get("write_tools")))
        if plan is not None:
            parts.append(plan_table(plan, marks={sid: ">"}))
        parts.append(Text.assemble(("Run step ", "bold"), (sid, "bold cyan"), ("?", "bold")))
        parts.append(Text("  " + str(step.get("description") or "")))
        tools = _names(payload.get("tools"))
        line = Text("  tools: ", style="dim")
        line.append_text(Text(", ".join(tools) or "none"))
        line.append("  changes things: ", style="dim")
        line.append(", ".join(t for t in tools if t in writes) or "none", style="bold yellow" if writes else "")
        parts.append(line)
        given_deps = payload.get("dependencies")
        deps: dict[str, Any] = given_deps if isinstance(given_deps, dict) else {}
        if deps:
            parts.append(Text("  Results of its dependencies:", style="dim"))
            for d, v in deps.items():
                v = v if isinstance(v, dict) else {}
                result = clip(str(v.get("result") or "(no result)"), 300, fold=True)
                parts.append(Text.assemble("  - ", (str(d), "bold"), f" ({v.get('status')}): ", result))
        after = _names(payload.get("dependents"))
        if after:
            parts.append(
                Text.assemble(
                    ("  Skipping it skips the steps that depend on it too: ", "yellow"), (", ".join(after), "bold")
                )
            )
    if payload.get("error"):
        parts.append(Text(f"Your previous answer was refused: {payload['error']}", style="red"))
    return Group(*parts)


def _screen(payload: dict[str, Any]) -> None:
    console.print(gate_screen(payload))


def answer_gate(payload: dict[str, Any], auto: bool, *, ask: bool = True) -> dict[str, Any] | None:
    """The answer to a staleness or per-step question: asked at a terminal (unless ``ask`` is False); None (left
    for later) otherwise.
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
    if not ask or not interactive():
        hint = "or pass --auto-approve" if stale else "(--step-approval writes asks a human for each write step)"
        console.print(Text(f"This needs an answer at a terminal {hint}.", style="yellow"))
        return None
    other = "replan" if stale else "skip"
    while True:
        choice = choose("Go on?", ["approve", other, "cancel", "quit"], synonyms=YES)
        if choice in ("quit", None):  # Ctrl-D too: left for later, resumable
            return None
        if choice == "approve":
            return approve
        after = _names(payload.get("dependents"))
        if choice != "skip" or not after:
            break
        console.print(  # a skip takes its dependents with it (they could never start): said before it is done
            Text.assemble(
                ("Skipping ", "yellow"),
                (str(step_id), "bold"),
                (" also skips the steps that depend on it: ", "yellow"),
                (", ".join(after), "bold"),
            )
        )
        sure = choose(f"Skip {step_id} and {len(after)} dependent step(s)?", ["no", "yes"], default="no")
        if sure is None:
            return None
        if sure == "yes":
            break
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
