"""What the nodes share: the model provider, tools, executor, verifier and store given to the builder."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, TypeVar

from langchain_core.messages import AnyMessage, HumanMessage
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore

from planmode.context import PlanModeContext, settings_of
from planmode.executors import Executor, Verifier
from planmode.llm import ModelProvider, text_of
from planmode.state.graph_state import PlanModeState, PlanModeUpdate

__all__ = ["Deps", "Node", "NodeRuntime", "StateUpdate", "negotiated_of", "settings_of", "store_of", "task_of"]

#: The runtime a node gets: the run settings as its context (None when a resumed run brings none).
NodeRuntime: TypeAlias = Runtime[PlanModeContext]
#: What a node returns: only the state keys it changes (typed: `PlanModeUpdate`).
StateUpdate: TypeAlias = PlanModeUpdate
_In = TypeVar("_In", contravariant=True)
_Out = TypeVar("_Out", covariant=True)


class Node(Protocol[_In, _Out]):
    """A node function as LangGraph calls it: its input (the state, or a ``Send`` payload) and the runtime."""

    def __call__(self, state: _In, *, runtime: NodeRuntime) -> _Out: ...


@dataclass
class Deps:
    """The builder's arguments, closed over by every node."""

    models: ModelProvider
    tools: Sequence[BaseTool] = ()
    executor: Executor | None = None
    verifier: Verifier | None = None
    store: BaseStore | None = None
    detect_cache: dict[str, bool] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def negotiated_of(state: Mapping[str, Any]) -> str | None:
    """The structured-output mode ``auto`` settled on in this run (``negotiated_output``), where a model made in
    another process starts. (A run checkpointed when it was a setting negotiates again in a new process: at most
    one refused request per refused mode.)"""
    recorded = state.get("negotiated_output")
    return recorded if isinstance(recorded, str) else None


def task_of(state: PlanModeState) -> str:
    """The task: ``state["task"]``, else the last human message."""
    if state.get("task"):
        return str(state["task"])
    messages: list[AnyMessage] = list(state.get("messages") or [])
    for m in reversed(messages):
        if isinstance(m, HumanMessage):
            return text_of(m).strip()
    return ""


def store_of(deps: Deps, runtime: NodeRuntime | None) -> BaseStore | None:
    """The LangGraph store: the runtime's (server or compile-time) or the builder's."""
    if runtime is not None and runtime.store is not None:
        return runtime.store
    return deps.store
