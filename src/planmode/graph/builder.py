"""`build_graph`: the plan-mode StateGraph, compiled.

START -> detect -> respond -> END                                  (simple requests)
                -> plan -> approve -> dispatch -> execute_step* -> verify -> execute_step* -> verify ...
                           ^   |reject    (dispatch and verify route alike:)
                           +---+          | trouble -> reflect -> patch -> (approve) -> dispatch
                                          | all done -> finalize -> END

An approval the policy gives (``approval="auto"``) routes as dispatch does, straight to execute_step: approve
started the first batch itself. A human's approval goes through dispatch, which checks the revision.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

from planmode.approval.policy import ApprovalPolicy
from planmode.context import PlanModeContext
from planmode.executors import Executor, Verifier
from planmode.graph.pipeline import data_sends, pipeline
from planmode.graph.routing import (
    route_after_approve,
    route_after_dispatch,
    route_after_patch,
    route_after_plan,
    route_after_reflect,
    route_after_respond,
)
from planmode.llm import ModelProvider
from planmode.nodes import (
    Deps,
    make_approve,
    make_detect,
    make_dispatch,
    make_execute_step,
    make_finalize,
    make_patch,
    make_plan,
    make_reflect,
    make_respond,
    make_verify,
)
from planmode.nodes._task import StepTask
from planmode.nodes.detect import DETECT_ROUTES
from planmode.nodes.model_unavailable import RESUME_NODES, make_model_unavailable
from planmode.persistence import with_planmode_types
from planmode.state.graph_state import InputState, OutputState, PlanModeState

__all__ = ["NODE_NAMES", "PlanModeGraph", "build_graph", "build_state_graph"]

NODE_NAMES = (
    "detect",
    "respond",
    "plan",
    "approve",
    "dispatch",
    "execute_step",
    "verify",
    "reflect",
    "patch",
    "finalize",
    "model_unavailable",
)


def build_state_graph(
    model: BaseChatModel | None = None,
    *,
    tools: Sequence[BaseTool] = (),
    executor: Executor | None = None,
    verifier: Verifier | None = None,
    store: BaseStore | None = None,
    approval_policy: ApprovalPolicy | None = None,
) -> StateGraph[PlanModeState, PlanModeContext, InputState, OutputState]:
    """The uncompiled graph (for users who compile it themselves or add nodes)."""
    deps = Deps(models=ModelProvider(model), tools=tuple(tools), executor=executor, verifier=verifier, store=store)
    g: StateGraph[PlanModeState, PlanModeContext, InputState, OutputState] = StateGraph(
        PlanModeState, context_schema=PlanModeContext, input_schema=InputState, output_schema=OutputState
    )
    # Each node inside its pipeline (graph/pipeline.py: one table of what wraps which node, outermost first)
    g.add_node("detect", pipeline("detect", make_detect(deps)), input_schema=PlanModeState, destinations=DETECT_ROUTES)
    g.add_node("respond", pipeline("respond", make_respond(deps)), input_schema=PlanModeState)
    g.add_node("plan", pipeline("plan", make_plan(deps)), input_schema=PlanModeState)
    # approve: the policy, then a human (nodes/approve.py); dispatch: its gates, then the batch (nodes/dispatch.py)
    g.add_node("approve", pipeline("approve", make_approve(deps, approval_policy)), input_schema=PlanModeState)
    g.add_node("dispatch", pipeline("dispatch", make_dispatch(deps, approval_policy)))
    g.add_node(
        "execute_step",
        pipeline("execute_step", make_execute_step(deps)),  # the execution guard is in the node
        input_schema=StepTask,
        destinations=("verify",),  # a step planmode started goes on to verify (execute_step's Command)
    )
    g.add_node("verify", pipeline("verify", make_verify(deps)))
    g.add_node("reflect", pipeline("reflect", make_reflect(deps)), input_schema=PlanModeState)
    g.add_node("patch", pipeline("patch", make_patch(deps)), input_schema=PlanModeState)
    g.add_node("finalize", pipeline("finalize", make_finalize(deps)), input_schema=PlanModeState)
    g.add_node(
        "model_unavailable", pipeline("model_unavailable", make_model_unavailable(deps)), destinations=RESUME_NODES
    )
    g.add_edge(START, "detect")
    g.add_conditional_edges("respond", route_after_respond)
    g.add_edge("finalize", END)
    g.add_conditional_edges("plan", route_after_plan)
    g.add_conditional_edges(
        "approve",
        data_sends(route_after_approve),
        ["execute_step", "verify", "approve", "plan", "reflect", "finalize", "dispatch", "model_unavailable"],
    )
    g.add_conditional_edges("patch", route_after_patch)
    # verify decides the next batch itself (dispatch's decision, `next_batch`): both route the same way
    for source in ("dispatch", "verify"):
        g.add_conditional_edges(
            source,
            data_sends(route_after_dispatch),
            ["execute_step", "verify", "approve", "reflect", "finalize", "dispatch", "model_unavailable"],
        )
    g.add_conditional_edges("reflect", route_after_reflect)
    return g


def build_graph(
    model: BaseChatModel | None = None,
    *,
    tools: Sequence[BaseTool] = (),
    executor: Executor | None = None,
    verifier: Verifier | None = None,
    checkpointer: BaseCheckpointSaver[Any] | bool | None = None,
    store: BaseStore | None = None,
    name: str = "planmode",
    approval_policy: ApprovalPolicy | None = None,
) -> CompiledStateGraph[PlanModeState, PlanModeContext, InputState, OutputState]:
    """Build and compile the plan-mode graph.

    Args:
        model: any LangChain chat model; default: ``ChatOpenAI`` made at run time from the settings
            (``model``, ``base_url``) and ``OPENAI_API_KEY`` — no key is needed to build the graph.
        tools: LangChain tools. Mark read-only ones with ``planmode.tools.read_only``; the others cannot
            be called before the plan is approved (enforced where tools are dispatched).
        executor: runs one step instead of the default tool-calling agent (see `planmode.executors`).
        verifier: judges a step's outcome instead of the default LLM judge.
        checkpointer: e.g. ``SqliteSaver``; ``None`` for a graph run under the LangGraph server or as a
            subgraph (which then uses its parent's).
        store: a LangGraph store for full step outputs (state keeps summaries).
        name: the graph's name (also its run name in traces).
        approval_policy: decides plan approvals (and, with ``step_approval="writes"``, write steps): approve,
            ask a human or reject (`planmode.approval.policy`); default: the ``approval`` setting.
    """
    graph = build_state_graph(
        model, tools=tools, executor=executor, verifier=verifier, store=store, approval_policy=approval_policy
    )
    compiled = graph.compile(checkpointer=with_planmode_types(checkpointer), store=store, name=name)
    return PlanModeGraph(**{k: v for k, v in compiled.__dict__.items() if k != "__orig_class__"})


class PlanModeGraph(CompiledStateGraph[PlanModeState, PlanModeContext, InputState, OutputState]):
    """The compiled plan-mode graph: a `CompiledStateGraph` whose context JSON schema is rendered once.

    The LangGraph server asks every run given a ``context`` for the graph's context JSON schema (to filter the
    context by it). LangGraph renders it anew each time, through a fresh Pydantic ``TypeAdapter`` of the
    `PlanModeContext` dataclass: about 3 ms of the server's event loop per run, 4% of its time at 50 concurrent
    runs. It is the same schema every time. ``copy()`` (the server copies the graph for each run) keeps the
    class."""

    def get_context_jsonschema(self) -> dict[str, Any] | None:
        key = self.context_schema
        if key not in _CONTEXT_JSONSCHEMA:
            _CONTEXT_JSONSCHEMA[key] = super().get_context_jsonschema()
        rendered = _CONTEXT_JSONSCHEMA[key]
        return copy.deepcopy(rendered) if rendered is not None else None


#: LangGraph's rendering of each context schema type (a type's schema does not change).
_CONTEXT_JSONSCHEMA: dict[Any, dict[str, Any] | None] = {}
