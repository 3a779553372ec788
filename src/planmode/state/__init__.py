"""The plan model, the pure patch logic and the graph state with its plan reducer."""

from planmode.state.diff import plan_changes, plan_snapshot
from planmode.state.models import (
    Complexity,
    NewStep,
    PatchRecord,
    Plan,
    PlanPatch,
    PlanSource,
    Rejection,
    ResetPlan,
    Step,
    StepStatus,
    StepTransition,
    StepUpdate,
    clean_text,
)
from planmode.state.parse import extract_json, parse_patch, parse_plan, parse_plan_or_patch
from planmode.state.patch import (
    ALLOWED_TRANSITIONS,
    PatchResult,
    TransitionResult,
    apply_patch,
    apply_transitions,
    diff_to_patch,
    find_cycle,
    validate_plan,
)
from planmode.state.reducer import PlanUpdate, Preview, plan_reducer, preview, restore_plan

__all__ = [
    "ALLOWED_TRANSITIONS",
    "Complexity",
    "NewStep",
    "PatchRecord",
    "PatchResult",
    "Plan",
    "PlanPatch",
    "PlanSource",
    "PlanUpdate",
    "Preview",
    "Rejection",
    "ResetPlan",
    "Step",
    "StepStatus",
    "StepTransition",
    "StepUpdate",
    "TransitionResult",
    "apply_patch",
    "apply_transitions",
    "clean_text",
    "diff_to_patch",
    "extract_json",
    "find_cycle",
    "parse_patch",
    "parse_plan",
    "parse_plan_or_patch",
    "plan_changes",
    "plan_reducer",
    "plan_snapshot",
    "preview",
    "restore_plan",
    "validate_plan",
]

from planmode.state.graph_state import (
    InputState,
    OutputState,
    PlanModeState,
    RunStatus,
    StepOutcome,
    merge_outcomes,
)

__all__ += ["InputState", "OutputState", "PlanModeState", "RunStatus", "StepOutcome", "merge_outcomes"]
