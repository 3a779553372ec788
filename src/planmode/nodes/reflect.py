"""reflect: after a failed step, a blocked step or a deadlock, assess the run and choose what happens."""

from __future__ import annotations

import hashlib
import json

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from planmode import prompts
from planmode._compat import RunnableCallable
from planmode.nodes._deps import Deps, NodeRuntime, StateUpdate, negotiated_of, settings_of
from planmode.nodes._repair import Reflection, repair_view
from planmode.nodes._twin import Body, ask, model_for, twin_node
from planmode.observability.events import emit
from planmode.state.graph_state import PlanModeState
from planmode.state.models import Plan, PlanSource, StepDefinition, StepStatus, StepTransition
from planmode.state.reducer import PlanUpdate

__all__ = ["Reflection", "make_reflect", "progress_key"]

S = StepStatus


def _reflect_retry(reasons: list[str]) -> str:
    """The message after an unreadable assessment. It says what to assess (the plan and the trouble above, not
    this message), so the model's next answer judges the run, not the retry request."""
    return (
        f"That answer could not be read ({'; '.join(reasons)}). Answer again with only the JSON object: your "
        "assessment of the plan and of the trouble described above (not of this message)."
    )


def progress_key(plan: Plan, trouble: str) -> str:
    """What a reflection saw, as a digest: the trouble (each failed step's error, which holds its check output),
    the steps done, and the definition of every step not finished. The same key at the next reflection means the
    retry or the repair in between changed nothing: no step got done, no unfinished step changed, and the same
    trouble came back. The run stops at a reflection whose key is the last one's when the last reflection chose a
    repair (a patch that changed nothing), or after two retries in a row that changed nothing; a first retry that
    changed nothing still gets a reflection, which may propose a repair."""
    fields = set(StepDefinition.model_fields)
    seen = {
        "trouble": trouble,
        "done": sorted(s.id for s in plan.by_status(S.DONE)),
        "open": [s.model_dump(mode="json", include=fields) for s in plan.steps if s.status not in (S.DONE, S.SKIPPED)],
    }
    return hashlib.sha256(json.dumps(seen, sort_keys=True, default=str).encode()).hexdigest()


def make_reflect(deps: Deps) -> RunnableCallable:
    """Build the reflect node: a sync path for ``invoke`` and an async one for ``ainvoke`` (the assessment call
    awaited). It returns only what it changes; `planmode.graph.routing.route_after_reflect` reads the route
    (dispatch, patch or finalize) from the state it leaves."""

    def reflect(state: PlanModeState, runtime: NodeRuntime) -> Body[StateUpdate]:
        settings = settings_of(state, runtime)
        plan = state.get("plan")
        trouble = state.get("trouble") or "unknown trouble"
        count = (state.get("reflections") or 0) + 1
        if plan is None:
            return {"status": "failed", "error": "no plan to reflect on"}
        if count > settings.max_reflections:
            msg = f"gave up after {settings.max_reflections} reflection(s); last trouble: {trouble}"
            return {"status": "failed", "error": msg, "reflections": count - 1}
        progress = progress_key(plan, trouble)
        earlier = state.get("reflection") or {}
        same = earlier.get("progress") == progress
        stalled = int(earlier.get("stalled") or 0) + 1 if same else 0
        repaired = earlier.get("assessment") in ("needs_adjustment", "off_track")
        if same and (repaired or stalled >= 2):
            # a repair that changed nothing, or a second retry that did not: the same steps failed the same way
            what = f"the repair ({earlier.get('assessment')})" if repaired else "two retries"
            msg = (
                f"stopped: no progress: {what} chosen by the last reflection changed nothing, the same trouble with "
                f"the same unfinished steps: {trouble}"
            )
            emit("reflection", msg, plan_version=plan.version, assessment="failed", trouble=trouble, retried=[])
            return {"status": "failed", "error": msg, "reflections": count}
        model = yield from model_for(deps, settings, negotiated_of(state))
        messages: list[BaseMessage] = [
            SystemMessage(content=prompts.REFLECT_SYSTEM),
            HumanMessage(content=prompts.REFLECT_USER.format(trouble=trouble, plan=repair_view(plan))),
        ]
        asked = yield from ask(
            model,
            Reflection,
            messages,
            settings,
            attempts=settings.max_reflect_attempts,
            accept=lambda r: (r, []),
            retry_prompt=_reflect_retry,
            show_chars=2000,
        )
        result, errors = asked.value, asked.errors
        if result is None:
            msg = "the reflection step gave no readable assessment: " + " | ".join(errors)
            return {"status": "failed", "error": msg, "reflections": count}
        if result.assessment == "on_track" and trouble.startswith("deadlock"):
            result = result.model_copy(update={"assessment": "needs_adjustment"})  # retrying cannot help
        if result.assessment == "complete" and (unmet := plan.by_status(S.FAILED)):
            # a model's "complete" does not skip a step its verification failed: with a failed step, it is read as
            # "failed", so the run never ends `completed` over a step whose checks did not pass
            said = f"the reflection called the run complete, but {', '.join(s.id for s in unmet)} failed verification"
            result = result.model_copy(update={"assessment": "failed", "reasoning": f"{said}: {result.reasoning}"})
        # a small model's first "failed" over failed steps is read as a retry of them, told what it found
        failed = plan.by_status(S.FAILED) if result.assessment == "failed" else []
        retried = settings.retry_judged_failed and count == 1 and bool(failed)
        if settings.retry_judged_failed and failed and not retried and result.proposes_patch:
            # a later "failed" that gives its own repair is read as that repair (needs_adjustment), so the steps
            # it adds or changes are tried while reflections are left
            said = f"read as needs_adjustment: judged failed with a repair proposed: {result.reasoning}"
            result = result.model_copy(update={"assessment": "needs_adjustment", "reasoning": said})
        emit(
            "reflection",
            result.reasoning,
            plan_version=plan.version,
            assessment=result.assessment,
            trouble=trouble,
            retried=[s.id for s in failed] if retried else [],
        )
        seen = {"progress": progress, "stalled": stalled}  # what the next reflection compares with (progress_key)
        update: StateUpdate = {"reflections": count, "reflection": {**result.model_dump(), **seen}}
        if result.assessment == "on_track":
            retry = [StepTransition(id=s.id, status=S.PENDING, attempts=0) for s in plan.by_status(S.FAILED, S.BLOCKED)]
            return {**update, "plan": PlanUpdate(transitions=retry, source=PlanSource.REFLECT)}
        if result.assessment in ("needs_adjustment", "off_track"):
            return update
        if result.assessment == "complete":  # a claim: the steps stay as they are, and finalize decides
            # (`planmode.nodes._completion`: a step no human skipped that is not done keeps the run from completed)
            return {**update, "status": "completed"}
        if retried:  # settings.retry_judged_failed: the steps run again, their error carrying the reflection's words
            said = f"the reflection judged the run failed: {result.reasoning}".strip()
            retry = [
                StepTransition(id=s.id, status=S.PENDING, attempts=0, error=f"{s.error or ''} ({said})".strip())
                for s in failed
            ]
            return {**update, "plan": PlanUpdate(transitions=retry, source=PlanSource.REFLECT)}
        return {**update, "status": "failed", "error": f"the run was judged failed: {result.reasoning or trouble}"}

    return twin_node("reflect", reflect)
