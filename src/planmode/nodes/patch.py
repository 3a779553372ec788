"""patch: repair the plan with the smallest patch that works.

Starts from the patch the reflection proposed, when it proposed one (one call for both, so the common case
makes no patch call); otherwise asks for a `PlanPatch`. Validates it with the same function the reducer
uses, feeds rejection reasons back for a bounded number of retries, then falls back to a whole plan
converted by diff, then ends the run cleanly as failed. Rejected patches are recorded in the plan's
rejections.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from pydantic import ValidationError

from planmode import prompts
from planmode.events import emit
from planmode.llm import call_structured
from planmode.nodes._deps import Deps, settings_of
from planmode.nodes._repair import Reflection, proposed_patch, repair_view
from planmode.state.draft import PlanDraft, draft_to_plan
from planmode.state.graph_state import PlanModeState
from planmode.state.models import PlanPatch, Rejection
from planmode.state.patch import apply_patch, diff_to_patch, validate_plan
from planmode.state.reducer import PlanUpdate

__all__ = ["make_patch"]


def make_patch(deps: Deps) -> Any:
    """Build the patch node."""

    def patch(state: PlanModeState, runtime: Runtime[Any]) -> dict[str, Any]:
        settings = settings_of(state, runtime)
        plan = state.get("plan")
        if plan is None:
            return {"status": "failed", "error": "no plan to patch"}
        model = deps.models.get(settings)
        reflection = state.get("reflection") or {}
        trouble = state.get("trouble") or ""
        guidance = reflection.get("guidance") or reflection.get("reasoning") or "(none)"
        messages: list[BaseMessage] = [
            SystemMessage(content=prompts.PATCH_SYSTEM),
            HumanMessage(content=prompts.PATCH_USER.format(trouble=trouble, guidance=guidance, plan=repair_view(plan))),
        ]
        rejections: list[Rejection] = []
        chosen: PlanPatch | None = None
        source = "patch"
        proposal = _proposal(reflection)  # the reflection's patch is the first attempt, without a call
        raw: AIMessage | None
        for attempt in range(max(1, settings.max_patch_attempts)):
            if attempt == 0 and proposal is not None:
                candidate, err, raw = proposal
            else:
                candidate, err, raw = call_structured(model, PlanPatch, messages, settings)
            reasons = [err] if err else []
            if candidate is not None:
                res = apply_patch(plan, candidate, max_steps=plan.max_steps, source="patch")
                if res.applied:
                    chosen = candidate
                    break
                reasons = res.reasons
            rejections.append(Rejection(version=plan.version, kind="patch", source="patch", reasons=reasons))
            emit("patch_rejected", "; ".join(reasons), plan_version=plan.version, reasons=reasons)
            # json.dumps escapes what model_dump_json refuses (e.g. a lone surrogate from a model)
            shown = (
                json.dumps(candidate.model_dump(mode="json", exclude_defaults=True))
                if candidate
                else (raw.content if raw else "")
            )
            messages += [
                AIMessage(content=str(shown)[:4000] or "(no answer)"),
                HumanMessage(content=prompts.PATCH_RETRY.format(reasons="\n".join(f"- {r}" for r in reasons))),
            ]
        if chosen is None:
            chosen = _full_plan_fallback(model, settings, plan, trouble, rejections)
            source = "diff"
        if chosen is None:
            msg = f"no valid patch after {settings.max_patch_attempts} attempt(s) and a full-plan fallback"
            return {"status": "failed", "error": msg, "plan": PlanUpdate(rejections=rejections, source="patch")}
        res = apply_patch(plan, chosen, max_steps=plan.max_steps, source=source)
        emit(
            "plan_patched",
            chosen.reason,
            plan_version=res.plan.version,
            added=res.plan.history[-1].added,
            updated=res.plan.history[-1].updated,
            removed=res.plan.history[-1].removed,
            warnings=res.warnings,
        )
        off_track = reflection.get("assessment") == "off_track"
        reapprove = off_track or settings.reapprove_patches
        update: dict[str, Any] = {
            "plan": PlanUpdate(patch=chosen, rejections=rejections, source=source),
            "patches_applied": (state.get("patches_applied") or 0) + 1,
        }
        if reapprove:
            return {**update, "needs_approval": True, "status": "awaiting_approval"}
        return {**update, "needs_approval": False}

    return patch


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


def _full_plan_fallback(
    model: Any, settings: Any, plan: Any, trouble: str, rejections: list[Rejection]
) -> PlanPatch | None:
    messages: list[BaseMessage] = [
        SystemMessage(
            content=prompts.PLAN_SYSTEM.format(max_steps=plan.max_steps or settings.max_steps, tools="as before")
        ),
        HumanMessage(content=prompts.FULL_PLAN_FALLBACK.format(trouble=trouble, plan=plan.to_prompt())),
    ]
    draft, err, _raw = call_structured(model, PlanDraft, messages, settings)
    if draft is None:
        rejections.append(Rejection(version=plan.version, kind="plan", source="diff", reasons=[err or "no plan"]))
        return None
    proposed = draft_to_plan(draft, plan.goal, plan.max_steps or settings.max_steps, plan)
    reasons = validate_plan(proposed)
    if not reasons:
        candidate = diff_to_patch(plan, proposed, reason="full plan converted into a patch by diff")
        res = apply_patch(plan, candidate, max_steps=plan.max_steps, source="diff")
        if res.applied:
            return candidate
        reasons = res.reasons
    rejections.append(Rejection(version=plan.version, kind="plan", source="diff", reasons=reasons))
    emit("patch_rejected", "; ".join(reasons), plan_version=plan.version, reasons=reasons)
    return None
