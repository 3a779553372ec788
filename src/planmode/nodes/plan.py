"""plan: explore with read-only tools (bounded), then emit a validated `Plan` through structured output."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Sequence
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool

from planmode import prompts
from planmode._compat import RunnableCallable
from planmode._drive import Call
from planmode.adapters import adapter_for
from planmode.approval.staleness import explored_paths
from planmode.checks import plan_check_problems
from planmode.context import PlanModeContext
from planmode.executors import tool_runs
from planmode.llm import negotiation_record
from planmode.nodes._deps import Deps, NodeRuntime, StateUpdate, negotiated_of, settings_of
from planmode.nodes._evidence import preferred_write, workspace_root, write_tool_names
from planmode.nodes._twin import Body, ask, model_for, tool_loop, twin_node
from planmode.observability.events import emit
from planmode.prompts import earlier_text
from planmode.state.draft import PlanDraft, draft_to_plan
from planmode.state.graph_state import PlanModeState
from planmode.state.models import Plan, PlanPatch, PlanSource
from planmode.state.patch import validate_plan
from planmode.state.reducer import PlanUpdate, preview
from planmode.tools import read_only_names
from planmode.tools.loop import is_read_only
from planmode.tools.workspace import WORKSPACE_ROOT_METADATA_KEY

__all__ = ["PlanDraft", "draft_to_plan", "make_plan", "request_plan"]


def request_plan(
    model: BaseChatModel,
    messages: list[BaseMessage],
    settings: PlanModeContext,
    goal: str,
    current: Plan | None,
    attempts: int,
    tools: Sequence[BaseTool] = (),
) -> Body[tuple[Plan | None, list[str], list[str]]]:
    """Ask for a plan until one is valid (as a first plan, or as a revision of ``current``) or attempts run
    out. Returns the plan (or None), the errors of every attempt, and what planmode changed (only with the
    small-model adapter on: its fixes, shown for approval as planmode's).

    A node body's step (``yield from``, see `planmode.nodes._twin`): the call is ``ask_until_valid`` on the sync
    path, ``aask_until_valid`` on the async one. A plan's declared checks must be ones that can run
    (`planmode.checks.plan_check_problems`) and a step that writes must declare how it is checked: the reasons
    are fed back like any other."""

    revising = current is not None and current.version > 0
    source = PlanSource.HUMAN_FEEDBACK if revising else PlanSource.PLANNER
    adapter = adapter_for(settings)
    valid_but_short: list[Plan] = []  # valid plans whose only problems are the adapter's (`plan_problems`)

    def valid(plan: Plan) -> list[str]:
        reasons: list[str] = []
        if revising:  # a revision must be a valid plan by itself too (the diff truncates past the cap)
            reasons = validate_plan(plan, max_steps=settings.max_steps)
        if not reasons:
            reasons = preview(current if revising else None, PlanUpdate(plan=plan, source=source)).reasons
        return reasons

    named: dict[int, list[str]] = {}  # by plan: what the adapter changed in it

    def accept(draft: PlanDraft) -> tuple[Plan | None, list[str]]:
        plan = draft_to_plan(draft, goal, settings.max_steps, current)
        if adapter is not None:
            plan, fixes = adapter.mend_plan(plan, tools, settings)
            named[id(plan)] = fixes
        reasons = valid(plan) or plan_check_problems(plan.steps, tools, settings, workspace_root(tools) is not None)
        if not reasons and adapter is not None:
            reasons = adapter.plan_problems(plan, tools)
            if reasons:
                valid_but_short.append(plan)
        return (None, reasons) if reasons else (plan, [])

    asked = yield from ask(
        model, PlanDraft, messages, settings, attempts=attempts, accept=accept, retry_prompt=_plan_retry
    )
    if asked.value is None and adapter is not None:  # the adapter's last resort: the fixes its reasons name
        for plan in reversed(valid_but_short):
            mended = adapter.last_resort(plan, tools, settings.max_steps)
            if mended is not None and not valid(mended[0]):
                return mended[0], asked.errors, [*named.get(id(plan), []), *mended[1]]
    return asked.value, asked.errors, named.get(id(asked.value), [])


def _commands(tools: Sequence[BaseTool], settings: PlanModeContext) -> str:
    """The programs a check may run, as the planner is told them."""
    if workspace_root(tools) is None:
        return "none (this run has no workspace: use acceptance prose)"
    if not settings.run_checks:
        return "none run (running checks is off: file checks and acceptance prose only)"
    return ", ".join(settings.check_commands) or "none"


def _example(tools: Sequence[BaseTool]) -> str:
    """The plan prompt's example, written with the graph's write tool (none without one: nothing to copy)."""
    writes = write_tool_names(tools)
    if not writes:
        return ""
    return prompts.PLAN_EXAMPLE.format(write=preferred_write(writes))


_MARKUP = re.compile(r"<tools>|<function[\s>=]|<tool_call>|\"(?:parameters|arguments)\"\s*:", re.IGNORECASE)


def _tool_markup(text: str) -> bool:
    """Whether an exploring answer is a tool call or a tool's declaration written as text, not findings: tool
    markup anywhere in it (``<tools>``, ``<function ...>``, ``<tool_call>``, a ``"parameters"`` or
    ``"arguments"`` key). Such an answer is not findings to plan from."""
    return bool(_MARKUP.search(text))


def _results(messages: Sequence[BaseMessage]) -> str:
    """What the read-only tools that ran returned, one line each (clipped)."""
    return "\n".join(f"- {r.name} {r.args}: {r.result}" for r in tool_runs(messages) if r.ok)


def _nothing_to_explore(readers: Sequence[BaseTool]) -> bool:
    """Every reading tool reads one workspace (`planmode.tools.workspace_tools`) and it is empty: exploring would
    only find that out, at the price of a model call. False when the readers read more than one root, none,
    or a root that cannot be listed."""
    roots = {(t.metadata or {}).get(WORKSPACE_ROOT_METADATA_KEY) for t in readers}
    if len(roots) != 1:
        return False
    root = roots.pop()
    if not isinstance(root, str) or not root:
        return False
    try:
        with os.scandir(root) as entries:
            return not any(True for _ in entries)
    except OSError:
        return False


async def _anothing(readers: Sequence[BaseTool]) -> bool:
    return await asyncio.to_thread(_nothing_to_explore, readers)


def _plan_retry(reasons: list[str]) -> str:
    return prompts.PLAN_RETRY.format(reasons="\n".join(f"- {r}" for r in reasons))


def make_plan(deps: Deps) -> RunnableCallable:
    """Build the plan node: a sync path for ``invoke`` and an async one for ``ainvoke`` (the exploring tool loop
    and the plan calls awaited)."""

    def plan(state: PlanModeState, runtime: NodeRuntime) -> Body[StateUpdate]:
        settings = settings_of(state, runtime)
        model = yield from model_for(deps, settings, negotiated_of(state))
        goal = state.get("goal", "")
        current = state.get("plan")
        feedback = state.get("feedback")
        tool_names = ", ".join(f"{t.name}{'' if is_read_only(t) else ' (writes)'}" for t in deps.tools) or "none"
        findings = ""
        earlier = earlier_text(state.get("earlier"))  # the run this one follows on the thread ("" when none)
        explored: list[str] | None = None
        # Exploring is shown only the read-only tools (a small model offered a write tool while planning spends its
        # few exploring turns on calls the gate refuses); the gate still refuses any other call where it runs.
        reading = read_only_names(deps.tools)  # a name a writing tool shares is not read-only
        readers = [t for t in deps.tools if t.name in reading]
        # the folder is listed off the event loop on the async path (the LangGraph server refuses blocking calls)
        empty = readers and (yield Call(partial(_nothing_to_explore, readers), partial(_anothing, readers)))
        if readers and settings.max_explore_calls > 0 and not feedback and not empty:
            explore: list[BaseMessage] = [
                SystemMessage(content=prompts.EXPLORE_SYSTEM.format(max_calls=settings.max_explore_calls)),
                HumanMessage(content=f"Task: {goal}" + earlier),
            ]
            # Before approval only read-only tools run: the gate refuses the others where they are dispatched.
            res = yield from tool_loop(
                model,
                readers,
                explore,
                settings,
                allow_writes=False,
                max_iterations=settings.max_explore_calls + 1,
                max_tool_calls=settings.max_explore_calls,
            )
            if res.text and not _tool_markup(res.text):
                findings = f"What exploring found:\n{res.text}"
            elif seen := _results(res.messages):
                findings = f"What exploring found (the tools' results):\n{seen}"
            explored = explored_paths(res.messages)  # the staleness fingerprint outside a git repository
        messages: list[BaseMessage] = [
            SystemMessage(
                content=prompts.PLAN_SYSTEM.format(
                    max_steps=settings.max_steps, tools=tool_names, commands=_commands(deps.tools, settings)
                )
                + _example(deps.tools)
            ),
            HumanMessage(content=prompts.PLAN_USER.format(task=goal, findings=findings).rstrip() + earlier),
        ]
        revising = current is not None and current.version > 0 and bool(feedback)
        if revising and current is not None:
            messages.append(
                HumanMessage(content=prompts.PLAN_FEEDBACK.format(feedback=feedback, plan=current.to_prompt()))
            )
        new, errors, mends = yield from request_plan(
            model, messages, settings, goal, current if revising else None, settings.max_plan_attempts, deps.tools
        )
        if new is None:
            msg = f"the planner gave no valid plan in {settings.max_plan_attempts} attempt(s): " + " | ".join(errors)
            return {"status": "failed", "error": msg}
        if (adapter := adapter_for(settings)) is not None:  # the adapter's last word: checks read from prose
            new, late = adapter.finish_plan(new, deps.tools, settings)
            mends = [*mends, *late]
        record = negotiation_record(model, settings, negotiated_of(state))  # a resume elsewhere starts from it
        kept: StateUpdate = {"negotiated_output": record} if record else {}
        source = PlanSource.HUMAN_FEEDBACK if revising else PlanSource.PLANNER
        version = current.version + 1 if revising and current is not None else 1
        mended: dict[str, Any] = {"mended": mends} if mends else {}  # the fixes planmode's adapter made
        emit(
            "plan_created",
            new.title or goal,
            plan_version=version,
            steps=len(new.steps),
            revision=revising,
            plan=new.model_dump(mode="json", include={"goal", "title", "steps"}),
            **mended,
        )
        # A revision's history record keeps the human's feedback as its reason (the reducer takes the reason of
        # a whole-plan update from an accompanying patch).
        reason = PlanPatch(reason=f"human feedback: {feedback}") if revising else None
        if mends:  # fixes planmode made without a model (shown for approval)
            said = "; ".join(mends)
            before = f"{reason.reason}; " if reason is not None else ""
            reason = PlanPatch(reason=f"{before}completed by planmode: {said}")
        return {
            "plan": PlanUpdate(plan=new, patch=reason, source=source),
            "status": "awaiting_approval",
            "needs_approval": True,
            "feedback": None,
            "approval_error": None,
            **({"explored_paths": explored} if explored is not None else {}),
            **kept,
        }

    return twin_node("plan", plan)
