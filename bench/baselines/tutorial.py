"""Baseline 1: the algorithm of LangGraph's plan-and-execute tutorial, as a small LangGraph graph.

Planner -> agent (executes the first step of the plan) -> replanner (rewrites the remaining plan, or answers)
-> agent ... The prompts, schemas and state are the tutorial's; the agent is the first turn of its ReAct
agent ("You are a helpful assistant.") with no tools bound, since the scenarios need none (this leaves out
the tool schemas the tutorial's agent would send: it favours the baseline).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

__all__ = ["build_tutorial_graph"]

PLANNER_SYSTEM = """For the given objective, come up with a simple step by step plan. \
This plan should involve individual tasks, that if executed correctly will yield the correct answer. Do not add \
any superfluous steps. The result of the final step should be the final answer. Make sure that each step has all \
the information needed - do not skip steps."""

REPLANNER = """For the given objective, come up with a simple step by step plan. \
This plan should involve individual tasks, that if executed correctly will yield the correct answer. Do not add \
any superfluous steps. The result of the final step should be the final answer. Make sure that each step has all \
the information needed - do not skip steps.

Your objective was this:
{input}

Your original plan was this:
{plan}

You have currently done the follow steps:
{past_steps}

Update your plan accordingly. If no more steps are needed and you can return to the user, then respond with that. \
Otherwise, fill out the plan. Only add steps to the plan that still NEED to be done. Do not return previously done \
steps as part of the plan."""


class PlanExecute(TypedDict, total=False):
    input: str
    plan: list[str]
    past_steps: Annotated[list[tuple[str, str]], operator.add]
    response: str


class Plan(BaseModel):
    """Plan to follow in future"""

    steps: list[str] = Field(description="different steps to follow, should be in sorted order")


class Response(BaseModel):
    """Response to user."""

    response: str


class Act(BaseModel):
    """Action to perform."""

    action: Response | Plan = Field(
        description="Action to perform. If you want to respond to user, use Response. "
        "If you need to further use tools to get the answer, use Plan."
    )


def build_tutorial_graph(model: BaseChatModel, checkpointer: Any = None) -> Any:
    """The tutorial's graph on ``model``."""
    planner = model.with_structured_output(Plan)
    replanner = model.with_structured_output(Act)

    def plan_step(state: PlanExecute) -> dict[str, Any]:
        plan = planner.invoke([SystemMessage(content=PLANNER_SYSTEM), HumanMessage(content=state["input"])])
        assert isinstance(plan, Plan)
        return {"plan": plan.steps}

    def execute_step(state: PlanExecute) -> dict[str, Any]:
        plan = state["plan"]
        plan_str = "\n".join(f"{i + 1}. {step}" for i, step in enumerate(plan))
        task = plan[0]
        task_formatted = f"For the following plan:\n{plan_str}\n\nYou are tasked with executing step 1, {task}."
        reply = model.invoke(
            [SystemMessage(content="You are a helpful assistant."), HumanMessage(content=task_formatted)]
        )
        return {"past_steps": [(task, str(reply.content))]}

    def replan_step(state: PlanExecute) -> dict[str, Any]:
        prompt = REPLANNER.format(input=state["input"], plan=state["plan"], past_steps=state["past_steps"])
        output = replanner.invoke([HumanMessage(content=prompt)])
        assert isinstance(output, Act)
        if isinstance(output.action, Response):
            return {"response": output.action.response}
        return {"plan": output.action.steps}

    def should_end(state: PlanExecute) -> str:
        return END if state.get("response") else "agent"

    g: StateGraph[Any, Any, Any, Any] = StateGraph(PlanExecute)
    g.add_node("planner", plan_step)
    g.add_node("agent", execute_step)
    g.add_node("replan", replan_step)
    g.add_edge(START, "planner")
    g.add_edge("planner", "agent")
    g.add_edge("agent", "replan")
    g.add_conditional_edges("replan", should_end, ["agent", END])
    return g.compile(checkpointer=checkpointer)
