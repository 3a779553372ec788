"""The floor for the framework-overhead figure: a bare LangGraph loop over the same steps.

One node runs one step per super-step — the same executor and verifier calls planmode makes — and keeps
each step's result summary in state; a conditional edge loops until every step ran. No plan model, no
validation, no parallelism, no events.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

__all__ = ["build_bare_loop"]


def _merge(current: dict[str, str] | None, update: dict[str, str] | None) -> dict[str, str]:
    return {**(current or {}), **(update or {})}


class LoopState(TypedDict, total=False):
    cursor: int
    results: Annotated[dict[str, str], _merge]


def build_bare_loop(step_ids: Sequence[str], work: Callable[[str], str], checkpointer: Any = None) -> Any:
    """A loop that calls ``work(step_id)`` for each step in order, one super-step each."""
    ids = list(step_ids)

    def step(state: LoopState) -> dict[str, Any]:
        i = state.get("cursor", 0)
        sid = ids[i]
        return {"cursor": i + 1, "results": {sid: work(sid)[:600]}}

    def more(state: LoopState) -> str:
        return "step" if state.get("cursor", 0) < len(ids) else END

    g: StateGraph[Any, Any, Any, Any] = StateGraph(LoopState)
    g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", more, ["step", END])
    return g.compile(checkpointer=checkpointer)
