"""Terminal rendering with rich: the plan as a table, progress events as lines, the approval prompt."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.prompt import Prompt
from rich.table import Table

from planmode.state.models import Plan

__all__ = ["ask_approval", "console", "interactive", "plan_table", "render_event", "snapshot_table"]

console = Console(highlight=False)

_STYLE = {"pending": "white", "running": "yellow", "done": "green", "failed": "red", "blocked": "magenta",
          "skipped": "dim"}
_ICON = {"plan_created": "📝", "plan_approved": "✅", "plan_rejected": "↩", "step_started": "▶",
         "step_completed": "✔", "step_failed": "✖", "reflection": "🤔", "plan_patched": "🩹",
         "patch_rejected": "⛔", "run_finished": "🏁", "direct_answer": "💬"}


def plan_table(plan: Plan) -> Table:
    """The plan as a rich table: id, status, description, dependencies, acceptance."""
    table = Table(title=f"{plan.title or 'Plan'}  (v{plan.version}, revision {plan.revision})", show_lines=False,
                  title_justify="left")
    table.add_column("#", justify="right", style="dim")
    table.add_column("id", style="bold")
    table.add_column("status")
    table.add_column("description")
    table.add_column("after", style="cyan")
    table.add_column("acceptance", style="dim")
    for n, s in enumerate(plan.steps, 1):
        st = s.status.value
        table.add_row(str(n), s.id, f"[{_STYLE[st]}]{st}[/]", s.description, ", ".join(s.dependencies),
                      s.acceptance)
    return table


def snapshot_table(snapshots: list[Any]) -> Table:
    """A thread's snapshots (newest first) as a table."""
    table = Table(title="Snapshots (newest first)", title_justify="left")
    table.add_column("back", justify="right", style="dim")
    table.add_column("checkpoint id", style="cyan")
    table.add_column("time", style="dim")
    table.add_column("plan", justify="right")
    table.add_column("steps")
    table.add_column("what happened")
    for n, snap in enumerate(snapshots):
        counts = snap.counts or {}
        steps = " ".join(f"{k}:{v}" for k, v in counts.items() if v)
        created = str(snap.created_at or "")[11:19]
        table.add_row(str(n), snap.checkpoint_id, created, f"v{snap.plan_version}" if snap.plan_version else "-",
                      steps, snap.label)
    return table


def render_event(event: dict[str, Any]) -> str:
    """One progress event as a line of text (rich markup)."""
    kind = str(event.get("type", ""))
    icon = _ICON.get(kind, "•")
    step = f"[bold]{event['step_id']}[/] " if event.get("step_id") else ""
    data = event.get("data") or {}
    msg = str(event.get("message") or "")
    if kind == "reflection":
        msg = f"{data.get('assessment')}: {msg}"
    if kind == "plan_patched":
        parts = [f"{k}: {', '.join(v)}" for k in ("added", "updated", "removed") if (v := data.get(k))]
        msg = f"v{event.get('plan_version')} — {msg} ({'; '.join(parts)})"
    if kind == "step_started" and data.get("attempt", 1) > 1:
        msg = f"(attempt {data['attempt']}) {msg}"
    if kind == "run_finished":
        msg = f"{data.get('status')}"
    if len(msg) > 160:
        msg = msg[:157] + "…"
    color = "red" if kind in ("step_failed", "patch_rejected") else "green" if kind == "step_completed" else ""
    text = f"{icon} {kind.replace('_', ' ')}: {step}{msg}"
    return f"[{color}]{text}[/]" if color else text


def _edit_in_editor(plan: Plan) -> dict[str, Any] | None:
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    body = plan.model_dump(mode="json", include={"title", "steps"})
    for step in body["steps"]:
        for key in ("attempts", "result", "error", "output_ref"):
            step.pop(key, None)
    with tempfile.NamedTemporaryFile("w+", suffix=".json", delete=False, encoding="utf-8") as fh:
        json.dump(body, fh, indent=2)
        path = fh.name
    try:
        subprocess.run([*shlex.split(editor), path], check=False)
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    finally:
        os.unlink(path)
    try:
        edited = json.loads(text)
    except json.JSONDecodeError as exc:
        console.print(f"[red]The edited plan is not valid JSON: {exc.msg} (line {exc.lineno}).[/]")
        return None
    return edited if isinstance(edited, dict) else None


def ask_approval(payload: dict[str, Any]) -> dict[str, Any] | None:
    """Show the plan and ask approve / edit / reject / cancel / quit. None means quit (the run stays resumable);
    cancel ends the run without executing anything."""
    plan = Plan.model_validate(payload["plan"])
    console.print(plan_table(plan))
    if payload.get("error"):
        console.print(Panel(str(payload["error"]), title="previous answer refused", style="red"))
    while True:
        choice = Prompt.ask("[bold]Approve this plan?[/] [a]pprove / [e]dit / [r]eject / [c]ancel / [q]uit",
                            choices=["a", "e", "r", "c", "q"], default="a", console=console)
        if choice == "a":
            return {"action": "approve", "revision": payload["revision"]}
        if choice == "q":
            return None
        if choice == "c":
            return {"action": "cancel", "feedback": Prompt.ask("Why (optional)?", default="", console=console)}
        if choice == "r":
            feedback = Prompt.ask("What should change?", console=console).strip()
            if feedback:
                return {"action": "reject", "feedback": feedback}
            console.print("[yellow]Feedback is needed to reject a plan.[/]")
            continue
        edited = _edit_in_editor(plan)
        if edited is not None:
            return {"action": "edit", "plan": edited, "revision": payload["revision"]}


def interactive() -> bool:
    """True when both stdin and stdout are terminals."""
    return sys.stdin.isatty() and sys.stdout.isatty()
