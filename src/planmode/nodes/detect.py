"""detect: does the request need a plan? Heuristics first, an LLM classifier for unclear cases (cached)."""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import Literal, get_args

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.types import Command
from pydantic import BaseModel, Field

from planmode import prompts
from planmode._compat import RunnableCallable
from planmode.context import PlanModeContext, settings_dict
from planmode.errors import ModelUnavailableError
from planmode.nodes._deps import Deps, NodeRuntime, settings_of, task_of
from planmode.nodes._twin import Body, model_for, structured, twin_node
from planmode.state.approvals import current_run, new_run_record
from planmode.state.earlier import earlier_summary
from planmode.state.graph_state import PlanModeState, new_run
from planmode.tools import read_only_names

__all__ = ["DETECT_ROUTES", "DetectDecision", "heuristic_decision", "make_detect"]

# The heuristic only decides what is clear: a request that plainly asks for a plan (enumerated tasks, several
# actions in sequence) goes to planning, and only a plainly trivial one (a greeting, or a short question that
# asks for no action) is answered directly. Everything else -- including any short task in a language these
# word lists do not know -- is unsure and asks the classifier. The lists cover English, French, German and
# Spanish; a miss costs one classifier call, never a one-line answer to a multi-step task.
_PLAN_WORDS = re.compile(
    r"\b(plan|step[- ]by[- ]step|steps|roadmap|checklist|todo list|phases?|étapes|schritte|pasos)\b", re.I
)
_SEQUENCE = re.compile(
    r"\b(then|after that|afterwards|next|finally|first|second|and also|followed by"
    r"|puis|ensuite|enfin|d'abord|après|"
    r"dann|danach|anschließend|zuerst|zunächst|schließlich|"
    r"luego|después|primero|finalmente|y luego)\b",
    re.I,
)
_ENUM_LINE = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+\S", re.M)
_ACTION = re.compile(
    r"\b(create|write|build|make|implement|refactor|migrate|port|add|update|fix|test|benchmark|deploy|set up|"
    r"configure|analy[sz]e|research|compare|summari[sz]e|rename|move|delete|install|generate|document|review|"
    r"optimi[sz]e|debug|scaffold|convert|"
    r"écris|écrire|crée|créer|construis|ajoute|ajouter|corrige|corriger|teste|tester|implémente|refactorise|"
    r"migre|déploie|installe|génère|documente|mets à jour|"
    r"schreib|schreibe|erstelle|erstellen|baue|füge|korrigiere|implementiere|migriere|installiere|"
    r"dokumentiere|aktualisiere|teste|"
    r"escribe|crea|construye|añade|agrega|corrige|prueba|implementa|migra|despliega|instala|genera|documenta|"
    r"actualiza|refactoriza)\b",
    re.I,
)
_FILE = re.compile(r"\b[\w-]+\.(?:py|js|ts|tsx|md|txt|json|ya?ml|toml|rs|go|java|c|h|cpp|sh|sql|html|css|csv)\b", re.I)
_GREETING = re.compile(
    r"^(hi|hello|hey|thanks|thank you|good (morning|evening|afternoon)|bonjour|salut|merci|hallo|danke|"
    r"guten (morgen|tag|abend)|hola|gracias|buenos días|ciao|grazie)\b[\s!.,]*\w*[\s!.]*$",
    re.I,
)
_QUESTION = re.compile(
    r"^(what|who|whom|when|where|why|how|which|can|could|should|would|"
    r"explain|define|tell me|"
    r"qu'est|qu\u2019est|quel|quelle|quels|quelles|comment|pourquoi|quand|où|qui|est-ce|peux-tu|"
    r"was|wer|wie|warum|wann|wo|welche|welcher|welches|kannst|"
    r"¿|qué|quién|cómo|por qué|cuándo|dónde|cuál|cuáles|puedes)\b",
    re.I,
)


class DetectDecision(BaseModel):
    """The classifier's answer."""

    needs_plan: bool = Field(description="True when the request needs a multi-step plan.")
    changes_files: bool = Field(
        default=False,
        description="True when the request asks to create, change, move, rename or delete files.",
    )
    reason: str = Field(default="", description="A short reason.")


def heuristic_decision(task: str) -> bool | None:
    """True (plan), False (direct) or None (unsure: ask the classifier).

    False is kept for the clearly trivial: an empty request, a greeting, or a short question that asks for
    no action, names no file and has no sequence. "No plan signal" alone is not "direct".
    """
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
    plain = actions == 0 and sequence == 0 and enum_lines == 0 and not _FILE.search(text)
    if plain and len(text) <= 60 and _GREETING.match(text):
        return False
    question = text.endswith(("?", "\uff1f")) or _QUESTION.match(text) is not None
    if plain and question and len(text) <= 200 and text.count("\n") <= 1:
        return False
    return None


DetectRoute = Literal["plan", "respond", "finalize"]
#: Where detect routes (its ``Command`` destinations: ``add_node(..., destinations=DETECT_ROUTES)``).
DETECT_ROUTES: tuple[DetectRoute, ...] = get_args(DetectRoute)


def make_detect(deps: Deps) -> RunnableCallable:
    """Build the detect node: a sync path for ``invoke`` and an async one for ``ainvoke`` (the classifier called
    with ``ainvoke``). Add it with ``destinations=DETECT_ROUTES``: a runnable has no return hint to read them from."""

    def detect(state: PlanModeState, runtime: NodeRuntime) -> Body[Command[DetectRoute]]:
        settings = settings_of({}, runtime)  # a new run takes its settings from the context (or defaults)
        task = task_of(state)
        run = uuid.uuid4().hex
        reset = new_run(settings_dict(settings), state.get("step_outcomes"), run)
        # the record that starts the run names the run it follows: the reducer refuses a replayed one
        reset["approvals"] = [new_run_record(run, after=current_run(state.get("approvals")))]
        if not task:
            return Command(goto="finalize", update={**reset, "status": "failed", "error": "no task was given"})
        yield from model_for(deps, settings)  # a missing API key is a clear error now, before any work
        if settings.mode != "auto":
            route: Literal["plan", "direct"] = "plan" if settings.mode == "plan" else "direct"
        else:
            decision = heuristic_decision(task)
            if decision is None:
                decision = yield from _classify(deps, task, settings, writes=_writes_bound(deps))
            route = "plan" if decision else "direct"
        goto: Literal["plan", "respond"] = "plan" if route == "plan" else "respond"
        status = "planning" if route == "plan" else "running"
        earlier = earlier_summary(state)  # the finished run this one follows on the thread, before the reset
        update = {**reset, "route": route, "status": status, "goal": task, "task": None, "earlier": earlier}
        return Command(goto=goto, update=update)

    return twin_node("detect", detect)


def _writes_bound(deps: Deps) -> bool:
    """Whether a tool that changes things is bound (a tool of the graph that is not read-only)."""
    reading = read_only_names(deps.tools)
    return any(t.name not in reading for t in deps.tools)


def _classify(deps: Deps, task: str, settings: PlanModeContext, *, writes: bool) -> Body[bool]:
    """Whether the task gets a plan, by the classifier's declared answer: it needs one, or, while a tool that
    changes things is bound, it changes files (a direct answer cannot change them: its writes are refused before
    approval)."""
    key = hashlib.sha256(task.encode("utf-8")).hexdigest()
    with deps.lock:
        if key in deps.detect_cache:
            return deps.detect_cache[key]
    model = yield from model_for(deps, settings)
    messages = [SystemMessage(content=prompts.DETECT_SYSTEM), HumanMessage(content=task)]
    try:
        decision, _err, _raw = yield from structured(model, DetectDecision, messages, settings)
    except ModelUnavailableError:  # plan: the planner pauses the run until the model is back
        return True
    # An unreadable classifier answer falls back to planning: the plan is shown before anything runs.
    needs_plan = decision.needs_plan or (writes and decision.changes_files) if decision is not None else True
    with deps.lock:
        deps.detect_cache[key] = needs_plan
    return needs_plan
