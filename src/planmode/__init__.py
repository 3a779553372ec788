"""planmode: Plan Mode for LangGraph.

A plan is a validated, versioned data structure that a human approves, that survives crashes, and that is
repaired with minimal patches that never rewrite work that is already done.
"""

from planmode.agent_tool import as_tool, guard_tools
from planmode.context import PlanModeContext
from planmode.errors import (
    ConfigurationError,
    LeaseLostError,
    PlanModeError,
    PlanParseError,
    SnapshotNotFoundError,
    ThreadBusyError,
    ThreadNotFoundError,
)
from planmode.executors import StepContext, Verdict
from planmode.graph import build_graph, build_state_graph, mermaid
from planmode.middleware import PlanModeMiddleware
from planmode.observability.events import Event
from planmode.persistence.alease import arun, astream, athread_lease
from planmode.persistence.edit import EditResult, edit_plan
from planmode.persistence.lease import run, stream, thread_lease
from planmode.persistence.runs import RunInfo, list_runs
from planmode.state import Plan, PlanPatch, Step, StepStatus, apply_patch

__all__ = [
    "ConfigurationError",
    "EditResult",
    "Event",
    "LeaseLostError",
    "Plan",
    "PlanModeContext",
    "PlanModeError",
    "PlanModeMiddleware",
    "PlanParseError",
    "PlanPatch",
    "RunInfo",
    "SnapshotNotFoundError",
    "Step",
    "StepContext",
    "StepStatus",
    "ThreadBusyError",
    "ThreadNotFoundError",
    "Verdict",
    "apply_patch",
    "arun",
    "as_tool",
    "astream",
    "athread_lease",
    "build_graph",
    "build_state_graph",
    "edit_plan",
    "guard_tools",
    "list_runs",
    "mermaid",
    "run",
    "stream",
    "thread_lease",
]
__version__ = "0.1.0"
