"""What the nodes share: the model provider, tools, executor, verifier and store given to the builder."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AnyMessage, HumanMessage
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore

from planmode.context import PlanModeContext, resolve_settings
from planmode.executors import Executor, Verifier
from planmode.llm import ModelProvider, text_of
from planmode.state.graph_state import PlanModeState

__all__ = ["Deps", "settings_of", "store_of", "task_of"]


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


def settings_of(state: PlanModeState, runtime: Runtime[Any] | None) -> PlanModeContext:
    """The run's settings: runtime context when given, else the copy kept in state, else defaults."""
    ctx = runtime.context if runtime is not None else None
    return resolve_settings(ctx, state.get("settings"))


def task_of(state: PlanModeState) -> str:
    """The task: ``state["task"]``, else the last human message."""
    if state.get("task"):
        return str(state["task"])
    messages: list[AnyMessage] = list(state.get("messages") or [])
    for m in reversed(messages):
        if isinstance(m, HumanMessage):
            return text_of(m).strip()
    return ""


def store_of(deps: Deps, runtime: Runtime[Any] | None) -> BaseStore | None:
    """The LangGraph store: the runtime's (server or compile-time) or the builder's."""
    if runtime is not None and runtime.store is not None:
        return runtime.store
    return deps.store
