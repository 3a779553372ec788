"""The floor for the framework-overhead figure: a bare LangGraph loop over the same steps.

One node runs one batch of steps per super-step — the same executor and verifier calls planmode makes — and
keeps each step's result summary in state; a conditional edge loops until every batch ran. A batch is one
step on a chain, or one layer of a wide plan (its steps run in threads, as planmode runs a layer's steps in
parallel), so the loop batches exactly as much as planmode does on the same plan. No plan model, no
validation, no events.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

__all__ = ["build_bare_loop"]


def _merge(current: dict[str, str] | None, update: dict[str, str] | None) -> dict[str, str]:
    return {**(current or {}), **(update or {})}


class LoopState(TypedDict, total=False):
    cursor: int
    results: Annotated[dict[str, str], _merge]


def build_bare_loop(
    batches: Sequence[Sequence[str]], work: Callable[[str], str], checkpointer: Any = None, max_workers: int = 4
) -> Any:
    """A loop that calls ``work(step_id)`` for each step, one batch per super-step (a batch's steps in up to
    ``max_workers`` threads)."""
    plan = [list(b) for b in batches]
    pool = ThreadPoolExecutor(max_workers=max_workers)

    def step(state: LoopState) -> dict[str, Any]:
        i = state.get("cursor", 0)
        batch = plan[i]
        outs = [work(batch[0])] if len(batch) == 1 else list(pool.map(work, batch))
        return {"cursor": i + 1, "results": {sid: out[:600] for sid, out in zip(batch, outs, strict=True)}}

    def more(state: LoopState) -> str:
        return "step" if state.get("cursor", 0) < len(plan) else END

    g: StateGraph[Any, Any, Any, Any] = StateGraph(LoopState)
    g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", more, ["step", END])
    return g.compile(checkpointer=checkpointer)
