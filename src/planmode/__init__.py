"""planmode: Plan Mode for LangGraph.

A plan is a validated, versioned data structure that a human approves, that survives crashes, and that is
repaired with minimal patches that never rewrite work that is already done.
"""

# ruff: noqa: F401  (_public below imports every public name to return them: its locals() are the API)

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from planmode.persistence.edit import EditResult, edit_plan
    from planmode.persistence.lease import arun, astream, athread_lease, run, stream, thread_lease
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


def _public() -> dict[str, Any]:
    """Every public name, imported. Importing ``planmode`` (or ``planmode.cli``) imports none of the LangGraph
    stack: the first public name used imports them all (``planmode --help`` starts in the time of click + rich)."""
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
    from planmode.persistence.edit import EditResult, edit_plan
    from planmode.persistence.lease import arun, astream, athread_lease, run, stream, thread_lease
    from planmode.persistence.runs import RunInfo, list_runs
    from planmode.state import Plan, PlanPatch, Step, StepStatus, apply_patch

    return {k: v for k, v in locals().items() if k in __all__}


def __getattr__(name: str) -> object:
    if name in __all__:
        globals().update(_public())
        return globals()[name]
    # A submodule used as an attribute without its import (``planmode.graph``), as the eager imports allowed.
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
