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
from planmode.approval.policy import read_only_tools_of
from planmode.context import PlanModeContext
from planmode.nodes._batch import unapproved_steps
from planmode.nodes._coverage import (
    kept_runs,
    mend_acceptance,
    mend_data_runs,
    mend_dependencies,
    mend_kept_runs,
    mend_module_runs,
    mend_runs,
    mend_tools,
    plan_problems,
    step_problems,
    tool_meant,
)
from planmode.nodes._deps import Deps, NodeRuntime, StateUpdate, negotiated_of, settings_of
from planmode.nodes._evidence import preferred_write, write_tool_names
from planmode.nodes._gates import write_holds
from planmode.nodes._repair import Reflection, proposed_patch, repair_view
from planmode.nodes._twin import Body, ask, model_for, structured, twin_node
from planmode.observability.events import emit
from planmode.state.approvals import decided_tools, grant
from planmode.state.draft import PlanDraft, draft_to_plan
from planmode.state.graph_state import PlanModeState
from planmode.state.models import (
    DEFINITION_FIELDS,
    NewStep,
    Plan,
    PlanPatch,
    PlanSource,
    Rejection,
    Step,
    StepStatus,
    StepTransition,
    StepUpdate,
)
from planmode.state.patch import diff_to_patch, validate_plan
from planmode.state.reducer import PlanUpdate, Preview, preview
from planmode.tools.files import produced_file

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

        def accept(candidate: PlanPatch) -> tuple[tuple[PlanUpdate, Preview] | None, list[str]]:
            candidate = _as_meant(candidate, plan, deps.tools)
            # a failed step the patch keeps runs again (kept failed, the plan could only end failed: the 1.5B's
            # patch added "fix the syntax of mathx.py" after the failed step that wrote it, and the run gave up)
            retry = _retrying_failed(candidate, plan)
            # a patch that gives a reason and changes nothing (the 1.5B's: ten refusals in the rounds since 9) is a
            # retry of the failed steps, as on_track is; refused, it cost a patch call and the fallback's (no reason:
            # refused as before)
            patch = None if candidate.is_empty() and candidate.reason.strip() and retry else candidate
            update = PlanUpdate(patch=patch, transitions=retry, source=PlanSource.PATCH)
            outcome = preview(plan, update)
            if not outcome.applied or outcome.plan is None:
                return None, _with_the_fix(outcome.reasons, candidate, plan)
            changed = [s.id for s in candidate.add_steps] + [u.id for u in candidate.update_steps]
            problems = step_problems(outcome.plan, deps.tools, changed)  # a new write step needs acceptance too
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
    "changes nothing", and is told why and what to do instead. Round 15's package_util, its plan at the cap of 5,
    sent added steps in two repairs, refused "the patch changes nothing" six times, and ran out its 600 s."""
    cap = plan.max_steps
    if reasons != ["the patch changes nothing"] or not candidate.add_steps or cap is None or len(plan.steps) < cap:
        return reasons
    failed = [s.id for s in plan.by_status(StepStatus.FAILED, StepStatus.BLOCKED)]
    fix = f"update {failed[0]!r} (the failed step) to make the fix" if failed else "change an open step"
    return [
        f"the plan already has its most steps ({cap}), so no step can be added: {fix} with update_steps, "
        "or remove a step that is not needed"
    ]


def _as_meant(candidate: PlanPatch, plan: Plan, tools: Sequence[BaseTool]) -> PlanPatch:
    """``candidate`` read as small models write patches, where the meaning is not in doubt:

    - a step "added" with the id of a step of the plan that is not done is that step's update (the 1.5B added
      ``write_convert_py`` again to fix it; the reducer refuses a duplicate id). A done step's id stays an add, and
      is refused: done steps never change;
    - a dependency that names a tool of the graph and no step is dropped (``"dependencies": ["write_file"]``); an
      update left with no dependency changes none (it does not clear the step's own);
    - a new step with no tools that produces one file ("Fix the syntax of mathx.py") is given the graph's write
      tool, said in the patch's reason: the reflection's compact steps have no tools, and the 1.5B's fix step had
      its write refused (the step declared none);
    - an update of a step the plan does not have is a new step when it gives a description (else dropped), and the
      removal of one is dropped: "cannot update unknown step" and "cannot remove unknown step" were in 14 of the
      1.5B's refused patches in the rounds since 9;
    - an update that takes away a failed write step's write tools keeps them."""
    known_ids = {s.id for s in plan.steps} | {a.id for a in candidate.add_steps}
    notes: list[str] = []
    updates = []
    as_new: list[NewStep] = []
    for u in candidate.update_steps:  # an update of a step the plan does not have is a new step, if it says one
        if u.id in known_ids:
            updates.append(u)
        elif u.description:
            fields = u.model_dump(include={"description", "dependencies", "tools", "acceptance"}, exclude_none=True)
            as_new.append(NewStep(id=u.id, **fields))
            notes.append(f"step {u.id!r} is not in the plan: added as a new step")
        else:
            notes.append(f"the update of {u.id!r}, a step not in the plan, was dropped")
    unknown_removals = [r for r in candidate.remove_steps if r not in known_ids]
    if unknown_removals:
        notes.append(f"removing {', '.join(map(repr, unknown_removals))}, not in the plan, changes nothing: dropped")
    candidate = candidate.model_copy(
        update={
            "add_steps": [*candidate.add_steps, *as_new],
            "update_steps": updates,
            "remove_steps": [r for r in candidate.remove_steps if r in known_ids],
        }
    )
    updated_ids = {u.id for u in candidate.update_steps}
    added: list[NewStep] = []
    updates = list(candidate.update_steps)
    for a in candidate.add_steps:
        old = plan.get(a.id)
        if old is None or old.status == StepStatus.DONE or a.id in updated_ids:
            added.append(a)
            continue
        # what the add says and the step does not (an empty field, as in a step change, leaves it as it is)
        fields = a.model_dump(include={"description", "dependencies", "tools", "acceptance"})
        updates.append(StepUpdate(id=a.id, **{k: v for k, v in fields.items() if v and v != getattr(old, k)}))
    names = {t.name for t in tools} - {s.id for s in plan.steps} - {a.id for a in added}
    added = [a.model_copy(update={"dependencies": [d for d in a.dependencies if d not in names]}) for a in added]
    fixed: list[StepUpdate] = []
    writes = write_tool_names(tools)
    for i, a in enumerate(added):  # the reflection's compact steps name no tools
        made = produced_file(a.description, a.acceptance) if writes and not a.tools else None
        if made is not None:
            added[i] = a.model_copy(update={"tools": [preferred_write(writes)]})
            notes.append(f"new step {a.id!r} writes {made}: given {preferred_write(writes)}")
    known = {t.name for t in tools}
    for u in updates:
        old = plan.get(u.id)
        if u.tools is not None and old is not None and old.status != StepStatus.DONE and known:
            # a repair changes how a step does its work, not whether it can: the 1.5B's patch gave the failed
            # write_avg the tools ["python"], and each of its writes was refused until the run failed
            meant = [tool_meant(t, known) for t in u.tools]
            had = [t for t in old.tools if t in writes]
            if had and not writes.intersection(meant):
                meant = [*had, *meant]
                notes.append(f"step {u.id!r} keeps {', '.join(had)}: a repair does not take away the write it does")
            if meant != list(u.tools):
                u = u.model_copy(update={"tools": list(dict.fromkeys(meant))})
        if u.acceptance is not None and old is not None:
            acceptance, lost = kept_runs(old.acceptance or "", u.acceptance)
            if lost:  # a repair rewords what a step must meet, never drops what it ran
                u = u.model_copy(update={"acceptance": acceptance})
                notes.append(f"step {u.id!r} keeps {', '.join(f'`{c}`' for c in lost)} in its acceptance")
        if u.dependencies is None or not names.intersection(u.dependencies):
            fixed.append(u)
            continue
        kept = [d for d in u.dependencies if d not in names]
        fixed.append(u.model_copy(update={"dependencies": kept or None}))
    reason = candidate.reason + (f" ({'; '.join(notes)})" if notes else "")
    return candidate.model_copy(update={"add_steps": added, "update_steps": fixed, "reason": reason})


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
    keeps as it was is one to run again. Kept failed, its trouble stayed, and the run gave up on its next
    reflection (the 1.5B's `test_shapes.py`, written on one line twice; its patch that added a step to fix
    mathx.py after the failed step that wrote it). A step the patch updates is reset by the update."""
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
    reasons recorded in ``rejections``) when there is none that applies. The plan is held to the coverage of a
    first plan (`planmode.nodes._coverage.plan_problems`; the files the run wrote, ``made``, are still the task's).
    A step of the node's body (``yield from``): the call is ``call_structured`` on the sync path,
    ``acall_structured`` on the async one."""
    messages: list[BaseMessage] = [
        SystemMessage(
            content=prompts.PLAN_SYSTEM.format(max_steps=plan.max_steps or settings.max_steps, tools="as before")
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
    # the model was told to keep the done steps as they are: its copy of one is not a change (the 1.5B re-sent a
    # done step with another complexity, and the whole repair was refused). Only the open steps are its plan.
    done = {s.id: s for s in plan.steps if s.status == StepStatus.DONE}
    kept = [s.id for s in proposed.steps if s.id in done and _definition(s) != _definition(done[s.id])]
    proposed = proposed.model_copy(update={"steps": [done.get(s.id, s) for s in proposed.steps]})
    # a write step without acceptance gets "<file> exists", as the planner's plan does (patches are sent back)
    open_ids = [s.id for s in proposed.steps if (old := plan.get(s.id)) is None or old.status != StepStatus.DONE]
    proposed, named = mend_tools(proposed, tools, open_ids)
    proposed, untied = mend_dependencies(proposed, tools, open_ids)
    proposed, data_runs = mend_data_runs(proposed, open_ids)
    proposed, mended = mend_acceptance(proposed, tools, open_ids)
    proposed, modules = mend_module_runs(proposed, tools, open_ids)
    proposed, runs = mend_runs(proposed, tools, open_ids)
    proposed, kept_commands = mend_kept_runs(plan, proposed, open_ids)
    mended = [*named, *untied, *data_runs, *mended, *modules, *runs, *kept_commands]
    reasons = validate_plan(proposed)  # the draft must be a valid plan by itself
    if not reasons:  # and cover the task as a first plan must (the 0.5B sent back the shape's example, "...")
        reasons = plan_problems(proposed, tools, open_ids, made)
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
