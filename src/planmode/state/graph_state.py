"""The graph state: a narrow input, a documented full state, and the output a caller sees."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, Self

from langchain_core.messages import AnyMessage
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.graph.message import add_messages
from pydantic import BaseModel, Field, model_validator
from typing_extensions import TypedDict

from planmode.context import PlanModeContext, settings_dict, settings_from
from planmode.state.approvals import add_approval_records
from planmode.state.channel import PlanChannel
from planmode.state.models import Plan, PlanPatch, ResetPlan, StepTransition, clean_text
from planmode.state.reducer import PlanUpdate
from planmode.state.usage import merge_usage

__all__ = [
    "KEPT_ACROSS_RUNS",
    "InputState",
    "OutputState",
    "PlanModeState",
    "PlanModeUpdate",
    "PlanWrite",
    "RunStatus",
    "SettingsChannel",
    "StepOutcome",
    "StepOutcomesChannel",
    "ToolRun",
    "latest",
    "merge_outcomes",
    "merge_writes",
    "new_run",
    "run_writes_of",
]

RunStatus = Literal[
    "new",
    "planning",
    "awaiting_approval",
    "running",
    "completed",
    "failed",
    "answered",
    "cancelled",
    "model_unavailable",
]


class ToolRun(BaseModel):
    """One tool call that ran during a step's attempt, as the tool loop saw it (evidence for verify)."""

    name: str
    args: str = Field(default="", description="The call's arguments, as short JSON text.")
    ok: bool = Field(default=True, description="False when the tool answered with an error (or was refused).")
    result: str = Field(default="", description="The beginning of the tool's answer.")

    @model_validator(mode="before")
    @classmethod
    def _clean_text_fields(cls, data: Any) -> object:
        if isinstance(data, dict):
            return {k: clean_text(v) if isinstance(v, str) else v for k, v in data.items()}
        return data


class StepOutcome(BaseModel):
    """What one execution attempt of a step produced, waiting for `verify`."""

    step_id: str
    ok: bool = Field(description="False when the attempt itself failed (a tool raised, the model failed).")
    output: str = Field(default="", description="The executor's answer (kept in state only until verified).")
    error: str | None = None
    blocked: bool = Field(
        default=False, description="The step cannot proceed as planned (e.g. a missing input): reflect decides."
    )
    tool_calls: int = 0
    output_ref: str | None = Field(default=None, description="Store key of the full output, if stored.")
    refused_tools: list[str] = Field(
        default_factory=list,
        description="Tools the attempt called that the step does not declare (refused, never run); the attempt "
        "then failed, naming them in its error.",
    )
    writes: dict[str, str] = Field(
        default_factory=dict,
        description="Files the attempt wrote through the workspace tools: real path -> sha256 of the bytes written "
        "(`planmode.tools._writes`); verify folds them into ``run_writes``.",
    )
    tool_runs: list[ToolRun] | None = Field(
        default=None,
        description="The tool calls that ran, in order, with their results (the default executor's tool loop); "
        "None when the executor does not report them (a custom executor). Verify judges this evidence, never the "
        "executor's own words alone.",
    )

    @model_validator(mode="before")
    @classmethod
    def _clean_text_fields(cls, data: Any) -> object:
        """A tool's or a model's text with a lone surrogate is made encodable (`clean_text`) on the way in."""
        if isinstance(data, dict):
            return {k: clean_text(v) if isinstance(v, str) else v for k, v in data.items()}
        return data


def latest(current: dict[str, Any] | None, update: dict[str, Any] | None) -> dict[str, Any] | None:
    """The last value written (several parallel tasks may write in one super-step; ``None`` clears)."""
    return update


#: Files ``run_writes`` remembers at most (the most recent writes are kept).
MAX_RUN_WRITES = 10_000


def merge_writes(current: Any, update: Any) -> dict[str, str]:
    """Merge the run's writes by path, the last write winning; ``None`` clears them (a new run).

    Pure and total: never raises; entries that are not ``str -> str`` are dropped, and at most
    `MAX_RUN_WRITES` paths are kept (the most recent)."""
    if update is None:
        return {}
    out: dict[str, str] = {}
    for source in (current, update):
        if isinstance(source, Mapping):
            for key, value in source.items():
                if isinstance(key, str) and isinstance(value, str):
                    out.pop(key, None)
                    out[key] = value
    if len(out) > MAX_RUN_WRITES:
        out = dict(list(out.items())[-MAX_RUN_WRITES:])
    return out


def run_writes_of(outcomes: Any) -> dict[str, str]:
    """The files some step outcomes wrote (`StepOutcome.writes`), merged in order; never raises."""
    out: dict[str, str] = {}
    if isinstance(outcomes, Mapping):
        outcomes = outcomes.values()
    try:
        items = list(outcomes or ())
    except TypeError:
        return out
    for outcome in items:
        out = merge_writes(out, getattr(outcome, "writes", None) or {})
    return out


def merge_outcomes(
    current: dict[str, StepOutcome] | None, update: dict[str, StepOutcome | None] | None
) -> dict[str, StepOutcome]:
    """Merge step outcomes by step id; a ``None`` value removes that step's outcome (after verification).

    Pure and total: never raises, whatever ``current`` and ``update`` are (a reducer runs on replay too, and a
    raising one leaves a thread unreadable). An update that is not a mapping (``"garbage"``, ``5``,
    ``["a"]``, as ``update_state`` may send) changes nothing; a value that is not an outcome is kept as an
    unreadable outcome of that step (ok=False), so verify sees a failed attempt instead of nothing; a
    current value that is not a mapping of outcomes is read as far as it can be.
    """
    out: dict[str, StepOutcome] = {}
    if isinstance(current, Mapping):
        for key, value in current.items():
            outcome = _outcome(key, value)
            if outcome is not None:
                out[str(key)] = outcome
    if not isinstance(update, Mapping):
        return out
    for key, raw in update.items():
        new = _outcome(key, raw)
        if new is None:
            out.pop(str(key), None)
        else:
            out[str(key)] = new
    return out


def _outcome(key: Any, value: Any) -> StepOutcome | None:
    """``value`` as a `StepOutcome` of step ``key`` (an unreadable one when it is not an outcome); never raises."""
    if value is None:
        return None
    if isinstance(value, StepOutcome):
        return value
    if isinstance(value, Mapping):
        try:
            return StepOutcome.model_validate(dict(value))
        except (ValueError, TypeError):
            pass
    return StepOutcome(step_id=clean_text(str(key)), ok=False, error="unreadable step outcome")


class StepOutcomesChannel(BinaryOperatorAggregate[Any]):
    """The ``step_outcomes`` channel: `merge_outcomes`, checkpointed as JSON data.

    The outcomes are `StepOutcome` models in the channel and JSON data in a checkpoint, rebuilt when it is read
    (as the plan is: `planmode.graph.pipeline`), so a stock saver reads them without an "unregistered
    type" warning, strict mode or not. Old checkpoints that hold `StepOutcome` objects are read too.
    """

    def __init__(self, typ: Any, operator: Callable[[Any, Any], Any] = merge_outcomes) -> None:
        super().__init__(typ, operator)

    def checkpoint(self) -> Any:
        """The outcomes as JSON data."""
        value = self.value
        if isinstance(value, Mapping):
            return {k: v.model_dump(mode="json") if isinstance(v, StepOutcome) else v for k, v in value.items()}
        return value

    def from_checkpoint(self, checkpoint: Any) -> Self:
        """A channel holding the checkpointed outcomes as `StepOutcome` models (`merge_outcomes` reads any value)."""
        channel = super().from_checkpoint(checkpoint)
        channel.value = merge_outcomes(channel.value, None)
        return channel


#: The data of the settings last checkpointed, with the settings object it was made from (one entry: a run keeps
#: one settings object; the tuple is replaced whole, so a reader on another thread sees a matching pair).
_SETTINGS_DATA: list[tuple[PlanModeContext, dict[str, Any]] | None] = [None]


class SettingsChannel(BinaryOperatorAggregate[Any]):
    """The ``settings`` channel: the run's settings as a `PlanModeContext`, checkpointed as its data.

    Nodes write the settings as data (`planmode.context.settings_dict`); the last write wins (the parallel steps
    of a resume may all write the same settings). The channel holds them typed, so every node reads the same
    object (`planmode.context.settings_of`) and nothing checks them again per node; a checkpoint holds their
    data, read back typed. A value that is not valid settings is kept as it is (`settings_from` never raises)."""

    def __init__(self, typ: Any, operator: Callable[[Any, Any], Any] = latest) -> None:
        super().__init__(typ, operator)

    def update(self, values: Sequence[Any]) -> bool:
        if not values:
            return False
        self.value = settings_from(values[-1])
        return True

    def checkpoint(self) -> Any:
        """The settings as JSON data (made once per settings object: settings are frozen, and every super-step's
        checkpoint holds them, unchanged for the whole run)."""
        value = self.value
        if not isinstance(value, PlanModeContext):
            return value
        last = _SETTINGS_DATA[0]
        if last is not None and last[0] is value:
            return last[1]
        data = settings_dict(value)
        _SETTINGS_DATA[0] = (value, data)
        return data

    def from_checkpoint(self, checkpoint: Any) -> Self:
        """A channel holding the checkpointed settings as a `PlanModeContext`."""
        channel = super().from_checkpoint(checkpoint)
        channel.value = settings_from(channel.value)
        return channel


class InputState(TypedDict, total=False):
    """What a caller passes in."""

    messages: Annotated[list[AnyMessage], add_messages]
    """The conversation; the last human message is the task unless ``task`` is given."""
    task: str | None
    """The task, when it is not the last human message."""


class OutputState(TypedDict, total=False):
    """What a caller (or a parent graph) gets back."""

    messages: Annotated[list[AnyMessage], add_messages]
    """The conversation plus the final answer as an AI message."""
    plan: Plan | None
    """The plan, with every step's status and result summary. A plain value here (the graph's own channel
    is `PlanChannel`), so a parent graph that copies this schema stores the finished plan as it is."""
    status: RunStatus
    """Where the run is: planning, awaiting_approval, running, completed, failed, answered."""
    report: dict[str, Any] | None
    """The run report written by finalize (done, failed, skipped, patches, reflections)."""


class PlanModeState(InputState, total=False):
    """The full state of a planmode run."""

    goal: str
    """The task of the current run (detect reads ``task`` or the last human message and clears ``task``)."""

    earlier: str | None
    """The compact summary of the run this one follows on the thread (its task, steps, files changed, answer:
    `planmode.state.earlier.earlier_summary`), written by detect; None when the thread had no finished run. The
    planner and the executor are given it, and the approval shows it."""

    plan: Annotated[Plan | None, PlanChannel]
    """The plan. Every write goes through `plan_reducer` (via `PlanChannel`): it never raises, never edits done
    steps."""
    status: RunStatus
    """Where the run is."""
    report: dict[str, Any] | None
    """The run report (finalize)."""
    settings: Annotated[PlanModeContext | None, SettingsChannel]
    """The run's settings: the ones it started with, and the new values a resume's context brought (runtime context
    is not kept across an interrupt). Written as data, held typed (`SettingsChannel`)."""
    negotiated_output: str | None
    """Written by planmode: the structured-output mode ``auto`` settled on, as ``"mode base_url model"``
    (`planmode.llm.structured.negotiation_record`), so that a run resumed in another process starts from it."""
    route: Literal["plan", "direct"] | None
    """detect's decision."""
    feedback: str | None
    """A human's feedback on a rejected plan, for the planner's next revision."""
    approval_error: str | None
    """Why the previous resume value at the approval interrupt was refused (shown in the next payload)."""
    approval_base: dict[str, Any] | None
    """The plan a human last answered at the approval (approved, edited, rejected, or answered naming its
    revision), as `planmode.state.diff.plan_snapshot` data (revision, version, title, each step's definition
    and status; no results). The approval payload's ``changes`` are computed against it, and its ``reason``
    from the plan history since its version. Written by approve only after a human answer (never in
    ``approval="auto"`` runs); None before the first answer."""
    needs_approval: bool
    """True when the plan (first version or an off_track patch) must be approved before execution goes on."""
    step_outcomes: Annotated[dict[str, StepOutcome], StepOutcomesChannel]
    """Attempts executed and not yet verified, by step id (merged by `merge_outcomes`; checkpointed as data)."""
    trouble: str | None
    """What sent the run to reflect (a failed or blocked step, a deadlock)."""
    reflection: dict[str, Any] | None
    """The last reflection: assessment, reasoning, guidance."""
    reflections: int
    """How many reflections this run made (bounded by max_reflections)."""
    patches_applied: int
    """How many patches this run applied during execution."""
    error: str | None
    """Why the run failed, when it did."""
    usage: Annotated[dict[str, Any], merge_usage]
    """Model calls and tokens (input, output, cached) of the run: in total, per node, per step and per model
    (`planmode.observability.usage`). Nodes return deltas; the reducer adds them and never raises."""
    budget: dict[str, Any] | None
    """The budget a human raised at a ``planmode.budget`` pause (it wins over the settings), or the stop
    (`planmode.budget`). None until then."""
    unavailable: Annotated[dict[str, Any] | None, latest]
    """The model call that could not reach the model: the node to re-run, the status before, the error and
    the endpoint (`planmode.nodes.model_unavailable`). Several execute_step tasks may write it at once."""
    # -- approval policy and staleness (planmode.nodes._gates, planmode.approval.policy, planmode.approval.staleness) --
    explored_paths: list[str] | None
    """Paths the planner's read-only exploration read (the fingerprint outside a git repository)."""
    workspace_fingerprint: dict[str, Any] | None
    """The workspace fingerprint taken at the last approval (`planmode.approval.staleness.fingerprint`)."""
    fingerprint_checked: dict[str, Any] | None
    """When, in which process and in which invocation the fingerprint was last checked (a dispatch checks again
    after a pause: `planmode.nodes._batch.staleness_check_due`)."""
    run_writes: Annotated[dict[str, str], merge_writes]
    """Files the run itself wrote through the workspace tools: real path -> sha256 of the bytes last written
    (folded in by verify from each `StepOutcome`'s ``writes``). The staleness check does not report a file whose
    content is still the run's last write. ``None`` clears it (a new run)."""
    stale: dict[str, Any] | None
    """The changed fingerprint and files while the ``planmode.stale`` question is open."""
    step_gate: dict[str, Any] | None
    """The step waiting for its ``planmode.step_approval`` while that question is open."""
    approvals: Annotated[list[dict[str, Any]], add_approval_records]
    """The run's approval record (`planmode.state.approvals`): every decision, sealed, append-only — grants of
    step definitions (plan, step, patch), rejections, staleness answers, refusals of the execution guard. Only
    planmode's nodes can write it (``update_state`` cannot: its records carry no valid seal); execute_step runs a
    step only when a grant here covers its exact definition."""


#: What a node may write to the plan: a whole plan, a patch, step transitions, their envelope, or a reset (read by
#: `planmode.state.reducer.plan_reducer`, which never raises).
PlanWrite = Plan | PlanPatch | StepTransition | list[StepTransition] | PlanUpdate | ResetPlan


class PlanModeUpdate(TypedDict, total=False):
    """What a node returns: the `PlanModeState` keys it changes, each as it is written (a reducer's input)."""

    messages: list[AnyMessage]
    task: str | None
    goal: str
    earlier: str | None
    plan: PlanWrite
    status: RunStatus
    report: dict[str, Any] | None
    settings: dict[str, Any] | None
    negotiated_output: str | None
    route: Literal["plan", "direct"] | None
    feedback: str | None
    approval_error: str | None
    approval_base: dict[str, Any] | None
    needs_approval: bool
    step_outcomes: Mapping[str, StepOutcome | None]
    trouble: str | None
    reflection: dict[str, Any] | None
    reflections: int
    patches_applied: int
    error: str | None
    usage: dict[str, Any]
    budget: dict[str, Any] | None
    unavailable: dict[str, Any] | None
    explored_paths: list[str] | None
    workspace_fingerprint: dict[str, Any] | None
    fingerprint_checked: dict[str, Any] | None
    run_writes: dict[str, str] | None
    stale: dict[str, Any] | None
    step_gate: dict[str, Any] | None
    approvals: list[dict[str, Any]]


#: The keys a new run on a thread keeps: the conversation. Every other key is reset by `new_run`.
KEPT_ACROSS_RUNS = frozenset({"messages"})


def new_run(settings: dict[str, Any], step_outcomes: Any, run_id: str) -> PlanModeUpdate:
    """The state update that starts a new run on a thread (detect writes it): every key of `PlanModeState` but
    `KEPT_ACROSS_RUNS`, so nothing of an earlier run — an approval, a question left open, a budget raised, a
    fingerprint — carries over to the next. ``step_outcomes``: the outcomes in state now (each is removed)."""
    from planmode.state.approvals import new_run_record

    return {
        "task": None,
        "goal": "",
        "earlier": None,
        "plan": ResetPlan(reason="new run"),
        "status": "new",
        "report": None,
        "settings": settings,
        "negotiated_output": None,
        "route": None,
        "feedback": None,
        "approval_error": None,
        "approval_base": None,
        "needs_approval": False,
        "step_outcomes": dict.fromkeys(step_outcomes if isinstance(step_outcomes, Mapping) else {}, None),
        "trouble": None,
        "reflection": None,
        "reflections": 0,
        "patches_applied": 0,
        "error": None,
        "usage": {"reset": True},
        "budget": None,
        "unavailable": None,
        "explored_paths": None,
        "workspace_fingerprint": None,
        "fingerprint_checked": None,
        "stale": None,
        "step_gate": None,
        "run_writes": None,
        "approvals": [new_run_record(run_id)],
    }
