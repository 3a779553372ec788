"""What each of planmode's caches saves: the cost of building the value against the cost of a hit.

    python -m bench.caches_bench

Each figure is the best of 5 repeats, in microseconds per call: the context JSON schema `PlanModeGraph` keeps
(LangGraph renders it through a new ``TypeAdapter`` for every run the server is given a context), the JSON data
of an unchanged 400-step plan (`planmode.state.channel`, at every checkpoint), a structured-output runnable
(`planmode.llm.structured.RUNNABLES`, at every structured call), a compiled tool loop
(`planmode.tools.loop._LOOPS`, at every step of the default executor) and the tokens of the tools' schemas
(`planmode.llm.window._TOOL_TOKENS`, at every model turn). Prints JSON.
"""

from __future__ import annotations

import json
import os
import timeit
from collections.abc import Callable
from typing import Any


def best_us(fn: Callable[[], Any], number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def context_schema() -> dict[str, float]:
    from langgraph.graph.state import CompiledStateGraph

    from planmode.graph import build_graph

    graph = build_graph()
    uncached = CompiledStateGraph.get_context_jsonschema
    return {
        "context_schema_build_us": best_us(lambda: uncached(graph), 50),
        "context_schema_hit_us": best_us(graph.get_context_jsonschema, 500),
    }


def plan_data() -> dict[str, float]:
    import planmode.state.channel as channel
    from planmode.state.models import Plan, Step

    plan = Plan(goal="g", version=1, steps=[Step(id=f"s{i}", description=f"step {i} " * 8) for i in range(400)])

    def build() -> Any:
        channel._DUMPED.clear()
        channel._STEPS.clear()
        return channel._plan_data(plan)

    return {
        "plan_data_400_build_us": best_us(build, 20),
        "plan_data_400_hit_us": best_us(lambda: channel._plan_data(plan), 2000),
    }


def structured_runnable() -> dict[str, float]:
    os.environ.setdefault("OPENAI_API_KEY", "bench")
    from langchain_openai import ChatOpenAI

    from planmode.llm.structured import _build, structured_runnable
    from planmode.state.draft import PlanDraft

    model = ChatOpenAI(model="gpt-4o-mini")
    structured_runnable(model, PlanDraft, "json_schema")
    return {
        "structured_runnable_build_us": best_us(lambda: _build(model, PlanDraft, "json_schema"), 50),
        "structured_runnable_hit_us": best_us(lambda: structured_runnable(model, PlanDraft, "json_schema"), 5000),
    }


def tool_loop_and_tokens() -> dict[str, float]:
    from langchain_core.tools import tool

    from planmode.context import PlanModeContext
    from planmode.llm.window import _tool_tokens
    from planmode.testing.scripted import ScriptedChatModel
    from planmode.tools.loop import _build_loop, _loop_for

    @tool
    def read_file(path: str) -> str:
        """Read a file of the workspace."""
        return path

    @tool
    def write_file(path: str, content: str) -> str:
        """Write a file of the workspace."""
        return path

    model, tools, settings = ScriptedChatModel(responder=lambda *a: "ok"), [read_file, write_file], PlanModeContext()
    args: dict[str, Any] = {"allow_writes": True, "max_iterations": 6, "max_tool_calls": None, "binding": None}
    _loop_for(model, tools, settings, **args)
    import planmode.llm.window as window

    def tokens_build() -> int:
        return len(json.dumps([t.name for t in tools])) + _tool_tokens(tools)

    window._TOOL_TOKENS.get(tuple(tools), (), lambda: _tool_tokens(tools))
    return {
        "tool_loop_build_us": best_us(lambda: _build_loop(model, tools, settings, **args), 20),
        "tool_loop_hit_us": best_us(lambda: _loop_for(model, tools, settings, **args), 5000),
        "tool_tokens_build_us": best_us(tokens_build, 200),
        "tool_tokens_hit_us": best_us(lambda: window._TOOL_TOKENS.get(tuple(tools), (), lambda: 0), 5000),
    }


def main() -> int:
    out: dict[str, Any] = {}
    for part in (context_schema, plan_data, structured_runnable, tool_loop_and_tokens):
        out.update({k: round(v, 1) for k, v in part().items()})
    out["load"] = os.getloadavg()[0]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
