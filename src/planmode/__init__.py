"""planmode: Plan Mode for LangGraph."""

from planmode.errors import ConfigurationError, PlanModeError, PlanParseError
from planmode.state import Plan, PlanPatch, Step, StepStatus, apply_patch

__all__ = [
    "ConfigurationError",
    "Plan",
    "PlanModeError",
    "PlanParseError",
    "PlanPatch",
    "Step",
    "StepStatus",
    "apply_patch",
]
__version__ = "0.1.0"
