"""Run settings: the graph's ``context_schema`` (a frozen `PlanModeContext`), and `settings_of`, how every node
reads them.

Explicit values beat environment variables, which beat defaults. Runtime context is not kept across an
interrupt, so the settings a run starts with are kept in state (``settings``); a resumed run's context
overrides them only with the values it was given (a `PlanModeContext` remembers which ones were): the
settings are resolved against a context (`resolve_settings`) only when it brings a value the state lacks.

The caller of a resumed run cannot loosen approval or the budget (`TIGHTEN_ONLY`): those settings may tighten
on a resume, never loosen. A loosening value is ignored, with a warning (log and a ``settings_ignored``
event): loosening is an answer at the interrupt (approve the plan, raise the budget at the budget pause).

Every value is checked when the settings are made: a choice outside its list, a number of the wrong type, negative, not
finite or past its bound (`MAX_TOKENS`, `MAX_DOLLARS`, `MAX_COUNT`) is a `ConfigurationError` that names it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import os
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
    "brings_news",
    "check_dollars",
    "check_tokens",
    "resolve_settings",
    "settings_dict",
    "settings_from",
    "settings_of",
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
_Choice = TypeVar("_Choice", bound=str)


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


def _env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return list(default)
    return [part.strip() for part in raw.split(",") if part.strip()]


def _env_choice(name: str, choices: tuple[_Choice, ...], default: _Choice) -> _Choice:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    for choice in choices:
        if raw == choice:
            return choice
    raise ValueError(f"{name}={raw!r}: expected one of {', '.join(choices)}")


def _remember_given(cls: type[_C]) -> type[_C]:
    """``cls`` (a dataclass) with its ``__init__`` remembering which fields it was given (see `given`)."""
    init: Callable[..., None] = cls.__init__

    @functools.wraps(init)
    def __init__(self: Any, **values: Any) -> None:
        self.__dict__["_given"] = frozenset(values)  # before the checks of __post_init__, which read nothing of it
        init(self, **values)

    setattr(cls, "__init__", __init__)  # noqa: B010  # assigning a method directly is a mypy error
    return cls


@_remember_given
@dataclass(frozen=True, kw_only=True)
class PlanModeContext:
    """Settings of one planmode run (Studio shows these descriptions).

    Frozen: ``dataclasses.replace`` makes a changed copy. Every value is checked when the object is made, and
    the object remembers which fields it was given (`given`), as opposed to its defaults."""

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
    final_summary: bool = field(
        default=True,
        metadata={
            "description": (
                "Write the final answer with one model call that summarises the run's record. Off: the answer is "
                "the record itself (the goal, the steps done, the files changed), with no call; --gguf turns it "
                "off (a small model on 2 cores takes most of a minute for it)."
            )
        },
    )
    retry_judged_failed: bool = field(
        default=False,
        metadata={
            "description": (
                "Read the run's first reflection that judges the run failed, over steps that failed, as a retry of "
                "those steps with its reasoning (once a run; a second 'failed' ends it, unless it proposes a repair: "
                "then it is read as needs_adjustment and the repair applied). Small models give up on steps they can "
                "fix; --gguf turns it on."
            )
        },
    )
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
    structured_output: Literal["auto", "json_schema", "json_object", "tool_calling", "prompted"] = field(
        default_factory=lambda: _env_choice(
            "PLANMODE_STRUCTURED_OUTPUT", ("auto", "json_schema", "json_object", "tool_calling", "prompted"), "auto"
        ),
        metadata={
            "description": (
                "How structured output is requested (env PLANMODE_STRUCTURED_OUTPUT). json_schema: response_format "
                "json_schema (OpenAI, vLLM); json_object: response_format json_object with the schema attached "
                "(llama.cpp's server and llama-cpp-python constrain decoding to it); tool_calling: a forced tool "
                "call; prompted: no response_format and no tools, the system message shows the JSON shape and the "
                "answer's JSON is read from its text and validated (for small local models on CPU: no grammar, a "
                "shorter prompt; the small model profile's choice). auto: for an OpenAI-compatible model, try "
                "json_schema, json_object, tool_calling and prompted in that order (a refused schema or grammar moves "
                "on) and keep the one the server answers for the rest of the run; tool calling for other chat models."
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
    model_profile: Literal["default", "small"] | None = field(
        default=None,
        metadata={
            "description": (
                "small: the settings for a small local model (prompted structured output, normalised messages, one "
                "step at a time, the server's context size, a retry of judged-failed steps, no final summary call; "
                "each unless set) and the small-model adapter (planmode.adapters.small_models: checks read from "
                "prose, plan and tool-call repair). default: none of that. Not set: `planmode run` "
                "detects a local llama.cpp or Ollama server at base_url (--gguf always) and picks small there, and "
                "shows the profile in its header."
            )
        },
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
    stored_result_chars: int = field(
        default=120,
        metadata={
            "description": (
                "With a store, characters of a step result kept in state: the store keeps the full output, and "
                "dependent steps and the final summary read it from there (result_chars of it for the summary)."
            )
        },
    )
    request_timeout: float = field(
        default=120.0,
        metadata={
            "description": (
                "Seconds a model request may take, from connect to the last byte of the reply (default OpenAI model); "
                "the client retries a timed-out request max_retries times."
            )
        },
    )
    max_retries: int = field(
        default=2, metadata={"description": "Retries of a failed model request: 429, 5xx, timeouts (default model)."}
    )
    max_reply_bytes: int = field(
        default=16 * 1024 * 1024,
        metadata={
            "description": (
                "Largest reply of the model server, in bytes (default model): a larger one is refused with an error, "
                "without reading it whole."
            ),
            "min": 1,
        },
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
    allow_git_writes: bool = field(
        default=False,
        metadata={
            "description": (
                "Let the workspace tools write in .git folders (hooks and config run commands); off: refused. "
                "A resume cannot turn it on."
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

    run_checks: bool = field(
        default_factory=lambda: _env_bool("PLANMODE_RUN_CHECKS", True),
        metadata={
            "description": (
                "Run the plan's declared checks (commands and file checks) in the sandbox when a step ends and "
                "again before 'completed'. Off: no command of a check runs; a step with run checks is then judged "
                "on its prose alone, and the approval screen says so (env PLANMODE_RUN_CHECKS)."
            )
        },
    )
    check_commands: list[str] = field(
        default_factory=lambda: _env_list("PLANMODE_CHECK_COMMANDS", ["python", "pytest"]),
        metadata={
            "description": (
                "The programs a check may run (the command's first word; python also allows python3). A check "
                "that runs another is refused at planning and at approval, and never runs (env "
                "PLANMODE_CHECK_COMMANDS, comma-separated: e.g. python,pytest,go,npm,make)."
            )
        },
    )
    sandbox: bool = field(
        default_factory=lambda: _env_bool("PLANMODE_SANDBOX", True),
        metadata={
            "description": (
                "Run checks under bubblewrap where it works (read-only root, only the workspace writable, no "
                "network, the home folder hidden); the scrubbed environment, limits and timeout hold either way "
                "(env PLANMODE_SANDBOX)."
            )
        },
    )
    check_timeout: float = field(
        default=60.0, metadata={"description": "Seconds one check's command may run before it is killed.", "min": 1}
    )

    def __post_init__(self) -> None:
        if isinstance(self.check_commands, str):  # an option or env var: comma-separated program names
            object.__setattr__(self, "check_commands", [p.strip() for p in self.check_commands.split(",") if p.strip()])
        if self.model_profile not in (None, "default", "small"):
            raise ConfigurationError(f"model_profile must be one of 'default', 'small', got {self.model_profile!r}")
        for name in _FIELD_NAMES:
            _check_field(name, getattr(self, name))

    def given(self) -> dict[str, Any]:
        """The values this context was given when it was made, as opposed to its defaults (a copy made by
        ``dataclasses.replace`` was given every field)."""
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
    elif typing.get_origin(hint) is Literal or (value is not None and _optional_literal(hint)):
        choices = typing.get_args(_optional_literal(hint) or hint)
        if value not in choices:
            raise ConfigurationError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    elif name == "prices":
        _check_prices(value)
    elif name == "check_commands" and (
        not isinstance(value, list | tuple) or not all(isinstance(v, str) and v.strip() for v in value)
    ):
        raise ConfigurationError(f"check_commands must be a list of program names, got {value!r}")


def _optional_literal(hint: Any) -> Any:
    """The ``Literal[...]`` of a ``Literal[...] | None`` hint (None for any other hint)."""
    args = typing.get_args(hint) if typing.get_origin(hint) is not Literal else ()
    literals = [a for a in args if typing.get_origin(a) is Literal]
    return literals[0] if len(literals) == 1 and type(None) in args else None


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


def brings_news(state: Mapping[str, Any], runtime: Any) -> bool:
    """Whether the runtime context was given a value that the settings kept in state do not have (then the
    settings are resolved: `resolve_settings`)."""
    stored = state.get("settings") if isinstance(state, Mapping) else None
    return not stored or bool(_news(_given_of(getattr(runtime, "context", None)), stored))


def settings_of(state: Mapping[str, Any], runtime: Any) -> PlanModeContext:
    """The run's settings, as every node and wrapper reads them: the settings kept in state (``settings``), as a
    `PlanModeContext`; resolved against the runtime context (`resolve_settings`) only when that context was given
    a value the stored settings do not have (a resume that switches ``base_url``, a new run's first node)."""
    context = getattr(runtime, "context", None)
    stored = state.get("settings") if isinstance(state, Mapping) else None
    if stored and not _news(_given_of(context), stored):
        return _typed(stored)
    return resolve_settings(context, stored)


#: Told when a resume's context tried to loosen a `TIGHTEN_ONLY` setting: (message, kept values, given values).
OnIgnored = Callable[[str, dict[str, Any], dict[str, Any]], None]


def resolve_settings(
    context: Any, stored: PlanModeContext | Mapping[str, Any] | None, *, on_ignored: OnIgnored | None = None
) -> PlanModeContext:
    """The settings of a run: the values the runtime context was given, else the stored ones, else defaults.

    Only *given* values override the stored settings (`PlanModeContext.given`; every known key of a dict):
    the LangGraph server hands a resumed run a context made from what the caller sent, often nothing, and
    its defaults must not replace the settings the run started with. A given value that would loosen a
    `TIGHTEN_ONLY` setting is ignored, with a warning (logged, and told to ``on_ignored``). Without stored
    settings (a new run), the context's own values (the context itself when it is a `PlanModeContext`).
    """
    given = _given_of(context)
    if not stored:
        return context if isinstance(context, PlanModeContext) else PlanModeContext(**given)
    kept = _typed(stored)
    changes = _news(given, stored)
    ignored = {name: changes.pop(name) for name in TIGHTEN_ONLY if name in changes and _loosens(name, kept, given)}
    if ignored:
        _warn_ignored(ignored, kept, on_ignored)
    return dataclasses.replace(kept, **changes) if changes else kept


def _given_of(context: Any) -> dict[str, Any]:
    """The values a runtime context was given: a `PlanModeContext`'s `given`, the known keys of a dict."""
    if isinstance(context, PlanModeContext):
        return context.given()
    return _known(context) if isinstance(context, Mapping) else {}


def _news(given: Mapping[str, Any], stored: PlanModeContext | Mapping[str, Any]) -> dict[str, Any]:
    """The given values that differ from the stored ones."""
    if isinstance(stored, PlanModeContext):
        return {k: v for k, v in given.items() if getattr(stored, k) != v}
    return {k: v for k, v in given.items() if k not in stored or stored[k] != v}


def _typed(stored: PlanModeContext | Mapping[str, Any]) -> PlanModeContext:
    """The stored settings as a `PlanModeContext` (keys it does not know are left out: a checkpoint written before
    ``negotiated_output`` left the settings holds it)."""
    return stored if isinstance(stored, PlanModeContext) else PlanModeContext(**_known(stored))


#: The settings a resumed run's context may tighten but never loosen: a run's caller cannot approve, skip a
#: question or lift a limit by passing a context (loosening is an answer at the interrupt).
TIGHTEN_ONLY = (
    "approval",
    "step_approval",
    "reapprove_patches",
    "check_staleness",
    "run_checks",
    "sandbox",
    "check_commands",
    "max_tokens",
    "max_cost",
    "prices",
    "allow_git_writes",
)


def _loosens(name: str, stored: PlanModeContext, given: Mapping[str, Any]) -> bool:
    """True when ``given[name]`` would loosen the run's stored setting ``name``."""
    old, new = getattr(stored, name), given[name]
    if old == new:
        return False
    if name == "approval":  # ask -> auto approves without a human
        return bool(new != "ask")
    if name == "step_approval":  # writes -> off skips the per-step question
        return bool(old == "writes")
    if name == "check_commands":  # a program the run did not allow may not be added on a resume
        return not set(new) <= set(old)
    if name in ("check_staleness", "reapprove_patches", "run_checks", "sandbox"):  # true -> false skips a question
        return bool(old)
    if name == "allow_git_writes":  # false -> true lets the tools write git's hooks and config
        return not old
    if name in ("max_tokens", "max_cost"):  # a larger limit, or none where there was one
        try:
            return bool(old > 0 and (new <= 0 or new > old))
        except TypeError:  # a value of the wrong type: keep the stored one (the check names the bad value)
            return True
    if name == "prices":  # new prices could make the same calls cheap: only a run without prices takes them
        return bool(old)
    return True


def _warn_ignored(ignored: Mapping[str, Any], kept: PlanModeContext, on_ignored: OnIgnored | None) -> None:
    """Say that a resume's context tried to loosen the run's settings and was ignored: a log warning, and
    ``on_ignored`` (the graph's pipeline makes it a ``settings_ignored`` event on the custom stream)."""
    parts = [f"{name}={value!r} (kept {getattr(kept, name)!r})" for name, value in ignored.items()]
    message = (
        "a resumed run may tighten its settings, never loosen them: ignored "
        + ", ".join(parts)
        + "; approve the plan or raise the budget by answering the interrupt"
    )
    log.warning("%s", message)
    if on_ignored is not None:
        on_ignored(message, {k: getattr(kept, k) for k in ignored}, dict(ignored))


def _known(values: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (values or {}).items() if k in _FIELD_NAMES}


def settings_dict(settings: PlanModeContext | Mapping[str, Any] | None) -> dict[str, Any]:
    """The settings as a plain dict: what a node writes to state, and what a reader of a checkpoint's values gets
    (the ``settings`` of a graph's state are a `PlanModeContext`; a checkpoint written before, or a value that is
    not valid settings, holds a dict; None: empty)."""
    if isinstance(settings, PlanModeContext):
        return asdict(settings)
    return dict(settings) if isinstance(settings, Mapping) else {}


def settings_from(value: Any) -> PlanModeContext | Any:
    """``value`` (settings data from a checkpoint or a node's write) as a `PlanModeContext`; the value itself when it
    is not valid settings (a hand-edited state), which `settings_of` then refuses with a clear error. Never raises:
    a checkpoint stays readable."""
    if isinstance(value, PlanModeContext) or not isinstance(value, Mapping) or not value:
        return value
    try:
        return PlanModeContext(**_known(value))
    except (ConfigurationError, TypeError, ValueError):
        return value
