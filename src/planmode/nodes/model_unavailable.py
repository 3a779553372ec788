"""model_unavailable: a run whose model cannot be reached pauses here, resumably, instead of failing.

A refused connection, or a server error after the client's retries, is not a verdict on the step. A node
whose model call raises `ModelUnavailableError` (see `planmode.llm.model_failure`) has ``pausable`` in its
pipeline (`planmode.graph.pipeline`; `paused` here):
it records what to re-run in ``state["unavailable"]`` and the run comes here (plan, patch, respond and
reflect through their routers, execute_step through verify's, verify through its own). The run's status is
``model_unavailable``; done steps stay done; a step whose executor lost the model stays ``running`` without an
outcome, and dispatch runs it again (without counting another attempt).

A server that refuses the credentials (HTTP 401/403: a bad API key, `ModelUnauthorizedError`) pauses the run the
same way, never counted as an invalid plan or a failed step; its pause says ``"reason": "unauthorized"`` (else
``"unavailable"``). Fix the key, then retry.

This node interrupts with ``{"type": "planmode.model_unavailable", ...}``. Resume it with:

- ``Command(resume={"base_url": ..., "model": ...})`` (any run setting may be named): the run continues
  there, and the new settings are kept in state for the rest of the run;
- ``Command(resume={"action": "retry"})`` (or ``"retry"``, ``True``): try the same endpoint again (not
  ``{}``: LangGraph reads a dict resume value as a map from interrupt ids, and an empty one resumes nothing);
- or with a runtime context that names another ``base_url`` or ``model``
  (``graph.invoke(None, cfg, context={"base_url": ...})``, ``planmode resume --base-url``): the node sees
  the changed endpoint and goes on without asking.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any, Literal, TypeVar, get_args

from langgraph.types import Command, interrupt

from planmode._compat import RunnableCallable
from planmode.context import PlanModeContext, settings_dict, settings_of
from planmode.errors import ModelUnavailableError
from planmode.nodes._deps import Deps, NodeRuntime, StateUpdate
from planmode.nodes._paused import unavailable_update
from planmode.nodes._twin import inline_node
from planmode.state.graph_state import PlanModeState

__all__ = [
    "INTERRUPT_TYPE",
    "RESUME_NODES",
    "ResumeNode",
    "make_model_unavailable",
    "model_unavailable",
    "paused",
    "unavailable_update",
]

#: The ``type`` of this node's interrupt payload.
INTERRUPT_TYPE = "planmode.model_unavailable"

ResumeNode = Literal["respond", "plan", "dispatch", "verify", "reflect", "patch"]
#: Where this node sends the run back (its ``destinations`` in the graph).
RESUME_NODES: tuple[ResumeNode, ...] = get_args(ResumeNode)
_SETTING_NAMES = {f.name for f in fields(PlanModeContext)}
_In = TypeVar("_In")
_Out = TypeVar("_Out")


def paused(name: str, state: Any, exc: Exception) -> StateUpdate | None:
    """What node ``name`` writes when it raised ``exc``: the pause's record when its model could not be reached
    (the node's router, or verify's, pauses the run), else None (the exception is raised on)."""
    if isinstance(exc, ModelUnavailableError):
        return unavailable_update(name, state, exc)
    return None


def _apply(settings: PlanModeContext, answer: Any) -> PlanModeContext:
    """The settings after a resume answer; `ValueError` for an answer this pause cannot take."""
    if answer is None or answer is True or answer == "retry":
        return settings
    if not isinstance(answer, dict):
        raise ValueError(
            f"expected a dict of settings such as {{'base_url': ..., 'model': ...}}, got {type(answer).__name__}"
        )
    values = dict(answer)
    action = values.pop("action", "retry")
    if action != "retry":
        raise ValueError(
            f"this pause waits for a model endpoint, not an approval (action {action!r}): resume "
            "with {'base_url': ..., 'model': ...}, or {'action': 'retry'} to try the same endpoint again"
        )
    unknown = sorted(set(values) - _SETTING_NAMES)
    if unknown:
        raise ValueError(
            f"unknown settings {', '.join(map(repr, unknown))}; settings are: {', '.join(sorted(_SETTING_NAMES))}"
        )
    for key in ("base_url", "model"):
        if key in values and values[key] is not None and not isinstance(values[key], str):
            raise ValueError(f"{key} must be a string")
    return replace(settings, **values)


def make_model_unavailable(deps: Deps) -> RunnableCallable:
    """Build the model_unavailable node: the same function on both paths (it only reads state and interrupts:
    nothing to await). Add it with ``destinations=`` the `ResumeNode` names (a runnable has no return type
    hint for LangGraph to draw its edges from)."""
    del deps  # no model here: this node only waits for one
    return inline_node("model_unavailable", model_unavailable)


def model_unavailable(state: PlanModeState, runtime: NodeRuntime) -> Command[ResumeNode]:
    """Wait for a reachable model (see the module docstring), then go back to the node that lost it."""
    info = dict(state.get("unavailable") or {})
    settings = settings_of(state, runtime)
    moved = (settings.base_url, settings.model) != (info.get("base_url"), info.get("model"))
    if not info or not moved:
        problem: str | None = None
        while True:  # a resume this node cannot take asks again, with the reason
            answer = interrupt(
                {
                    "type": INTERRUPT_TYPE,
                    "error": info.get("error") or "the model could not be reached",
                    # "unauthorized": the server refused the credentials (fix the API key, then retry)
                    "reason": info.get("reason") or "unavailable",
                    "node": info.get("failed_node"),
                    "step_id": info.get("step_id"),
                    "base_url": settings.base_url,
                    "model": settings.model,
                    "resume": (
                        "{'base_url': ..., 'model': ...} for another endpoint or model, {'action': 'retry'} "
                        "to try the same one again"
                    ),
                    "answer_error": problem,
                }
            )
            try:
                settings = _apply(settings, answer)
                break
            except ValueError as exc:
                problem = str(exc)
    target: ResumeNode = info.get("node") or "dispatch"
    return Command(
        goto=target,
        update={
            "settings": settings_dict(settings),
            "status": info.get("status") or "running",
            "unavailable": None,
            "error": None,
        },
    )
