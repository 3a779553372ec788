"""The small-model judgement of a step (the adapter's part of verify): facts read from the step's prose, the
judge, and a second look when the evidence contradicts a failed verdict. verify calls `judge` only with the
adapter on (``model_profile="small"``), after the step's declared checks passed."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from functools import partial

from langchain_core.language_models import BaseChatModel

from planmode.adapters.small_models.evidence import Check, Evidence, gather, only_creates, others_write, own_acceptance
from planmode.adapters.small_models.files import says_file_empty
from planmode.checks import CheckResult
from planmode.context import PlanModeContext
from planmode.executors import StepContext, Verdict, verification
from planmode.nodes._deps import Deps
from planmode.nodes._twin import Body, call
from planmode.state.checks import describe_check
from planmode.state.graph_state import StepOutcome
from planmode.state.models import Plan, Step, StepStatus

__all__ = ["judge"]


def judge(
    deps: Deps,
    plan: Plan,
    step: Step,
    outcome: StepOutcome,
    settings: PlanModeContext,
    model: BaseChatModel | None,
    output: str,
    declared: list[CheckResult],
) -> Body[Verdict]:
    """The small-model judgement of a successful attempt (its declared checks passed): the facts read from the
    step's prose first (`gather`), then the judge, shown them and the declared checks' results."""
    plan_step = step
    elsewhere = others_write(plan, step)  # files the plan's other open steps write
    # what the acceptance asks of those files is their steps' to meet (and re-run at the end)
    acceptance, theirs = own_acceptance(step, elsewhere, outcome.writes)
    step = step.model_copy(update={"acceptance": acceptance}) if theirs else step
    evidence = yield from call(
        partial(gather, step, outcome, deps.tools, elsewhere, plan.goal),
        partial(asyncio.to_thread, gather, step, outcome, deps.tools, elsewhere, plan.goal),
    )
    evidence.checks[:0] = [Check(describe_check(r.check), r.passed, r.detail) for r in declared]
    if evidence.failed:
        return Verdict(passed=False, reason=evidence.reason())
    if deps.verifier is None and (  # nothing left to judge
        evidence.settles(step.acceptance, step.description) or _made_empty_for_later(plan, step, evidence)
    ):
        return Verdict(passed=True, reason="")
    if deps.verifier is None and not step.acceptance.strip():
        return Verdict(passed=True, reason="")
    report = "" if evidence.wrote else output
    shown = evidence.to_prompt(report)
    if evidence.covers(step.acceptance):
        shown += f"\n{COVERED}"
    if theirs:
        shown += f"\n{LATER}" + "".join(f"\n- {clause}" for clause in theirs)
    ctx = _context(plan, plan_step, settings, model, shown)
    verdict = yield from verification(deps.verifier, step, output, ctx)
    if deps.verifier is not None or verdict.passed:
        return verdict
    again = partial(_judge_again, step, output, partial(_context, plan, plan_step, settings, model))
    return (yield from _second_look(step, evidence, verdict, shown, bool(report.strip()), again))


def _context(
    plan: Plan, step: Step, settings: PlanModeContext, model: BaseChatModel | None, evidence: str | None = None
) -> StepContext:
    return StepContext(
        goal=plan.goal,
        dependencies={},
        attempt=step.attempts,
        previous_error=step.error,
        settings=settings,
        tools=(),
        model=model,
        evidence=evidence,
    )


def _made_empty_for_later(plan: Plan, step: Step, evidence: Evidence) -> bool:
    """Whether ``step`` only creates files (`only_creates`: "Create strings.py file in the util directory"), every
    clause of its acceptance is met by a passed check, and each file it wrote is empty and is one a package needs
    empty (``__init__.py``), one the step calls empty, or one another open step of the plan names (its content is
    that step's). Nothing is left to judge: the file's content is another step's to write, so a judge asked about
    it could only fail the step on content that is not yet due."""
    if not evidence.files or not only_creates(step.description) or not evidence.covers(step.acceptance):
        return False
    said_empty = says_file_empty(step.description)
    later = " ".join(s.description for s in plan.steps if s.id != step.id and s.status != StepStatus.DONE)
    for name, content in evidence.files.items():
        base = name.rsplit("/", 1)[-1]
        if content.strip() or not (base == "__init__.py" or said_empty or re.search(rf"\b{re.escape(base)}\b", later)):
            return False
    return True


#: Told the judge with the clauses of the plan's acceptance that another open step's file meets (`own_acceptance`).
LATER = (
    "Not judged here: these criteria of the step concern files another step of the plan writes; they are checked "
    "when that step runs, and again at the end of the run:"
)

#: Told the judge when the checks decide every clause of the acceptance (a file that exists, a command that runs).
COVERED = (
    "Every acceptance criterion above is shown met by a passed check. What is left to judge is only whether the "
    "files' content does what the step describes."
)


def _second_look(
    step: Step,
    evidence: Evidence,
    verdict: Verdict,
    shown: str,
    report_shown: bool,
    ask: Callable[[str], Body[Verdict]],
) -> Body[Verdict]:
    """A failed verdict of the model's judge whose reason the evidence contradicts ("data.txt does not exist"
    beside a passed check that found it; "the executor gave no report" when none was shown) is asked once more,
    the contradiction named. A second verdict on a contradicted reason stands only where a clause of the
    acceptance is left to the judge; where the checks decide every clause, they decide: the step passes, and its
    reason says the judge was overruled."""
    refuted = evidence.refutes(verdict.reason, report_shown)
    if not refuted:
        return verdict
    again = (
        f"{shown}\nA first judgement failed the step because: {verdict.reason!r}. The evidence contradicts it "
        f"({refuted}). Judge again from the evidence."
    )
    second = yield from ask(again)
    if second.passed:
        return second
    # a second reason that only repeats the contradiction it was shown ("The evidence contradicts it (the checks
    # found app.py: it exists).") is no reason
    refuted_again = evidence.refutes(second.reason, report_shown) or (refuted if refuted in second.reason else "")
    if refuted_again and evidence.covers(step.acceptance):
        overruled = f"the checks decide: the judge's reasons were contradicted by the evidence ({refuted_again})"
        return Verdict(passed=True, reason=overruled)
    return second


def _judge_again(step: Step, output: str, context: Callable[[str], StepContext], shown: str) -> Body[Verdict]:
    return (yield from verification(None, step, output, context(shown)))
