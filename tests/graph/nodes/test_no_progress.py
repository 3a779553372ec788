"""Fail cheaply (issue 44, item 4): a run whose reflections show no progress stops, and says why.

No progress: at a reflection, the same trouble (the same failed steps with the same error, which holds their
check output), the same steps done and the same unfinished steps as at the reflection before. After a repair that
changed nothing, or a second retry that changed nothing, the run ends failed at once, without another reflection
call."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

from planmode.context import PlanModeContext
from planmode.executors import StepContext
from planmode.graph import build_graph
from planmode.state.models import Step
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

PLAN = {
    "title": "Build",
    "steps": [
        {"id": "a", "description": "write the config"},
        {"id": "b", "description": "build the service", "dependencies": ["a"]},
    ],
}
ON_TRACK = {"assessment": "on_track", "reasoning": "try the build again"}
NEEDS_ADJUSTMENT = {"assessment": "needs_adjustment", "reasoning": "b needs a change", "guidance": "change b"}
HEADLESS = PlanModeContext(approval="auto", max_attempts=1, max_reflections=5)


class Verifier:
    """Fails ``b`` every time, with ``output(n)`` for its n-th run; counts the runs."""

    def __init__(self, output: Any = lambda n: "error: no toolchain (exit 2)") -> None:
        self.output = output
        self.runs: dict[str, int] = {}

    def execute(self, step: Step, ctx: StepContext) -> str:
        self.runs[step.id] = self.runs.get(step.id, 0) + 1
        return f"{step.id} ran"

    def verify(self, step: Step, output: str, ctx: StepContext) -> tuple[bool, str]:
        if step.id == "b":
            return False, str(self.output(self.runs["b"]))
        return True, ""


def _run(checkpointer: SqliteSaver, reflect: Any, verifier: Verifier, patch: Any = None, thread: str = "t") -> Any:
    script = PurposeScript(plan=PLAN, reflect=reflect, **({"patch": patch} if patch is not None else {}))
    model = ScriptedChatModel(responder=script)
    graph = build_graph(model, executor=verifier.execute, verifier=verifier.verify, checkpointer=checkpointer)
    cfg: Any = {"configurable": {"thread_id": thread}}
    graph.invoke({"messages": [("user", "write the config, then build the service")]}, cfg, context=HEADLESS)
    return graph.get_state(cfg).values, model


def test_a_step_that_fails_the_same_way_after_a_retry_stops_the_run(checkpointer: SqliteSaver) -> None:
    verifier = Verifier()
    values, model = _run(checkpointer, ON_TRACK, verifier)
    assert values["status"] == "failed"
    assert values["error"].startswith("stopped: no progress: two retries chosen by the last reflection changed")
    assert "error: no toolchain (exit 2)" in values["error"]  # the trouble that came back, named
    # the first retry that changed nothing gets a reflection (it may propose a repair); the second does not
    assert model.calls("reflect") == 2
    assert verifier.runs["b"] == 3 and verifier.runs["a"] == 1
    # a step whose output changes at each run is progress: the reflections go on to their bound
    changing = Verifier(output=lambda n: f"error: {n} tests failed")
    values, model = _run(checkpointer, ON_TRACK, changing, thread="changing")
    assert values["error"].startswith("gave up after 5 reflection(s)")
    assert model.calls("reflect") == 5


def test_a_patch_that_changes_nothing_stops_the_run(checkpointer: SqliteSaver) -> None:
    nothing = {"reason": "b is right as it is: run it again"}
    values, model = _run(checkpointer, NEEDS_ADJUSTMENT, Verifier(), patch=nothing)
    assert values["status"] == "failed"
    assert values["error"].startswith("stopped: no progress: the repair (needs_adjustment) chosen by the last")
    assert (model.calls("reflect"), model.calls("patch")) == (1, 1)
    # a patch that rewrites the failing step is progress, even when the error stays: the next reflection is asked
    ways = iter(range(100))

    def rewrite(_: Any) -> dict[str, Any]:
        return {"reason": "reword b", "update_steps": [{"id": "b", "description": f"build it, way {next(ways)}"}]}

    values, model = _run(checkpointer, NEEDS_ADJUSTMENT, Verifier(), patch=rewrite, thread="rewritten")
    assert values["error"].startswith("gave up after 5 reflection(s)")
    assert model.calls("reflect") == 5
