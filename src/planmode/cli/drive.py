"""Driving a run from the terminal: stream progress events, answer approval interrupts, show the result."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command
from rich.text import Text

from planmode.cli.ui import console, plan_table, render_event
from planmode.errors import ThreadNotFoundError

__all__ = ["drive", "require_thread", "show_result"]

Approver = Callable[[dict[str, Any]], dict[str, Any] | None]


def require_thread(graph: Any, cfg: RunnableConfig) -> Any:
    """The thread's current state; `ThreadNotFoundError` when it has no checkpoint."""
    state = graph.get_state(cfg)
    if state.created_at is None:
        raise ThreadNotFoundError(f"no run with thread id {cfg['configurable']['thread_id']!r} in this database")
    return state


def drive(graph: Any, inp: Any, cfg: RunnableConfig, *, context: Any, approver: Approver) -> str:
    """Run until the graph finishes or a human quits at the approval prompt; return the run status."""
    if inp is None and _model_unavailable(graph.get_state(cfg)) is not None:
        inp = Command(resume={"action": "retry"})  # resuming a run paused for its model: try the model again
    while True:
        for mode, chunk in graph.stream(inp, cfg, context=context, stream_mode=["custom", "updates"]):
            if mode == "custom" and isinstance(chunk, dict) and chunk.get("source") == "planmode":
                console.print(render_event(chunk))
        state = graph.get_state(cfg)
        paused = _model_unavailable(state)
        if paused is not None:  # not an approval: stop, resumable
            tid = cfg["configurable"]["thread_id"]
            console.print(Text(f"Model unavailable: {paused.get('error')}", style="red"))
            console.print(Text(f"The run is paused. Resume with: planmode resume {tid}"))
            return "model_unavailable"
        if state.interrupts:
            payload = state.interrupts[0].value
            answer = approver(payload)
            if answer is None:
                tid = cfg["configurable"]["thread_id"]
                console.print(f"[yellow]Left for later. Resume with:[/] planmode resume {tid}")
                return "awaiting_approval"
            inp = Command(resume=answer)
            continue
        return str(state.values.get("status") or "unknown")


def _model_unavailable(state: Any) -> dict[str, Any] | None:
    """The payload of a pending model_unavailable interrupt (planmode.nodes.model_unavailable), if any."""
    for item in state.interrupts:
        if isinstance(item.value, dict) and item.value.get("type") == "planmode.model_unavailable":
            return item.value
    return None


def show_result(graph: Any, cfg: RunnableConfig) -> None:
    """Print the final plan, answer and report of a thread."""
    values = graph.get_state(cfg).values
    plan = values.get("plan")
    if plan is not None and plan.version > 0:
        console.print(plan_table(plan))
    messages = values.get("messages") or []
    if messages and values.get("status") in ("completed", "answered", "failed"):
        console.print(f"\n[bold]Answer[/]\n{messages[-1].content}")
    report = values.get("report")
    if report:
        console.print(
            f"\n[bold]Report[/]: status={report.get('status')} done={len(report.get('done', []))} "
            f"failed={len(report.get('failed', []))} skipped={len(report.get('skipped', []))} "
            f"patches={len(report.get('patches', []))} reflections={report.get('reflections')}"
        )
