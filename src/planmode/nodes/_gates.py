"""The questions besides the plan approval: staleness and per-step approval.

`dispatch_gates` runs inside dispatch, before steps start: it checks the workspace fingerprint when the run
may have paused (`planmode.nodes._batch.staleness_check_due`), and asks the approval policy about each ready
step that a grant holds for its own answer (``step_approval="writes"``: a step that uses a tool that changes
things). A step the policy approves gets a ``step`` grant; otherwise the question is handed to approve by
setting ``stale`` / ``step_gate`` and ``needs_approval``. approve asks it (`ask_stale`, `ask_step`), one
interrupt per node run (a node re-runs from its start on resume, so two interrupts in one run could receive
each other's answers), and returns to dispatch when it is answered.

A per-step answer names the step and the definition it was shown (``definition`` in the payload), as a plan
answer names its revision: an answer about another definition is refused and the question asked again.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from typing import Any

from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.types import interrupt

from planmode._compat import CONFIG_KEY_CHECKPOINTER
from planmode.approval.policy import ApprovalRequest, decide
from planmode.approval.staleness import (
    STALE_TYPE,
    outside_changes,
    own_files,
    parse_stale_resume,
    read_answer,
    stale_payload,
)
from planmode.context import PlanModeContext
from planmode.nodes._batch import (
    PROCESS_TOKEN,  # noqa: F401  # re-exported (the process token the checks record: _batch.checked_now)
    RECHECK_AFTER_SECONDS,
    checked_now,
    staleness_check_due,
)
from planmode.observability.events import emit
from planmode.state.approvals import covering_grant, definition_digest, grant, held_steps, record
from planmode.state.graph_state import PlanModeState, PlanModeUpdate, merge_writes, run_writes_of
from planmode.state.mermaid import plan_to_mermaid
from planmode.state.models import Plan, PlanPatch, Step, StepStatus, StepUpdate, clean_text
from planmode.state.reducer import PlanUpdate
from planmode.text import markdown_text

__all__ = [
    "RECHECK_AFTER_SECONDS",
    "STALE_TYPE",
    "STEP_APPROVAL_TYPE",
    "ask_stale",
    "ask_step",
    "dependents",
    "dispatch_gates",
    "needs_own_answer",
    "parse_step_resume",
    "step_payload",
    "write_holds",
]

STEP_APPROVAL_TYPE = "planmode.step_approval"
STEP_ACTIONS = ("approve", "skip", "cancel")

#: What `dispatch_gates` yields to have the workspace fingerprinted: ("fingerprint", workspace, read paths).
FingerprintRequest = tuple[str, str | None, list[str]]


def write_holds(plan: Plan, settings: PlanModeContext, read_only: frozenset[str]) -> list[str]:
    """The steps an approval holds for their own answer: under ``step_approval="writes"``, every step that
    names a tool that changes things (not read-only, or unknown)."""
    if settings.step_approval != "writes":
        return []
    return [s.id for s in plan.steps if any(t not in read_only for t in s.tools)]


def needs_own_answer(
    state: PlanModeState, plan: Plan, step: Step, settings: PlanModeContext, writes: list[str]
) -> bool:
    """Whether ``step`` needs a per-step answer before it runs: its grant holds it, or ``step_approval="writes"``
    (a setting can add the question, never remove one a grant holds) and it uses a tool that changes things."""
    held = step.id in held_steps(covering_grant(state.get("approvals"), step, plan.goal))
    return held or (settings.step_approval == "writes" and bool(writes))


def ask_stale(state: PlanModeState, plan: Plan, stale: dict[str, Any], name: str) -> PlanModeUpdate:
    current = stale.get("fingerprint") if isinstance(stale.get("fingerprint"), dict) else {}
    assert isinstance(current, dict)
    changed = [str(p) for p in stale.get("changed") or []]
    digest = str(current.get("digest") or "")
    payload = stale_payload(current, changed, error=stale.get("error"))
    payload["plan_revision"] = plan.revision
    payload["plan"] = json.loads(plan.model_dump_json(exclude={"rejections", "history"}))  # the CLI shows it
    answer = interrupt(payload)
    decision = parse_stale_resume(answer, digest)
    if isinstance(decision, str):
        return {"stale": {**stale, "error": decision}, "needs_approval": True}
    files = ", ".join(changed[:20]) + (f" and {len(changed) - 20} more" if len(changed) > 20 else "")
    log = state.get("approvals")
    done = record(log, "stale", decision.action, name, "human", plan, changed=files, feedback=decision.feedback)
    if decision.action == "approve":
        return {
            "stale": None,
            "needs_approval": False,
            "status": "running",
            "approval_error": None,
            "workspace_fingerprint": current,
            "fingerprint_checked": checked_now(),
            "approvals": [done],
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
            "approvals": [done],
        }
    emit("plan_cancelled", decision.feedback or "cancelled: the workspace changed", plan_version=plan.version)
    return {
        "stale": None,
        "status": "cancelled",
        "feedback": decision.feedback or f"cancelled because the workspace changed ({files})",
        "needs_approval": False,
        "approval_error": None,
        "approvals": [done],
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
    after = dependents(plan, step.id)
    if after:
        lines += ["", f"Skipping it skips the steps that depend on it too: {', '.join(f'`{d}`' for d in after)}"]
    lines += ["", plan_to_mermaid(plan, fenced=True)]
    return {
        "type": STEP_APPROVAL_TYPE,
        "step": json.loads(step.model_dump_json()),
        "plan": json.loads(plan.model_dump_json(exclude={"rejections", "history"})),
        "dependents": after,
        "tools": list(step.tools),
        "write_tools": writes,
        "dependencies": dependencies,
        "markdown": "\n".join(lines),
        "revision": plan.revision,
        "definition": definition_digest(step, plan.goal),
        "actions": list(STEP_ACTIONS),
        "error": clean_text(error) if error else None,
    }


def dependents(plan: Plan, step_id: str) -> list[str]:
    """The steps that depend on ``step_id``, directly or through others, that have not run (pending), in plan
    order: skipping ``step_id`` leaves them waiting for a dependency that is never done."""
    out: set[str] = set()
    frontier = {step_id}
    while frontier:
        found = {s.id for s in plan.steps if s.id not in out and frontier & set(s.dependencies)}
        out |= found
        frontier = found
    return [s.id for s in plan.steps if s.id in out and s.status is StepStatus.PENDING]


def parse_step_resume(value: Any, step_id: str, definition: str) -> tuple[str, str] | str:
    """(action, feedback) from a resume value at the per-step approval, or why it is refused (never raises). An
    approve or a skip names the step and the ``definition`` shown (the payload's), so an answer given to another
    version of the step never approves this one."""
    example = {"action": "approve", "step": step_id, "definition": definition}
    read = read_answer(value, STEP_ACTIONS, example)
    if isinstance(read, str):
        return read
    value, action = read
    feedback = value.get("feedback")
    if action in ("approve", "skip"):
        if value.get("step") != step_id:
            return f"{action} must name the step shown: " + json.dumps({**example, "action": action})
        if value.get("definition") != definition:
            return (
                f"{action} must name the definition shown (the step changed, or the answer names none): "
                + json.dumps({**example, "action": action})
            )
    return str(action), clean_text((feedback or "").strip())


def ask_step(
    state: PlanModeState, settings: PlanModeContext, plan: Plan, gate: dict[str, Any], name: str
) -> PlanModeUpdate:
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
    if gate.get("definition") not in (None, definition_digest(step, plan.goal)):  # edited since it was asked
        return {"step_gate": None, "needs_approval": False, "status": "running"}
    writes = [str(w) for w in gate.get("writes") or []]
    definition = definition_digest(step, plan.goal)
    answer = interrupt(step_payload(plan, step, writes, gate.get("error")))
    parsed = parse_step_resume(answer, step.id, definition)
    if isinstance(parsed, str):
        return {"step_gate": {**gate, "error": parsed}, "needs_approval": True}
    action, feedback = parsed
    log = state.get("approvals")
    if action == "approve":
        from planmode.approval.approver import approver

        approved = grant(log, "step", plan, steps=[step], policy=name, by="human", who=approver(), step=step.id)
        return {
            "step_gate": None,
            "needs_approval": False,
            "status": "running",
            "approvals": [approved],
            "fingerprint_checked": None,  # the run paused for the human: the next dispatch checks the workspace
        }
    done = record(log, "step", action, name, "human", plan, step=step.id, feedback=feedback)
    if action == "skip":  # its pending dependents are skipped with it: they could never start (their dependency is
        # never done), and the run would end with steps not done
        after = dependents(plan, step.id)
        also = f" (with the steps that depend on it: {', '.join(after)})" if after else ""
        patch = PlanPatch(
            reason=f"skipped at its approval{also}{': ' + feedback if feedback else ''}",
            update_steps=[StepUpdate(id=sid, status="skipped") for sid in [step.id, *after]],
        )
        return {
            "step_gate": None,
            "needs_approval": False,
            "status": "running",
            "plan": PlanUpdate(patch=patch, source="human", expected_revision=plan.revision),
            "approvals": [done],
        }
    emit("plan_cancelled", feedback or f"cancelled at step {step.id}", plan_version=plan.version)
    return {
        "step_gate": None,
        "status": "cancelled",
        "feedback": feedback or f"cancelled at the approval of step {step.id!r}",
        "needs_approval": False,
        "approvals": [done],
    }


# -- dispatch ---------------------------------------------------------------------------------------------


def _outside(
    state: PlanModeState, stored: dict[str, Any], now: dict[str, Any] | None, tools: Sequence[BaseTool]
) -> list[str]:
    """What changed in the workspace that nobody in the run changed (`planmode.approval.staleness.outside_changes`): not
    the run's own writes (``run_writes``, and those of outcomes verify has not folded in yet), not its database."""
    if now is None or now.get("digest") == stored.get("digest"):
        return []
    writes = merge_writes(state.get("run_writes"), run_writes_of(state.get("step_outcomes")))
    try:
        checkpointer = get_config().get("configurable", {}).get(CONFIG_KEY_CHECKPOINTER)
    except RuntimeError:
        checkpointer = None
    return outside_changes(stored, now, writes, own_files(tools, checkpointer))


def dispatch_gates(
    state: PlanModeState,
    settings: PlanModeContext,
    policy: Any,
    name: str,
    read_only: frozenset[str],
    tools: Sequence[BaseTool] = (),
) -> Generator[FingerprintRequest, Any, tuple[dict[str, Any], bool]]:
    """The checks dispatch makes before steps start: ``(update, stop)``. ``stop`` True: the update hands a
    question to approve (no batch starts); otherwise the update (the fingerprint check time, step grants the
    policy gave) goes with the batch."""
    plan = state.get("plan")
    if (
        not isinstance(plan, Plan)
        or plan.version == 0
        or state.get("needs_approval")
        or state.get("unavailable")
        or state.get("status") in ("cancelled", "failed", "completed")
    ):
        return {}, False
    extra: dict[str, Any] = {}
    pending_work = bool(plan.ready_steps() or plan.by_status(StepStatus.RUNNING))
    stored = state.get("workspace_fingerprint")
    if settings.check_staleness and isinstance(stored, dict) and pending_work and staleness_check_due(state):
        now = yield ("fingerprint", settings.workspace, list(state.get("explored_paths") or []))
        changed = _outside(state, stored, now, tools)
        if changed:
            stale = {"fingerprint": now, "changed": changed}
            return {"stale": stale, "needs_approval": True, "status": "awaiting_approval"}, True
        extra["fingerprint_checked"] = checked_now()
    log = state.get("approvals")
    records: list[dict[str, Any]] = []
    for step in plan.ready_steps()[: max(1, settings.max_parallel)]:
        writes = [t for t in step.tools if t not in read_only]
        if not needs_own_answer(state, plan, step, settings, writes):
            continue
        if covering_grant(log, step, plan.goal, kinds=("step",)) is not None:
            continue
        request = ApprovalRequest(
            kind="step",
            subject=plan,
            reason=f"step {step.id} uses tools that change things: {', '.join(writes) or '(held by its approval)'}",
            step=step,
            settings=settings,
            read_only_tools=read_only,
        )
        decision, failure = decide(policy, request)
        if decision.action == "approve":
            records.append(grant(log, "step", plan, steps=[step], policy=name, by="policy", step=step.id))
            continue
        gate: dict[str, Any] = {"step": step.id, "writes": writes, "definition": definition_digest(step, plan.goal)}
        if decision.action == "reject":
            gate["rejected"] = decision.reason
            records.append(record(log, "step", "rejected", name, "policy", plan, step=step.id, reason=decision.reason))
        elif failure:
            gate["error"] = failure
        update = {**extra, "step_gate": gate, "needs_approval": True, "status": "awaiting_approval"}
        return ({**update, "approvals": records} if records else update), True
    if records:
        extra["approvals"] = records
    return extra, False
