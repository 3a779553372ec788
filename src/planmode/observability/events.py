"""Typed progress events, emitted on LangGraph's ``custom`` stream.

Consume them with ``graph.stream(..., stream_mode="custom")`` (or ``["updates", "custom"]``); each event
is a JSON-able dict with a ``type`` field. UIs and the CLI read these instead of parsing state.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.config import get_stream_writer
from pydantic import BaseModel, Field

from planmode.observability.usage import event_usage

__all__ = ["EVENT_TYPES", "Event", "emit"]

EventType = Literal[
    "plan_created",
    "plan_approved",
    "plan_rejected",
    "plan_cancelled",
    "step_started",
    "step_completed",
    "step_failed",
    "reflection",
    "plan_patched",
    "patch_rejected",
    "run_finished",
    "direct_answer",
    "model_unavailable",
    "budget_paused",
    "budget_stopped",
    "step_refused",
    "settings_ignored",
]
EVENT_TYPES: tuple[str, ...] = EventType.__args__  # type: ignore[attr-defined]  # Literal exposes __args__


class Event(BaseModel):
    """One progress event."""

    source: Literal["planmode"] = "planmode"
    type: EventType
    message: str = ""
    step_id: str | None = None
    plan_version: int | None = None
    data: dict[str, Any] = Field(default_factory=dict)


def emit(
    type: EventType, message: str = "", *, step_id: str | None = None, plan_version: int | None = None, **data: Any
) -> None:
    """Write an event to the custom stream (a no-op outside a streamed run)."""
    try:
        writer = get_stream_writer()
    except RuntimeError:  # called outside a LangGraph run (e.g. unit-testing a helper)
        return
    usage = event_usage(type, step_id)  # the tokens behind the event (planmode.observability.usage)
    if usage is not None and "usage" not in data:
        data = {**data, "usage": usage}
    event = Event(type=type, message=message, step_id=step_id, plan_version=plan_version, data=data)
    writer(event.model_dump(mode="json"))
