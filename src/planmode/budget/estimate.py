"""Token estimates: what a step, a node, or the rest of a plan is expected to use.

A prior from the plan's size and its steps' complexity -- each step's prompt (its text, the goal, its
dependencies' results, a turn per expected tool, each resending the prompt) and an answer size by complexity,
plus its verification -- scaled, once steps have run, by what the steps run so far actually used against their
prior. The constants were set against the bench oracle's calls (bench/budget_bench.py measures the error).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from typing import Any

from planmode import prompts
from planmode.context import PlanModeContext
from planmode.llm.trim import CHARS_PER_TOKEN
from planmode.observability.usage import total_tokens
from planmode.state.models import Plan, Step, StepStatus

__all__ = ["expected_tokens", "plan_estimate", "step_estimate"]

S = StepStatus
#: A step's answer in tokens by complexity (the executor's output; verify reads it back).
_ANSWER = {"low": 80, "medium": 150, "high": 300}
#: Prompt overhead of a call by purpose (system prompt, framing), in tokens.
_OVERHEAD = {"plan": 450, "execute": 120, "verify": 150, "reflect": 450, "patch": 900, "final": 80, "respond": 150}


def _tok(text: str | None) -> int:
    return len(text or "") // CHARS_PER_TOKEN


@functools.cache
def _plan_prefix() -> int:
    """The plan call's fixed prefix in tokens: its system prompt, the example and the schema of the plan it asks
    for (the schema is sent with the call, and grows with what a step declares)."""
    from planmode.state.draft import PlanDraft

    schema = json.dumps(PlanDraft.model_json_schema())
    return _tok(prompts.PLAN_SYSTEM) + _tok(prompts.PLAN_EXAMPLE) + _tok(schema)


def step_estimate(step: Step, plan: Plan, settings: PlanModeContext) -> int:
    """Prior tokens of one step: its execution (a turn per expected tool, each resending the prompt) and its
    verification."""
    deps = sum(min(settings.result_chars, len(d.result or "")) for d in map(plan.get, step.dependencies) if d)
    prompt = _OVERHEAD["execute"] + _tok(step.description) + _tok(step.acceptance) + _tok(plan.goal) + deps // 3
    turns = 1 + min(len(step.tools), max(0, settings.max_executor_iterations - 1))
    answer = _ANSWER.get(step.complexity.value, _ANSWER["medium"])
    execute = prompt * turns + answer + 60 * (turns - 1)
    judge = _OVERHEAD["verify"] + _tok(step.description) + _tok(step.acceptance) + answer + 30
    verify = judge if step.acceptance else 0
    return execute + verify


def _scale(plan: Plan, usage: Any, settings: PlanModeContext) -> tuple[float, int]:
    """What the steps done so far used against their prior (1.0 without history), and how many counted."""
    actual = prior = 0
    counted = 0
    for step in plan.steps:
        used = total_tokens(usage, "steps", step.id)
        if used and step.status in (S.DONE, S.FAILED, S.BLOCKED):
            actual += used
            prior += step_estimate(step, plan, settings)
            counted += 1
    return (actual / prior if prior else 1.0), counted


def _result_tokens(step: Step, settings: PlanModeContext) -> int:
    return min(settings.result_chars // CHARS_PER_TOKEN, _ANSWER.get(step.complexity.value, _ANSWER["medium"]))


def _repair_view_tokens(plan: Plan) -> int:
    return sum(_tok(s.description) + 12 for s in plan.steps) + _tok(plan.goal)


def expected_tokens(name: str, state: Mapping[str, Any], settings: PlanModeContext) -> tuple[int, list[str]]:
    """The tokens node ``name`` is expected to use now, and the steps it would start (dispatch)."""
    plan = state.get("plan")
    usage = state.get("usage")
    if name == "plan":  # the plan call itself (an exploration's tool turns are counted as they happen)
        return max(_OVERHEAD["plan"], _plan_prefix()) + _tok(str(state.get("goal") or "")) + 600, []
    if name == "respond":
        chars = sum(len(str(getattr(m, "content", ""))) for m in state.get("messages") or [])
        return _OVERHEAD["respond"] + chars // CHARS_PER_TOKEN + _ANSWER["medium"], []
    if not isinstance(plan, Plan) or plan.version == 0:
        return 0, []
    if name == "dispatch":
        if state.get("needs_approval") or state.get("status") == "cancelled":
            return 0, []
        outcomes = state.get("step_outcomes") or {}
        stale = [s for s in plan.by_status(S.RUNNING) if s.id not in outcomes]
        batch = (stale + plan.ready_steps())[: max(1, settings.max_parallel)]
        scale, _ = _scale(plan, usage, settings)
        return math.ceil(sum(step_estimate(s, plan, settings) for s in batch) * scale), [s.id for s in batch]
    if name in ("reflect", "patch"):
        return _OVERHEAD[name] + _repair_view_tokens(plan) + 300, []
    if name == "finalize":  # every step's result summary (its expected size before it ran) and a short answer
        results = sum((_tok(s.result) if s.result else _result_tokens(s, settings)) + 8 for s in plan.steps)
        return _OVERHEAD["final"] + results + 100, []
    return 0, []


def plan_estimate(plan: Plan, usage: Any, settings: PlanModeContext) -> dict[str, Any]:
    """The tokens the rest of the plan is expected to use, spent so far, and the basis of the estimate."""
    scale, counted = _scale(plan, usage, settings)
    open_steps = [s for s in plan.steps if s.status not in (S.DONE, S.SKIPPED)]
    steps = math.ceil(sum(step_estimate(s, plan, settings) for s in open_steps) * scale)
    final = expected_tokens("finalize", {"plan": plan}, settings)[0]
    spent = total_tokens(usage)
    basis = (
        f"scaled by the {counted} step(s) run so far (x{scale:.2f})" if counted else "the plan's size and complexity"
    )
    return {"spent": spent, "remaining": steps + final, "total": spent + steps + final, "basis": basis}
