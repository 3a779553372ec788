"""The step-output store: full step outputs kept in a LangGraph store, state keeping only their summaries."""

from __future__ import annotations

from typing import Any

from langgraph.config import get_config

from planmode.state.graph_state import StepOutcome

__all__ = ["OUTPUT_NAMESPACE", "stored_output"]

#: Store namespace of full step outputs: (*OUTPUT_NAMESPACE, thread_id).
OUTPUT_NAMESPACE = ("planmode", "outputs")


def _thread_id() -> str:
    try:
        return str(get_config().get("configurable", {}).get("thread_id") or "default")
    except RuntimeError:
        return "default"


def stored_output(outcome: StepOutcome, store: Any) -> str:
    """An attempt's full output: from the store when it was kept there, else the outcome's own text.

    Call it in the node's own thread (the store namespace needs the run's config)."""
    if store is not None and outcome.output_ref:
        item = store.get((*OUTPUT_NAMESPACE, _thread_id()), outcome.output_ref)
        if item is not None:
            return str(item.value.get("output", outcome.output))
    return outcome.output


def _dependency_output(info: dict[str, str | None], store: Any) -> str:
    """A dependency's full output from the store when it was kept there, else its summary."""
    ref = info.get("output_ref")
    if store is not None and ref:
        item = store.get((*OUTPUT_NAMESPACE, _thread_id()), ref)
        if item is not None:
            return str(item.value.get("output", info.get("result") or ""))
    return info.get("result") or ""
