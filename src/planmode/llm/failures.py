"""What a failed model call means: unavailable (the run pauses), a refused structured-output mode, a context
overflow, or another error to feed back."""

from __future__ import annotations

import json
import re
import sys
from typing import Literal

from langchain_core.language_models import BaseChatModel
from pydantic import ValidationError

from planmode.context import PlanModeContext
from planmode.errors import ModelUnauthorizedError, ModelUnavailableError
from planmode.llm._learnt import endpoint, relearn
from planmode.llm.http import ReplyTooLargeError
from planmode.llm.window import context_budget
from planmode.text import clip

__all__ = ["FailureKind", "describe", "failure_kind", "model_failure"]


def describe(exc: BaseException) -> str:
    """A short, one-line account of an exception (a validation error's first fields)."""
    if isinstance(exc, ValidationError):
        parts = []
        for err in exc.errors()[:6]:
            loc = ".".join(str(p) for p in err["loc"]) or "(root)"
            parts.append(f"{loc}: {err['msg']}")
        return "invalid fields: " + "; ".join(parts)
    too_large = _too_large(exc)
    if too_large is not None:  # the openai client reports it as "Connection error." with it as the cause
        exc = too_large
    # All of it, whitespace folded: llama-cpp-python puts the cause on the lines after "1 validation error:".
    text = " ".join(str(exc).split()) or type(exc).__name__
    return clip(text, 500, marker="", fold=False)


FailureKind = Literal["unauthorized", "unavailable", "refused", "overflow", "other"]

#: HTTP statuses of a server that refuses the request's credentials (a bad or missing API key).
_AUTH_STATUSES = (401, 403)

_OVERFLOW_MARKERS = (
    "maximum context length",
    "context length exceeded",
    "context_length_exceeded",
    "exceeds the available context",
    "context window",
    "n_ctx",
    "prompt is too long",
    "input tokens exceed",
)
_MODE_MARKERS = ("response_format", "json_schema", "json_object", "tool_choice", "tools", "tool call", "function call")
_CONTEXT_SIZE = re.compile(r"(?:maximum context length is|n_ctx\W{0,12}|context size\W{0,12})\s*(\d{3,7})", re.I)


def _error_text(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    parts = [str(exc)]
    if body is not None and not isinstance(body, str):
        parts.append(json.dumps(body, default=str))
    elif isinstance(body, str):
        parts.append(body)
    return " ".join(parts)


def failure_kind(exc: BaseException) -> FailureKind:
    """What a failed model call means: the server refused the credentials (401, 403: a bad API key), the model
    is unavailable (connection refused, 5xx or 429 after the client's retries), the server refused a
    structured-output mode, the context overflowed, or another error. A timeout is another error: a server that
    answers too slowly is not down."""
    if _too_large(exc) is not None:  # a reply past max_reply_bytes: the server answered, too much
        return "other"
    text = _error_text(exc).lower()
    status = getattr(exc, "status_code", None)
    if status in _AUTH_STATUSES:  # before the markers: an auth error's text may name anything
        return "unauthorized"
    if any(m in text for m in _OVERFLOW_MARKERS):
        return "overflow"
    if isinstance(status, int):
        if status >= 400 and any(m in text for m in _MODE_MARKERS):
            return "refused"
        return "unavailable" if status >= 500 or status == 429 else "other"
    openai_mod = sys.modules.get("openai")
    if openai_mod is not None:
        if isinstance(exc, openai_mod.APITimeoutError):
            return "other"
        if isinstance(exc, openai_mod.APIConnectionError):
            return "unavailable"
    if isinstance(exc, ConnectionError):
        return "unavailable"
    return "other"


def _too_large(exc: BaseException) -> ReplyTooLargeError | None:
    """The `ReplyTooLargeError` behind ``exc`` (itself, or its cause or context), if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ReplyTooLargeError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def model_failure(exc: BaseException, model: BaseChatModel, settings: PlanModeContext) -> str:
    """The error text of a failed model call, naming the setting that fixes it; raises
    `ModelUnavailableError` when the model cannot be reached, `ModelUnauthorizedError` when the server refuses
    the credentials (both pause the run instead: neither is a verdict on the plan or the step)."""
    kind = failure_kind(exc)
    base_url, name = endpoint(model)
    if kind == "unauthorized":
        raise ModelUnauthorizedError(
            describe(exc),
            base_url=base_url or settings.base_url,
            model=name or settings.model,
            status=getattr(exc, "status_code", None),
        ) from exc
    if kind == "unavailable":
        raise ModelUnavailableError(
            describe(exc), base_url=base_url or settings.base_url, model=name or settings.model
        ) from exc
    if kind == "overflow":
        match = _CONTEXT_SIZE.search(_error_text(exc))
        if match:  # later calls trim to the size the server named
            relearn(model, "context", int(match.group(1)))
        return (
            f"context overflow: {describe(exc)} The prompt plus max_output_tokens "
            f"({settings.max_output_tokens}) must fit the model's context: set the context_tokens setting "
            f"to the server's context size (the budget was {context_budget(model, settings)} tokens) so "
            "old tool results are trimmed to fit, lower max_output_tokens, or give the server a larger "
            "context (llama.cpp: --n_ctx / -c)"
        )
    return f"model call failed: {describe(exc)}"
