"""Chat models: resolving the run's model, structured output, and message normalisation.

Structured calls never raise for bad model output: they return ``(value, None)`` or ``(None, error)`` so
nodes can feed the error back within their bounds.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ValidationError

from planmode.context import PlanModeContext
from planmode.errors import ConfigurationError, PlanParseError
from planmode.state.parse import extract_json

__all__ = ["ModelProvider", "call_structured", "normalize_messages", "text_of"]

T = TypeVar("T", bound=BaseModel)


class ModelProvider:
    """Gives nodes the chat model: the one passed to the builder, or a ``ChatOpenAI`` made from settings."""

    def __init__(self, model: BaseChatModel | None = None) -> None:
        self._model = model
        self._cache: dict[tuple[str, str | None, float, int], BaseChatModel] = {}

    @property
    def explicit(self) -> bool:
        """True when a model object was passed to the builder."""
        return self._model is not None

    def get(self, settings: PlanModeContext) -> BaseChatModel:
        """The chat model for a run; raises `ConfigurationError` naming the fix when it cannot be made."""
        if self._model is not None:
            return self._model
        key = (settings.model, settings.base_url, settings.request_timeout, settings.max_retries)
        if key not in self._cache:
            self._cache[key] = _openai_model(settings)
        return self._cache[key]


def _openai_model(settings: PlanModeContext) -> BaseChatModel:
    from langchain_openai import ChatOpenAI

    api_key = os.environ.get("OPENAI_API_KEY")
    if not api_key and not settings.base_url:
        raise ConfigurationError(
            "OPENAI_API_KEY is not set. Export it, set OPENAI_BASE_URL (or the base_url setting) for a local "
            "OpenAI-compatible server, or pass a chat model: build_graph(model=...)."
        )
    return ChatOpenAI(
        model=settings.model,
        base_url=settings.base_url,
        api_key=api_key or "not-needed",  # local servers ignore the key
        max_retries=settings.max_retries,
        timeout=settings.request_timeout,
    )


def normalize_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """One system message first, then same-role neighbours merged (strict chat templates need this)."""
    system = [m for m in messages if isinstance(m, SystemMessage)]
    rest = [m for m in messages if not isinstance(m, SystemMessage)]
    out: list[BaseMessage] = []
    if system:
        out.append(SystemMessage(content="\n\n".join(text_of(m) for m in system)))
    for m in rest:
        prev = out[-1] if out else None
        mergeable = (
            prev is not None
            and type(prev) is type(m)
            and isinstance(m, HumanMessage | AIMessage)
            and not getattr(m, "tool_calls", None)
            and not getattr(prev, "tool_calls", None)
        )
        if mergeable and prev is not None:
            out[-1] = type(m)(content=text_of(prev) + "\n\n" + text_of(m))
        else:
            out.append(m)
    return out


def text_of(message: BaseMessage) -> str:
    """A message's text content (list contents joined)."""
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for item in content:
        if isinstance(item, str):
            parts.append(item)
        elif isinstance(item, dict) and item.get("type") == "text":
            parts.append(str(item.get("text", "")))
    return "".join(parts)


def _method(model: BaseChatModel, settings: PlanModeContext) -> str:
    if settings.structured_output == "tool_calling":
        return "function_calling"
    if settings.structured_output == "json_schema":
        return "json_schema"
    # Only a ChatOpenAI model can be one; checking sys.modules avoids a ~1 s import for other models.
    module = sys.modules.get("langchain_openai")
    chat_openai = getattr(module, "ChatOpenAI", None) if module is not None else None
    return "json_schema" if chat_openai is not None and isinstance(model, chat_openai) else "function_calling"


def _from_raw(raw: AIMessage | None, schema: type[T]) -> T:
    """Read a schema value from a raw message: its tool call arguments, or JSON in its text."""
    if raw is None:
        raise PlanParseError("the model returned nothing")
    for call in raw.tool_calls or []:
        return schema.model_validate(call["args"])
    for bad in getattr(raw, "invalid_tool_calls", None) or []:
        args = bad.get("args") or ""
        return schema.model_validate(extract_json(args))
    return schema.model_validate(extract_json(text_of(raw)))


def _describe(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        parts = []
        for err in exc.errors()[:6]:
            loc = ".".join(str(p) for p in err["loc"]) or "(root)"
            parts.append(f"{loc}: {err['msg']}")
        return "invalid fields: " + "; ".join(parts)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:500]


def call_structured(
    model: BaseChatModel,
    schema: type[T],
    messages: Sequence[BaseMessage],
    settings: PlanModeContext,
) -> tuple[T | None, str | None, AIMessage | None]:
    """Ask for one ``schema`` value. Returns ``(value, None, raw)`` or ``(None, error, raw)``; never raises
    for bad output or a failed model call (those are errors to feed back), only for configuration errors."""
    msgs = normalize_messages(messages) if settings.normalize_messages else list(messages)
    method = _method(model, settings)
    raw: AIMessage | None = None
    try:
        kwargs: dict[str, Any] = {"include_raw": True}
        try:
            runnable = model.with_structured_output(schema, method=method, **kwargs)
        except TypeError:  # models whose with_structured_output has no `method`
            runnable = model.with_structured_output(schema, **kwargs)
        out = runnable.invoke(msgs)
    except ConfigurationError:
        raise
    except NotImplementedError as exc:
        raise ConfigurationError(
            f"{type(model).__name__} supports neither tool calling nor structured output; use a chat model "
            "that implements bind_tools"
        ) from exc
    except Exception as exc:  # a failed model call is an error value for the node's retry loop
        return None, f"model call failed: {_describe(exc)}", None
    if isinstance(out, dict):
        raw_msg = out.get("raw")
        raw = raw_msg if isinstance(raw_msg, AIMessage) else None
        parsed = out.get("parsed")
        if isinstance(parsed, schema):
            return parsed, None, raw
        if isinstance(parsed, dict):
            try:
                return schema.model_validate(parsed), None, raw
            except ValidationError as exc:
                return None, _describe(exc), raw
        try:
            return _from_raw(raw, schema), None, raw
        except (ValidationError, PlanParseError, json.JSONDecodeError, TypeError) as exc:
            return None, _describe(exc), raw
    if isinstance(out, schema):
        return out, None, None
    return None, f"unexpected structured output of type {type(out).__name__}", None
