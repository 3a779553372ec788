"""What runs next: dispatch's decision (`next_batch`), made by dispatch and, within a run, by verify on the
plan it leaves (a layer of steps then takes two checkpointed super-steps); and when verify must leave the
decision to dispatch because a gate may stop the next batch (`gates_may_stop`)."""

from __future__ import annotations

import threading
import time
import uuid
import weakref
from collections.abc import Mapping
from typing import Any

from langgraph.config import get_config

from planmode._compat import CONFIG_KEY_RESUMING, CONFIG_KEY_RUNTIME
from planmode.context import PlanModeContext
from planmode.state.approvals import covering_grant, granted_shape, held_steps
from planmode.state.graph_state import PlanModeState, PlanModeUpdate
from planmode.state.models import Plan, PlanSource, Step, StepStatus, StepTransition
from planmode.state.reducer import PlanUpdate

__all__ = [
    "PROCESS_TOKEN",
    "RECHECK_AFTER_SECONDS",
    "checked_now",
    "find_trouble",
    "gates_may_stop",
    "invocation_token",
    "next_batch",
    "staleness_check_due",
    "unapproved_steps",
]

S = StepStatus

#: Kept for callers that import it; the staleness check no longer runs on a timer (`staleness_check_due`).
RECHECK_AFTER_SECONDS = 2.0
#: Identifies this process: a run resumed in another process (after a crash) checks the fingerprint.
PROCESS_TOKEN = uuid.uuid4().hex


def find_trouble(plan: Plan) -> str | None:
    """Why execution cannot simply go on: a failed step, a blocked step, or a deadlock (None when fine)."""
    failed = plan.by_status(S.FAILED)
    if failed:
        return "; ".join(
            f"step {s.id!r} failed after {s.attempts} attempt(s): {s.error or 'no reason'}" for s in failed
        )
    blocked = plan.by_status(S.BLOCKED)
    if blocked:
        return "; ".join(f"step {s.id!r} is blocked: {s.error or 'no reason'}" for s in blocked)
    pending = plan.by_status(S.PENDING)
    if pending and not plan.ready_steps() and not plan.by_status(S.RUNNING):
        waits = []
        done = {s.id for s in plan.by_status(S.DONE)}
        for s in pending:
            missing = [d for d in s.dependencies if d not in done]
            waits.append(f"{s.id} waits for {', '.join(missing)}")
        return "deadlock: no step can run (" + "; ".join(waits) + ")"
    return None


def next_batch(state: PlanModeState, plan: Plan | None, max_parallel: int) -> PlanModeUpdate:
    """What dispatch decides for ``plan`` in ``state``: the state update that marks the next batch running (at
    most ``max_parallel`` steps), or records the trouble, the finished run, the pause or the re-approval.

    Pure: dispatch calls it on the state it is given, and verify on the state it leaves (its own transitions
    applied), so that a layer of steps takes two checkpointed super-steps (execute_step, verify), not three.
    """
    lost = state.get("unavailable")
    if lost:  # execute_step or verify could not reach the model: pause (planmode.nodes.model_unavailable)
        return {"status": "model_unavailable", "error": lost.get("error")}
    if plan is None or plan.version == 0:
        return {"status": "failed", "error": "there is no valid plan"}
    if state.get("needs_approval"):
        return {}
    unapproved = unapproved_steps(state, plan)
    if unapproved:  # a step added or changed since the approval: approve it first (execute_step would refuse it)
        return _approve_again(unapproved)
    if plan.is_complete:
        return {"status": "completed"}
    trouble = find_trouble(plan)
    if trouble:
        return {"trouble": trouble}
    # A step left running without an outcome (after a crash, a rollback or an edit) is dispatched again,
    # first, as the same attempt (it never finished: a crash, a rollback, an edit or a lost model).
    outcomes = state.get("step_outcomes") or {}
    stale = [s for s in plan.by_status(S.RUNNING) if s.id not in outcomes]
    batch = (stale + plan.ready_steps())[: max(1, max_parallel)]
    transitions = [StepTransition(id=s.id, status=S.RUNNING, attempts=_attempt(s)) for s in batch]
    return {"plan": PlanUpdate(transitions=transitions, source=PlanSource.DISPATCH), "status": "running"}


def unapproved_steps(state: Mapping[str, Any], plan: Plan) -> list[str]:
    """The steps still to run (not done or skipped) whose exact definition no grant of the run's approval record
    covers (`planmode.state.approvals`): a step added or edited after the approval."""
    log = state.get("approvals")
    if granted_shape(log) == plan.shape:  # the plan as the latest grant covered it whole
        return []
    return [
        s.id for s in plan.steps if s.status not in (S.DONE, S.SKIPPED) and covering_grant(log, s, plan.goal) is None
    ]


def _approve_again(steps: list[str]) -> PlanModeUpdate:
    """The plan is not the one approved (``steps`` are not): back to the approval (which shows what changed)."""
    del steps  # the approval payload's ``changes`` name them
    return {
        "needs_approval": True,
        "status": "awaiting_approval",
        "approval_error": "the plan changed after it was approved; review it again",
    }


def _attempt(step: Step) -> int:
    """The attempt a dispatch starts: the next one, or the same one for a step still running without an
    outcome (its executor lost the model, or a rollback went back to it): that attempt never finished."""
    return step.attempts if step.status is S.RUNNING else step.attempts + 1


def _ready_step_held(state: PlanModeState) -> bool:
    """Whether the grant that covers a ready step of the plan holds that step for its own answer."""
    plan = state.get("plan")
    if not isinstance(plan, Plan):
        return False
    log = state.get("approvals")
    return any(s.id in held_steps(covering_grant(log, s, plan.goal)) for s in plan.ready_steps())


def _resuming() -> bool:
    try:
        return bool(get_config().get("configurable", {}).get(CONFIG_KEY_RESUMING))
    except RuntimeError:
        return False


#: One token per invocation of a graph, keyed by the invocation's stream writer (LangGraph makes one function
#: per ``invoke``/``stream`` call and gives it to every task of that call; held weakly, so a token is never
#: reused by a later invocation).
_INVOCATIONS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_INVOCATIONS_LOCK = threading.Lock()


def invocation_token() -> str | None:
    """A token naming the graph invocation this node runs in (None when it cannot be told: then every check is
    due)."""
    try:
        runtime = get_config().get("configurable", {}).get(CONFIG_KEY_RUNTIME)
    except RuntimeError:
        return None
    writer = getattr(runtime, "stream_writer", None)
    if writer is None:
        return None
    try:
        with _INVOCATIONS_LOCK:
            token = _INVOCATIONS.get(writer)
            if token is None:
                token = _INVOCATIONS[writer] = uuid.uuid4().hex
            return token
    except TypeError:  # not weakly referenceable
        return None


def checked_now() -> dict[str, Any]:
    """The ``fingerprint_checked`` record of a check made now: this process, this invocation, the time."""
    return {"token": PROCESS_TOKEN, "invocation": invocation_token(), "at": time.time()}


def staleness_check_due(state: PlanModeState) -> bool:
    """Whether the workspace fingerprint must be taken again before new steps start: after a real pause.

    A run pauses only between invocations: LangGraph stops a thread at an interrupt (the plan approval, a step
    question, a budget or model-unavailable pause), at a crash, or when the caller stops, and goes on only when it
    is invoked again (an answer, ``planmode resume``, a new process). So the check is due when the last one was
    made in another process, in another invocation (`invocation_token`), never, or was cleared by a node that
    took a human's answer; and in the first super-step of a resumed invocation. Within one invocation no pause
    happens, however long a step takes: no recheck then (the run's own writes are not outside changes anyway,
    `planmode.approval.staleness.outside_changes`)."""
    checked = state.get("fingerprint_checked")
    if not isinstance(checked, dict) or checked.get("token") != PROCESS_TOKEN:
        return True
    invocation = checked.get("invocation")
    if not isinstance(invocation, str) or invocation != invocation_token():
        return True
    return _resuming()


def gates_may_stop(state: PlanModeState, settings: PlanModeContext) -> bool:
    """Whether a gate around dispatch (`planmode.nodes._gates`: per-step approval, the staleness check;
    `planmode.budget`: the budget check) may stop the next batch: verify then leaves the decision to dispatch."""
    if settings.step_approval != "off" or settings.max_tokens or settings.max_cost or state.get("budget"):
        return True
    if _ready_step_held(state):  # an approval given under step_approval="writes" still holds steps for their own answer
        return True
    return bool(
        settings.check_staleness and isinstance(state.get("workspace_fingerprint"), dict) and staleness_check_due(state)
    )
