"""Structured calls: one schema value from the chat model, in the structured-output mode the server accepts.

Structured calls never raise for bad model output: they return ``(value, None, raw)`` or ``(None, error, raw)``, so
nodes can feed the error back within their bounds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.runnables import Runnable
from langgraph.errors import GraphBubbleUp
from pydantic import BaseModel, ValidationError

from planmode._cache import IdentityCache
from planmode._drive import Call, adrive, drive
from planmode.context import PlanModeContext
from planmode.errors import ConfigurationError, PlanParseError
from planmode.llm._learnt import endpoint, is_openai, learn, learnt, relearn
from planmode.llm.failures import describe, failure_kind, model_failure
from planmode.llm.messages import normalize_messages, text_of
from planmode.llm.trim import fit_messages
from planmode.llm.window import acontext_budget, context_budget
from planmode.state.parse import extract_json
from planmode.text import clip

__all__ = [
    "AUTO_ORDER",
    "RUNNABLES",
    "Mode",
    "Prepared",
    "Structured",
    "acall_structured",
    "call_structured",
    "grammar_safe_pattern",
    "grammar_safe_schema",
    "negotiated_mode",
    "negotiation_record",
    "openai_response_format",
    "refuses_mode",
    "shape_hint",
    "start_from_record",
    "structured_runnable",
    "structured_steps",
]

T = TypeVar("T", bound=BaseModel)


def _from_raw(raw: AIMessage | None, schema: type[T]) -> T:
    """Read a schema value from a raw message: its tool call arguments, or JSON in its text."""
    if raw is None:
        raise PlanParseError("the model returned nothing")
    refusal = (raw.additional_kwargs or {}).get("refusal")
    if refusal:
        raise PlanParseError(f"the model refused to answer: {clip(str(refusal), 300)}")
    for call in raw.tool_calls or []:
        return schema.model_validate(call["args"])
    for bad in getattr(raw, "invalid_tool_calls", None) or []:
        args = bad.get("args") or ""
        return schema.model_validate(extract_json(args))
    return schema.model_validate(extract_json(text_of(raw)))


Structured = tuple[T | None, str | None, AIMessage | None]
"""A structured call's answer: ``(value, None, raw)`` or ``(None, error, raw)``."""


def call_structured(
    model: BaseChatModel,
    schema: type[T],
    messages: Sequence[BaseMessage],
    settings: PlanModeContext,
) -> Structured[T]:
    """Ask for one ``schema`` value. Returns ``(value, None, raw)`` or ``(None, error, raw)``.

    Never raises for bad output or a failed model call (those are errors to feed back); raises
    `ConfigurationError` for a model that cannot do structured output, and `ModelUnavailableError` when the
    model cannot be reached (the run pauses; see `planmode.nodes.model_unavailable`).

    The mode follows ``settings.structured_output``. In ``auto``, an OpenAI-compatible model tries
    json_schema, json_object (with the schema), tool calling and prompted in turn (`AUTO_ORDER`), starting from the
    mode negotiated so far: a server that refuses a mode (`refuses_mode`) gets the next one, and the mode that is
    answered is kept for that model object (`negotiated_mode`), which `ModelProvider` keeps one of per endpoint: every
    later call starts from it. A later refusal (another schema the server cannot turn into a grammar) moves on again,
    never back. Every mode that sends a schema sends it grammar-safe (`grammar_safe_schema`); Pydantic checks the
    full schema on the answer. The runnable of each (model, schema, mode) is built once (`structured_runnable`).
    """
    return drive(structured_steps(model, schema, messages, settings))


async def acall_structured(
    model: BaseChatModel,
    schema: type[T],
    messages: Sequence[BaseMessage],
    settings: PlanModeContext,
) -> Structured[T]:
    """`call_structured` with ``ainvoke``: the same modes, validation and errors, nothing blocking the loop."""
    return await adrive(structured_steps(model, schema, messages, settings))


_Call = tuple[Runnable[Any, Any], list[BaseMessage]]


def structured_steps(
    model: BaseChatModel, schema: type[T], messages: Sequence[BaseMessage], settings: PlanModeContext
) -> Generator[Any, Any, Structured[T]]:
    """`call_structured` as a loop for a driver (`planmode._drive`): yields the context-window look-up (a `Call`)
    and each model call to make (a ``(runnable, messages)`` pair), returns the answer. A node body composes it
    with ``yield from``, so the node's driver makes the calls."""
    budget = yield Call(partial(context_budget, model, settings), partial(acontext_budget, model, settings))
    return (yield from _structured(model, schema, messages, settings, budget))


def _structured(
    model: BaseChatModel, schema: type[T], messages: Sequence[BaseMessage], settings: PlanModeContext, budget: int
) -> Generator[_Call, Any, Structured[T]]:
    """The structured call, written once: yields each model call to make (see `planmode.llm._drive`)."""
    msgs = normalize_messages(messages) if settings.normalize_messages else list(messages)
    msgs = fit_messages(msgs, budget, reserve=settings.max_output_tokens)
    modes, forced = _modes(model, settings)
    refusals: list[str] = []
    for mode in modes:
        try:
            prepared = structured_runnable(model, schema, mode)
            out = prepared.read((yield prepared.runnable, prepared.prompt(msgs)))
        except (ConfigurationError, GraphBubbleUp):  # a setup error; a pause at the call's budget check
            raise
        except NotImplementedError as exc:
            raise ConfigurationError(
                f"{type(model).__name__} supports neither tool calling nor structured output; use a chat model "
                "that implements bind_tools"
            ) from exc
        except Exception as exc:  # a failed model call is an error value for the node's retry loop
            if refuses_mode(exc, mode):
                refusals.append(f"{mode}: {clip(describe(exc), 300, marker='', fold=False)}")
                continue
            error = model_failure(exc, model, settings)
            if refusals:  # what the server refused before this mode failed for another reason
                error += f" (after the server refused {'; '.join(refusals)})"
            return None, error, None
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


Mode = Literal["json_schema", "json_object", "tool_calling", "prompted"]
"""How a structured value is asked for. ``prompted``: no response_format and no tools; the system message shows
the JSON shape (`shape_hint`), the answer's JSON is read leniently from its text and Pydantic checks it. For
small local models, where a grammar made from the schema slows decoding many times over (the small model
profile's choice), and the last resort of ``auto``: it asks the server for nothing it can refuse."""
#: The order "auto" tries structured-output modes in, for an OpenAI-compatible model.
AUTO_ORDER: tuple[Mode, ...] = ("json_schema", "json_object", "tool_calling", "prompted")
#: HTTP statuses of a request the server found malformed: for a request that carries a schema, a grammar or tools,
#: the server's refusal of what it carried (llama.cpp answers 400 when it cannot build a grammar from a schema).
_REFUSAL_STATUSES = frozenset({400, 422})


def refuses_mode(exc: BaseException, mode: Mode) -> bool:
    """Whether the failed call ``exc`` in ``mode`` is the server refusing the mode (then ``auto`` tries the next one).

    The rule: a call that carried something to constrain the answer (every mode but prompted) and failed with HTTP
    400 or 422 (a request the server could not take, other than a context overflow), or with an error naming the
    structured-output mode (`failure_kind` ``refused``). Which part of the request the server could not take is not
    read from its words: the next mode asks for less, and prompted asks for nothing the server can refuse, so a 400
    that was about something else fails in prompted too, and is then the call's error. The mode that is answered is
    the one remembered, so a 400 that was no refusal never makes a later call start from a mode it did not need."""
    if mode == "prompted":
        return False
    kind = failure_kind(exc)
    return kind == "refused" or (kind == "other" and getattr(exc, "status_code", None) in _REFUSAL_STATUSES)


def negotiated_mode(model: BaseChatModel) -> Mode | None:
    """The structured-output mode ``auto`` settled on for this model object, if any yet.

    `ModelProvider` keeps one model object per (model, base_url, ...) for the life of the graph, so every node
    of a run, and a run resumed in the same process, reuse the choice; another process negotiates again (one
    refused request per refused mode)."""
    mode: Mode | None = learnt(model, "mode")
    return mode


def negotiation_record(model: BaseChatModel, settings: PlanModeContext, recorded: str | None) -> str | None:
    """The ``negotiated_output`` state value to keep when ``auto`` settled on a mode that the state does not
    record yet (``recorded``; None when there is nothing new): ``"mode base_url model"``."""
    mode = negotiated_mode(model) if settings.structured_output == "auto" else None
    if mode is None:
        return None
    base_url, name = endpoint(model)
    record = f"{mode} {base_url or ''} {name or ''}"
    return None if record == recorded else record


def start_from_record(model: BaseChatModel, recorded: Any) -> None:
    """Let ``auto`` start from the mode a run recorded (``negotiated_output`` in state, `negotiation_record`)
    for this endpoint and model, when this model object has settled on none yet (a run resumed in another
    process); a record of another endpoint, or an unreadable one, changes nothing."""
    if not isinstance(recorded, str) or not is_openai(model) or negotiated_mode(model) is not None:
        return
    parts = recorded.split(" ")
    base_url, name = endpoint(model)
    if len(parts) == 3 and parts[0] in AUTO_ORDER and parts[1:] == [base_url or "", name or ""]:
        learn(model, "mode", parts[0])


def _remember_mode(model: BaseChatModel, mode: Mode) -> None:
    if is_openai(model) and negotiated_mode(model) != mode:
        relearn(model, "mode", mode)


def _modes(model: BaseChatModel, settings: PlanModeContext) -> tuple[list[Mode], bool]:
    """The modes to try, in order, and whether the setting forces them."""
    chosen = settings.structured_output
    if chosen != "auto":
        return [chosen], True
    if not is_openai(model):
        return ["tool_calling"], False
    known = negotiated_mode(model)
    start = AUTO_ORDER.index(known) if known is not None else 0
    return list(AUTO_ORDER[start:]), False


@dataclass(frozen=True)
class Prepared:
    """A structured-output runnable, built once per (model, schema, mode) and reused by every call."""

    runnable: Runnable[Any, Any]
    hint: str | None = None
    """What the system message adds: the JSON schema (json_object mode), or the JSON shape (prompted mode)."""
    raw_only: bool = False
    """The runnable answers with the raw message, not ``{"raw": ..., "parsed": ...}``."""

    def prompt(self, msgs: list[BaseMessage]) -> list[BaseMessage]:
        """The messages to send."""
        return _with_hint(msgs, self.hint) if self.hint is not None else msgs

    def read(self, out: Any) -> Any:
        """The answer as ``{"raw": ..., "parsed": ...}`` (or what ``with_structured_output`` returned)."""
        return {"raw": out, "parsed": None} if self.raw_only else out


#: The runnables built so far, by model object, schema and mode.
RUNNABLES: IdentityCache[Prepared] = IdentityCache(size=256)


def structured_runnable(model: BaseChatModel, schema: type[BaseModel], mode: Mode) -> Prepared:
    """The runnable asking ``model`` for a ``schema`` value in ``mode``: built on the first call, then cached
    (building one renders the JSON schema, which cost a good share of a server's time when done per call)."""
    return RUNNABLES.get((model,), (schema, mode), lambda: _build(model, schema, mode))


def _build(model: BaseChatModel, schema: type[BaseModel], mode: Mode) -> Prepared:
    if mode == "prompted":
        # The model itself: no response_format (a server makes a grammar of it) and no tools; the answer's JSON is
        # read from its text (`_from_raw`: a fenced block, prose around it) and Pydantic checks it.
        return Prepared(model, hint=shape_hint(schema), raw_only=True)
    if mode == "json_object":
        spec = grammar_safe_schema(schema.model_json_schema())
        response_format = {"type": "json_object", "schema": spec}
        if is_openai(model):
            # Through extra_body: langchain-openai would turn a response_format into its parse() path, and
            # LangChain's json_mode sends the type alone, which leaves the model free to write any JSON.
            bound: Any = _with_extra_body(model, response_format)
        else:
            bound = model.bind(response_format=response_format)
        hint = "Answer with one JSON object, and nothing else, that matches this JSON schema:\n" + json.dumps(spec)
        return Prepared(bound, hint=hint, raw_only=True)
    if mode == "tool_calling" and is_openai(model) and endpoint(model)[0]:
        # A local server builds a grammar from the tool's parameters as well (llama-cpp-python died on
        # PlanDraft's step-id pattern in tool-calling mode too): send them grammar-safe; Pydantic checks the rest.
        from langchain_core.utils.function_calling import convert_to_openai_tool

        tool = convert_to_openai_tool(schema)
        tool["function"]["parameters"] = grammar_safe_schema(tool["function"].get("parameters") or {})
        return Prepared(model.bind_tools([tool], tool_choice=tool["function"]["name"]), raw_only=True)
    if mode == "json_schema" and is_openai(model):
        rendered = openai_response_format(schema)
        if rendered is not None:
            # Grammar-safe like every schema planmode sends: a local server makes a grammar of it, and llama.cpp's
            # refuses a pattern's escapes; Pydantic checks the full schema on the answer.
            inner = dict(rendered["json_schema"])
            inner["schema"] = grammar_safe_schema(inner.get("schema") or {})
            rendered = {**rendered, "json_schema": inner}
            # The response_format rendered once, sent through extra_body: given the Pydantic class,
            # langchain-openai hands it to openai's parse(), which renders the strict JSON schema again on every
            # call, and the client walks any response_format it is given, node by node, to transform it. The
            # body sent is the same; Pydantic reads the answer (`_from_raw`). At 50 concurrent runs on one
            # server, this and with_structured_output's runnable chain were a fifth of its event loop's time.
            tracing = {"kwargs": {"method": "json_schema", "strict": True}, "schema": rendered["json_schema"]}
            return Prepared(_with_extra_body(model, rendered, ls_structured_output_format=tracing), raw_only=True)
    method = "json_schema" if mode == "json_schema" else "function_calling"
    try:
        runnable = model.with_structured_output(schema, method=method, include_raw=True)
    except TypeError:  # models whose with_structured_output has no `method`
        runnable = model.with_structured_output(schema, include_raw=True)
    return Prepared(runnable)


def shape_hint(schema: type[BaseModel]) -> str:
    """The system message's statement of ``schema`` for the prompted mode: one example object and a line per field
    (type, required, choices, description). Small models follow an example better than a JSON schema, and it is
    a fraction of its length."""
    spec = schema.model_json_schema()
    defs = spec.get("$defs") or {}
    lines: list[str] = []
    example = _example(spec, defs, "", lines)
    return (
        "Answer with one JSON object and nothing else: no text before or after it. Its shape, with example "
        "values (write your own):\n" + json.dumps(example) + "\nFields:\n" + "\n".join(lines)
    )


def _resolve(spec: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with a ``$ref`` (to ``$defs``) and an optional-value ``anyOf`` (``X | None``) replaced by ``X``."""
    ref = spec.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        spec = {**(defs.get(ref.rsplit("/", 1)[1]) or {}), **{k: v for k, v in spec.items() if k != "$ref"}}
    options = spec.get("anyOf")
    if isinstance(options, list):
        real = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
        if len(real) == 1:
            rest = {k: v for k, v in spec.items() if k != "anyOf"}
            spec = {**_resolve(real[0], defs), **rest, "nullable": True}
    return spec


_EXAMPLE_ID = "step_1"


def _example(spec: dict[str, Any], defs: dict[str, Any], path: str, lines: list[str]) -> Any:
    """An example value for ``spec``; for an object, a line per field appended to ``lines`` (nested ones too)."""
    spec = _resolve(spec, defs)
    kind = spec.get("type")
    if kind == "object" or "properties" in spec:
        props: dict[str, Any] = spec.get("properties") or {}
        required = set(spec.get("required") or ())
        out: dict[str, Any] = {}
        for name, sub in props.items():
            sub = _resolve(sub, defs)
            where = f"{path}.{name}" if path else name
            lines.append(_field_line(where, sub, name in required))
            value = _example(sub, defs, where, lines)  # also the lines of the fields of its items
            if name not in required:
                # An optional field shows its default ("" as "..."), an optional list an empty one: an example item
                # invites a model to fill it (a dependency, a patch), a "" to leave it out (acceptance criteria).
                if sub.get("nullable") and sub.get("default") is None:
                    value = None
                elif sub.get("type") == "array":
                    value = []
                elif "default" in sub:
                    value = "..." if sub["default"] == "" else sub["default"]
            out[name] = value
        return out
    if kind == "array":
        item = spec.get("items")
        return [_example(item, defs, path + "[]", lines)] if isinstance(item, dict) and item else []
    if spec.get("enum"):
        return spec["enum"][0]
    if kind == "boolean":
        return False
    if kind in ("integer", "number"):
        return 0
    pattern = spec.get("pattern")
    if isinstance(pattern, str):
        try:
            if re.fullmatch(pattern, _EXAMPLE_ID):
                return _EXAMPLE_ID
        except re.error:
            pass
    return "..."


def _field_line(where: str, spec: dict[str, Any], required: bool) -> str:
    kind = spec.get("type")
    if "enum" in spec:
        what = "one of " + ", ".join(json.dumps(v) for v in spec["enum"])
    elif kind == "array":
        item = spec.get("items") or {}
        what = f"a list of {item.get('type') or 'object'}s" if isinstance(item, dict) else "a list"
    elif kind == "boolean":
        what = "true or false"
    else:
        what = str(kind or "value")
    if isinstance(spec.get("pattern"), str):
        what += f" matching {spec['pattern']}"
    if spec.get("minLength"):
        what = "non-empty " + what
    if spec.get("nullable"):
        what += " or null"
    note = spec.get("description")
    return f"- {where}{' (required)' if required else ''}: {what}" + (f". {note}" if note else "")


def _with_extra_body(model: BaseChatModel, response_format: dict[str, Any], **kwargs: Any) -> Any:
    """``model`` bound to send ``response_format`` in the body as it is (besides its own extra_body)."""
    extra = {**(getattr(model, "extra_body", None) or {}), "response_format": response_format}
    return model.bind(extra_body=extra, **kwargs)


def openai_response_format(schema: type[BaseModel]) -> dict[str, Any] | None:
    """The ``response_format`` the openai client sends for ``schema`` in json_schema mode (its strict JSON schema,
    named after the class), rendered by the client's own function; None when this openai version lacks it."""
    try:
        from planmode._compat import type_to_response_format_param
    except ImportError:  # pragma: no cover - a private helper of the openai client; older versions fall back
        return None
    rendered = type_to_response_format_param(schema)
    return dict(rendered) if isinstance(rendered, dict) else None


_GRAMMAR_UNSAFE = frozenset({"format", "minLength", "maxLength"})
_BOUNDED = re.compile(r"\{(\d*),?(\d*)\}")


def grammar_safe_pattern(pattern: str) -> str | None:
    """A regex pattern llama.cpp's grammar converter handles: bounded repeats become ``*`` / ``+`` and an
    escaped ``-`` at the end of a class a plain one; None when escapes remain (the pattern is then left out)."""
    out = _BOUNDED.sub(lambda m: "+" if m.group(1) not in ("", "0") else "*", pattern).replace("\\-]", "-]")
    return None if "\\" in out else out


def grammar_safe_schema(spec: Any) -> Any:
    """The JSON schema as a grammar llama.cpp can build: no formats or lengths, simple patterns only.

    llama.cpp turns the schema of a request (json_schema, json_object, a tool's parameters) into a grammar.
    PlanDraft's step-id pattern ``^[A-Za-z_][A-Za-z0-9_\\-]{0,63}$`` became a grammar it failed to parse, and
    llama-cpp-python 0.3.16's server process died; ``^[A-Za-z_][A-Za-z0-9_-]*$`` works. Pydantic still checks the
    full constraints on the answer. Only schema keywords are changed: a property (or definition) that happens to be
    named ``format`` or ``pattern`` stays."""
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
            if key in _NAMED_SCHEMAS and isinstance(value, dict):  # names of subschemas, not keywords
                out[key] = {name: grammar_safe_schema(sub) for name, sub in value.items()}
                continue
            out[key] = grammar_safe_schema(value)
        return out
    if isinstance(spec, list):
        return [grammar_safe_schema(v) for v in spec]
    return spec


#: Schema keywords whose value maps names to subschemas.
_NAMED_SCHEMAS = frozenset({"properties", "$defs", "definitions", "patternProperties"})


def _with_hint(msgs: list[BaseMessage], hint: str) -> list[BaseMessage]:
    """The messages with ``hint`` added to the (first) system message."""
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
                return None, describe(exc), raw
        try:
            return _from_raw(raw, schema), None, raw
        except (ValidationError, PlanParseError, json.JSONDecodeError, TypeError) as exc:
            return None, describe(exc) + _cut_off(raw), raw
    if isinstance(out, schema):
        return out, None, None
    return None, f"unexpected structured output of type {type(out).__name__}", None


def _cut_off(raw: AIMessage | None) -> str:
    reason = (raw.response_metadata or {}).get("finish_reason") if raw is not None else None
    if reason != "length" or raw is None:
        return ""
    # an answer cut off while it repeated one piece (a list item written over and over) is told to write each once
    runaway = _RUNAWAY.search(text_of(raw)[-_RUNAWAY_TAIL:])
    if runaway is not None:
        piece = runaway.group(1)
        at = piece.find('"')  # '_file", "write' is the item "write_file", seen from its middle
        item = (piece[at:] + piece[:at] if at > 0 else piece).strip(' ,"\n\t')
        return (
            f" (the answer repeated {clip(item or piece, 60)!r} over and over until the max_output_tokens cap cut it "
            "off: write each item once)"
        )
    return " (the answer was cut off at the max_output_tokens cap: raise the setting if answers need more)"


#: A text's tail that is one piece repeated at least eight times (what a small model writes when it loops).
_RUNAWAY = re.compile(r"(.{3,60}?)\1{7,}", re.DOTALL)
_RUNAWAY_TAIL = 600
