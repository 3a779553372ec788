"""How often a run resolves its settings, and what the settings cost per node.

    python -m bench.settings_bench [--steps 40] [--repeat 5]

One run of the real graph (scripted model, a chain of ``--steps`` steps, approval asked and answered, so the run
crosses an interrupt), counted: calls of ``planmode.context.resolve_settings`` (the settings computed from a
context and the stored settings), and `PlanModeContext` objects made. Then the same run timed (median of
``--repeat``, in-memory checkpointer, no model latency: pure framework CPU; wall-clock and process CPU time).
Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

import planmode.context as context_module
from planmode.context import PlanModeContext
from planmode.graph import build_graph
from planmode.testing.scripted import PurposeScript, ScriptedChatModel


def _plan(steps: int) -> dict[str, Any]:
    chain = [{"id": "s0", "description": "step 0"}]
    chain += [{"id": f"s{i}", "description": f"step {i}", "dependencies": [f"s{i - 1}"]} for i in range(1, steps)]
    return {"title": "chain", "steps": chain}


def one_run(steps: int, thread: str, saver: Any) -> str:
    model = ScriptedChatModel(responder=PurposeScript(plan=_plan(steps)))
    graph = build_graph(
        model, executor=lambda step, ctx: f"did {step.id}", verifier=lambda s, o, c: True, checkpointer=saver
    )
    cfg: Any = {"configurable": {"thread_id": thread}}
    context = PlanModeContext(mode="plan", max_parallel=2, max_steps=max(20, steps))
    graph.invoke({"messages": [("user", "do it")]}, cfg, context=context)
    revision = graph.get_state(cfg).interrupts[0].value["revision"]
    graph.invoke(Command(resume={"action": "approve", "revision": revision}), cfg)
    return str(graph.get_state(cfg).values["status"])


def count(steps: int) -> dict[str, int]:
    """Calls of resolve_settings and PlanModeContext objects made during one run."""
    counts = {"resolve_settings": 0, "contexts_made": 0}
    resolve_code = context_module.resolve_settings.__code__
    init_code = PlanModeContext.__init__.__code__

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            if frame.f_code is resolve_code:
                counts["resolve_settings"] += 1
            elif frame.f_code is init_code:
                counts["contexts_made"] += 1

    sys.setprofile(profile)
    import threading

    threading.setprofile(profile)
    try:
        status = one_run(steps, "count", InMemorySaver())
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    assert status == "completed", status
    return counts


def timed(steps: int, repeat: int) -> dict[str, float]:
    """Wall-clock and the process's CPU time of one run (CPU time is less sensitive to other processes)."""
    times, cpu = [], []
    for i in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        one_run(steps, f"t{i}", InMemorySaver())
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "cpu_median_s": statistics.median(cpu),
        "cpu_min_s": min(cpu),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.settings_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    out = {"steps": args.steps, **count(args.steps), **timed(args.steps, args.repeat), "load": os.getloadavg()[0]}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
