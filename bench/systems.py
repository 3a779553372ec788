"""Run one system on one scenario and measure it: planmode, the tutorial, full replanning, the bare loop."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.baselines.full_replan import build_full_replan_graph
from bench.baselines.tutorial import build_tutorial_graph
from bench.model import BenchModel, Usage
from bench.oracle import Oracle
from bench.scenarios import Scenario
from planmode.context import PlanModeContext
from planmode.graph import build_graph
from planmode.persistence import sqlite_checkpointer

__all__ = ["RunResult", "db_bytes", "run_full_replan", "run_planmode", "run_tutorial", "settings_for"]


@dataclass
class RunResult:
    """What one run measured."""

    system: str
    scenario: str
    status: str
    wall: float
    usage: Usage
    executions: dict[str, int]
    extra: dict[str, Any] = field(default_factory=dict)
    #: CPU seconds of this process (every thread: `time.process_time`) while the graph ran
    cpu: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "scenario": self.scenario,
            "status": self.status,
            "wall_seconds": round(self.wall, 4),
            **self.usage.to_json(),
            "executions": sum(self.executions.values()),
            **self.extra,
        }


def settings_for(scenario: Scenario, *, max_parallel: int = 4, **kwargs: Any) -> PlanModeContext:
    """Headless planmode settings for a scenario: auto-approval, plan mode, a step cap that fits."""
    return PlanModeContext(
        approval="auto",
        mode="plan",
        max_parallel=max_parallel,
        max_steps=scenario.n + len(scenario.failing) + 5,
        **kwargs,
    )


def _config(scenario: Scenario, thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}, "recursion_limit": 12 * (scenario.n + 10)}


def db_bytes(path: Path) -> int:
    """Bytes of a SQLite database after folding its write-ahead log in."""
    conn = sqlite3.connect(str(path))
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    return int(pages * size)


def run_planmode(
    scenario: Scenario,
    db: Path,
    *,
    latency: float = 0.0,
    max_parallel: int = 4,
    count_tokens: bool = True,
    store: Any = None,
    settings: dict[str, Any] | None = None,
    executor: Any = None,
    verifier: Any = None,
    system: str | None = None,
    thread: str = "bench",
) -> RunResult:
    """One headless planmode run on a SQLite file."""
    oracle = Oracle(scenario)
    model = BenchModel(responder=oracle, latency=latency, count_tokens=count_tokens)
    saver = sqlite_checkpointer(db)
    try:
        graph = build_graph(model, checkpointer=saver, store=store, executor=executor, verifier=verifier)
        ctx = settings_for(scenario, max_parallel=max_parallel, **(settings or {}))
        start, cpu0 = time.perf_counter(), time.process_time()
        graph.invoke({"messages": [("user", scenario.task)]}, _config(scenario, thread), context=ctx)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
        values = graph.get_state(_config(scenario, thread)).values
    finally:
        saver.conn.close()
    plan = values.get("plan")
    extra = {"plan_steps": len(plan.steps) if plan else 0, "patches": max(0, len(plan.history) - 1) if plan else 0}
    return RunResult(
        system or f"planmode(max_parallel={max_parallel})",
        scenario.name,
        str(values.get("status")),
        wall,
        model.usage(),
        dict(oracle.executions),
        extra,
        cpu,
    )


def run_tutorial(
    scenario: Scenario, db: Path, *, latency: float = 0.0, count_tokens: bool = True, thread: str = "bench"
) -> RunResult:
    """One run of baseline 1 (the plan-and-execute tutorial) on a SQLite file."""
    oracle = Oracle(scenario)
    model = BenchModel(responder=oracle, latency=latency, count_tokens=count_tokens)
    saver = sqlite_checkpointer(db)
    try:
        graph = build_tutorial_graph(model, checkpointer=saver)
        start = time.perf_counter()
        out = graph.invoke({"input": scenario.task}, _config(scenario, thread))
        wall = time.perf_counter() - start
    finally:
        saver.conn.close()
    status = "completed" if out.get("response") else "failed"
    return RunResult(
        "tutorial (replan every step)", scenario.name, status, wall, model.usage(), dict(oracle.executions)
    )


def run_full_replan(
    scenario: Scenario,
    db: Path,
    *,
    latency: float = 0.0,
    max_parallel: int = 4,
    count_tokens: bool = True,
    thread: str = "bench",
) -> RunResult:
    """One run of baseline 2 (replanning the remaining steps on failure) on a SQLite file."""
    oracle = Oracle(scenario)
    model = BenchModel(responder=oracle, latency=latency, count_tokens=count_tokens)
    saver = sqlite_checkpointer(db)
    try:
        graph = build_full_replan_graph(model, max_parallel=max_parallel, max_steps=scenario.n + 20, checkpointer=saver)
        start = time.perf_counter()
        out = graph.invoke({"goal": scenario.task}, _config(scenario, thread))
        wall = time.perf_counter() - start
    finally:
        saver.conn.close()
    status = "completed" if out.get("answer") else "failed"
    return RunResult("remaining-steps replanning", scenario.name, status, wall, model.usage(), dict(oracle.executions))
