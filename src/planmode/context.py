"""Run settings: the graph's ``context_schema``, and `resolve_settings`, which gives every node one object.

Explicit values beat environment variables, which beat defaults. Runtime context is not kept across an
interrupt, so the settings a run starts with are kept in state (``settings``); a resumed run's context
overrides them only with the values it was given (a `PlanModeContext` remembers which ones were).

The caller of a resumed run cannot loosen approval or the budget (`TIGHTEN_ONLY`): those settings may tighten
on a resume, never loosen. A loosening value is ignored, with a warning (log and a ``settings_ignored``
event): loosening is an answer at the interrupt (approve the plan, raise the budget at the budget pause).

Every value is checked when it is set: a choice outside its list, a number of the wrong type, negative, not
finite or past its bound (`MAX_TOKENS`, `MAX_DOLLARS`, `MAX_COUNT`) is a `ConfigurationError` that names it.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import threading
import typing
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, TypeVar

from planmode.errors import ConfigurationError

__all__ = [
    "DEFAULT_CONTEXT_TOKENS",
    "MAX_COUNT",
    "MAX_DOLLARS",
    "MAX_TOKENS",
    "TIGHTEN_ONLY",
    "PlanModeContext",
    "check_dollars",
    "check_tokens",
    "resolve_settings",
    "settings_dict",
]

log = logging.getLogger("planmode.settings")

#: The largest token count planmode accepts (a budget, a context size, a cap): far past any real run, and far
#: inside what a checkpoint can store (a 10**30 budget made the checkpoint unsavable).
MAX_TOKENS = 10**12
#: The largest amount of dollars (a cost budget, a price per million tokens).
MAX_DOLLARS = 10**9
#: The largest value of any other number setting (steps, attempts, seconds, characters...).
MAX_COUNT = 10**9

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
        metadata={
            "description": "OpenAI-compatible base URL (env OPENAI_BASE_URL): Ollama, vLLM, llama.cpp.",
            "env": "OPENAI_BASE_URL",
        },
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
    max_steps: int = field(default=20, metadata={"description": "Step cap of a plan.", "min": 1})
    max_attempts: int = field(default=2, metadata={"description": "Attempts per step before it fails.", "min": 1})
    max_reflections: int = field(default=3, metadata={"description": "Reflections per run before it fails."})
    max_patch_attempts: int = field(default=3, metadata={"description": "Patch requests per reflection."})
    max_plan_attempts: int = field(default=3, metadata={"description": "Planner retries for an invalid plan."})
    max_reflect_attempts: int = field(
        default=3,
        metadata={"description": "Reflection retries for an unreadable assessment (per reflection).", "min": 1},
    )
    max_parallel: int = field(default=4, metadata={"description": "Steps executed at once.", "min": 1})
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
            ),
            "cli": False,  # not a user's setting: no `planmode run` option
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
        if name in _FIELD_NAMES:
            _check_field(name, value)
        object.__setattr__(self, name, value)
        given = self.__dict__.get("_given")
        if given is not None and name in _FIELD_NAMES:  # a field set after __init__ was given too
            self.__dict__["_given"] = given | {name}

    def given(self) -> dict[str, Any]:
        """The values this context was given (by name, or set later), as opposed to its defaults."""
        names = self.__dict__.get("_given", _FIELD_NAMES)
        return {name: getattr(self, name) for name in names if name in _FIELD_NAMES}


_FIELD_NAMES = frozenset(f.name for f in fields(PlanModeContext))
_HINTS = typing.get_type_hints(PlanModeContext)
#: Token-valued settings (bounded by `MAX_TOKENS`); dollar-valued ones (bounded by `MAX_DOLLARS`).
_TOKEN_FIELDS = frozenset({"max_tokens", "max_output_tokens", "context_tokens"})
_DOLLAR_FIELDS = frozenset({"max_cost"})


def check_tokens(name: str, value: Any) -> int:
    """``value`` as a token count: a whole number from 0 to `MAX_TOKENS` (`ConfigurationError` otherwise)."""
    return int(_check_number(name, value, whole=True, bound=MAX_TOKENS, unit="tokens"))


def check_dollars(name: str, value: Any) -> float:
    """``value`` as dollars: a finite number from 0 to `MAX_DOLLARS` (`ConfigurationError` otherwise)."""
    return float(_check_number(name, value, whole=False, bound=MAX_DOLLARS, unit="dollars"))


def _check_number(name: str, value: Any, *, whole: bool, bound: int, unit: str) -> int | float:
    kind = "a whole number" if whole else "a number"
    if isinstance(value, bool) or not isinstance(value, int | float) or (whole and not isinstance(value, int)):
        raise ConfigurationError(f"{name} must be {kind} of {unit}, got {value!r}")
    if not math.isfinite(value) or value < 0 or value > bound:
        raise ConfigurationError(f"{name} must be {kind} of {unit} from 0 to {bound:,}, got {value!r}")
    return value


def _check_field(name: str, value: Any) -> None:
    """A clear error for a value ``name`` cannot take (see the module docstring)."""
    hint = _HINTS.get(name)
    if name in _TOKEN_FIELDS:
        check_tokens(name, value)
    elif name in _DOLLAR_FIELDS:
        check_dollars(name, value)
    elif hint is int:
        _check_number(name, value, whole=True, bound=MAX_COUNT, unit="units")
    elif hint is float:
        _check_number(name, value, whole=False, bound=MAX_COUNT, unit="seconds")
    elif hint is bool:
        if not isinstance(value, bool):
            raise ConfigurationError(f"{name} must be true or false, got {value!r}")
    elif typing.get_origin(hint) is Literal:
        choices = typing.get_args(hint)
        if value not in choices:
            raise ConfigurationError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    elif name == "prices":
        _check_prices(value)


def _check_prices(prices: Any) -> None:
    if not isinstance(prices, Mapping):
        raise ConfigurationError(
            f'prices must be an object such as {{"*": {{"input": 0.15, "output": 0.6}}}}, got {prices!r}'
        )
    for model, entry in prices.items():
        if not isinstance(entry, Mapping):
            raise ConfigurationError(
                f"prices[{model!r}] must be an object of dollars per million tokens, got {entry!r}"
            )
        for kind, price in entry.items():
            check_dollars(f"prices[{model!r}][{kind!r}]", price)


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
    kept = _known(stored)
    ignored = {
        name: given.pop(name) for name in TIGHTEN_ONLY if name in given and name in kept and _loosens(name, kept, given)
    }
    if ignored:
        _warn_ignored(ignored, kept)
    return _settings({**kept, **given})


#: The settings a resumed run's context may tighten but never loosen: a run's caller cannot approve, skip a
#: question or lift a limit by passing a context (loosening is an answer at the interrupt).
TIGHTEN_ONLY = ("approval", "step_approval", "reapprove_patches", "check_staleness", "max_tokens", "max_cost", "prices")


def _loosens(name: str, stored: Mapping[str, Any], given: Mapping[str, Any]) -> bool:
    """True when ``given[name]`` would loosen the run's stored ``stored[name]``."""
    old, new = stored[name], given[name]
    if old == new:
        return False
    if name == "approval":  # ask -> auto approves without a human
        return bool(new != "ask")
    if name == "step_approval":  # writes -> off skips the per-step question
        return bool(old == "writes")
    if name in ("check_staleness", "reapprove_patches"):  # true -> false skips a question
        return bool(old)
    if name in ("max_tokens", "max_cost"):  # a larger limit, or none where there was one
        try:
            return bool(old > 0 and (new <= 0 or new > old))
        except TypeError:  # a value of the wrong type: keep the stored one (the check names the bad value)
            return True
    if name == "prices":  # new prices could make the same calls cheap: only a run without prices takes them
        return bool(old)
    return True


def _warn_ignored(ignored: Mapping[str, Any], kept: Mapping[str, Any]) -> None:
    """Say that a resume's context tried to loosen the run's settings and was ignored: a log warning and a
    ``settings_ignored`` event on the custom stream."""
    from planmode.observability.events import emit  # events imports usage, which must not import the settings at load

    parts = [f"{name}={value!r} (kept {kept[name]!r})" for name, value in ignored.items()]
    message = (
        "a resumed run may tighten its settings, never loosen them: ignored "
        + ", ".join(parts)
        + "; approve the plan or raise the budget by answering the interrupt"
    )
    log.warning("%s", message)
    emit("settings_ignored", message, ignored={k: kept[k] for k in ignored}, given=dict(ignored))


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
