"""Observability: what a run spent (`usage`: tokens and cost per model call, per node and per run) and what
it did (`events`: the typed progress events on the ``custom`` stream).
"""

from planmode.observability.events import (
    EVENT_TYPES,
    Event,
    emit,
)
from planmode.observability.usage import (
    COUNTERS,
    UsageRecorder,
    add_counters,
    event_usage,
    format_usage,
    merge_usage,
    metered,
    spent_usage,
    step_scope,
    total_tokens,
)

__all__ = [
    "COUNTERS",
    "EVENT_TYPES",
    "Event",
    "UsageRecorder",
    "add_counters",
    "emit",
    "event_usage",
    "format_usage",
    "merge_usage",
    "metered",
    "spent_usage",
    "step_scope",
    "total_tokens",
]
