"""plan: explore with read-only tools (bounded), then emit a validated `Plan` through structured output."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from planmode import prompts
from planmode._agent import is_read_only, run_tool_loop
from planmode.context import PlanModeContext, settings_dict
from planmode.events import emit
from planmode.llm import call_structured, negotiation_record
from planmode.nodes._deps import Deps, settings_of
from planmode.staleness import explored_paths
from planmode.state.graph_state import PlanModeState
from planmode.state.models import Plan, PlanPatch, Step, StepDefinition
from planmode.state.patch import apply_patch, diff_to_patch, validate_plan
from planmode.state.reducer import PlanUpdate

__all__ = ["PlanDraft", "draft_to_plan", "make_plan", "request_plan"]


class PlanDraft(BaseModel):
    """What the planner emits: a title and the steps."""

    title: str = Field(default="", description="A short title for the plan.")
    steps: list[StepDefinition] = Field(description="The steps, in a sensible order.")


def draft_to_plan(draft: PlanDraft, goal: str, max_steps: int, current: Plan | None = None) -> Plan:
    """A plan from a draft. Statuses and records are never taken from a model: new steps are pending, and a
    step whose id is a done step of ``current`` keeps that step's record (so an unchanged done step diffs as
    unchanged, and a changed one is refused by `apply_patch`)."""
    done = {s.id: s for s in current.steps if s.status.value == "done"} if current is not None else {}
    steps = []
    for d in draft.steps:
        step = Step(**d.model_dump())
        old = done.get(step.id)
        if old is not None:
            step = step.model_copy(
                update=old.model_dump(include={"status", "attempts", "result", "error", "output_ref"})
            )
        steps.append(step)
    return Plan(goal=goal, title=draft.title, steps=steps, max_steps=max_steps)


def request_plan(
    model: Any,
    messages: list[BaseMessage],
    settings: PlanModeContext,
    goal: str,
    current: Plan | None,
    attempts: int,
) -> tuple[Plan | None, list[str]]:
    """Ask for a plan until one is valid (as a first plan, or as a revision of ``current``) or attempts run
    out. Returns the plan, or None and the errors of every attempt."""
    errors: list[str] = []
    msgs = list(messages)
    for _ in range(max(1, attempts)):
        draft, err, raw = call_structured(model, PlanDraft, msgs, settings)
        reasons: list[str] = [err] if err else []
        plan: Plan | None = None
        if draft is not None:
            plan = draft_to_plan(draft, goal, settings.max_steps, current)
            reasons = validate_plan(plan, max_steps=settings.max_steps)
            if not reasons and current is not None and current.version > 0:
                patch = diff_to_patch(current, plan, reason="revised plan")
                if not patch.is_empty():
                    res = apply_patch(current, patch, max_steps=current.max_steps)
                    reasons = res.reasons
        if not reasons and plan is not None:
            return plan, errors
        errors.append("; ".join(reasons))
        if draft is not None:
            shown = json.dumps(draft.model_dump(mode="json"))  # escapes what model_dump_json refuses
        else:
            shown = str(raw.content) if raw is not None else ""
        msgs += [
            AIMessage(content=str(shown)[:4000] or "(no answer)"),
            HumanMessage(content=prompts.PLAN_RETRY.format(reasons="\n".join(f"- {r}" for r in reasons))),
        ]
    return None, errors


def make_plan(deps: Deps) -> Any:
    """Build the plan node."""

    def plan(state: PlanModeState, runtime: Runtime[Any]) -> dict[str, Any]:
        settings = settings_of(state, runtime)
        model = deps.models.get(settings)
        goal = state.get("goal", "")
        current = state.get("plan")
        feedback = state.get("feedback")
        tool_names = ", ".join(f"{t.name}{'' if is_read_only(t) else ' (writes)'}" for t in deps.tools) or "none"
        findings = ""
        explored: list[str] | None = None
        if deps.tools and settings.max_explore_calls > 0 and not feedback:
            explore: list[BaseMessage] = [
                SystemMessage(content=prompts.EXPLORE_SYSTEM.format(max_calls=settings.max_explore_calls)),
                HumanMessage(content=f"Task: {goal}"),
            ]
            # Before approval only read-only tools run: the gate refuses the others where they are dispatched.
            res = run_tool_loop(
                model,
                deps.tools,
                explore,
                settings,
                allow_writes=False,
                max_iterations=settings.max_explore_calls + 1,
                max_tool_calls=settings.max_explore_calls,
            )
            if res.text:
                findings = f"What exploring found:\n{res.text}"
            explored = explored_paths(res.messages)  # the staleness fingerprint outside a git repository
        messages: list[BaseMessage] = [
            SystemMessage(content=prompts.PLAN_SYSTEM.format(max_steps=settings.max_steps, tools=tool_names)),
            HumanMessage(content=prompts.PLAN_USER.format(task=goal, findings=findings).rstrip()),
        ]
        revising = current is not None and current.version > 0 and bool(feedback)
        if revising and current is not None:
            messages.append(
                HumanMessage(content=prompts.PLAN_FEEDBACK.format(feedback=feedback, plan=current.to_prompt()))
            )
        new, errors = request_plan(
            model, messages, settings, goal, current if revising else None, settings.max_plan_attempts
        )
        if new is None:
            msg = f"the planner gave no valid plan in {settings.max_plan_attempts} attempt(s): " + " | ".join(errors)
            return {"status": "failed", "error": msg}
        record = negotiation_record(model, settings)  # a run resumed elsewhere starts from the mode auto chose
        kept = {"settings": settings_dict(replace(settings, negotiated_output=record))} if record else {}
        source = "planner (revision)" if revising else "planner"
        version = current.version + 1 if revising and current is not None else 1
        emit(
            "plan_created",
            new.title or goal,
            plan_version=version,
            steps=len(new.steps),
            revision=revising,
            plan=new.model_dump(mode="json", include={"goal", "title", "steps"}),
        )
        # A revision's history record keeps the human's feedback as its reason (the reducer takes the reason of
        # a whole-plan update from an accompanying patch).
        reason = PlanPatch(reason=f"human feedback: {feedback}") if revising else None
        return {
            "plan": PlanUpdate(plan=new, patch=reason, source=source),
            "status": "awaiting_approval",
            "needs_approval": True,
            "feedback": None,
            "approval_error": None,
            **({"explored_paths": explored} if explored is not None else {}),
            **kept,
        }

    return plan
