"""planmode: Plan Mode for LangGraph.

A plan is a validated, versioned data structure that a human approves, that survives crashes, and that is
repaired with minimal patches that never rewrite work that is already done.
"""

from planmode.context import PlanModeContext
from planmode.errors import (
    ConfigurationError,
    PlanModeError,
    PlanParseError,
    SnapshotNotFoundError,
    ThreadNotFoundError,
)
from planmode.events import Event
from planmode.executors import StepContext, Verdict
from planmode.graph import build_graph, build_state_graph, mermaid
from planmode.state import Plan, PlanPatch, Step, StepStatus, apply_patch

__all__ = [
    "ConfigurationError",
    "Event",
    "Plan",
    "PlanModeContext",
    "PlanModeError",
    "PlanParseError",
    "PlanPatch",
    "SnapshotNotFoundError",
    "Step",
    "StepContext",
    "StepStatus",
    "ThreadNotFoundError",
    "Verdict",
    "apply_patch",
    "build_graph",
    "build_state_graph",
    "mermaid",
]
__version__ = "0.1.0"
