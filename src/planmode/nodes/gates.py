"""Gates around approve and dispatch: the approval policy, per-step approval and the staleness check.

`gated_approve` wraps the approve node: it asks the approval policy (`planmode.policy`) before the human
approval, records the decision in ``approvals``, takes the workspace fingerprint when a plan is approved
(`planmode.staleness`), and asks the two other questions that route through approve: ``planmode.stale``
(the workspace changed since the approval) and ``planmode.step_approval`` (a step that uses a write tool, with
``step_approval="writes"``).

`gated_dispatch` wraps dispatch: before steps start it checks the fingerprint when the run may have paused
(the first super-step of a resumed invocation, another process, or more than `RECHECK_AFTER_SECONDS` since
the last check: a git status is cheap, but not free on every super-step), and holds write steps that need an
approval. Both hand over to approve by setting ``stale`` / ``step_gate`` and ``needs_approval``; approve
returns to dispatch when the question is answered (the existing routers, unchanged).

Each question is one interrupt per node run (a node re-runs from its start on resume, so two interrupts in
one run could receive each other's answers).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import json
import time
from collections.abc import Callable, Generator
from typing import Any, cast

from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from planmode._drive import adrive, drive, per_path
from planmode.approval import approval_reason
from planmode.context import PlanModeContext
from planmode.events import emit
from planmode.nodes._batch import (
    PROCESS_TOKEN,  # noqa: F401  # re-exported (the process token the checks record: _batch.checked_now)
    RECHECK_AFTER_SECONDS,
    checked_now,
    gates_may_stop,
    next_batch,
    staleness_check_due,
)
from planmode.nodes._deps import Deps, settings_of
from planmode.policy import ApprovalRequest, decide, from_settings, policy_name, read_only_tools_of
from planmode.staleness import (
    STALE_TYPE,
    fingerprint,
    outside_changes,
    own_files,
    parse_stale_resume,
    read_answer,
    stale_payload,
)
from planmode.state.graph_state import PlanModeState, merge_writes, run_writes_of
from planmode.state.mermaid import plan_to_mermaid
from planmode.state.models import Plan, PlanPatch, Step, StepStatus, StepUpdate, clean_text
from planmode.state.reducer import PlanUpdate
from planmode.text import markdown_text

__all__ = [
    "RECHECK_AFTER_SECONDS",
    "STALE_TYPE",
    "STEP_APPROVAL_TYPE",
    "gated_approve",
    "gated_dispatch",
    "parse_step_resume",
    "step_key",
    "step_payload",
]

STEP_APPROVAL_TYPE = "planmode.step_approval"
STEP_ACTIONS = ("approve", "skip", "cancel")


Node = Callable[[PlanModeState, Runtime[Any]], dict[str, Any]]


def _record(kind: str, decision: str, policy: str, by: str, plan: Plan, **extra: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        "decision": decision,
        "policy": policy,
        "by": by,
        "plan_version": plan.version,
        "revision": plan.revision,
        "at": round(time.time(), 3),
        **{k: clean_text(v) if isinstance(v, str) else v for k, v in extra.items() if v not in (None, "")},
    }


# A gate is written once as a generator that yields what it needs done -- the wrapped node's run (`_INNER`) or
# a workspace fingerprint (git in a subprocess, file hashing) -- and receives the answer: `_gate` drives it
# with plain calls for ``invoke`` and with the node's async function and a worker thread for ``ainvoke``, so
# the event loop never blocks on git or the file system.
_INNER = ("inner",)
_Gate = Generator[tuple[Any, ...], Any, dict[str, Any]]


def _fingerprint_request(state: PlanModeState, settings: PlanModeContext) -> tuple[Any, ...]:
    return ("fingerprint", settings.workspace, list(state.get("explored_paths") or []))


def _fingerprint_now(state: PlanModeState, settings: PlanModeContext) -> _Gate:
    """The fields that record the workspace fingerprint (nothing when the check is off or there is no workspace)."""
    if not settings.check_staleness:
        return {}
    fp = yield _fingerprint_request(state, settings)
    if fp is None:
        return {}
    return {"workspace_fingerprint": fp, "fingerprint_checked": checked_now()}


def _gate(inner: Any, body: Callable[[PlanModeState, Any], _Gate], name: str) -> Any:
    """A node that runs ``body`` around ``inner`` on each of ``inner``'s paths (see `_INNER`)."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def agated(state: PlanModeState, runtime: Any) -> dict[str, Any]:
                async def call(request: tuple[Any, ...]) -> Any:
                    if request == _INNER:
                        return await fn(state, runtime=runtime)
                    return await asyncio.to_thread(fingerprint, request[1], request[2])

                return await adrive(body(state, runtime), call)

            return agated

        @functools.wraps(fn)
        def gated(state: PlanModeState, runtime: Any) -> dict[str, Any]:
            def call(request: tuple[Any, ...]) -> Any:
                if request == _INNER:
                    return fn(state, runtime=runtime)
                return fingerprint(request[1], request[2])

            return drive(body(state, runtime), call)

        return gated

    return per_path(inner, wrap)


def step_key(step: Step, goal: str) -> str:
    """A step's approval key: its id and a hash of its definition and the plan's goal (an edited step, or the
    same step in the plan of a new task on the thread, is asked again)."""
    body = json.dumps([goal, step.description, step.tools, step.dependencies, step.acceptance], ensure_ascii=True)
    return f"{step.id}:{hashlib.sha256(body.encode()).hexdigest()[:10]}"


# -- approve ----------------------------------------------------------------------------------------------


def gated_approve(inner: Any, deps: Deps, policy: Any = None) -> Any:
    """The approve node with the policy, the staleness question and the per-step question."""
    chosen = policy if policy is not None else from_settings
    name = policy_name(chosen)
    read_only = read_only_tools_of(deps.tools)

    def approve(state: PlanModeState, runtime: Runtime[Any]) -> _Gate:
        settings = settings_of(state, runtime)
        plan = state.get("plan")
        if not isinstance(plan, Plan) or plan.version == 0:
            out: dict[str, Any] = yield _INNER
            return out
        stale = state.get("stale")
        if isinstance(stale, dict):
            return _ask_stale(state, plan, stale, name)
        gate = state.get("step_gate")
        if isinstance(gate, dict):
            return _ask_step(state, settings, plan, gate, name)
        base = state.get("approval_base")
        if not isinstance(base, dict) or base.get("goal") != plan.goal:
            base = None
        reason = approval_reason(plan, base, error=state.get("approval_error"))
        request = ApprovalRequest(
            kind="plan", subject=plan, reason=reason, settings=settings, read_only_tools=read_only
        )
        decision, failure = decide(chosen, request)
        if decision.action == "approve":
            said = "approved automatically" + ("" if chosen is from_settings else f" by the policy {name}")
            emit("plan_approved", said, plan_version=plan.version, revision=plan.revision)
            approved = {
                "approved_revision": plan.revision,
                "needs_approval": False,
                "approval_error": None,
                "status": "running",
                "approvals": [_record("plan", "approved", name, "policy", plan, reason=reason)],
                **(yield from _fingerprint_now(state, settings)),
            }
            return {**approved, **_first_batch(cast(PlanModeState, {**state, **approved}), settings)}
        if decision.action == "reject":
            emit("plan_cancelled", decision.reason, plan_version=plan.version)
            return {
                "status": "cancelled",
                "feedback": f"rejected by the approval policy {name}: {decision.reason}",
                "needs_approval": False,
                "approval_error": None,
                "approvals": [_record("plan", "rejected", name, "policy", plan, reason=decision.reason)],
            }
        out = yield _INNER
        human = _human_outcome(out)
        if human is not None:
            out = {
                **out,
                "approvals": [_record("plan", human, name, "human", plan, reason=reason, policy_error=failure)],
            }
            if human in ("approved", "edited"):
                out.update((yield from _fingerprint_now(state, settings)))
        return out

    return _gate(inner, approve, "approve")


def _first_batch(approved: PlanModeState, settings: PlanModeContext) -> dict[str, Any]:
    """An approval the policy gave (no human, no plan change) starts the first batch in the same super-step, as
    verify starts the later ones (`next_batch`, bound to the revision just approved): one checkpointed
    super-step fewer per run. Nothing when a gate around dispatch may stop the batch: dispatch then decides."""
    if gates_may_stop(approved, settings):
        return {}
    return next_batch(approved, approved.get("plan"), settings.max_parallel)


def _human_outcome(out: dict[str, Any]) -> str | None:
    if out.get("approved_revision"):
        update = out.get("plan")  # an approval names its approver in a plan update; an edit carries a change
        edited = getattr(update, "patch", None) is not None or getattr(update, "plan", None) is not None
        return "edited" if edited else "approved"
    if out.get("status") == "cancelled":
        return "cancelled"
    if out.get("status") == "planning" and out.get("feedback"):
        return "rejected"
    return None  # a refused answer: asked again


def _ask_stale(state: PlanModeState, plan: Plan, stale: dict[str, Any], name: str) -> dict[str, Any]:
    current = stale.get("fingerprint") if isinstance(stale.get("fingerprint"), dict) else {}
    assert isinstance(current, dict)
    changed = [str(p) for p in stale.get("changed") or []]
    digest = str(current.get("digest") or "")
    payload = stale_payload(current, changed, error=stale.get("error"))
    payload["plan_revision"] = plan.revision
    answer = interrupt(payload)
    decision = parse_stale_resume(answer, digest)
    if isinstance(decision, str):
        return {"stale": {**stale, "error": decision}, "needs_approval": True}
    files = ", ".join(changed[:20]) + (f" and {len(changed) - 20} more" if len(changed) > 20 else "")
    record = _record("stale", decision.action, name, "human", plan, changed=files, feedback=decision.feedback)
    if decision.action == "approve":
        return {
            "stale": None,
            "needs_approval": False,
            "status": "running",
            "approval_error": None,
            "workspace_fingerprint": current,
            "fingerprint_checked": checked_now(),
            "approvals": [record],
        }
    if decision.action == "replan":
        feedback = f"The workspace changed since the plan was approved (changed: {files})."
        if decision.feedback:
            feedback += f" {decision.feedback}"
        return {
            "stale": None,
            "status": "planning",
            "feedback": feedback,
            "needs_approval": True,
            "approval_error": None,
            "approvals": [record],
        }
    emit("plan_cancelled", decision.feedback or "cancelled: the workspace changed", plan_version=plan.version)
    return {
        "stale": None,
        "status": "cancelled",
        "feedback": decision.feedback or f"cancelled because the workspace changed ({files})",
        "needs_approval": False,
        "approval_error": None,
        "approvals": [record],
    }


def step_payload(plan: Plan, step: Step, writes: list[str], error: str | None) -> dict[str, Any]:
    """The payload of the ``planmode.step_approval`` interrupt: the step, its tools and its dependencies'
    results."""
    dependencies = {}
    for d in step.dependencies:
        dep = plan.get(d)
        if dep is not None:
            dependencies[d] = {"status": dep.status.value, "result": dep.result, "output_ref": dep.output_ref}
    md = markdown_text  # the step's text is data: escaped, never markdown or HTML
    lines = [
        f"## Run step `{step.id}`?",  # a step id is an identifier (`StepId`): safe in a code span
        "",
        md(step.description),
        "",
        f"Tools: {md(', '.join(step.tools) or 'none')} (changes things: {md(', '.join(writes) or 'none')})",
    ]
    if dependencies:
        lines += ["", "Results of its dependencies:"]
        lines += [f"- `{d}` ({v['status']}): {md(v['result'] or '(no result)')}" for d, v in dependencies.items()]
    lines += ["", plan_to_mermaid(plan, fenced=True)]
    return {
        "type": STEP_APPROVAL_TYPE,
        "step": json.loads(step.model_dump_json()),
        "tools": list(step.tools),
        "write_tools": writes,
        "dependencies": dependencies,
        "markdown": "\n".join(lines),
        "revision": plan.revision,
        "actions": list(STEP_ACTIONS),
        "error": clean_text(error) if error else None,
    }


def parse_step_resume(value: Any, step_id: str) -> tuple[str, str] | str:
    """(action, feedback) from a resume value at the per-step approval, or why it is refused (never raises)."""
    read = read_answer(value, STEP_ACTIONS, {"action": "approve", "step": step_id})
    if isinstance(read, str):
        return read
    value, action = read
    feedback = value.get("feedback")
    shown = value.get("step")
    if action in ("approve", "skip") and shown != step_id:
        return f'{action} must name the step shown: {{"action": "{action}", "step": "{step_id}"}}'
    return str(action), clean_text((feedback or "").strip())


def _ask_step(
    state: PlanModeState, settings: PlanModeContext, plan: Plan, gate: dict[str, Any], name: str
) -> dict[str, Any]:
    step = plan.get(str(gate.get("step")))
    if step is None or step.status is not StepStatus.PENDING:  # the plan changed meanwhile: dispatch looks again
        return {"step_gate": None, "needs_approval": False, "status": "running"}
    if gate.get("rejected"):
        reason = str(gate["rejected"])
        emit("plan_cancelled", reason, plan_version=plan.version)
        return {
            "step_gate": None,
            "status": "cancelled",
            "feedback": f"step {step.id!r} rejected by the approval policy {name}: {reason}",
            "needs_approval": False,
        }
    writes = [str(w) for w in gate.get("writes") or []]
    answer = interrupt(step_payload(plan, step, writes, gate.get("error")))
    parsed = parse_step_resume(answer, step.id)
    if isinstance(parsed, str):
        return {"step_gate": {**gate, "error": parsed}, "needs_approval": True}
    action, feedback = parsed
    record = _record("step", action, name, "human", plan, step=step.id, feedback=feedback)
    if action == "approve":
        return {
            "step_gate": None,
            "needs_approval": False,
            "status": "running",
            "approved_steps": [*(state.get("approved_steps") or []), step_key(step, plan.goal)],
            "approvals": [record],
            "fingerprint_checked": None,  # the run paused for the human: the next dispatch checks the workspace
        }
    if action == "skip":
        patch = PlanPatch(
            reason=f"skipped at its approval{': ' + feedback if feedback else ''}",
            update_steps=[StepUpdate(id=step.id, status="skipped")],
        )
        return {
            "step_gate": None,
            "needs_approval": False,
            "status": "running",
            "plan": PlanUpdate(patch=patch, source="human", expected_revision=plan.revision),
            "approvals": [record],
        }
    emit("plan_cancelled", feedback or f"cancelled at step {step.id}", plan_version=plan.version)
    return {
        "step_gate": None,
        "status": "cancelled",
        "feedback": feedback or f"cancelled at the approval of step {step.id!r}",
        "needs_approval": False,
        "approvals": [record],
    }


# -- dispatch ---------------------------------------------------------------------------------------------


def _outside(state: PlanModeState, stored: dict[str, Any], now: dict[str, Any] | None, deps: Deps) -> list[str]:
    """What changed in the workspace that nobody in the run changed (`planmode.staleness.outside_changes`): not
    the run's own writes (``run_writes``, and those of outcomes verify has not folded in yet), not its database."""
    if now is None or now.get("digest") == stored.get("digest"):
        return []
    writes = merge_writes(state.get("run_writes"), run_writes_of(state.get("step_outcomes")))
    try:
        checkpointer = get_config().get("configurable", {}).get("__pregel_checkpointer")
    except RuntimeError:
        checkpointer = None
    return outside_changes(stored, now, writes, own_files(deps.tools, checkpointer))


def gated_dispatch(inner: Any, deps: Deps, policy: Any = None) -> Any:
    """The dispatch node with the staleness check and the per-step approval gate."""
    chosen = policy if policy is not None else from_settings
    name = policy_name(chosen)
    read_only = read_only_tools_of(deps.tools)

    def dispatch(state: PlanModeState, runtime: Runtime[Any]) -> _Gate:
        plan = state.get("plan")
        if (
            not isinstance(plan, Plan)
            or plan.version == 0
            or state.get("needs_approval")
            or state.get("unavailable")
            or state.get("status") in ("cancelled", "failed", "completed")
        ):
            out: dict[str, Any] = yield _INNER
            return out
        settings = settings_of(state, runtime)
        extra: dict[str, Any] = {}
        pending_work = bool(plan.ready_steps() or plan.by_status(StepStatus.RUNNING))
        stored = state.get("workspace_fingerprint")
        if settings.check_staleness and isinstance(stored, dict) and pending_work and staleness_check_due(state):
            now = yield _fingerprint_request(state, settings)
            changed = _outside(state, stored, now, deps)
            if changed:
                return {
                    "stale": {"fingerprint": now, "changed": changed},
                    "needs_approval": True,
                    "status": "awaiting_approval",
                }
            extra["fingerprint_checked"] = checked_now()
        if settings.step_approval == "writes":
            approved = list(state.get("approved_steps") or [])
            records: list[dict[str, Any]] = []
            for step in plan.ready_steps()[: max(1, settings.max_parallel)]:
                writes = [t for t in step.tools if t not in read_only]
                if not writes or step_key(step, plan.goal) in approved:
                    continue
                request = ApprovalRequest(
                    kind="step",
                    subject=plan,
                    reason=f"step {step.id} uses tools that change things: {', '.join(writes)}",
                    step=step,
                    settings=settings,
                    read_only_tools=read_only,
                )
                decision, failure = decide(chosen, request)
                if decision.action == "approve":
                    approved.append(step_key(step, plan.goal))
                    records.append(_record("step", "approved", name, "policy", plan, step=step.id))
                    continue
                gate: dict[str, Any] = {"step": step.id, "writes": writes}
                if decision.action == "reject":
                    gate["rejected"] = decision.reason
                    records.append(
                        _record("step", "rejected", name, "policy", plan, step=step.id, reason=decision.reason)
                    )
                elif failure:
                    gate["error"] = failure
                return {
                    **extra,
                    "step_gate": gate,
                    "needs_approval": True,
                    "status": "awaiting_approval",
                    "approved_steps": approved,
                    "approvals": records,
                }
            if records:
                extra.update(approved_steps=approved, approvals=records)
        out = yield _INNER
        return {**extra, **out} if extra else out

    return _gate(inner, dispatch, "dispatch")
