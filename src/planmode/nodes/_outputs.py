"""The step-output store: full step outputs kept in a LangGraph store, state keeping only their summaries."""

from __future__ import annotations

from langgraph.config import get_config
from langgraph.store.base import BaseStore

from planmode.state.graph_state import StepOutcome
from planmode.text import clip

__all__ = [
    "OUTPUT_NAMESPACE",
    "adependency_output",
    "aput_output",
    "astored_output",
    "dependency_output",
    "put_output",
    "stored_output",
    "summarize",
    "thread_id",
]

#: Store namespace of full step outputs: (*OUTPUT_NAMESPACE, thread_id).
OUTPUT_NAMESPACE = ("planmode", "outputs")


def thread_id() -> str:
    """The run's thread id (``"default"`` outside a run): the last part of the namespace."""
    try:
        return str(get_config().get("configurable", {}).get("thread_id") or "default")
    except RuntimeError:
        return "default"


def put_output(store: BaseStore, step_id: str, attempt: int, output: str) -> str:
    """Keep an attempt's full output in ``store``; its key (the step's ``output_ref``)."""
    key = f"{step_id}.{attempt}"
    store.put((*OUTPUT_NAMESPACE, thread_id()), key, {"step_id": step_id, "output": output})
    return key


def stored_output(outcome: StepOutcome, store: BaseStore | None) -> str:
    """An attempt's full output: from the store when it was kept there, else the outcome's own text.

    Call it in the node's own thread (the store namespace needs the run's config)."""
    if store is not None and outcome.output_ref:
        item = store.get((*OUTPUT_NAMESPACE, thread_id()), outcome.output_ref)
        if item is not None:
            return str(item.value.get("output", outcome.output))
    return outcome.output


def dependency_output(info: dict[str, str | None], store: BaseStore | None) -> str:
    """A dependency's full output from the store when it was kept there, else its summary."""
    ref = info.get("output_ref")
    if store is not None and ref:
        item = store.get((*OUTPUT_NAMESPACE, thread_id()), ref)
        if item is not None:
            return str(item.value.get("output", info.get("result") or ""))
    return info.get("result") or ""


async def aput_output(store: BaseStore, step_id: str, attempt: int, output: str) -> str:
    """`put_output` with the store's ``aput`` (for async nodes)."""
    key = f"{step_id}.{attempt}"
    await store.aput((*OUTPUT_NAMESPACE, thread_id()), key, {"step_id": step_id, "output": output})
    return key


async def astored_output(outcome: StepOutcome, store: BaseStore | None) -> str:
    """`stored_output` with the store's ``aget``."""
    if store is not None and outcome.output_ref:
        item = await store.aget((*OUTPUT_NAMESPACE, thread_id()), outcome.output_ref)
        if item is not None:
            return str(item.value.get("output", outcome.output))
    return outcome.output


async def adependency_output(info: dict[str, str | None], store: BaseStore | None) -> str:
    """`dependency_output` with the store's ``aget``."""
    ref = info.get("output_ref")
    if store is not None and ref:
        item = await store.aget((*OUTPUT_NAMESPACE, thread_id()), ref)
        if item is not None:
            return str(item.value.get("output", info.get("result") or ""))
    return info.get("result") or ""


def summarize(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text`` (whitespace folded), marked when cut: a step's result in state."""
    return clip(text, limit, marker=" …[truncated]")
