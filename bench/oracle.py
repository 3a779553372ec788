"""The responder every system talks to: answers each call as a competent model would on the scenario.

It is stateful per run (which steps ran, which failed, which were fixed), thread-safe, and answers by the
call's purpose (`bench.model.classify`). A failing step's attempts fail until its fix step has run; each
system then repairs the plan in its own format, and only that format differs in the answers:

- planmode: a reflection that carries the minimal patch (add the fix step, add it to the step's
  dependencies) in planmode's compact format; the patch node's own call, if made, answers a `PlanPatch`;
- the plan-and-execute tutorial: the remaining steps rewritten as a list after every step;
- remaining-steps replanning: the steps not yet done re-emitted as JSON (done steps are not repeated).

Verification answers carry a reason either way, as a judge model writes one (about 15 tokens).
"""

from __future__ import annotations

import re
import threading
from typing import Any

from bench.model import TUTORIAL_EXECUTE, classify
from bench.scenarios import Scenario, StepSpec
from planmode.testing.scripted import ScriptRequest

__all__ = ["Oracle"]

_FAILED = re.compile(r"step '([A-Za-z0-9_\-]+)' failed")
_STEP = re.compile(r"Step `([^`]+)`")
_TUTORIAL_TASK = re.compile(re.escape(TUTORIAL_EXECUTE) + r" 1, (.*)\.\s*$", re.S)


class Oracle:
    """Answers the calls of one run on ``scenario``."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.lock = threading.Lock()
        self.executions: dict[str, int] = {}
        self.succeeded: set[str] = set()
        self.failed: set[str] = set()
        self.fixed: set[str] = set()
        self.patched: set[str] = set()
        self._by_description = {s.description: s.id for s in scenario.steps}
        for sid in scenario.failing:
            self._by_description[scenario.fix_step(sid).description] = f"fix_{sid}"

    # -- the responder --------------------------------------------------------------------------------
    def __call__(self, req: ScriptRequest) -> Any:
        purpose = classify(req.messages, req.schema)
        handler = getattr(self, f"_{purpose}", None)
        if handler is None:
            raise AssertionError(f"the bench oracle has no answer for a {purpose!r} call")
        return handler(req)

    # -- shared facts ---------------------------------------------------------------------------------
    def _attempt(self, step_id: str) -> bool:
        """Record one execution of ``step_id``; True when it works."""
        with self.lock:
            self.executions[step_id] = self.executions.get(step_id, 0) + 1
            if step_id.startswith("fix_"):
                self.fixed.add(step_id[4:])
            ok = step_id not in self.scenario.failing or step_id in self.fixed
            (self.succeeded if ok else self.failed).add(step_id)
            if ok:
                self.failed.discard(step_id)
            return ok

    def _works(self, step_id: str) -> bool:
        with self.lock:
            return step_id not in self.scenario.failing or step_id in self.fixed

    def _result(self, step_id: str, ok: bool) -> str:
        if ok:
            return self.scenario.output(step_id)
        return f"Attempt failed: {step_id} could not run because the toolchain it needs is missing."

    def _plan_with_fixes(self, broken: set[str]) -> list[StepSpec]:
        """The scenario's steps with a fix step before each broken (or already fixed) step."""
        out: list[StepSpec] = []
        for s in self.scenario.steps:
            if s.id in broken or s.id in self.patched:
                fix = self.scenario.fix_step(s.id)
                out.append(fix)
                s = StepSpec(s.id, s.description, (*s.dependencies, fix.id), s.acceptance, s.layer)
            out.append(s)
        return out

    def _final_text(self) -> str:
        return (
            f"The operations review is complete: all {self.scenario.n} tasks ran, the figures were "
            "reconciled and the summary for the board is written."
        )

    # -- planmode's calls -----------------------------------------------------------------------------
    def _detect(self, req: ScriptRequest) -> Any:
        return {"needs_plan": True, "reason": "several dependent tasks"}

    def _plan(self, req: ScriptRequest) -> Any:
        return self.scenario.plan_json()

    def _execute(self, req: ScriptRequest) -> Any:
        sid = req.step_id or ""
        return self._result(sid, self._attempt(sid))

    def _verify(self, req: ScriptRequest) -> Any:
        sid = req.step_id or ""
        if self._works(sid):
            spec = self.scenario.by_id.get(sid)
            met = spec.acceptance if spec is not None else "the toolchain runs"
            return {"passed": True, "reason": f"the outcome meets the criteria: {met}"}
        return {"passed": False, "reason": f"{sid} did not run: the toolchain it needs is missing"}

    def _repair(self, req: ScriptRequest) -> dict[str, Any]:
        """The minimal patch for the steps that failed: a fix step before each, and the rewired step."""
        broken = sorted(set(_FAILED.findall(req.text())) or (self.failed - self.patched))
        order = [s.id for s in self.scenario.steps]
        adds, updates = [], []
        for sid in broken:
            spec = self.scenario.by_id[sid]
            fix = self.scenario.fix_step(sid)
            i = order.index(sid)
            adds.append(
                {
                    "id": fix.id,
                    "description": fix.description,
                    "dependencies": list(fix.dependencies),
                    "acceptance": fix.acceptance,
                    **({"after": order[i - 1]} if i > 0 else {}),
                }
            )
            updates.append({"id": sid, "dependencies": [*spec.dependencies, fix.id]})
        with self.lock:
            self.patched.update(broken)
        return {"reason": f"{', '.join(broken)} need their toolchain installed first", "adds": adds, "updates": updates}

    def _reflect(self, req: ScriptRequest) -> Any:
        fix = self._repair(req)
        return {
            "assessment": "needs_adjustment",
            "reasoning": fix["reason"],
            "add_steps": fix["adds"],
            "update_steps": fix["updates"],
        }

    def _patch(self, req: ScriptRequest) -> Any:
        fix = self._repair(req)
        adds = [{**a, "complexity": "medium"} for a in fix["adds"]]
        return {"reason": fix["reason"], "add_steps": adds, "update_steps": fix["updates"]}

    def _final(self, req: ScriptRequest) -> Any:
        return self._final_text()

    # -- baseline 2: full-plan replanning -------------------------------------------------------------
    def _replan(self, req: ScriptRequest) -> Any:
        broken = set(_FAILED.findall(req.text())) or set(self.failed)
        with self.lock:
            self.patched.update(broken)
            done = set(self.succeeded)
        steps = [s for s in self._plan_with_fixes(broken) if s.id not in done]
        return {"title": self.scenario.title, "steps": [s.definition() for s in steps]}

    # -- baseline 1: the plan-and-execute tutorial ----------------------------------------------------
    def _tutorial_plan(self, req: ScriptRequest) -> Any:
        return {"steps": [s.description for s in self.scenario.steps]}

    def _tutorial_execute(self, req: ScriptRequest) -> Any:
        found = _TUTORIAL_TASK.search(str(req.messages[-1].content))
        description = found.group(1).strip() if found else ""
        sid = self._by_description.get(description, "")
        return self._result(sid, self._attempt(sid))

    def _tutorial_replan(self, req: ScriptRequest) -> Any:
        with self.lock:
            broken = set(self.failed)
            self.patched.update(broken)
            done = set(self.succeeded)
        remaining = [s.description for s in self._plan_with_fixes(broken) if s.id not in done]
        if not remaining:
            return {"action": {"response": self._final_text()}}
        return {"action": {"steps": remaining}}
