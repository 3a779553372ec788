"""Adapters: help for particular kinds of model, kept apart from the core and off by default.

The core never imports an adapter's code: `adapter_for` loads the one a run's settings name
(``model_profile="small"``: `planmode.adapters.small_models`) when it is first asked for, and returns None
otherwise. What an adapter adds to a plan is shown to the human as planmode's (checks marked ``by: planmode``).
"""

from __future__ import annotations

import importlib
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from langchain_core.language_models import BaseChatModel
    from langchain_core.tools import BaseTool

    from planmode.checks import CheckResult
    from planmode.context import PlanModeContext
    from planmode.state.graph_state import StepOutcome
    from planmode.state.models import Plan, PlanPatch, Step

__all__ = ["ADAPTERS", "Adapter", "adapter_for"]

#: The adapters a ``model_profile`` switches on, by the module that holds each.
ADAPTERS: Mapping[str, str] = {"small": "planmode.adapters.small_models"}


class Adapter(Protocol):
    """What an adapter may change: the plan as the planner wrote it, a repair, a step's judgement, the end of a run
    (`planmode.adapters.small_models.SmallModels` is the one there is)."""

    def mend_plan(self, plan: Plan, tools: Sequence[BaseTool], settings: PlanModeContext) -> tuple[Plan, list[str]]:
        """The planner's plan with the adapter's fixes, and a line for each (shown for approval as planmode's)."""
        ...

    def plan_problems(
        self, plan: Plan, tools: Sequence[BaseTool], ids: Sequence[str] | None = None, made: Collection[str] = ()
    ) -> list[str]:
        """What the adapter finds missing in a valid plan (fed back to the planner)."""
        ...

    def step_problems(self, plan: Plan, tools: Sequence[BaseTool], ids: Sequence[str]) -> list[str]:
        """What the adapter finds wrong in the steps ``ids`` a repair adds or changes."""
        ...

    def last_resort(self, plan: Plan, tools: Sequence[BaseTool], max_steps: int) -> tuple[Plan, list[str]] | None:
        """A plan the adapter completes itself when the planner's attempts ran out on its problems alone."""
        ...

    def finish_plan(self, plan: Plan, tools: Sequence[BaseTool], settings: PlanModeContext) -> tuple[Plan, list[str]]:
        """The valid plan with the adapter's last changes (checks read from prose), and a line for each."""
        ...

    def mend_patch(self, candidate: PlanPatch, plan: Plan, tools: Sequence[BaseTool]) -> PlanPatch:
        """A repair's patch read as meant."""
        ...

    def mend_repair(
        self, plan: Plan, proposed: Plan, tools: Sequence[BaseTool], open_ids: list[str]
    ) -> tuple[Plan, list[str]]:
        """The repair's whole plan with the fixes a first plan gets, and a line for each."""
        ...

    def judge(
        self,
        deps: Any,
        plan: Plan,
        step: Step,
        outcome: StepOutcome,
        settings: PlanModeContext,
        model: BaseChatModel | None,
        output: str,
        declared: list[CheckResult],
    ) -> Any:
        """The judgement of an attempt whose declared checks passed (a node body, `planmode.nodes._twin.Body`,
        of a `Verdict`; ``deps`` is the graph's `planmode.nodes._deps.Deps`)."""
        ...

    def run_problems(self, plan: Plan, tools: Sequence[BaseTool], run_writes: Mapping[str, str]) -> str | None:
        """Why a run whose steps are all done is still not completed, or None."""
        ...

    def unsupported(self, text: str, tools: Sequence[BaseTool], run_writes: Mapping[str, str]) -> bool:
        """Whether a final answer claims files the record does not show."""
        ...

    def kept_files(self, plan: Plan, step: Step, root: Path | None) -> frozenset[str]:
        """Files, beyond those done steps declare, that ``step`` may not write (read from the task's prose)."""
        ...

    def produced_file(self, step: Step) -> str | None:
        """The one file a step that declares none writes, read from its prose, or None."""
        ...

    def says_empty(self, step: Step) -> bool:
        """Whether a step that declares no file says, in its prose, that the file it writes is empty."""
        ...


def adapter_for(settings: PlanModeContext | Any) -> Adapter | None:
    """The adapter ``settings.model_profile`` switches on, or None (the default: no adapter)."""
    profile = getattr(settings, "model_profile", None)
    module = ADAPTERS.get(profile) if isinstance(profile, str) else None
    if module is None:
        return None
    adapter: Adapter = importlib.import_module(module).ADAPTER
    return adapter
