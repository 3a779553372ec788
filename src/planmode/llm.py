"""Chat models: resolving the run's model, structured output, and message normalisation.

Structured calls never raise for bad model output: they return ``(value, None)`` or ``(None, error)`` so
nodes can feed the error back within their bounds.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import urllib.request
import weakref
from collections.abc import Sequence
from typing import Any, Literal, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ValidationError

from planmode._budget import CHARS_PER_TOKEN, fit_messages
from planmode.context import DEFAULT_CONTEXT_TOKENS, PlanModeContext
from planmode.errors import ConfigurationError, ModelUnavailableError, PlanParseError
from planmode.state.parse import extract_json

__all__ = [
    "AUTO_ORDER",
    "ModelProvider",
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
    "text_of",
]

T = TypeVar("T", bound=BaseModel)


class ModelProvider:
    """Gives nodes the chat model: the one passed to the builder, or a ``ChatOpenAI`` made from settings."""

    def __init__(self, model: BaseChatModel | None = None) -> None:
        self._model = model
        self._cache: dict[tuple[Any, ...], BaseChatModel] = {}

    @property
    def explicit(self) -> bool:
        """True when a model object was passed to the builder."""
        return self._model is not None

    def get(self, settings: PlanModeContext) -> BaseChatModel:
        """The chat model for a run; raises `ConfigurationError` naming the fix when it cannot be made."""
        if self._model is not None:
            return self._model
        key = (
            settings.model,
            settings.base_url,
            settings.request_timeout,
            settings.max_retries,
            settings.max_output_tokens,
        )
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
    cap = settings.max_output_tokens if settings.max_output_tokens > 0 else None
    # ChatOpenAI sends its cap as max_completion_tokens, which llama-cpp-python's server (0.3.x) ignores: a
    # local server also gets the older max_tokens, which every OpenAI-compatible server reads.
    extra_body = {"max_tokens": cap} if cap and settings.base_url else None
    return ChatOpenAI(
        model=settings.model,
        base_url=settings.base_url,
        api_key=api_key or "not-needed",  # local servers ignore the key
        max_retries=settings.max_retries,
        timeout=settings.request_timeout,
        max_tokens=cap,
        extra_body=extra_body,
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


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        parts = []
        for err in exc.errors()[:6]:
            loc = ".".join(str(p) for p in err["loc"]) or "(root)"
            parts.append(f"{loc}: {err['msg']}")
        return "invalid fields: " + "; ".join(parts)
    # All of it, whitespace folded: llama-cpp-python puts the cause on the lines after "1 validation error:".
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:500]


def call_structured(
    model: BaseChatModel,
    schema: type[T],
    messages: Sequence[BaseMessage],
    settings: PlanModeContext,
) -> tuple[T | None, str | None, AIMessage | None]:
    """Ask for one ``schema`` value. Returns ``(value, None, raw)`` or ``(None, error, raw)``.

    Never raises for bad output or a failed model call (those are errors to feed back); raises
    `ConfigurationError` for a model that cannot do structured output, and `ModelUnavailableError` when the
    model cannot be reached (the run pauses; see `planmode.nodes.model_unavailable`).

    The mode follows ``settings.structured_output``. In ``auto``, an OpenAI-compatible model tries
    json_schema, json_object (with the schema) and tool calling in turn: a server that refuses a mode (an HTTP
    error naming response_format, json_schema or tools) gets the next one, and the first one accepted is
    kept for that model object (`negotiated_mode`): every later call of the run uses it.
    """
    msgs = normalize_messages(messages) if settings.normalize_messages else list(messages)
    msgs = fit_messages(msgs, context_budget(model, settings), reserve=settings.max_output_tokens)
    modes, forced = _modes(model, settings)
    refusals: list[str] = []
    for mode in modes:
        try:
            out = _ask(model, schema, msgs, mode)
        except ConfigurationError:
            raise
        except NotImplementedError as exc:
            raise ConfigurationError(
                f"{type(model).__name__} supports neither tool calling nor structured output; use a chat model "
                "that implements bind_tools"
            ) from exc
        except Exception as exc:  # a failed model call is an error value for the node's retry loop
            if failure_kind(exc) == "refused":
                refusals.append(f"{mode}: {_describe(exc)[:300]}")
                continue
            return None, model_failure(exc, model, settings), None
        if not forced:
            _remember_mode(model, mode)
        return _read(out, schema)
    tried = "; ".join(refusals)
    if forced:
        msg = (
            f"the server refused structured_output={modes[0]!r} ({tried}); set the structured_output setting "
            "to 'auto' to negotiate, or to another of json_schema, json_object, tool_calling"
        )
    else:
        msg = (
            f"the server refused every structured-output mode it was offered ({tried}); set the "
            "structured_output setting to json_schema, json_object or tool_calling to force one"
        )
    return None, msg, None


Mode = Literal["json_schema", "json_object", "tool_calling"]
#: The order "auto" tries structured-output modes in, for an OpenAI-compatible model.
AUTO_ORDER: tuple[Mode, ...] = ("json_schema", "json_object", "tool_calling")
_REGISTRY_LOCK = threading.Lock()
#: What planmode learnt about a model object (its negotiated mode, its server's context size), by id(); an
#: entry is dropped when its model is collected, so a new graph (or a new port) learns afresh.
_LEARNT: dict[int, dict[str, Any]] = {}


def _learnt(model: Any, key: str) -> Any:
    with _REGISTRY_LOCK:
        return _LEARNT.get(id(model), {}).get(key)


def _learn(model: Any, key: str, value: Any) -> Any:
    """Keep ``value`` for ``model`` unless a value is already kept; return the kept value."""
    ident = id(model)
    with _REGISTRY_LOCK:
        fresh = ident not in _LEARNT
        kept = _LEARNT.setdefault(ident, {}).setdefault(key, value)
    if fresh:
        weakref.finalize(model, _forget, ident)
    return kept


def _forget(ident: int) -> None:
    with _REGISTRY_LOCK:
        _LEARNT.pop(ident, None)


def _is_openai(model: Any) -> bool:
    # Only a ChatOpenAI model can be one; checking sys.modules avoids a ~1 s import for other models.
    module = sys.modules.get("langchain_openai")
    chat_openai = getattr(module, "ChatOpenAI", None) if module is not None else None
    return chat_openai is not None and isinstance(model, chat_openai)


def _endpoint(model: Any) -> tuple[str | None, str | None]:
    base = getattr(model, "openai_api_base", None)
    name = getattr(model, "model_name", None)
    return (str(base).rstrip("/") if base else None, str(name) if name else None)


def negotiated_mode(model: BaseChatModel) -> Mode | None:
    """The structured-output mode ``auto`` settled on for this model object, if any yet.

    `ModelProvider` keeps one model object per (model, base_url, ...) for the life of the graph, so every node
    of a run, and a run resumed in the same process, reuse the choice; another process negotiates again (one
    refused request per refused mode)."""
    mode: Mode | None = _learnt(model, "mode")
    return mode


def negotiation_record(model: BaseChatModel, settings: PlanModeContext) -> str | None:
    """The ``negotiated_output`` setting to keep in state when ``auto`` settled on a mode that the settings do
    not record yet (None when there is nothing new)."""
    mode = negotiated_mode(model) if settings.structured_output == "auto" else None
    if mode is None:
        return None
    base_url, name = _endpoint(model)
    record = f"{mode} {base_url or ''} {name or ''}"
    return None if record == settings.negotiated_output else record


def _recorded_mode(model: BaseChatModel, settings: PlanModeContext) -> Mode | None:
    parts = settings.negotiated_output.split(" ")
    base_url, name = _endpoint(model)
    if len(parts) == 3 and parts[0] in AUTO_ORDER and parts[1:] == [base_url or "", name or ""]:
        mode: Mode = parts[0]  # narrowed by the AUTO_ORDER check above
        return mode
    return None


def _remember_mode(model: BaseChatModel, mode: Mode) -> None:
    if _is_openai(model) and negotiated_mode(model) != mode:
        with _REGISTRY_LOCK:
            _LEARNT.get(id(model), {}).pop("mode", None)
        _learn(model, "mode", mode)


def _modes(model: BaseChatModel, settings: PlanModeContext) -> tuple[list[Mode], bool]:
    """The modes to try, in order, and whether the setting forces them."""
    chosen = settings.structured_output
    if chosen != "auto":
        return [chosen], True
    if not _is_openai(model):
        return ["tool_calling"], False
    known = negotiated_mode(model) or _recorded_mode(model, settings)
    start = AUTO_ORDER.index(known) if known is not None else 0
    return list(AUTO_ORDER[start:]), False


def _ask(model: BaseChatModel, schema: type[BaseModel], msgs: list[BaseMessage], mode: Mode) -> Any:
    if mode == "json_object":
        spec = grammar_safe_schema(schema.model_json_schema())
        response_format = {"type": "json_object", "schema": spec}
        if _is_openai(model):
            # Through extra_body: langchain-openai would turn a response_format into its parse() path, and
            # LangChain's json_mode sends the type alone, which leaves the model free to write any JSON.
            extra = {**(getattr(model, "extra_body", None) or {}), "response_format": response_format}
            bound: Any = model.bind(extra_body=extra)
        else:
            bound = model.bind(response_format=response_format)
        raw = bound.invoke(_with_schema_hint(msgs, spec))
        return {"raw": raw, "parsed": None}
    if mode == "tool_calling" and _is_openai(model) and _endpoint(model)[0]:
        # A local server builds a grammar from the tool's parameters as well (llama-cpp-python died on
        # PlanDraft's step-id pattern in tool-calling mode too): send them grammar-safe; Pydantic checks the rest.
        from langchain_core.utils.function_calling import convert_to_openai_tool

        spec = convert_to_openai_tool(schema)
        spec["function"]["parameters"] = grammar_safe_schema(spec["function"].get("parameters") or {})
        raw = model.bind_tools([spec], tool_choice=spec["function"]["name"]).invoke(msgs)
        return {"raw": raw, "parsed": None}
    method = "json_schema" if mode == "json_schema" else "function_calling"
    try:
        runnable = model.with_structured_output(schema, method=method, include_raw=True)
    except TypeError:  # models whose with_structured_output has no `method`
        runnable = model.with_structured_output(schema, include_raw=True)
    return runnable.invoke(msgs)


_GRAMMAR_UNSAFE = frozenset({"format", "minLength", "maxLength"})
_BOUNDED = re.compile(r"\{(\d*),?(\d*)\}")


def grammar_safe_pattern(pattern: str) -> str | None:
    """A regex pattern llama.cpp's grammar converter handles: bounded repeats become ``*`` / ``+`` and an
    escaped ``-`` at the end of a class a plain one; None when escapes remain (the pattern is then left out)."""
    out = _BOUNDED.sub(lambda m: "+" if m.group(1) not in ("", "0") else "*", pattern).replace("\\-]", "-]")
    return None if "\\" in out else out


def grammar_safe_schema(spec: Any) -> Any:
    """The JSON schema as a grammar llama.cpp can build: no formats or lengths, simple patterns only.

    llama.cpp turns the schema of a json_object request into a grammar. PlanDraft's step-id pattern
    ``^[A-Za-z_][A-Za-z0-9_\\-]{0,63}$`` became a grammar it failed to parse, and llama-cpp-python 0.3.16's
    server process died; ``^[A-Za-z_][A-Za-z0-9_-]*$`` works. Pydantic still checks the full constraints on
    the answer."""
    if isinstance(spec, dict):
        out: dict[str, Any] = {}
        for key, value in spec.items():
            if key in _GRAMMAR_UNSAFE:
                continue
            if key == "pattern" and isinstance(value, str):
                simple = grammar_safe_pattern(value)
                if simple is not None:
                    out[key] = simple
                continue
            out[key] = grammar_safe_schema(value)
        return out
    if isinstance(spec, list):
        return [grammar_safe_schema(v) for v in spec]
    return spec


def _with_schema_hint(msgs: list[BaseMessage], spec: dict[str, Any]) -> list[BaseMessage]:
    """The messages with the JSON schema stated in the (first) system message."""
    hint = "Answer with one JSON object, and nothing else, that matches this JSON schema:\n" + json.dumps(spec)
    out = list(msgs)
    for i, m in enumerate(out):
        if isinstance(m, SystemMessage):
            out[i] = SystemMessage(content=text_of(m) + "\n\n" + hint)
            return out
    return [SystemMessage(content=hint), *out]


def _read(out: Any, schema: type[T]) -> tuple[T | None, str | None, AIMessage | None]:
    raw: AIMessage | None = None
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
            return None, _describe(exc) + _cut_off(raw), raw
    if isinstance(out, schema):
        return out, None, None
    return None, f"unexpected structured output of type {type(out).__name__}", None


def _cut_off(raw: AIMessage | None) -> str:
    reason = (raw.response_metadata or {}).get("finish_reason") if raw is not None else None
    if reason == "length":
        return " (the answer was cut off at the max_output_tokens cap: raise the setting if answers need more)"
    return ""


# -- model failures ----------------------------------------------------------------------------------------

FailureKind = Literal["unavailable", "refused", "overflow", "other"]

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
    """What a failed model call means: the model is unavailable (connection refused, 5xx or 429 after the
    client's retries), the server refused a structured-output mode, the context overflowed, or another error.
    A timeout is another error: a server that answers too slowly is not down."""
    text = _error_text(exc).lower()
    status = getattr(exc, "status_code", None)
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


def model_failure(exc: BaseException, model: BaseChatModel, settings: PlanModeContext) -> str:
    """The error text of a failed model call, naming the setting that fixes it; raises
    `ModelUnavailableError` when the model cannot be reached (that pauses the run instead)."""
    kind = failure_kind(exc)
    base_url, name = _endpoint(model)
    if kind == "unavailable":
        raise ModelUnavailableError(
            _describe(exc), base_url=base_url or settings.base_url, model=name or settings.model
        ) from exc
    if kind == "overflow":
        match = _CONTEXT_SIZE.search(_error_text(exc))
        if match:  # later calls trim to the size the server named
            with _REGISTRY_LOCK:
                _LEARNT.get(id(model), {}).pop("context", None)
            _learn(model, "context", int(match.group(1)))
        return (
            f"context overflow: {_describe(exc)} The prompt plus max_output_tokens "
            f"({settings.max_output_tokens}) must fit the model's context: set the context_tokens setting "
            f"to the server's context size (the budget was {context_budget(model, settings)} tokens) so "
            "old tool results are trimmed to fit, lower max_output_tokens, or give the server a larger "
            "context (llama.cpp: --n_ctx / -c)"
        )
    return f"model call failed: {_describe(exc)}"


# -- the context budget ------------------------------------------------------------------------------------


def context_budget(model: BaseChatModel, settings: PlanModeContext) -> int:
    """Tokens a call's prompt and answer may use: the context_tokens setting, else what the server reports
    (or named in an overflow error), else `DEFAULT_CONTEXT_TOKENS`."""
    if settings.context_tokens > 0:
        return settings.context_tokens
    base_url, _ = _endpoint(model)
    if not base_url or not _is_openai(model):
        return DEFAULT_CONTEXT_TOKENS
    known = _learnt(model, "context")
    if known is None:
        known = _learn(model, "context", discover_context_tokens(base_url) or 0)
    return int(known) or DEFAULT_CONTEXT_TOKENS


def fit_transcript(
    model: BaseChatModel, messages: Sequence[BaseMessage], settings: PlanModeContext, tools: Sequence[Any] = ()
) -> list[BaseMessage]:
    """A tool loop's messages trimmed to the context budget, leaving room for the answer and the tools'
    schemas (see `planmode._budget`)."""
    reserve = max(0, settings.max_output_tokens)
    if tools:
        from langchain_core.utils.function_calling import convert_to_openai_tool

        try:
            specs = json.dumps([convert_to_openai_tool(t) for t in tools], default=str)
        except Exception:  # a tool whose schema cannot be rendered: count a generous fixed amount instead
            specs = "x" * 2000 * len(tools)
        reserve += len(specs) // CHARS_PER_TOKEN
    return fit_messages(messages, context_budget(model, settings), reserve=reserve)


def discover_context_tokens(base_url: str, *, timeout: float = 2.0) -> int | None:
    """The context size an OpenAI-compatible server reports: llama.cpp's ``/props`` (``n_ctx``) or vLLM's
    ``/v1/models`` (``max_model_len``). None when it reports none (llama-cpp-python, Ollama) or cannot be
    asked. One short request each, no retries."""
    root = base_url.rstrip("/")
    root = root[: -len("/v1")] if root.endswith("/v1") else root
    props = _get_json(root + "/props", timeout)
    if isinstance(props, dict):
        for holder in (props, props.get("default_generation_settings")):
            if isinstance(holder, dict) and isinstance(holder.get("n_ctx"), int) and holder["n_ctx"] > 0:
                return int(holder["n_ctx"])
    models = _get_json(base_url.rstrip("/") + "/models", timeout)
    data = models.get("data") if isinstance(models, dict) else None
    for item in data if isinstance(data, list) else []:
        size = item.get("max_model_len") if isinstance(item, dict) else None
        if isinstance(size, int) and size > 0:
            return size
    return None


def _get_json(url: str, timeout: float) -> Any:
    if not url.startswith(("http://", "https://")):
        return None
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # http(s) only, checked above
            return json.loads(response.read(1_000_000))
    except (OSError, ValueError):
        return None
