"""detect: does the request need a plan? Heuristics first, an LLM classifier for unclear cases (cached)."""

from __future__ import annotations

import hashlib
import re
from typing import Any, Literal

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import BaseModel, Field

from planmode import prompts
from planmode.context import settings_dict
from planmode.errors import ModelUnavailableError
from planmode.llm import call_structured
from planmode.nodes._deps import Deps, settings_of, task_of
from planmode.state.graph_state import PlanModeState
from planmode.state.models import ResetPlan

__all__ = ["DetectDecision", "heuristic_decision", "make_detect"]

_PLAN_WORDS = re.compile(r"\b(plan|step[- ]by[- ]step|steps|roadmap|checklist|todo list|phases?)\b", re.I)
_SEQUENCE = re.compile(r"\b(then|after that|afterwards|next|finally|first|second|and also|followed by)\b", re.I)
_ENUM_LINE = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+\S", re.M)
_ACTION = re.compile(
    r"\b(create|write|build|implement|refactor|migrate|add|update|fix|test|deploy|set up|configure|analy[sz]e|"
    r"research|compare|summari[sz]e|rename|move|delete|install|generate|document|review)\b",
    re.I,
)

class DetectDecision(BaseModel):
    """The classifier's answer."""

    needs_plan: bool = Field(description="True when the request needs a multi-step plan.")
    reason: str = Field(default="", description="A short reason.")

def heuristic_decision(task: str) -> bool | None:
    """True (plan), False (direct) or None (unsure: ask the classifier)."""
    text = task.strip()
    if not text:
        return False
    enum_lines = len(_ENUM_LINE.findall(text))
    actions = len({m.lower() for m in _ACTION.findall(text)})
    sequence = len(_SEQUENCE.findall(text))
    if _PLAN_WORDS.search(text) and actions >= 1:
        return True
    if enum_lines >= 2 or len(text) > 600:
        return True
    if actions >= 3 or (actions >= 2 and sequence >= 1) or sequence >= 2:
        return True
    if len(text) < 80 and actions == 0 and sequence == 0:
        return False
    if text.endswith("?") and actions <= 1 and sequence == 0 and len(text) < 200:
        return False
    return None

def make_detect(deps: Deps) -> Any:
    """Build the detect node."""

    def detect(state: PlanModeState, runtime: Runtime[Any]) -> Command[Literal["plan", "respond", "finalize"]]:
        settings = settings_of({}, runtime)  # a new run takes its settings from the context (or defaults)
        task = task_of(state)
        reset: dict[str, Any] = {
            "settings": settings_dict(settings),
            "plan": ResetPlan(reason="new run"),
            "feedback": None,
            "approval_error": None,
            "approved_revision": None,
            "needs_approval": False,
            "trouble": None,
            "reflection": None,
            "reflections": 0,
            "patches_applied": 0,
            "report": None,
            "error": None,
            "step_outcomes": dict.fromkeys(state.get("step_outcomes") or {}, None),
        }
        if not task:
            return Command(goto="finalize", update={**reset, "status": "failed", "error": "no task was given"})
        deps.models.get(settings)  # a missing API key is a clear error now, before any work
        if settings.mode != "auto":
            route: Literal["plan", "direct"] = "plan" if settings.mode == "plan" else "direct"
        else:
            decision = heuristic_decision(task)
            if decision is None:
                decision = _classify(deps, task, settings)
            route = "plan" if decision else "direct"
        goto: Literal["plan", "respond"] = "plan" if route == "plan" else "respond"
        status = "planning" if route == "plan" else "running"
        return Command(goto=goto, update={**reset, "route": route, "status": status, "goal": task, "task": None})

    return detect

def _classify(deps: Deps, task: str, settings: Any) -> bool:
    key = hashlib.sha256(task.encode("utf-8")).hexdigest()
    with deps.lock:
        if key in deps.detect_cache:
            return deps.detect_cache[key]
    model = deps.models.get(settings)
    messages = [SystemMessage(content=prompts.DETECT_SYSTEM), HumanMessage(content=task)]
    try:
        decision, _err, _raw = call_structured(model, DetectDecision, messages, settings)
    except ModelUnavailableError:  # plan: the planner pauses the run until the model is back
        return True
    # An unreadable classifier answer falls back to planning: the plan is shown before anything runs.
    needs_plan = decision.needs_plan if decision is not None else True
    with deps.lock:
        deps.detect_cache[key] = needs_plan
    return needs_plan

