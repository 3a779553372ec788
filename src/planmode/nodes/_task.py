"""`StepTask`: the input of one execute_step task, as dispatch sends it."""

from __future__ import annotations

from typing import Any, NotRequired

from typing_extensions import TypedDict

from planmode.context import PlanModeContext
from planmode.state.models import Step

__all__ = ["StepTask"]


class StepTask(TypedDict):
    """The input of one execute_step task (sent with ``Send``)."""

    step: Step
    """The step as it runs (status running, attempts counted)."""
    goal: str
    plan_version: int
    dependencies: dict[str, dict[str, str | None]]
    """Each dependency's ``result`` summary and ``output_ref`` (store key of the full output)."""
    settings: NotRequired[PlanModeContext | dict[str, Any] | None]
    """The run's settings: set by ``trusted_task`` from the graph's channel (a ``Send`` does not carry them)."""
    durable: NotRequired[bool]
    """True when some step is done: the task waits until the checkpoint it runs from is saved before it starts."""
    usage: NotRequired[dict[str, Any] | None]
    """The run's usage when the step started, set by ``trusted_task`` from the graph's channel: each model call of
    the step is checked against the budget from there (`planmode.budget.CallGuard`)."""
    budget: NotRequired[dict[str, Any] | None]
    """The budget a human raised (or stopped), set by ``trusted_task`` from the graph's channel."""
