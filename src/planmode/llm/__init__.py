"""Chat models: the model factory (`factory`), structured calls (`structured`), message helpers (`messages`),
what a failed call means (`failures`) and the context window (`window`, `trim`).

Structured calls never raise for bad model output: they return ``(value, None, raw)`` or
``(None, error, raw)`` so nodes can feed the error back within their bounds.
"""

from planmode.llm.factory import ModelProvider
from planmode.llm.failures import FailureKind, failure_kind, model_failure
from planmode.llm.messages import normalize_messages, text_of
from planmode.llm.retry import Asked, aask_until_valid, ask_until_valid
from planmode.llm.structured import (
    AUTO_ORDER,
    Mode,
    Structured,
    acall_structured,
    call_structured,
    grammar_safe_pattern,
    grammar_safe_schema,
    negotiated_mode,
    negotiation_record,
    structured_runnable,
)
from planmode.llm.window import (
    acontext_budget,
    afit_transcript,
    context_budget,
    discover_context_tokens,
    fit_transcript,
)

__all__ = [
    "AUTO_ORDER",
    "Asked",
    "FailureKind",
    "Mode",
    "ModelProvider",
    "Structured",
    "aask_until_valid",
    "acall_structured",
    "acontext_budget",
    "afit_transcript",
    "ask_until_valid",
    "call_structured",
    "context_budget",
    "discover_context_tokens",
    "failure_kind",
    "fit_transcript",
    "grammar_safe_pattern",
    "grammar_safe_schema",
    "model_failure",
    "negotiated_mode",
    "negotiation_record",
    "normalize_messages",
    "structured_runnable",
    "text_of",
]
