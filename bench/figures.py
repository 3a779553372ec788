"""The figures: each function measures one thing side by side and returns a JSON-able dict.

Every figure has ``rows`` (the measurements) and, when the issue sets one, ``target`` (what we hold
ourselves to), ``measured`` and ``met``. Sizes shrink with ``quick=True`` (the smoke test).
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage

from bench.baselines.bare_loop import build_bare_loop
from bench.model import BenchModel
from bench.oracle import Oracle
from bench.scenarios import Scenario, make_scenario
from bench.systems import db_bytes, run_full_replan, run_planmode, run_tutorial
from planmode import prompts
from planmode.context import PlanModeContext
from planmode.executors import Verdict
from planmode.llm import call_structured
from planmode.persistence import sqlite_checkpointer

__all__ = ["FIGURES"]

Fig = dict[str, Any]


def _ratio(a: float, b: float) -> float:
    return round(a / b, 4) if b else float("inf")


def replan_tokens(work: Path, quick: bool) -> Fig:
    """Output tokens of the repair: planmode's patch vs a full-plan rewrite, one failure mid-plan."""
    rows = []
    for n in (6, 10) if quick else (10, 20, 50, 100):
        sc = make_scenario(n, width=4, varying=True, failures=(n // 2,), name=f"replan-{n}")
        pm = run_planmode(sc, work / f"replan-pm-{n}.sqlite")
        fr = run_full_replan(sc, work / f"replan-fr-{n}.sqlite")
        patch, reflect = pm.usage.output_of("patch"), pm.usage.output_of("reflect")
        rewrite = fr.usage.output_of("replan")
        rows.append(
            {
                "steps": n,
                "patch_output_tokens": patch,
                "reflect_output_tokens": reflect,
                "rewrite_output_tokens": rewrite,
                "patch_vs_rewrite": _ratio(patch, rewrite),
                "reflect_plus_patch_vs_rewrite": _ratio(patch + reflect, rewrite),
                "status": [pm.status, fr.status],
            }
        )
    at = next((r for r in rows if r["steps"] == 50), rows[-1])
    return {
        "title": "Replan output tokens: patch vs full-plan rewrite",
        "rows": rows,
        "target": "patch <= 10% of the rewrite at 50 steps",
        "measured": at["patch_vs_rewrite"],
        "met": at["patch_vs_rewrite"] <= 0.10,
    }


def tokens_per_task(work: Path, quick: bool) -> Fig:
    """Total tokens and LLM calls per task: planmode vs the baselines (20 steps, 2 injected failures)."""
    rows = []
    sizes = (8,) if quick else (10, 20, 50)
    for n in sizes:
        sc = make_scenario(n, width=4, varying=True, failures=2, name=f"tokens-{n}")
        runs = [
            run_planmode(sc, work / f"tok-pm-{n}.sqlite"),
            run_planmode(sc, work / f"tok-pm1-{n}.sqlite", max_parallel=1),
            run_tutorial(sc, work / f"tok-tut-{n}.sqlite"),
            run_full_replan(sc, work / f"tok-fr-{n}.sqlite"),
        ]
        for r in runs:
            rows.append(
                {
                    "steps": n,
                    "system": r.system,
                    "status": r.status,
                    "calls": r.usage.calls,
                    "input_tokens": r.usage.input_tokens,
                    "output_tokens": r.usage.output_tokens,
                    "total_tokens": r.usage.total_tokens,
                    "by_purpose": r.usage.by_purpose,
                }
            )
    ref = 8 if quick else 20
    pm = next(r for r in rows if r["steps"] == ref and r["system"].startswith("planmode(max_parallel=4"))
    tut = next(r for r in rows if r["steps"] == ref and r["system"].startswith("tutorial"))
    ratio = _ratio(pm["total_tokens"], tut["total_tokens"])
    return {
        "title": f"Tokens and calls per task ({ref} steps, 2 failures)",
        "rows": rows,
        "target": f"planmode <= 50% of the tutorial's total tokens at {ref} steps",
        "measured": ratio,
        "calls": {"planmode": pm["calls"], "tutorial": tut["calls"]},
        "met": ratio <= 0.5,
    }


def wall_clock(work: Path, quick: bool) -> Fig:
    """Wall-clock with simulated latency on width-4 DAGs vs the critical-path bound and vs sequential.

    The bound counts only the model calls on the critical path (plan, then execute and verify per layer,
    then the final answer) at the simulated latency: zero framework cost. Judged at 100 ms per call (a fast
    model, where framework overhead shows most) and shown at 300 ms.
    """
    cases = ((0.02, 8),) if quick else ((0.1, 20), (0.1, 40), (0.3, 20))
    rows = []
    for latency, n in cases:
        sc = make_scenario(n, width=4, name=f"wide-{n}")
        bound = latency * (2 + 2 * sc.depth)
        tag = f"{n}-{int(latency * 1000)}"
        runs = [
            run_planmode(sc, work / f"wall-pm-{tag}.sqlite", latency=latency, count_tokens=False),
            run_planmode(sc, work / f"wall-pm1-{tag}.sqlite", latency=latency, count_tokens=False, max_parallel=1),
            run_tutorial(sc, work / f"wall-tut-{tag}.sqlite", latency=latency, count_tokens=False),
            run_full_replan(sc, work / f"wall-fr-{tag}.sqlite", latency=latency, count_tokens=False),
        ]
        par = runs[0].wall
        for r in runs:
            rows.append(
                {
                    "latency_ms": round(latency * 1000),
                    "steps": n,
                    "depth": sc.depth,
                    "width": sc.max_width,
                    "system": r.system,
                    "status": r.status,
                    "wall_seconds": round(r.wall, 3),
                    "calls": r.usage.calls,
                    "critical_path_bound_seconds": round(bound, 3),
                    "vs_bound": _ratio(r.wall, bound),
                    "vs_planmode": _ratio(r.wall, par),
                }
            )
    judged = min(lat for lat, _ in cases)
    measured: dict[str, Any] = {}
    for latency_ms in sorted({r["latency_ms"] for r in rows}):
        main = [r for r in rows if r["latency_ms"] == latency_ms and r["system"].startswith("planmode(max_parallel=4")]
        seq = [r for r in rows if r["latency_ms"] == latency_ms and r["system"].startswith("planmode(max_parallel=1")]
        measured[f"{latency_ms} ms"] = {
            "vs_bound": max(r["vs_bound"] for r in main),
            "speedup_vs_sequential": round(
                min(s["wall_seconds"] / m["wall_seconds"] for s, m in zip(seq, main, strict=True)), 3
            ),
        }
    at = measured[f"{round(judged * 1000)} ms"]
    return {
        "title": "Wall-clock with simulated latency on width-4 DAGs",
        "judged_at_ms": round(judged * 1000),
        "rows": rows,
        "target": "within 1.2x of the critical-path bound; >= 3.2x faster than max_parallel=1",
        "measured": measured,
        "met": at["vs_bound"] <= 1.2 and at["speedup_vs_sequential"] >= 3.2,
    }


def _bare_work(model: BenchModel, sc: Scenario) -> Any:
    """One step's work in the bare loop: the same execute and verify calls planmode makes."""
    settings = PlanModeContext()

    def work(sid: str) -> str:
        step = sc.by_id[sid]
        out = model.invoke(
            [
                SystemMessage(content=prompts.EXECUTE_SYSTEM),
                HumanMessage(
                    content=prompts.EXECUTE_USER.format(
                        goal=sc.task,
                        step_id=sid,
                        description=step.description,
                        acceptance=step.acceptance,
                        context="(none)",
                        previous_error="",
                    ).rstrip()
                ),
            ]
        )
        text = str(out.content)
        call_structured(
            model,
            Verdict,
            [
                SystemMessage(content=prompts.VERIFY_SYSTEM),
                HumanMessage(
                    content=prompts.VERIFY_USER.format(
                        step_id=sid, description=step.description, acceptance=step.acceptance, output=text[:4000]
                    )
                ),
            ],
            settings,
        )
        return text

    return work


def run_bare_loop(sc: Scenario, db: Path) -> float:
    """Seconds for the bare loop over ``sc`` (zero-latency model, SQLite checkpointer)."""
    model = BenchModel(responder=Oracle(sc), count_tokens=False)
    saver = sqlite_checkpointer(db)
    try:
        graph = build_bare_loop([s.id for s in sc.steps], _bare_work(model, sc), checkpointer=saver)
        start = time.perf_counter()
        graph.invoke({}, {"configurable": {"thread_id": "bench"}, "recursion_limit": sc.n + 10})
        return time.perf_counter() - start
    finally:
        saver.conn.close()


def overhead(work: Path, quick: bool) -> Fig:
    """Framework overhead per step: zero-latency model, real SQLite file, vs a bare LangGraph loop."""
    warm = make_scenario(4, width=1, name="warm")
    run_planmode(warm, work / "warm.sqlite", count_tokens=False)  # imports and first-call caches
    run_bare_loop(warm, work / "warm-bare.sqlite")
    rows = []
    for n in (6, 12) if quick else (20, 100, 400):
        chain = make_scenario(n, width=1, name=f"chain-{n}")
        wide = make_scenario(n, width=4, name=f"wide-{n}")
        repeats = 1 if quick else (3 if n <= 100 else 2)  # best of: the machine may be busy with other work
        runners = {
            "planmode, chain (max_parallel=1)": lambda db, sc=chain: (
                run_planmode(sc, db, count_tokens=False, max_parallel=1).wall
            ),
            "planmode, width 4 (max_parallel=4)": lambda db, sc=wide: run_planmode(sc, db, count_tokens=False).wall,
            "bare LangGraph loop": lambda db, sc=chain: run_bare_loop(sc, db),
        }
        for i, (system, runner) in enumerate(runners.items()):
            walls = []
            for rep in range(repeats):
                db = work / f"ovh-{i}-{n}-{rep}.sqlite"
                walls.append(runner(db))
            wall = min(walls)
            rows.append(
                {
                    "steps": n,
                    "system": system,
                    "wall_seconds": round(wall, 3),
                    "runs": [round(w, 3) for w in walls],
                    "ms_per_step": round(1000 * wall / n, 3),
                    "db_bytes": db_bytes(db),
                }
            )
            for rep in range(repeats):
                (work / f"ovh-{i}-{n}-{rep}.sqlite").unlink(missing_ok=True)
    sizes = sorted({r["steps"] for r in rows})

    def per(system: str, n: int) -> float:
        return next(r["ms_per_step"] for r in rows if r["system"] == system and r["steps"] == n)

    lo, hi = sizes[0], sizes[-1]
    measured = {}
    for system in ("planmode, chain (max_parallel=1)", "planmode, width 4 (max_parallel=4)"):
        measured[system] = {
            "flatness": _ratio(per(system, hi), per(system, lo)),
            "vs_bare_at_largest": _ratio(per(system, hi), per("bare LangGraph loop", hi)),
        }
    met = all(m["flatness"] <= 1.5 and m["vs_bare_at_largest"] <= 2.0 for m in measured.values())
    return {
        "title": "Framework overhead per step (zero-latency model, SQLite file)",
        "rows": rows,
        "target": f"{hi}-step per-step cost <= 1.5x the {lo}-step one; <= 2x the bare loop",
        "measured": measured,
        "met": met,
    }


def storage(work: Path, quick: bool) -> Fig:
    """Checkpoint database bytes per run with 10 KB step outputs: outputs in a store vs inline in state.

    Three runs of the same scenario: planmode with an in-memory store (the checkpoint database holds
    summaries only), planmode with a SQLite store in the same file (the file then also holds each output
    once), and the inline design — planmode without a store and with summaries as long as the outputs.
    """
    from langgraph.store.memory import InMemoryStore
    from langgraph.store.sqlite import SqliteStore

    n, chars = (8, 2048) if quick else (50, 10240)
    sc = make_scenario(n, width=4, output_chars=chars, name=f"storage-{n}")
    db_mem, db_same, db_inline = (
        work / "storage-mem.sqlite",
        work / "storage-same.sqlite",
        work / "storage-inline.sqlite",
    )
    with_memory = run_planmode(sc, db_mem, store=InMemoryStore(), system="planmode + store (checkpoint database)")
    sqlite_checkpointer(db_same).conn.close()  # the checkpoint tables first, then the store's in the same file
    conn = sqlite3.connect(str(db_same), check_same_thread=False, timeout=30, isolation_level=None)
    store = SqliteStore(conn)
    store.setup()
    try:
        same_file = run_planmode(sc, db_same, store=store, system="planmode + SQLite store in the same file")
    finally:
        conn.close()
    inline = run_planmode(sc, db_inline, settings={"result_chars": chars + 100}, system="outputs inline in state")
    rows = []
    for r, db in ((with_memory, db_mem), (same_file, db_same), (inline, db_inline)):
        c = sqlite3.connect(str(db))
        try:
            ck = c.execute("SELECT count(*), coalesce(sum(length(checkpoint)), 0) FROM checkpoints").fetchone()
            wr = c.execute("SELECT coalesce(sum(length(value)), 0) FROM writes").fetchone()[0]
            tables = {t for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            st = 0
            if "store" in tables:
                st = c.execute("SELECT coalesce(sum(length(value)), 0) FROM store").fetchone()[0]
        finally:
            c.close()
        rows.append(
            {
                "system": r.system,
                "status": r.status,
                "steps": n,
                "output_bytes": chars,
                "db_bytes": db_bytes(db),
                "checkpoints": ck[0],
                "checkpoint_blob_bytes": ck[1],
                "writes_blob_bytes": wr,
                "store_value_bytes": st,
            }
        )
    for row in rows:
        row["vs_inline"] = _ratio(row["db_bytes"], rows[-1]["db_bytes"])
    ratio = rows[0]["vs_inline"]
    return {
        "title": f"Checkpoint database bytes per run ({n} steps, {chars // 1024} KB outputs)",
        "rows": rows,
        "target": "<= 15% of the inline design",
        "measured": ratio,
        "same_file_with_store": rows[1]["vs_inline"],
        "met": ratio <= 0.15,
    }


def rollback_latency(work: Path, quick: bool) -> Fig:
    """Latency of rolling a thread with 500+ checkpoints back to random snapshots."""
    from planmode.graph import build_graph

    try:
        from planmode.snapshots import rollback
    except ImportError:  # pragma: no cover - before planmode.snapshots existed
        rollback = None
    n = 8 if quick else 170
    sc = make_scenario(n, width=1, name=f"rollback-{n}")
    db = work / "rollback.sqlite"
    run_planmode(sc, db, count_tokens=False, max_parallel=1, thread="long")
    saver = sqlite_checkpointer(db)
    try:
        graph = build_graph(BenchModel(responder=Oracle(sc), count_tokens=False), checkpointer=saver)
        config = {"configurable": {"thread_id": "long"}}
        ids = [s.config["configurable"]["checkpoint_id"] for s in graph.get_state_history(config)]
        rng = random.Random(11)
        picks = [rng.choice(ids) for _ in range(10 if quick else 60)]
        times = []
        for cid in picks:
            start = time.perf_counter()
            if rollback is not None:
                rollback(graph, "long", cid)
            else:  # pragma: no cover
                graph.update_state(
                    {"configurable": {"thread_id": "long", "checkpoint_id": cid}}, None, as_node="__copy__"
                )
            times.append(time.perf_counter() - start)
        head = graph.get_state(config)
        readable = head.values.get("plan") is not None
    finally:
        saver.conn.close()
    times_ms = sorted(1000 * t for t in times)
    p95 = times_ms[min(len(times_ms) - 1, round(0.95 * (len(times_ms) - 1)))]
    return {
        "title": f"Rollback latency ({len(ids)} checkpoints in the thread)",
        "checkpoints": len(ids),
        "rows": [
            {
                "rollbacks": len(times_ms),
                "p50_ms": round(statistics.median(times_ms), 2),
                "p95_ms": round(p95, 2),
                "max_ms": round(times_ms[-1], 2),
                "head_readable": readable,
                "api": "planmode.snapshots.rollback" if rollback else "graph.update_state(as_node='__copy__')",
            }
        ],
        "target": "report p50/p95",
        "measured": {"p50_ms": round(statistics.median(times_ms), 2), "p95_ms": round(p95, 2)},
        "met": None,
    }


_MEMORY_CHILD = """
import json, sys, tracemalloc
from pathlib import Path
from bench.scenarios import make_scenario
from bench.systems import run_planmode


def hwm_kb():  # this process's peak RSS (VmHWM: unlike ru_maxrss, not inherited from the parent)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


n = int(sys.argv[1]); work = Path(sys.argv[2])
run_planmode(make_scenario(4, width=4, name="warm"), work / "mem-warm.sqlite", count_tokens=False)
base = hwm_kb()
r = run_planmode(make_scenario(n, width=4, name=f"mem-{n}"), work / "mem.sqlite", count_tokens=False)
peak = hwm_kb()
tracemalloc.start()
run_planmode(make_scenario(n, width=4, name=f"mem-{n}"), work / "mem2.sqlite", count_tokens=False)
traced = tracemalloc.get_traced_memory()[1]
print(json.dumps({"steps": n, "status": r.status, "wall_seconds": round(r.wall, 3), "rss_before_kb": base,
                  "peak_rss_kb": peak, "tracemalloc_peak_bytes": traced}))
"""


def peak_memory(work: Path, quick: bool) -> Fig:
    """Peak memory of one run (a fresh interpreter: max RSS, and Python's own peak by tracemalloc)."""
    n = 20 if quick else 400
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH", "")]),
    }
    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_CHILD, str(n), str(work)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=600,
    )
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["peak_rss_mb"] = round(row["peak_rss_kb"] / 1024, 1)
    row["rss_growth_mb"] = round((row["peak_rss_kb"] - row["rss_before_kb"]) / 1024, 1)
    row["tracemalloc_peak_mb"] = round(row["tracemalloc_peak_bytes"] / 2**20, 1)
    return {
        "title": f"Peak memory of a {n}-step run",
        "rows": [row],
        "target": "report",
        "measured": {"peak_rss_mb": row["peak_rss_mb"], "tracemalloc_peak_mb": row["tracemalloc_peak_mb"]},
        "met": None,
    }


FIGURES = {
    "replan_tokens": replan_tokens,
    "tokens_per_task": tokens_per_task,
    "wall_clock": wall_clock,
    "overhead": overhead,
    "storage": storage,
    "rollback": rollback_latency,
    "memory": peak_memory,
}
