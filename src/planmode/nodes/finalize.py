"""finalize: the final answer as an AI message, and the run report.

"Completed" is grounded in the run's record: before a run whose steps are all done is ``completed``, every done
step's declared checks run again (on a copy of the workspace, so a check that writes changes nothing), and a check
that fails now — a later step broke what an earlier one made — ends the run ``failed``, naming the check. The
final answer is written from the record (the steps done, the files the run changed). With the small-model adapter
on, the adapter's own end-of-run checks follow (`planmode.adapters`)."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.store.base import BaseStore

from planmode import prompts
from planmode._compat import RunnableCallable
from planmode.adapters import adapter_for
from planmode.budget import BudgetSkipped, finalize_fits
from planmode.checks import failure_reason
from planmode.context import PlanModeContext
from planmode.llm import text_of
from planmode.nodes._completion import unfinished_error
from planmode.nodes._deps import Deps, NodeRuntime, StateUpdate, settings_of, store_of
from planmode.nodes._evidence import changed_files, declared_checks, workspace_root
from planmode.nodes._outputs import adependency_output, dependency_output, summarize
from planmode.nodes._twin import Body, call, chat, model_for, twin_node
from planmode.observability.events import emit
from planmode.state.graph_state import PlanModeState
from planmode.state.models import Plan, PlanSource, Step, StepStatus

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
        if status == "completed" and plan is not None and (unfinished := unfinished_error(plan)):
            status, error = "failed", unfinished  # completed: every step done, or skipped by a human
        if status == "completed" and plan is not None:
            settings = settings_of(state, runtime)
            again = partial(_recheck, plan, deps, settings)
            broken = yield from call(again, partial(asyncio.to_thread, again))
            adapter = adapter_for(settings)
            if broken:  # what a done step's checks found still holds at the end
                status, error = "failed", "a done step's check fails at the end of the run: " + "; ".join(broken)
            elif adapter is not None and (
                trouble := adapter.run_problems(plan, deps.tools, state.get("run_writes") or {})
            ):
                status, error = "failed", trouble
        if status == "failed" and not error:
            error = "the run did not complete"
        report = build_report(plan, status, error, state.get("reflections") or 0)
        report["files_changed"] = changed_files(deps.tools, state.get("run_writes") or {})  # that exist now
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


def _recheck(plan: Plan, deps: Deps, settings: PlanModeContext) -> list[str]:
    """Each done step whose declared checks fail when run again now, with why: run on a copy of the workspace,
    so that a check is never a second effect (a script that appends to a file would append twice)."""
    root = workspace_root(deps.tools)
    broken = []
    for step in plan.by_status(S.DONE):
        results = declared_checks(step, root, settings, copy_workspace=True)
        if any(r.passed is False for r in results):
            broken.append(f"{step.id}: {failure_reason(results)}")
    return broken


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
    """The model's summary of the run's record, checked against it; the record itself when the summary names a
    file that does not exist. The files the run changed are always listed."""
    writes = state.get("run_writes") or {}
    changed = changed_files(deps.tools, writes)
    files = f"Files changed: {', '.join(changed)}." if changed else ""
    text = yield from _summary(deps, state, runtime, plan, files or "Files changed: none.")
    adapter = adapter_for(settings_of(state, runtime))
    if adapter is not None and adapter.unsupported(text, deps.tools, writes):  # the record instead of a claim
        done = ", ".join(s.id for s in plan.by_status(S.DONE)) or "none"
        text = f"Done: {plan.goal}\nSteps done: {done}."
    return f"{text}\n\n{files}" if files and files not in text else text


def _results(plan: Plan, store: BaseStore | None, chars: int) -> str:
    """Each step's result for the final summary: ``chars`` of its full output when the store keeps it (state keeps
    a shorter summary then: `PlanModeContext.stored_result_chars`), else the summary in state."""
    return "\n".join(f"- {s.id}: {_result(s, store, chars)}" for s in plan.steps)


def _result(step: Step, store: BaseStore | None, chars: int) -> str:
    if step.output_ref and step.status == S.DONE:
        return summarize(dependency_output({"result": step.result, "output_ref": step.output_ref}, store), chars)
    return step.result or step.status.value


async def _aresults(plan: Plan, store: BaseStore | None, chars: int) -> str:
    lines = []
    for s in plan.steps:
        if s.output_ref and s.status == S.DONE:
            full = await adependency_output({"result": s.result, "output_ref": s.output_ref}, store)
            lines.append(f"- {s.id}: {summarize(full, chars)}")
        else:
            lines.append(f"- {s.id}: {s.result or s.status.value}")
    return "\n".join(lines)


def _summary(deps: Deps, state: PlanModeState, runtime: NodeRuntime, plan: Plan, files: str) -> Body[str]:
    settings = settings_of(state, runtime)
    if not settings.final_summary:  # the record is the answer: no model call
        done = ", ".join(s.id for s in plan.by_status(S.DONE)) or "none"
        return f"Done: {plan.goal}\nSteps done: {done}."
    store = store_of(deps, runtime)
    summary = yield from call(
        partial(_results, plan, store, settings.result_chars), partial(_aresults, plan, store, settings.result_chars)
    )
    if not finalize_fits(state, settings):  # the summary call would go over the budget: a plain summary
        return f"Done: {plan.goal} (the final summary was skipped: it does not fit the budget)\n{summary}"
    try:
        model = yield from model_for(deps, settings)
        reply = yield from chat(
            model,
            [
                SystemMessage(content=prompts.FINAL_SYSTEM),
                HumanMessage(content=f"Goal: {plan.goal}\nStep results:\n{summary}\n{files}"),
            ],
        )
        text = text_of(reply).strip() if hasattr(reply, "content") else str(reply)
    except BudgetSkipped:  # the call's own budget check (planmode.budget.CallGuard): the same plain summary
        return f"Done: {plan.goal} (the final summary was skipped: it does not fit the budget)\n{summary}"
    except Exception as exc:  # the work is done; a failed summary call must not fail the run
        text = f"(the final summary could not be written: {type(exc).__name__})"
    return text or f"Done: {plan.goal}\n{summary}"
