"""patch: repair the plan with the smallest patch that works.

Starts from the patch the reflection proposed, when it proposed one (one call for both, so the common case
makes no patch call); otherwise asks for a `PlanPatch`. Validates it with the same function the reducer
uses, feeds rejection reasons back for a bounded number of retries, then falls back to a whole plan
converted by diff, then ends the run cleanly as failed. Rejected patches are recorded in the plan's
rejections.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool
from pydantic import ValidationError

from planmode import prompts
from planmode._compat import RunnableCallable
from planmode.adapters import adapter_for
from planmode.approval.policy import read_only_tools_of
from planmode.checks import plan_check_problems
from planmode.context import PlanModeContext
from planmode.nodes._batch import unapproved_steps
from planmode.nodes._deps import Deps, NodeRuntime, StateUpdate, negotiated_of, settings_of
from planmode.nodes._evidence import workspace_root
from planmode.nodes._gates import write_holds
from planmode.nodes._repair import Reflection, proposed_patch, repair_view
from planmode.nodes._twin import Body, ask, model_for, structured, twin_node
from planmode.observability.events import emit
from planmode.state.approvals import decided_tools, grant
from planmode.state.draft import PlanDraft, draft_to_plan
from planmode.state.graph_state import PlanModeState
from planmode.state.models import (
    DEFINITION_FIELDS,
    Plan,
    PlanPatch,
    PlanSource,
    Rejection,
    Step,
    StepStatus,
    StepTransition,
)
from planmode.state.patch import diff_to_patch, validate_plan
from planmode.state.reducer import PlanUpdate, Preview, preview

__all__ = ["make_patch"]


def make_patch(deps: Deps) -> RunnableCallable:
    """Build the patch node: a sync path for ``invoke`` and an async one for ``ainvoke`` (the patch calls and
    the full-plan fallback awaited)."""
    read_only = read_only_tools_of(deps.tools)

    def patch(state: PlanModeState, runtime: NodeRuntime) -> Body[StateUpdate]:
        settings = settings_of(state, runtime)
        plan = state.get("plan")
        if plan is None:
            return {"status": "failed", "error": "no plan to patch"}
        model = yield from model_for(deps, settings, negotiated_of(state))
        reflection = state.get("reflection") or {}
        trouble = state.get("trouble") or ""
        guidance = reflection.get("guidance") or reflection.get("reasoning") or "(none)"
        messages: list[BaseMessage] = [
            SystemMessage(content=prompts.PATCH_SYSTEM),
            HumanMessage(content=prompts.PATCH_USER.format(trouble=trouble, guidance=guidance, plan=repair_view(plan))),
        ]
        rejections: list[Rejection] = []

        def reject(reasons: list[str]) -> None:
            rejections.append(Rejection(version=plan.version, kind="patch", source=PlanSource.PATCH, reasons=reasons))
            emit("patch_rejected", "; ".join(reasons), plan_version=plan.version, reasons=reasons)

        adapter = adapter_for(settings)

        def accept(candidate: PlanPatch) -> tuple[tuple[PlanUpdate, Preview] | None, list[str]]:
            if adapter is not None:  # a patch as small models write it, read as meant
                candidate = adapter.mend_patch(candidate, plan, deps.tools)
            # a failed step the patch keeps runs again (kept failed, the plan could only end failed, whatever the
            # patch added after it)
            retry = _retrying_failed(candidate, plan)
            # a patch that gives a reason and changes nothing is a retry of the failed steps, as on_track is;
            # without a reason (or with no failed step) it is previewed as sent, and refused as changing nothing
            patch = None if candidate.is_empty() and candidate.reason.strip() and retry else candidate
            update = PlanUpdate(patch=patch, transitions=retry, source=PlanSource.PATCH)
            outcome = preview(plan, update)
            if not outcome.applied or outcome.plan is None:
                return None, _with_the_fix(outcome.reasons, candidate, plan)
            changed = [s.id for s in candidate.add_steps] + [u.id for u in candidate.update_steps]
            problems = _check_problems(outcome.plan, changed, deps.tools, settings)  # as a first plan's steps
            if not problems and adapter is not None:
                problems = adapter.step_problems(outcome.plan, deps.tools, changed)
            return (None, problems) if problems else ((update, outcome), [])

        asked = yield from ask(
            model,
            PlanPatch,
            messages,
            settings,
            attempts=settings.max_patch_attempts,
            accept=accept,
            retry_prompt=lambda reasons: prompts.PATCH_RETRY.format(reasons="\n".join(f"- {r}" for r in reasons)),
            show=lambda c: json.dumps(c.model_dump(mode="json", exclude_defaults=True)),
            first=_proposal(reflection),  # the reflection's patch is the first attempt, without a call
            on_reject=reject,
        )
        chosen = asked.value
        if chosen is None:
            made = list(state.get("run_writes") or {})
            chosen = yield from _full_plan_fallback(model, settings, plan, trouble, rejections, deps.tools, made)
        if chosen is None:
            msg = f"no valid patch after {settings.max_patch_attempts} attempt(s) and a full-plan fallback"
            return {
                "status": "failed",
                "error": msg,
                "plan": PlanUpdate(rejections=rejections, source=PlanSource.PATCH),
            }
        update, outcome = chosen
        record = outcome.record
        emit(
            "plan_patched",
            update.patch.reason
            if update.patch is not None
            else f"the repair kept {', '.join(t.id for t in update.transitions)} as they were: they run again",
            plan_version=outcome.plan.version if outcome.plan is not None else plan.version,
            added=record.added if record else [],
            updated=record.updated if record else [],
            removed=record.removed if record else [],
            warnings=outcome.warnings,
        )
        off_track = reflection.get("assessment") == "off_track"
        patched = outcome.plan
        # a patch that adds a step, or a write tool to a step, is decided by the approval policy (a human under
        # ask_human), whatever reapprove_patches says: the settings never approve a write nobody decided
        undecided = undecided_steps(state.get("approvals"), plan, patched, read_only)
        reapprove = off_track or settings.reapprove_patches or bool(undecided)
        written: StateUpdate = {
            "plan": update.model_copy(update={"rejections": rejections}),
            "patches_applied": (state.get("patches_applied") or 0) + 1,
        }
        if reapprove:
            return {**written, "needs_approval": True, "status": "awaiting_approval"}
        # Applied without asking (reapprove_patches off, no step added, no write tool added): the settings approve
        # the patched plan (a grant by the settings), provided every step of the plan patched was approved. A step
        # edited in meanwhile stays unapproved, so the next batch asks for approval (a patch must not approve an
        # edit it happened to be applied on top of). execute_step holds a settings grant to the same rule.
        if patched is not None and not unapproved_steps(state, plan):
            holds = write_holds(patched, settings, read_only)
            written["approvals"] = [
                grant(
                    state.get("approvals"),
                    "patch",
                    patched,
                    policy="reapprove_patches=false",
                    by="settings",
                    hold=holds,
                    reason=update.patch.reason if update.patch else None,
                    read_only=sorted(read_only),
                )
            ]
        return {**written, "needs_approval": False}

    return twin_node("patch", patch)


def _check_problems(plan: Plan, ids: Sequence[str], tools: Sequence[BaseTool], settings: PlanModeContext) -> list[str]:
    """How the steps ``ids`` of ``plan`` are checked, held to what a first plan's steps are held to."""
    steps = [s for i in dict.fromkeys(ids) if (s := plan.get(i)) is not None]
    return plan_check_problems(steps, tools, settings, workspace_root(tools) is not None)


def undecided_steps(log: Any, plan: Plan, patched: Plan | None, read_only: frozenset[str]) -> list[str]:
    """The steps of ``patched`` still to run that no decision of the run covers: a step the patch added (not in
    ``plan``), or a step that declares a tool, not read-only, beyond the tools a human's or the policy's grant of
    it covered (`planmode.state.approvals.decided_tools`). Only a patch with none runs on the earlier grant."""
    if patched is None:
        return []
    known = {s.id for s in plan.steps}
    out = []
    for s in patched.steps:
        if s.status in (StepStatus.DONE, StepStatus.SKIPPED):
            continue
        decided = decided_tools(log, s.id)
        if s.id not in known or decided is None or set(s.tools) - read_only - decided:
            out.append(s.id)
    return out


def _definition(step: Step) -> dict[str, Any]:
    return step.model_dump(include=set(DEFINITION_FIELDS))


def _with_the_fix(reasons: list[str], candidate: PlanPatch, plan: Plan) -> list[str]:
    """A refusal's ``reasons`` as the model is told them: a patch whose new steps the plan's step cap cut off
    "changes nothing", and is told that no step can be added and to update the failed step (an open one
    when none failed) or remove a step instead. Any other refusal's reasons are returned as they are."""
    cap = plan.max_steps
    if reasons != ["the patch changes nothing"] or not candidate.add_steps or cap is None or len(plan.steps) < cap:
        return reasons
    failed = [s.id for s in plan.by_status(StepStatus.FAILED, StepStatus.BLOCKED)]
    fix = f"update {failed[0]!r} (the failed step) to make the fix" if failed else "change an open step"
    return [
        f"the plan already has its most steps ({cap}), so no step can be added: {fix} with update_steps, "
        "or remove a step that is not needed"
    ]


def _proposal(reflection: dict[str, Any]) -> tuple[PlanPatch | None, str | None, AIMessage] | None:
    """The patch the reflection proposed, as a first attempt ``(patch, error, raw)``; None if it has none.
    ``raw`` holds the proposal as the model wrote it, shown back to the model if it is refused."""
    try:
        r = Reflection.model_validate(reflection)
    except ValidationError:  # a reflection without an assessment (e.g. written by hand): no proposal
        return None
    if not r.proposes_patch:
        return None
    patch, err = proposed_patch(r.reasoning, r.add_steps, r.update_steps, r.remove_steps)
    written = r.model_dump(mode="json", include={"add_steps", "update_steps", "remove_steps"}, exclude_defaults=True)
    return patch, err, AIMessage(content=json.dumps(written))


def _retrying_failed(candidate: PlanPatch, plan: Plan) -> list[StepTransition]:
    """The failed or blocked steps a patch (or the corrected whole plan) keeps unchanged, sent back to pending with
    their last error (as an ``on_track`` retry does): the patched plan is the plan to run, and a failed step it
    keeps as it was is one to run again (kept failed, the plan could only end failed). A step the patch updates
    is reset by the update; a step it removes is not retried."""
    untouched = {u.id for u in candidate.update_steps} | set(candidate.remove_steps)
    return [
        StepTransition(id=s.id, status=StepStatus.PENDING, attempts=0)
        for s in plan.by_status(StepStatus.FAILED, StepStatus.BLOCKED)
        if s.id not in untouched
    ]


def _full_plan_fallback(
    model: BaseChatModel,
    settings: PlanModeContext,
    plan: Plan,
    trouble: str,
    rejections: list[Rejection],
    tools: Sequence[BaseTool] = (),
    made: Sequence[str] = (),
) -> Body[tuple[PlanUpdate, Preview] | None]:
    """A whole plan asked for, converted into a patch by diff: the update and what it does; None (the
    reasons recorded in ``rejections``) when there is none that applies. Its open steps are held to what a first
    plan's are (`planmode.checks.plan_check_problems`, and the adapter's problems with the adapter on; the files the
    run wrote, ``made``, are still the task's).
    A step of the node's body (``yield from``): the call is ``call_structured`` on the sync path,
    ``acall_structured`` on the async one."""
    messages: list[BaseMessage] = [
        SystemMessage(
            content=prompts.PLAN_SYSTEM.format(
                max_steps=plan.max_steps or settings.max_steps,
                tools="as before",
                commands=", ".join(settings.check_commands) or "none",
            )
        ),
        HumanMessage(content=prompts.FULL_PLAN_FALLBACK.format(trouble=trouble, plan=plan.to_prompt())),
    ]
    draft, err, _raw = yield from structured(model, PlanDraft, messages, settings)
    if draft is None:
        rejections.append(
            Rejection(version=plan.version, kind="plan", source=PlanSource.DIFF, reasons=[err or "no plan"])
        )
        return None
    proposed = draft_to_plan(draft, plan.goal, plan.max_steps or settings.max_steps, plan)
    # the model was told to keep the done steps as they are: its copy of one is not a change, even with another
    # definition (the done step is kept as it was). Only the open steps are its plan.
    done = {s.id: s for s in plan.steps if s.status == StepStatus.DONE}
    kept = [s.id for s in proposed.steps if s.id in done and _definition(s) != _definition(done[s.id])]
    proposed = proposed.model_copy(update={"steps": [done.get(s.id, s) for s in proposed.steps]})
    open_ids = [s.id for s in proposed.steps if (old := plan.get(s.id)) is None or old.status != StepStatus.DONE]
    adapter = adapter_for(settings)
    mended: list[str] = []
    if adapter is not None:
        proposed, mended = adapter.mend_repair(plan, proposed, tools, open_ids)
    reasons = validate_plan(proposed)  # the draft must be a valid plan by itself
    if not reasons:  # and its open steps checked as a first plan's are
        reasons = _check_problems(proposed, open_ids, tools, settings)
    if not reasons and adapter is not None:
        reasons = adapter.plan_problems(proposed, tools, open_ids, made)
    if not reasons:
        notes = [*mended, *([f"done steps kept as they are: {', '.join(kept)}"] if kept else [])]
        reason = "full plan converted into a patch by diff" + (f" ({'; '.join(notes)})" if notes else "")
        candidate = diff_to_patch(plan, proposed, reason=reason)
        retry = _retrying_failed(candidate, plan)
        patch = None if candidate.is_empty() and retry else candidate  # the same plan again: a retry of its failed
        update = PlanUpdate(patch=patch, transitions=retry, source=PlanSource.DIFF)
        outcome = preview(plan, update)
        if outcome.applied:
            return update, outcome
        reasons = outcome.reasons
    rejections.append(Rejection(version=plan.version, kind="plan", source=PlanSource.DIFF, reasons=reasons))
    emit("patch_rejected", "; ".join(reasons), plan_version=plan.version, reasons=reasons)
    return None
