"""The graph's nodes, one module each. Each ``make_<node>(deps)`` returns the node: a function, or a
`RunnableCallable` with a sync path for ``invoke`` and an async one for ``ainvoke``."""

from planmode.nodes._batch import find_trouble
from planmode.nodes._deps import Deps
from planmode.nodes._outputs import OUTPUT_NAMESPACE
from planmode.nodes._repair import Reflection
from planmode.nodes._task import StepTask
from planmode.nodes.approve import make_approve
from planmode.nodes.detect import DetectDecision, heuristic_decision, make_detect
from planmode.nodes.dispatch import make_dispatch
from planmode.nodes.execute_step import make_execute_step
from planmode.nodes.finalize import build_report, make_finalize
from planmode.nodes.patch import make_patch
from planmode.nodes.plan import make_plan
from planmode.nodes.reflect import make_reflect
from planmode.nodes.respond import make_respond
from planmode.nodes.verify import make_verify
from planmode.state.draft import PlanDraft

__all__ = [
    "OUTPUT_NAMESPACE",
    "Deps",
    "DetectDecision",
    "PlanDraft",
    "Reflection",
    "StepTask",
    "build_report",
    "find_trouble",
    "heuristic_decision",
    "make_approve",
    "make_detect",
    "make_dispatch",
    "make_execute_step",
    "make_finalize",
    "make_patch",
    "make_plan",
    "make_reflect",
    "make_respond",
    "make_verify",
]
