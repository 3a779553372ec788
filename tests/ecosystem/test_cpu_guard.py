"""The per-step CPU of a chain does not grow with the plan (issue 46 §1): CPU time (`time.process_time`), not wall
clock, of a 20-step and a 200-step chain run on the bench's oracle model, after a warm-up run. A regression that
makes each step walk the whole plan with work per step (as reading every done step's description did) fails here
the day it lands; the bench (`python -m bench`) measures the same at 400 steps beside the bare loop."""

from __future__ import annotations

import time
from pathlib import Path

from bench.scenarios import make_scenario
from bench.systems import run_planmode

#: How much more CPU a step of the 200-step chain may take than one of the 20-step chain.
GROWTH = 1.3


def _cpu_per_step(n: int, tmp_path: Path) -> float:
    sc = make_scenario(n, width=1, name=f"chain-{n}")
    start = time.process_time()
    tmp_path.mkdir(parents=True, exist_ok=True)
    result = run_planmode(sc, tmp_path / f"chain-{n}.sqlite", count_tokens=False, max_parallel=1)
    spent = time.process_time() - start
    assert result.status == "completed"
    return spent / n


def test_the_per_step_cpu_of_a_chain_does_not_grow_with_the_plan(tmp_path: Path) -> None:
    _cpu_per_step(5, tmp_path)  # warm-up: imports, compiled graphs and caches are not a step's cost
    small = min(_cpu_per_step(20, tmp_path / "a"), _cpu_per_step(20, tmp_path / "b"))
    large = _cpu_per_step(200, tmp_path)
    assert large <= GROWTH * small, f"{large * 1000:.1f} ms a step at 200 steps, {small * 1000:.1f} ms at 20"
