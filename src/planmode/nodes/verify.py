"""verify: judge each executed step against its acceptance criteria. Only a verified step becomes done;
a failed verification counts an attempt (the step is retried, or fails when its attempts are used up).

verify then makes dispatch's decision (`planmode.nodes._batch.next_batch`) on the plan it leaves, in the
same update: the next batch marked running, or the trouble, the finished run, the pause. Its router is
dispatch's, so a layer of steps takes two checkpointed super-steps (execute_step, verify), not three."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables.config import ContextThreadPoolExecutor

from planmode.events import emit
from planmode.executors import StepContext, Verdict, llm_verifier, run_verifier
from planmode.nodes._batch import gates_may_stop, next_batch
from planmode.nodes._deps import Deps, NodeRuntime, StateNode, settings_of, store_of
from planmode.nodes._outputs import stored_output
from planmode.state.graph_state import PlanModeState, StepOutcome
from planmode.state.models import PlanSource, Step, StepStatus, StepTransition
from planmode.state.patch import apply_transitions
from planmode.state.reducer import PlanUpdate
from planmode.text import clip
from planmode.usage import step_scope

__all__ = ["make_verify", "summarize"]

S = StepStatus


def summarize(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text`` (whitespace folded), marked when cut."""
    return clip(text, limit, marker=" …[truncated]")


def make_verify(deps: Deps) -> StateNode:
    """Build the verify node."""

    def verify(state: PlanModeState, runtime: NodeRuntime) -> dict[str, Any]:
        settings = settings_of(state, runtime)
        plan = state.get("plan")
        outcomes = state.get("step_outcomes") or {}
        if plan is None or not outcomes:
            return next_batch(state, plan, settings.max_parallel)
        work: list[tuple[Step, StepOutcome]] = []
        for sid, outcome in outcomes.items():
            step = plan.get(sid)
            if step is not None and step.status is S.RUNNING:
                work.append((step, outcome))
        needs_model = deps.verifier is None and any(o.ok and s.acceptance for s, o in work)
        model = deps.models.get(settings) if needs_model else None
        store = store_of(deps, runtime)
        full = {step.id: stored_output(outcome, store) for step, outcome in work}  # here: the pool has no config

        def judge(item: tuple[Step, StepOutcome]) -> Verdict:
            step, outcome = item
            if not outcome.ok:
                return Verdict(passed=False, reason=outcome.error or "the attempt failed")
            ctx = StepContext(
                goal=plan.goal,
                dependencies={},
                attempt=step.attempts,
                previous_error=step.error,
                settings=settings,
                tools=(),
                model=model,
            )
            with step_scope(step.id):  # the judge's tokens count for its step
                return run_verifier(deps.verifier or llm_verifier, step, full[step.id], ctx)

        # ContextThreadPoolExecutor keeps the run context, so the judge's model calls stay in the run's trace
        with ContextThreadPoolExecutor(max_workers=max(1, min(len(work), settings.max_parallel))) as pool:
            verdicts = list(pool.map(judge, work))
        transitions: list[StepTransition] = []
        for (step, outcome), verdict in zip(work, verdicts, strict=True):
            if verdict.passed:
                summary = summarize(full[step.id], settings.result_chars)
                transitions.append(
                    StepTransition(
                        id=step.id, status=S.DONE, result=summary, error=None, output_ref=outcome.output_ref, clear=True
                    )
                )
                emit("step_completed", summary, step_id=step.id, plan_version=plan.version, attempt=step.attempts)
                continue
            reason = verdict.reason or "verification failed"
            if outcome.blocked:  # retrying cannot help: reflect decides (patch, skip, or give up)
                transitions.append(StepTransition(id=step.id, status=S.BLOCKED, error=reason, clear=True))
                emit(
                    "step_failed",
                    reason,
                    step_id=step.id,
                    plan_version=plan.version,
                    attempt=step.attempts,
                    final=True,
                    blocked=True,
                )
                continue
            exhausted = step.attempts >= settings.max_attempts
            transitions.append(
                StepTransition(
                    id=step.id,
                    status=S.FAILED if exhausted else S.PENDING,
                    error=reason,
                    result=summarize(full[step.id], settings.result_chars) if full[step.id] else None,
                    clear=True,
                )
            )
            emit(
                "step_failed",
                reason,
                step_id=step.id,
                plan_version=plan.version,
                attempt=step.attempts,
                final=exhausted,
            )
        cleared = dict.fromkeys(outcomes, None)
        judged = apply_transitions(plan, transitions)
        if not judged.applied or gates_may_stop(state, settings):
            # refused transitions (cannot happen for running steps: the reducer records it), or a gate around
            # dispatch (per-step approval, staleness, the budget) may stop the next batch: dispatch decides
            return {"plan": PlanUpdate(transitions=transitions, source=PlanSource.VERIFY), "step_outcomes": cleared}
        # dispatch's decision on the plan as verify leaves it: the next batch starts without a dispatch
        # super-step (its steps wait in execute_step until this checkpoint is saved)
        decision = next_batch({**state, "step_outcomes": {}}, judged.plan, settings.max_parallel)
        started = decision.pop("plan", None)
        more = started.transitions if isinstance(started, PlanUpdate) else []
        return {
            **decision,
            "plan": PlanUpdate(transitions=[*transitions, *more], source=PlanSource.VERIFY),
            "step_outcomes": cleared,
        }

    return verify
