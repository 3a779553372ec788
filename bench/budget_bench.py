"""The budget figure: how close the approval's token estimate comes to what a run spends, and whether every
budget pause comes before the overspend.

For each scenario (plan sizes, widths, injected failures), planmode runs on the bench oracle with its exact
(cl100k) token counts reported as each call's usage, so the run's own accounting (``state["usage"]``) is the
bench's count:

1. with ``approval="ask"``: the approval payload's estimate (``budget.estimate.total``: spent so far plus the
   plan's estimate) is read, the plan approved, and the run's actual total recorded; the estimate is also
   computed at the checkpoint where half the steps are done (scaled by what those steps used);
2. with ``max_tokens`` set below the actual total (60% of it): the run must pause at ``planmode.budget`` with
   ``spent <= max_tokens``; every further pause is answered with a raise to exactly ``spent + next`` (the
   tightest answer), and each must again come with ``spent <= max_tokens``; the run must then complete.

The estimate cannot foresee failures: a scenario with injected failures spends more (reflections, patches,
retries) than its plan says, which the error shows.
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from typing import Any

from langgraph.types import Command

from bench.model import BenchModel
from bench.oracle import Oracle
from bench.scenarios import Scenario, make_scenario
from bench.systems import settings_for
from planmode.budget import INTERRUPT_TYPE, plan_estimate
from planmode.graph import build_graph
from planmode.observability.usage import total_tokens
from planmode.persistence import sqlite_checkpointer
from planmode.state.models import Plan

__all__ = ["budget_estimates", "run_estimate", "run_with_budget", "scenarios"]

#: The budget of the pause check, as a share of the run's actual total.
BUDGET_SHARE = 0.6


def scenarios(quick: bool) -> list[Scenario]:
    """The scenario set: sizes, widths and failures."""
    specs = (
        [(5, 2, 0), (8, 3, 1)]
        if quick
        else [(5, 2, 0), (8, 3, 0), (10, 4, 0), (15, 4, 0), (20, 4, 0), (10, 2, 1), (20, 4, 2), (30, 4, 0)]
    )
    return [
        make_scenario(n, width=w, varying=True, failures=f, name=f"budget-{n}-w{w}-f{f}", seed=7 + i)
        for i, (n, w, f) in enumerate(specs)
    ]


def _config(sc: Scenario, thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}, "recursion_limit": 12 * (sc.n + 10)}


def _pause(graph: Any, cfg: dict[str, Any]) -> dict[str, Any] | None:
    for item in graph.get_state(cfg).interrupts:
        if isinstance(item.value, dict) and item.value.get("type") == INTERRUPT_TYPE:
            return dict(item.value)
    return None


def run_estimate(sc: Scenario, db: Path) -> dict[str, Any]:
    """The approval's estimate and the actual total of one run."""
    model = BenchModel(responder=Oracle(sc))
    saver = sqlite_checkpointer(db)
    try:
        graph = build_graph(model, checkpointer=saver)
        cfg = _config(sc, "estimate")
        ctx = dataclasses.replace(settings_for(sc, max_parallel=4), approval="ask")
        graph.invoke({"messages": [("user", sc.task)]}, cfg, context=ctx)
        payload = graph.get_state(cfg).interrupts[0].value
        estimate = payload["budget"]["estimate"]
        graph.invoke(Command(resume={"action": "approve", "revision": payload["revision"]}), cfg)
        for _ in range(sc.n + 5):  # a repair that adds a step is decided again (approved here, as the plan was)
            asked = [i.value for i in graph.get_state(cfg).interrupts if "revision" in (i.value or {})]
            if not asked:
                break
            graph.invoke(Command(resume={"action": "approve", "revision": asked[0]["revision"]}), cfg)
        values = graph.get_state(cfg).values
        midway = _midway_estimate(graph, cfg, ctx)
    finally:
        saver.conn.close()
    actual = total_tokens(values["usage"])
    return {
        "scenario": sc.name,
        "steps": sc.n,
        "failures": len(sc.failing),
        "status": values["status"],
        "estimated": estimate["total"],
        "actual": actual,
        "bench_count": model.usage().total_tokens,
        "error": estimate["total"] - actual,
        "relative_error": round((estimate["total"] - actual) / actual, 4) if actual else None,
        "midway_estimated": midway,
        "midway_relative_error": round((midway - actual) / actual, 4) if actual and midway else None,
    }


def _midway_estimate(graph: Any, cfg: dict[str, Any], ctx: Any) -> int | None:
    """The plan's estimate (`plan_estimate`: spent plus the rest) at the first checkpoint with half the steps
    done: what the estimate says once it has learnt from the steps run so far."""
    for snap in reversed(list(graph.get_state_history(cfg))):  # oldest first
        plan = snap.values.get("plan")
        if isinstance(plan, Plan) and plan.steps:
            done = sum(1 for s in plan.steps if s.status.value == "done")
            if done * 2 >= len(plan.steps):
                return int(plan_estimate(plan, snap.values.get("usage"), ctx)["total"])
    return None


def run_with_budget(sc: Scenario, db: Path, budget: int) -> dict[str, Any]:
    """A run with ``max_tokens=budget``: every pause's spent against its budget, then the run's end."""
    model = BenchModel(responder=Oracle(sc))
    saver = sqlite_checkpointer(db)
    pauses: list[dict[str, Any]] = []
    try:
        graph = build_graph(model, checkpointer=saver)
        cfg = _config(sc, "budget")
        graph.invoke({"messages": [("user", sc.task)]}, cfg, context=settings_for(sc, max_tokens=budget))
        while (pause := _pause(graph, cfg)) is not None and len(pauses) < 4 * sc.n + 20:
            spent, limit = pause["spent"]["tokens"], pause["budget"]["max_tokens"]
            # what the run's own accounting says at the pause (the payload could lie; the state cannot)
            in_state = total_tokens(graph.get_state(cfg).values.get("usage"))
            pauses.append({"node": pause["node"], "spent": spent, "in_state": in_state, "max_tokens": limit})
            graph.invoke(Command(resume={"max_tokens": spent + pause["next"]["tokens"]}), cfg)
        values = graph.get_state(cfg).values
    finally:
        saver.conn.close()
    return {
        "scenario": sc.name,
        "budget": budget,
        "pauses": len(pauses),
        "first_pause": pauses[0] if pauses else None,
        "before_overspend": bool(pauses) and all(p["in_state"] <= p["max_tokens"] for p in pauses),
        "max_spent_over_budget": max((p["in_state"] - p["max_tokens"] for p in pauses), default=None),
        "status": values["status"],
        "final_spent": total_tokens(values.get("usage")),
    }


def budget_estimates(work: Path, quick: bool) -> dict[str, Any]:
    """The figure: estimate error over the scenarios, and the pause before the overspend in each."""
    rows = []
    for sc in scenarios(quick):
        est = run_estimate(sc, work / f"{sc.name}-estimate.sqlite")
        paused = run_with_budget(sc, work / f"{sc.name}-budget.sqlite", int(est["actual"] * BUDGET_SHARE))
        rows.append({**est, "budget_run": paused})
    errors = [abs(r["error"]) for r in rows]
    relative = [abs(r["relative_error"]) for r in rows if r["relative_error"] is not None]
    clean = [abs(r["relative_error"]) for r in rows if r["failures"] == 0 and r["relative_error"] is not None]
    all_before = all(r["budget_run"]["before_overspend"] for r in rows)
    all_done = all(r["budget_run"]["status"] == "completed" and r["status"] == "completed" for r in rows)
    midway = [abs(r["midway_relative_error"]) for r in rows if r["midway_relative_error"] is not None]
    measured = {
        "mean_absolute_error_tokens": round(statistics.mean(errors), 1),
        "mean_relative_error_midway": round(statistics.mean(midway), 4) if midway else None,
        "mean_relative_error": round(statistics.mean(relative), 4),
        "mean_relative_error_without_failures": round(statistics.mean(clean), 4) if clean else None,
        "pause_before_overspend": f"{sum(r['budget_run']['before_overspend'] for r in rows)}/{len(rows)}",
    }
    return {
        "title": "Budget: the approval's token estimate against the actual total; the pause before the overspend",
        "rows": rows,
        "budget_share": BUDGET_SHARE,
        "target": "in every scenario the budget pause comes before the overspend (spent <= max_tokens at each "
        "pause) and the run completes after raises; the estimate error is reported",
        "measured": measured,
        "met": all_before and all_done,
    }
