"""Run settings: the graph's ``context_schema``.

Explicit values beat environment variables, which beat defaults. Runtime context is not kept across an
interrupt, so the settings a run starts with are also kept in state (``settings``) and nodes fall back to
them when a resumed run brings no context.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal

__all__ = ["DEFAULT_CONTEXT_TOKENS", "PlanModeContext", "resolve_settings"]


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a whole number") from None


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


_FIELD_NAMES = {f.name for f in fields(PlanModeContext)}

#: The context budget when neither the setting nor the server gives one.
DEFAULT_CONTEXT_TOKENS = 8192


def resolve_settings(context: Any, stored: dict[str, Any] | None) -> PlanModeContext:
    """The settings for a node: the values given in the runtime context, else the ones stored in state, else
    defaults.

    A `PlanModeContext` instance cannot tell a value that was given from a default, so only its fields that
    differ from the defaults override the stored settings. This matters on resume: the LangGraph server
    hands a resumed run a *default* `PlanModeContext` (runtime context is not kept across an interrupt), which
    must not replace the settings the run started with. A dict context counts every key it has as given.
    """
    base = PlanModeContext(**_known(stored)) if stored else None
    if isinstance(context, PlanModeContext):
        if base is None:
            return context
        defaults = PlanModeContext()
        given = {f: getattr(context, f) for f in _FIELD_NAMES if getattr(context, f) != getattr(defaults, f)}
        return replace(base, **given)
    given = _known(context) if isinstance(context, dict) else {}
    if base is None:
        return PlanModeContext(**given)
    return replace(base, **given)


def _known(values: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (values or {}).items() if k in _FIELD_NAMES}


def settings_dict(settings: PlanModeContext) -> dict[str, Any]:
    """The settings as a plain dict (kept in state so a resumed run has them)."""
    return asdict(settings)
