"""The small-model adapter: help for small local models, off by default (``model_profile="small"``; ``--gguf``).

What it does, each part kept here and nowhere in the core:

- **plans** (`coverage`): fixes a planner's plan where the meaning is not in doubt (a tool's name written as
  a dependency, a step named after a tool, a read-back step) and sends back plans that leave out a file the task
  asks for (`prose_checks` can read the commands a step's acceptance names in backticks as declared checks
  marked as planmode's, ``by: planmode``; it is not switched on yet: the verify-time reading below still decides
  which clause belongs to which step);
- **repairs** (`repair`): a patch as small models write it, read as meant;
- **verification** (`verify`, `evidence`): after the declared checks passed, facts read from the step's prose
  (files it names, commands it runs, values it prints), then the judge, with a second look when the evidence
  contradicts a failed verdict. Every command it runs runs in planmode's sandbox;
- **the end of a run**: files the task names that are missing, commands done steps ran that fail now, files left
  empty, and a final answer that names files that do not exist.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from planmode.adapters.small_models import coverage, evidence, files, repair, verify
from planmode.state.checks import RunCheck

if TYPE_CHECKING:
    from pathlib import Path

    from langchain_core.language_models import BaseChatModel
    from langchain_core.tools import BaseTool

    from planmode.checks import CheckResult
    from planmode.context import PlanModeContext
    from planmode.executors import Verdict
    from planmode.nodes._deps import Deps
    from planmode.nodes._twin import Body
    from planmode.state.graph_state import StepOutcome
    from planmode.state.models import Plan, PlanPatch, Step

__all__ = ["ADAPTER", "SmallModels", "prose_checks"]


def prose_checks(plan: Plan, allowed: Sequence[str]) -> tuple[Plan, list[str]]:
    """``plan`` with the commands each open step's acceptance names in backticks (`` `python x.py` ``,
    `` `pytest test_x.py` ``) declared as run checks marked as planmode's, where the step does not declare them
    already and the run allows the program; and a line for each step given checks."""
    steps, notes = [], []
    for step in plan.steps:
        have = {c.command for c in step.checks if isinstance(c, RunCheck)}
        made = []
        for command in evidence.commands(step.acceptance or ""):
            if command in have or not command.split() or command.split()[0] not in {*allowed, "python3"}:
                continue
            try:
                made.append(RunCheck(command=command, by="planmode"))
            except ValueError:  # a command that cannot be split into arguments stays prose
                continue
        if made and step.status.value != "done":
            steps.append(step.model_copy(update={"checks": [*step.checks, *made]}))
            notes.append(f"step {step.id!r}: checks read from its acceptance: " + ", ".join(c.command for c in made))
        else:
            steps.append(step)
    return (plan.model_copy(update={"steps": steps}) if notes else plan), notes


class SmallModels:
    """The adapter's hooks (`planmode.adapters.Adapter`)."""

    def mend_plan(self, plan: Plan, tools: Sequence[BaseTool], settings: PlanModeContext) -> tuple[Plan, list[str]]:
        plan, fixed = coverage.mend_tools(plan, tools)
        plan, untied = coverage.mend_dependencies(plan, tools)
        plan, new_files = coverage.mend_new_files(plan, tools)
        plan, read_back = coverage.mend_reads(plan, tools)
        plan, run_steps = coverage.mend_run_steps(plan, tools)
        plan, trimmed = coverage.mend_length(plan, tools, settings.max_steps)
        plan, data_runs = coverage.mend_data_runs(plan)
        plan, stem_runs = coverage.mend_stem_runs(plan, tools)
        return plan, [*fixed, *untied, *new_files, *trimmed, *data_runs, *stem_runs, *read_back, *run_steps]

    def plan_problems(
        self, plan: Plan, tools: Sequence[BaseTool], ids: Sequence[str] | None = None, made: Collection[str] = ()
    ) -> list[str]:
        return coverage.plan_problems(plan, tools, ids, made)

    def step_problems(self, plan: Plan, tools: Sequence[BaseTool], ids: Sequence[str]) -> list[str]:
        return coverage.step_problems(plan, tools, ids)

    def last_resort(self, plan: Plan, tools: Sequence[BaseTool], max_steps: int) -> tuple[Plan, list[str]] | None:
        return coverage.mend_plan(plan, tools, max_steps)

    def finish_plan(self, plan: Plan, tools: Sequence[BaseTool], settings: PlanModeContext) -> tuple[Plan, list[str]]:
        plan, modules = coverage.mend_module_runs(plan, tools)
        plan, runs = coverage.mend_runs(plan, tools)
        return plan, [*modules, *runs]

    def mend_patch(self, candidate: PlanPatch, plan: Plan, tools: Sequence[BaseTool]) -> PlanPatch:
        return repair.as_meant(candidate, plan, tools)

    def mend_repair(
        self, plan: Plan, proposed: Plan, tools: Sequence[BaseTool], open_ids: list[str]
    ) -> tuple[Plan, list[str]]:
        return repair.mend_repair(plan, proposed, tools, open_ids)

    def judge(
        self,
        deps: Deps,
        plan: Plan,
        step: Step,
        outcome: StepOutcome,
        settings: PlanModeContext,
        model: BaseChatModel | None,
        output: str,
        declared: list[CheckResult],
    ) -> Body[Verdict]:
        return verify.judge(deps, plan, step, outcome, settings, model, output, declared)

    def run_problems(self, plan: Plan, tools: Sequence[BaseTool], run_writes: Mapping[str, str]) -> str | None:
        missing = evidence.missing_deliverables(plan, tools, run_writes)
        if missing:
            return f"the run ended without the files it was to produce: {', '.join(missing)} (not in the workspace)"
        if broken := evidence.broken_runs(plan, tools):
            return "a done step's check fails at the end of the run: " + "; ".join(broken)
        if empty := evidence.left_empty(plan, tools, run_writes):
            return "the run ended with files still empty: " + "; ".join(empty)
        return None

    def unsupported(self, text: str, tools: Sequence[BaseTool], run_writes: Mapping[str, str]) -> bool:
        return bool(evidence.unsupported_files(text, tools, run_writes))

    def kept_files(self, plan: Plan, step: Step, root: Path | None) -> frozenset[str]:
        return files.done_files(plan, step) | frozenset(files.given_files(plan.goal, root))

    def produced_file(self, step: Step) -> str | None:
        return files.produced_file(step.description, step.acceptance or "")

    def says_empty(self, step: Step) -> bool:
        return files.says_file_empty(f"{step.description}\n{step.acceptance or ''}")


#: The adapter `planmode.adapters.adapter_for` returns for ``model_profile="small"``.
ADAPTER = SmallModels()
