"""Run settings: the graph's ``context_schema``, and `resolve_settings`, which gives every node one object.

Explicit values beat environment variables, which beat defaults. Runtime context is not kept across an
interrupt, so the settings a run starts with are kept in state (``settings``); a resumed run's context
overrides them only with the values it was given (a `PlanModeContext` remembers which ones were).
"""

from __future__ import annotations

import functools
import json
import math
import os
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, TypeVar

__all__ = ["DEFAULT_CONTEXT_TOKENS", "PlanModeContext", "resolve_settings", "settings_dict"]

_C = TypeVar("_C")


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a whole number") from None


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name}={raw!r} must be a non-negative number")
    return value


def _env_prices(name: str) -> dict[str, Any]:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name} is not JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise ValueError(f'{name} must be a JSON object such as {{"gpt-4o-mini": {{"input": 0.15, "output": 0.6}}}}')
    return value


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}={raw!r}: expected true or false")


def _env_choice(name: str, choices: tuple[str, ...], default: str) -> Any:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if raw not in choices:
        raise ValueError(f"{name}={raw!r}: expected one of {', '.join(choices)}")
    return raw


def _remember_given(cls: type[_C]) -> type[_C]:
    """``cls`` (a dataclass) with its ``__init__`` remembering which fields it was given (see `given`)."""
    init: Callable[..., None] = cls.__init__

    @functools.wraps(init)
    def __init__(self: Any, **values: Any) -> None:
        init(self, **values)
        self.__dict__["_given"] = frozenset(values)

    setattr(cls, "__init__", __init__)  # noqa: B010  # assigning a method directly is a mypy error
    return cls


@_remember_given
@dataclass(kw_only=True)
class PlanModeContext:
    """Settings of one planmode run (Studio shows these descriptions)."""

    model: str = field(
        default_factory=lambda: os.environ.get("PLANMODE_MODEL", "gpt-4o-mini"),
        metadata={"description": "Chat model name (env PLANMODE_MODEL). Ignored when a model object is passed."},
    )
    base_url: str | None = field(
        default_factory=lambda: os.environ.get("OPENAI_BASE_URL") or None,
        metadata={"description": "OpenAI-compatible base URL (env OPENAI_BASE_URL): Ollama, vLLM, llama.cpp."},
    )
    workspace: str | None = field(
        default=None,
        metadata={"description": "Folder the CLI's file tools work in (absolute); `planmode resume` reuses it."},
    )
    mode: Literal["auto", "plan", "direct"] = field(
        default="auto",
        metadata={"description": "auto: detect whether a plan is needed; plan / direct: force it."},
    )
    approval: Literal["ask", "auto"] = field(
        default="ask",
        metadata={"description": "ask: interrupt for a human to approve the plan; auto: approve it (headless)."},
    )
    reapprove_patches: bool = field(
        default=False,
        metadata={"description": "Patches made during execution need approval again (off_track ones always do)."},
    )
    max_steps: int = field(default=20, metadata={"description": "Step cap of a plan."})
    max_attempts: int = field(default=2, metadata={"description": "Attempts per step before it fails."})
    max_reflections: int = field(default=3, metadata={"description": "Reflections per run before it fails."})
    max_patch_attempts: int = field(default=3, metadata={"description": "Patch requests per reflection."})
    max_plan_attempts: int = field(default=3, metadata={"description": "Planner retries for an invalid plan."})
    max_reflect_attempts: int = field(
        default=3, metadata={"description": "Reflection retries for an unreadable assessment (per reflection)."}
    )
    max_parallel: int = field(default=4, metadata={"description": "Steps executed at once."})
    max_explore_calls: int = field(default=6, metadata={"description": "Read-only tool calls while planning."})
    max_executor_iterations: int = field(
        default=6, metadata={"description": "Model turns of the default executor per step."}
    )
    structured_output: Literal["auto", "json_schema", "json_object", "tool_calling"] = field(
        default_factory=lambda: _env_choice(
            "PLANMODE_STRUCTURED_OUTPUT", ("auto", "json_schema", "json_object", "tool_calling"), "auto"
        ),
        metadata={
            "description": (
                "How structured output is requested (env PLANMODE_STRUCTURED_OUTPUT). json_schema: response_format "
                "json_schema (OpenAI, vLLM); json_object: response_format json_object with the schema attached "
                "(llama.cpp's server and llama-cpp-python constrain decoding to it); tool_calling: a forced tool "
                "call. auto: for an OpenAI-compatible model, try them in that order and keep the first one the "
                "server accepts for the rest of the run; tool calling for other chat models."
            )
        },
    )
    negotiated_output: str = field(
        default="",
        metadata={
            "description": (
                "Written by planmode, leave empty: the structured-output mode auto settled on, as 'mode base_url "
                "model', so that a run resumed in another process starts from it."
            )
        },
    )
    max_output_tokens: int = field(
        default_factory=lambda: _env_int("PLANMODE_MAX_OUTPUT_TOKENS", 2048),
        metadata={
            "description": (
                "Cap on the tokens one model call may generate (env PLANMODE_MAX_OUTPUT_TOKENS), sent as max_tokens "
                "to the OpenAI-compatible model planmode builds; 0 for no cap."
            )
        },
    )
    context_tokens: int = field(
        default_factory=lambda: _env_int("PLANMODE_CONTEXT_TOKENS", 0),
        metadata={
            "description": (
                "Context budget in tokens (env PLANMODE_CONTEXT_TOKENS): prompt plus max_output_tokens must fit; "
                "old tool results in the exploration and execution transcripts are trimmed to stay within it. 0: "
                "the context size the server reports (llama.cpp /props, vLLM /v1/models), else 8192."
            )
        },
    )
    normalize_messages: bool = field(
        default=False,
        metadata={"description": "Merge same-role messages and put one system message first (strict templates)."},
    )
    max_tokens: int = field(
        default_factory=lambda: _env_int("PLANMODE_MAX_TOKENS", 0),
        metadata={
            "description": (
                "Token budget of the run, input plus output of every model call (env PLANMODE_MAX_TOKENS); 0 for "
                "none. A run that would go over it pauses (interrupt planmode.budget) before the call."
            )
        },
    )
    max_cost: float = field(
        default_factory=lambda: _env_float("PLANMODE_MAX_COST", 0.0),
        metadata={"description": "Cost budget of the run in dollars (env PLANMODE_MAX_COST), at `prices`; 0 for none."},
    )
    prices: dict[str, Any] = field(
        default_factory=lambda: _env_prices("PLANMODE_PRICES"),
        metadata={
            "description": (
                'Per-model prices in dollars per million tokens (env PLANMODE_PRICES, JSON): {"model": {"input": '
                '0.15, "output": 0.6, "cached": 0.075}}; a key matches models it starts with, "*" every model.'
            )
        },
    )
    result_chars: int = field(default=600, metadata={"description": "Characters of a step result kept in state."})
    request_timeout: float = field(
        default=120.0, metadata={"description": "Seconds before a model request times out (default OpenAI model)."}
    )
    max_retries: int = field(
        default=2, metadata={"description": "Retries of a failed model request: 429, 5xx, timeouts (default model)."}
    )
    check_staleness: bool = field(
        default_factory=lambda: _env_bool("PLANMODE_CHECK_STALENESS", True),
        metadata={
            "description": (
                "Fingerprint the workspace at approval and ask again when a resumed run finds it changed "
                "(env PLANMODE_CHECK_STALENESS)."
            )
        },
    )
    step_approval: Literal["off", "writes"] = field(
        default_factory=lambda: _env_choice("PLANMODE_STEP_APPROVAL", ("off", "writes"), "off"),
        metadata={
            "description": (
                "writes: ask for approval of each step that uses a tool that changes things; read-only steps run "
                "straight through (env PLANMODE_STEP_APPROVAL)."
            )
        },
    )

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        given = self.__dict__.get("_given")
        if given is not None and name in _FIELD_NAMES:  # a field set after __init__ was given too
            self.__dict__["_given"] = given | {name}

    def given(self) -> dict[str, Any]:
        """The values this context was given (by name, or set later), as opposed to its defaults."""
        names = self.__dict__.get("_given", _FIELD_NAMES)
        return {name: getattr(self, name) for name in names if name in _FIELD_NAMES}


_FIELD_NAMES = frozenset(f.name for f in fields(PlanModeContext))

#: The context budget when neither the setting nor the server gives one.
DEFAULT_CONTEXT_TOKENS = 8192


def resolve_settings(context: Any, stored: dict[str, Any] | None) -> PlanModeContext:
    """The settings for a node: the values the runtime context was given, else the ones stored in state,
    else defaults.

    Only *given* values override the stored settings (`PlanModeContext.given`; every known key of a dict):
    the LangGraph server hands a resumed run a context made from what the caller sent, often nothing, and
    its defaults must not replace the settings the run started with. An empty ``negotiated_output`` never
    overrides (planmode writes it). The same settings resolve to the same object (cached by value), so
    every node of a run shares one object: treat it as read-only (``dataclasses.replace`` makes a changed
    copy).
    """
    if isinstance(context, PlanModeContext):
        if not stored:
            return context
        # Every node of a run asks with the same two objects: answer from the last answers, by identity (the
        # context's record of given fields changes object whenever a field is set, so a changed context misses).
        memo_key = (id(context), id(stored))
        hit = _MEMO.get(memo_key)
        if hit is not None and hit[0] is context and hit[1] is stored and hit[2] is context.__dict__.get("_given"):
            return hit[3]
        resolved = _resolve(context.given(), stored)
        with _CACHE_LOCK:
            if len(_MEMO) >= _CACHE_SIZE:
                _MEMO.pop(next(iter(_MEMO)))
            _MEMO[memo_key] = (context, stored, context.__dict__.get("_given"), resolved)
        return resolved
    given = _known(context) if isinstance(context, dict) else {}
    return _resolve(given, stored)


def _resolve(given: dict[str, Any], stored: dict[str, Any] | None) -> PlanModeContext:
    if given.get("negotiated_output") == "":
        given.pop("negotiated_output")
    if not stored:
        return PlanModeContext(**given)
    return _settings({**_known(stored), **given})


def _settings(values: dict[str, Any]) -> PlanModeContext:
    """A `PlanModeContext` of ``values``: one shared object per distinct set of values when they name every
    field (missing ones take defaults, which may read the environment: not cached)."""
    if values.keys() != _FIELD_NAMES:
        return PlanModeContext(**values)
    try:
        key = _frozen(values)
        hash(key)
    except TypeError:  # a value that cannot be frozen (a hand-edited state): not cached
        return PlanModeContext(**values)
    with _CACHE_LOCK:
        found = _CACHE.get(key)
        if found is None:
            if len(_CACHE) >= _CACHE_SIZE:
                _CACHE.pop(next(iter(_CACHE)))
            found = _CACHE[key] = PlanModeContext(**values)
        return found


_CACHE: dict[Any, PlanModeContext] = {}
#: resolve_settings' last answers by (context, stored settings) identity: (context, stored, given, settings).
_MEMO: dict[tuple[int, int], tuple[Any, Any, Any, PlanModeContext]] = {}
_CACHE_SIZE = 256
_CACHE_LOCK = threading.Lock()


def _frozen(value: Any) -> Any:
    """``value`` as a hashable key: dicts (``prices``) and lists become sorted tuples, tagged by type."""
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), _frozen(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(_frozen(v) for v in value))
    return (type(value).__name__, value)


def _known(values: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (values or {}).items() if k in _FIELD_NAMES}


def settings_dict(settings: PlanModeContext) -> dict[str, Any]:
    """The settings as a plain dict (kept in state so a resumed run has them)."""
    return asdict(settings)
