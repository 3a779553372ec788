"""finalize: the final answer as an AI message, and the run report."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from planmode import prompts
from planmode._compat import RunnableCallable
from planmode.budget import BudgetSkipped, finalize_fits
from planmode.llm import text_of
from planmode.nodes._deps import Deps, NodeRuntime, StateUpdate, settings_of
from planmode.nodes._twin import Body, chat, model_for, twin_node
from planmode.observability.events import emit
from planmode.state.graph_state import PlanModeState
from planmode.state.models import Plan, PlanSource, StepStatus

__all__ = ["build_report", "make_finalize"]

S = StepStatus


#: The sources of the run's own changes to a plan (`PlanSource`): a repair counts as a patch in the report.
_MACHINE_SOURCES = {
    PlanSource.PLANNER.value,
    PlanSource.PATCH.value,
    PlanSource.DIFF.value,
    PlanSource.DISPATCH.value,
    PlanSource.VERIFY.value,
    PlanSource.REFLECT.value,
    PlanSource.UNKNOWN.value,
}


def _kind(source: str) -> str:
    """How the report counts a history record of ``source``: approval, replan, patch or edit (a human's, or a
    custom source: `planmode.edit_plan` takes a user name)."""
    value = str(getattr(source, "value", source))
    if value == PlanSource.APPROVAL.value:
        return "approval"
    if value == PlanSource.HUMAN_FEEDBACK.value:
        return "replan"
    return "patch" if value in _MACHINE_SOURCES else "edit"


def build_report(plan: Plan | None, status: str, error: str | None, reflections: int) -> dict[str, Any]:
    """The run report: what was done, failed and skipped, the patches applied, the reflections."""
    if plan is None:
        return {
            "status": status,
            "error": error,
            "done": [],
            "failed": [],
            "skipped": [],
            "pending": [],
            "patches": [],
            "edits": [],
            "replans": [],
            "approvals": [],
            "reflections": reflections,
            "plan_version": 0,
        }
    return {
        "status": status,
        "error": error,
        "goal": plan.goal,
        "plan_version": plan.version,
        "done": [s.id for s in plan.by_status(S.DONE)],
        "failed": [s.id for s in plan.by_status(S.FAILED)],
        "skipped": [s.id for s in plan.by_status(S.SKIPPED)],
        "pending": [s.id for s in plan.by_status(S.PENDING, S.RUNNING, S.BLOCKED)],
        # what changed the plan after its first version, by who changed it: the run's own repairs (patches), a
        # human's edits (at the approval, `planmode.edit_plan`, Studio, or a custom source naming a person), and
        # the planner's revisions from a human's feedback on a rejected plan (replans); an approval is none of them
        "patches": [r.model_dump(mode="json") for r in plan.history[1:] if _kind(r.source) == "patch"],
        "edits": [r.model_dump(mode="json") for r in plan.history[1:] if _kind(r.source) == "edit"],
        "replans": [r.model_dump(mode="json") for r in plan.history[1:] if _kind(r.source) == "replan"],
        "approvals": [
            {"version": r.version, "by": r.approved_by, "edited": r.source != "approval"}
            for r in plan.history
            if r.approved_by is not None
        ],
        "rejected_updates": len(plan.rejections),
        "reflections": reflections,
    }


def make_finalize(deps: Deps) -> RunnableCallable:
    """Build the finalize node: a sync path for ``invoke`` and an async one for ``ainvoke`` (the summary call
    awaited)."""

    def finalize(state: PlanModeState, runtime: NodeRuntime) -> Body[StateUpdate]:
        plan = state.get("plan")
        error = state.get("error")
        status = state.get("status") or "failed"
        if status == "cancelled":  # a human cancelled at the approval: no model call, the feedback is kept
            return _cancelled(state, plan)
        if status not in ("failed", "completed"):
            status = "completed" if plan is not None and plan.is_complete else "failed"
        if status == "completed" and plan is not None and not plan.is_complete:
            status, error = "failed", error or "the plan ended with steps not done"
        if status == "failed" and not error:
            error = "the run did not complete"
        report = build_report(plan, status, error, state.get("reflections") or 0)
        if status == "completed" and plan is not None:
            answer = yield from _final_answer(deps, state, runtime, plan)
        else:
            answer = f"The run failed: {error}"
        emit("run_finished", answer, plan_version=plan.version if plan else None, status=status, report=report)
        return {
            "messages": [AIMessage(content=answer, name="planmode")],
            "status": status,
            "report": report,
            "error": error if status == "failed" else None,
        }

    return twin_node("finalize", finalize)


def _cancelled(state: PlanModeState, plan: Plan | None) -> StateUpdate:
    feedback = state.get("feedback")
    report = {**build_report(plan, "cancelled", None, state.get("reflections") or 0), "feedback": feedback}
    answer = "The plan was cancelled at the approval" + (f": {feedback}" if feedback else ".")
    stopped = state.get("budget")
    if isinstance(stopped, dict) and stopped.get("stopped"):  # a human stopped the run at its budget (planmode.budget)
        answer = f"The run was stopped at its budget before {stopped.get('stopped_at')}: {stopped.get('reason')}."
    if report["done"]:
        answer += f" Steps already done: {', '.join(report['done'])}."
    emit("run_finished", answer, plan_version=plan.version if plan else None, status="cancelled", report=report)
    return {
        "messages": [AIMessage(content=answer, name="planmode")],
        "status": "cancelled",
        "report": report,
        "error": None,
    }


def _final_answer(deps: Deps, state: PlanModeState, runtime: NodeRuntime, plan: Plan) -> Body[str]:
    summary = "\n".join(f"- {s.id}: {s.result or s.status.value}" for s in plan.steps)
    settings = settings_of(state, runtime)
    if not finalize_fits(state, settings):  # the summary call would go over the budget: a plain summary
        return f"Done: {plan.goal} (the final summary was skipped: it does not fit the budget)\n{summary}"
    try:
        model = yield from model_for(deps, settings)
        reply = yield from chat(
            model,
            [
                SystemMessage(content=prompts.FINAL_SYSTEM),
                HumanMessage(content=f"Goal: {plan.goal}\nStep results:\n{summary}"),
            ],
        )
        text = text_of(reply).strip() if hasattr(reply, "content") else str(reply)
    except BudgetSkipped:  # the call's own budget check (planmode.budget.CallGuard): the same plain summary
        return f"Done: {plan.goal} (the final summary was skipped: it does not fit the budget)\n{summary}"
    except Exception as exc:  # the work is done; a failed summary call must not fail the run
        text = f"(the final summary could not be written: {type(exc).__name__})"
    return text or f"Done: {plan.goal}\n{summary}"
