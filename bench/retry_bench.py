"""No blind retry (issue 46 §4): the attempts planmode makes when a step's declared check fails the same way again.

A one-step plan whose step declares a check that no attempt passes (a heading the file the executor writes
lacks), run with the scripted model on a real SQLite file and the workspace tools, for several ``max_attempts``.
The reflection answers ``on_track`` (retry) every time: the model that asks for a retry whatever happened, the
case where only planmode itself can stop a useless retry. Every attempt fails the same way: the same check, the
same output.

A blind retry is an attempt started when the step's last two attempts failed the same way and no reflection came
after the later of them: the failure is known to repeat and nothing new was decided. Counted from the order of
the model's calls (an attempt starts with an execute call that carries no earlier turn of the attempt). The target
is none, at every ``max_attempts``; the attempts, reflections and the run's end are reported beside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage

from planmode.graph import build_graph
from planmode.persistence import sqlite_checkpointer
from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest, tool_call
from planmode.tools import workspace_tools

__all__ = ["blind_retries", "no_blind_retry"]

PLAN = {
    "title": "report",
    "steps": [
        {
            "id": "write_report",
            "description": "Write report.md",
            "tools": ["write_file"],
            "checks": [{"kind": "file", "path": "report.md", "contains": ["## Summary"]}],
        }
    ],
}


def _write_draft(req: ScriptRequest) -> Any:
    """Each attempt writes the same draft (without the heading the check wants), then says it is done."""
    if req.tool_results():
        return "Wrote the report."
    return {"tool_calls": [tool_call("write_file", path="report.md", content="draft\n")]}


RETRY = {"assessment": "on_track", "reasoning": "a transient problem: try the step again"}


def blind_retries(purposes: list[str]) -> int:
    """The blind retries in a run's sequence of attempts and reflections (``execute``: one attempt that fails the
    same way as every other; ``reflect``: one reflection; anything else is ignored)."""
    blind, failures, reflected = 0, 0, False
    for purpose in purposes:
        if purpose == "reflect":
            reflected = True
        elif purpose == "execute":
            if failures >= 2 and not reflected:
                blind += 1
            failures += 1
            reflected = False
    return blind


def _run(work: Path, max_attempts: int) -> dict[str, Any]:
    ws = work / f"ws-{max_attempts}"
    ws.mkdir(parents=True, exist_ok=True)
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, execute=_write_draft, reflect=RETRY))
    saver = sqlite_checkpointer(work / f"retry-{max_attempts}.sqlite")
    try:
        graph = build_graph(model, tools=workspace_tools(ws), checkpointer=saver)
        context = {"mode": "plan", "approval": "auto", "max_explore_calls": 0, "max_attempts": max_attempts}
        out = graph.invoke({"task": "write report.md"}, {"configurable": {"thread_id": "t"}}, context=context)
    finally:
        saver.conn.close()
    purposes = [
        r.purpose
        for r in model.requests
        if r.purpose == "reflect"
        or (r.purpose == "execute" and not any(isinstance(m, AIMessage) for m in r.messages))  # an attempt's start
    ]
    first_reflection = purposes.index("reflect") if "reflect" in purposes else len(purposes)
    step = out["plan"].get("write_report") if out.get("plan") else None
    return {
        "max_attempts": max_attempts,
        "status": str(out.get("status")),
        "attempts": purposes.count("execute"),
        "attempts_before_first_reflection": first_reflection,
        "reflections": purposes.count("reflect"),
        "blind_retries": blind_retries(purposes),
        "calls": "".join("E" if p == "execute" else "R" for p in purposes),
        "step_error": (step.error or "")[:200] if step is not None else "",
        "run_error": str(out.get("error") or "")[:300],
    }


def no_blind_retry(work: Path, quick: bool) -> dict[str, Any]:
    """The figure (see the module docstring)."""
    rows = [_run(work, n) for n in ((2, 3) if quick else (1, 2, 3, 5))]
    worst = max(r["blind_retries"] for r in rows)
    return {
        "title": "No blind retry: attempts when a declared check fails the same way (reflection always says retry)",
        "rows": rows,
        "target": "0 blind retries (an attempt after two identical failures with no reflection since) at every "
        "max_attempts",
        "measured": {
            "worst_blind_retries": worst,
            "by_max_attempts": {str(r["max_attempts"]): r["blind_retries"] for r in rows},
        },
        "met": worst == 0,
    }
