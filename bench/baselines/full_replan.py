"""Baseline 2: replanning the remaining steps on failure, as a small LangGraph graph.

The same structured plan, prompts, executor and verifier calls as planmode, and the same parallelism; the
one difference is the repair. When a step fails, the model rewrites the steps that are not done yet — what
the plan-and-execute tutorial's replanner does ("Only add steps to the plan that still NEED to be done"),
with structured steps — and the done steps are kept as they are. It is shown the plan the way planmode's
repair is (`planmode.nodes._repair.repair_view`: done steps as ids, the results the open steps use), plus
every open step's acceptance criteria, which it must re-emit. No reflection, no patch.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from planmode import prompts
from planmode.executors import Verdict
from planmode.nodes._repair import repair_view
from planmode.state.draft import PlanDraft
from planmode.state.models import Plan, Step

__all__ = ["REPLAN_SYSTEM", "build_full_replan_graph"]

REPLAN_SYSTEM = (
    "bench:replan\n"
    + prompts.PLAN_SYSTEM.split("\n", 1)[1]
    + (
        "\nA step failed. Answer with the corrected plan for the steps that are not done yet, in order. Do not"
        " repeat done steps; the new steps may depend on them."
    )
)

REPLAN_USER = """{plan}

Problem: {trouble}"""


class FullReplanState(TypedDict, total=False):
    goal: str
    steps: list[dict[str, Any]]
    trouble: str | None
    answer: str


def _plan(goal: str, steps: list[dict[str, Any]]) -> Plan:
    return Plan(goal=goal, steps=[Step.model_validate(s) for s in steps])


def build_full_replan_graph(
    model: BaseChatModel, *, max_parallel: int = 4, max_steps: int = 200, checkpointer: Any = None
) -> Any:
    """The full-replanning baseline on ``model``."""
    planner = model.with_structured_output(PlanDraft)
    judge = model.with_structured_output(Verdict)

    def plan(state: FullReplanState) -> dict[str, Any]:
        draft = planner.invoke(
            [
                SystemMessage(content=prompts.PLAN_SYSTEM.format(max_steps=max_steps, tools="none", commands="none")),
                HumanMessage(content=prompts.PLAN_USER.format(task=state["goal"], findings="").rstrip()),
            ]
        )
        assert isinstance(draft, PlanDraft)
        return {"steps": [s.model_dump(mode="json") for s in draft.steps], "trouble": None}

    def run_one(goal: str, step: dict[str, Any], deps: dict[str, str]) -> dict[str, Any]:
        context = "\n".join(f"- {k}: {v}" for k, v in deps.items()) or "(none)"
        reply = model.invoke(
            [
                SystemMessage(content=prompts.EXECUTE_SYSTEM),
                HumanMessage(
                    content=prompts.EXECUTE_USER.format(
                        goal=goal,
                        step_id=step["id"],
                        description=step["description"],
                        acceptance=step.get("acceptance") or "(none given)",
                        checks="(none)",
                        context=context,
                        previous_error="",
                    ).rstrip()
                ),
            ]
        )
        output = str(reply.content)
        verdict = judge.invoke(
            [
                SystemMessage(content=prompts.VERIFY_SYSTEM),
                HumanMessage(
                    content=prompts.VERIFY_USER.format(
                        step_id=step["id"],
                        description=step["description"],
                        acceptance=step.get("acceptance") or "",
                        output=output[:4000],
                    )
                ),
            ]
        )
        assert isinstance(verdict, Verdict)
        status = "done" if verdict.passed else "failed"
        return {**step, "status": status, "result": output[:600], "error": None if verdict.passed else verdict.reason}

    def work(state: FullReplanState) -> dict[str, Any]:
        steps = [dict(s) for s in state["steps"]]
        done = {s["id"]: s.get("result") or "" for s in steps if s.get("status") == "done"}
        ready = [
            s
            for s in steps
            if s.get("status", "pending") == "pending" and all(d in done for d in s.get("dependencies", []))
        ][:max_parallel]
        with ThreadPoolExecutor(max_workers=max(1, len(ready))) as pool:
            outs = list(pool.map(lambda s: run_one(state["goal"], s, {d: done[d] for d in s["dependencies"]}), ready))
        by_id = {o["id"]: o for o in outs}
        steps = [by_id.get(s["id"], s) for s in steps]
        failed = [o for o in outs if o["status"] == "failed"]
        trouble = "; ".join(f"step {o['id']!r} failed: {o['error']}" for o in failed) or None
        return {"steps": steps, "trouble": trouble}

    def replan(state: FullReplanState) -> dict[str, Any]:
        current = _plan(state["goal"], state["steps"])
        draft = planner.invoke(
            [
                SystemMessage(content=REPLAN_SYSTEM.format(max_steps=max_steps, tools="none", commands="none")),
                HumanMessage(
                    content=REPLAN_USER.format(
                        trouble=state.get("trouble") or "", plan=repair_view(current, open_details=True)
                    )
                ),
            ]
        )
        assert isinstance(draft, PlanDraft)
        done = [s for s in state["steps"] if s.get("status") == "done"]
        kept = {s["id"] for s in done}
        fresh = [{**s.model_dump(mode="json"), "status": "pending"} for s in draft.steps if s.id not in kept]
        return {"steps": done + fresh, "trouble": None}

    def final(state: FullReplanState) -> dict[str, Any]:
        summary = "\n".join(f"- {s['id']}: {s.get('result') or s.get('status')}" for s in state["steps"])
        reply = model.invoke(
            [
                SystemMessage(content=prompts.FINAL_SYSTEM),
                HumanMessage(content=f"Goal: {state['goal']}\nStep results:\n{summary}"),
            ]
        )
        return {"answer": str(reply.content)}

    def route(state: FullReplanState) -> str:
        if state.get("trouble"):
            return "replan"
        if all(s.get("status") == "done" for s in state["steps"]):
            return "final"
        return "work"

    g: StateGraph[Any, Any, Any, Any] = StateGraph(FullReplanState)
    g.add_node("plan", plan)
    g.add_node("work", work)
    g.add_node("replan", replan)
    g.add_node("final", final)
    g.add_edge(START, "plan")
    g.add_edge("plan", "work")
    g.add_conditional_edges("work", route, ["replan", "final", "work"])
    g.add_edge("replan", "work")
    g.add_edge("final", END)
    return g.compile(checkpointer=checkpointer)
