"""The limit for the server load benchmark (bench/server_load.py): a minimal async LangGraph graph that makes
planmode's calls for the 5-step plan in the same pattern, and nothing else.

    plan -> a -> (b, c in one super-step) -> d -> e -> final      every step: execute, then verify

12 model calls per run, 10 on the critical path; each node is ``async def`` and awaits ``ChatOpenAI.ainvoke``,
so concurrent runs share the event loop instead of the server's thread pool. The system prompts start with
planmode's ``planmode:<purpose>`` lines, so the same scripted server answers both graphs.
"""

from __future__ import annotations

import functools
import operator
from typing import Annotated, Any, TypedDict

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph

STEPS = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"], "e": ["d"]}


class State(TypedDict, total=False):
    messages: list[Any]
    done: Annotated[list[str], operator.add]


@functools.cache
def _model() -> ChatOpenAI:
    # as planmode builds its default model: 2 retries, 120 s timeout; OPENAI_BASE_URL / OPENAI_API_KEY from the env
    return ChatOpenAI(model="scripted-model", max_retries=2, timeout=120.0)


async def _call(purpose: str, text: str) -> str:
    reply = await _model().ainvoke([SystemMessage(content=f"planmode:{purpose}"), HumanMessage(content=text)])
    return str(reply.content)


async def plan(state: State) -> dict[str, Any]:
    await _call("plan", "Plan the task.")
    return {}


def _step(step_id: str) -> Any:
    async def step(state: State) -> dict[str, Any]:
        await _call("execute", f"Step `{step_id}`: do it.")
        await _call("verify", f"Step `{step_id}`: check it.")
        return {"done": [step_id]}

    step.__name__ = f"step_{step_id}"
    return step


async def final(state: State) -> dict[str, Any]:
    await _call("final", "Summarise.")
    return {}


def build() -> Any:
    builder = StateGraph(State)
    builder.add_node("plan", plan)
    builder.add_node("final", final)
    for step_id in STEPS:
        builder.add_node(step_id, _step(step_id))
    builder.add_edge(START, "plan")
    for step_id, deps in STEPS.items():
        builder.add_edge(deps if len(deps) > 1 else (deps[0] if deps else "plan"), step_id)
    builder.add_edge("e", "final")
    builder.add_edge("final", END)
    return builder.compile()


graph = build()
