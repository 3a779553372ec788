"""When things go wrong: failed verification, patches (invalid then valid), garbage model output at every
structured step, invalid plans, deadlocks, raising tools, and edits of done steps through update_state."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from planmode.context import PlanModeContext
from planmode.executors import StepContext
from planmode.graph import build_graph
from planmode.state.models import PlanPatch, Step, StepStatus, StepUpdate
from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest, tool_call

TASK = "Set up the service: write the config, then build it, then deploy it"
HEADLESS = PlanModeContext(approval="auto", max_attempts=1)
S = StepStatus

# a and c are independent; b needs a; d needs b. b fails verification until a fix step has run.
PLAN = {
    "title": "Service",
    "steps": [
        {"id": "a", "description": "write the config"},
        {"id": "c", "description": "write the docs"},
        {"id": "b", "description": "build the service", "dependencies": ["a"]},
        {"id": "d", "description": "deploy the service", "dependencies": ["b"]},
    ],
}
FIX_PATCH = {
    "reason": "b needs its toolchain installed first",
    "add_steps": [{"id": "fix_b", "description": "install the toolchain", "dependencies": ["a"], "after": "a"}],
    "update_steps": [{"id": "b", "dependencies": ["a", "fix_b"]}],
}
NEEDS_ADJUSTMENT = {
    "assessment": "needs_adjustment",
    "reasoning": "b lacks a toolchain",
    "guidance": "add a step that installs it",
}
FAILED = {"assessment": "failed", "reasoning": "cannot go on"}


def thread(name: str = "t1") -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


class Counting:
    """An executor counting executions per step id, and a verifier that fails ``b`` until ``fix_b`` ran."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: dict[str, int] = {}

    def execute(self, step: Step, ctx: StepContext) -> str:
        with self.lock:
            self.runs[step.id] = self.runs.get(step.id, 0) + 1
        return f"{step.id} finished"

    def verify(self, step: Step, output: str, ctx: StepContext) -> tuple[bool, str]:
        if step.id == "b" and "fix_b" not in self.runs:
            return False, "the build failed: no toolchain"
        return True, ""


def build(model: ScriptedChatModel, checkpointer: SqliteSaver, counting: Counting | None = None, **kwargs: Any) -> Any:
    if counting is not None:
        kwargs.update(executor=counting.execute, verifier=counting.verify)
    return build_graph(model, checkpointer=checkpointer, **kwargs)


def test_failed_verification_is_repaired_by_a_patch_and_done_steps_run_once(checkpointer: SqliteSaver) -> None:
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, reflect=NEEDS_ADJUSTMENT, patch=FIX_PATCH))
    counting = Counting()
    graph = build(model, checkpointer, counting)

    graph.invoke({"messages": [("user", TASK)]}, thread(), context=HEADLESS)

    values = graph.get_state(thread()).values
    plan = values["plan"]
    assert values["status"] == "completed", values.get("error")
    assert [s.id for s in plan.steps] == ["a", "fix_b", "c", "b", "d"]
    assert all(s.status is S.DONE for s in plan.steps)
    # a and c were done before the failure: executed exactly once; b failed once and ran again after the fix
    assert counting.runs == {"a": 1, "c": 1, "b": 2, "fix_b": 1, "d": 1}
    assert (model.calls("reflect"), model.calls("patch")) == (1, 1)
    assert values["reflection"]["assessment"] == "needs_adjustment"
    assert "no toolchain" in values["trouble"]
    assert plan.history[-1].source == "patch"
    assert (plan.history[-1].added, plan.history[-1].updated) == (["fix_b"], ["b"])
    assert values["report"]["done"] == ["a", "fix_b", "c", "b", "d"]
    assert len(values["report"]["patches"]) == 1


def test_an_invalid_patch_is_rejected_and_recorded_then_a_valid_one_applies(checkpointer: SqliteSaver) -> None:
    edits_done_step = {"reason": "redo the config", "update_steps": [{"id": "a", "description": "rewrite it"}]}
    model = ScriptedChatModel(
        responder=PurposeScript(plan=PLAN, reflect=NEEDS_ADJUSTMENT, patch=[edits_done_step, FIX_PATCH])
    )
    counting = Counting()
    graph = build(model, checkpointer, counting)

    events = list(graph.stream({"messages": [("user", TASK)]}, thread(), context=HEADLESS, stream_mode="custom"))

    values = graph.get_state(thread()).values
    plan = values["plan"]
    assert values["status"] == "completed", values.get("error")
    assert model.calls("patch") == 2
    [rejection] = plan.rejections
    assert rejection.kind == "patch"
    assert any("'a' is done" in r for r in rejection.reasons)
    second_request = [r for r in model.requests if r.purpose == "patch"][1]
    assert "'a' is done" in second_request.text()  # the reasons were fed back to the model
    assert plan.get("a").description == "write the config"
    assert plan.history[-1].added == ["fix_b"]
    assert counting.runs["a"] == 1
    types = [e["type"] for e in events]
    assert types.index("patch_rejected") < types.index("plan_patched")


# The reflection that carries its patch (one call for both), in the compact model-facing format.
REFLECT_WITH_PATCH = {
    "assessment": "needs_adjustment",
    "reasoning": "b needs its toolchain installed first",
    "add_steps": [{"id": "fix_b", "description": "install the toolchain", "dependencies": ["a"], "after": "a"}],
    "update_steps": [{"id": "b", "dependencies": ["a", "fix_b"]}],
}


def headless(
    checkpointer: SqliteSaver,
    reflect: Any,
    patch: Any = FIX_PATCH,
    counting: Counting | None = None,
    context: Any = None,
) -> tuple[dict[str, Any], ScriptedChatModel, Counting]:
    """A headless run of PLAN (b fails until fixed, with `Counting`), the reflection answering ``reflect`` and the
    patch model ``patch``: the thread's values, the model and the counts."""
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, reflect=reflect, patch=patch))
    counting = counting or Counting()
    graph = build(model, checkpointer, counting)
    graph.invoke({"messages": [("user", TASK)]}, thread(), context=context or HEADLESS)
    return graph.get_state(thread()).values, model, counting


def repaired(
    checkpointer: SqliteSaver, reflect: Any, context: Any = None
) -> tuple[dict[str, Any], ScriptedChatModel, Counting]:
    """A headless run of PLAN whose b fails until fixed, the reflection answering ``reflect``; it repairs
    without a patch call."""
    values, model, counting = headless(checkpointer, reflect, context=context)
    assert values["status"] == "completed", values.get("error")
    assert (model.calls("reflect"), model.calls("patch")) == (1, 0)
    return values, model, counting


def test_a_reflection_that_carries_a_patch_repairs_without_a_patch_call(checkpointer: SqliteSaver) -> None:
    values, model, counting = repaired(checkpointer, REFLECT_WITH_PATCH)
    plan = values["plan"]
    assert [s.id for s in plan.steps] == ["a", "fix_b", "c", "b", "d"]
    assert (plan.history[-1].added, plan.history[-1].updated) == (["fix_b"], ["b"])
    assert plan.history[-1].reason == "b needs its toolchain installed first"
    assert plan.get("fix_b").complexity.value == "medium" and plan.get("fix_b").status is S.DONE
    assert counting.runs == {"a": 1, "c": 1, "b": 2, "fix_b": 1, "d": 1}
    # the reflection's prompt shows done steps compactly and the trouble after the plan (a stable prefix)
    [reflect_req] = [r for r in model.requests if r.purpose == "reflect"]
    human = str(reflect_req.messages[-1].content)
    assert "Done: a, c" in human and human.index("Open steps:") < human.index("Trouble:")
    assert reflect_req.schema == "Reflection"
    schema = reflect_req.tools[0]["function"]["parameters"]["properties"]
    assert {"assessment", "add_steps", "update_steps", "remove_steps"} <= set(schema)


def test_step_ids_a_small_model_quotes_or_spells_with_spaces_are_read_as_ids(checkpointer: SqliteSaver) -> None:
    """Qwen2.5-Coder-1.5B's patch was refused at the schema ("update_steps.0.id: String should match pattern"):
    ids in backticks or quotes, or with spaces, name the steps they spell."""
    reflect = {
        "assessment": "needs_adjustment",
        "reasoning": "b needs its toolchain installed first",
        "add_steps": [{"id": "fix b", "description": "install the toolchain", "dependencies": ["`a`"], "after": "a"}],
        "update_steps": [{"id": "`b`", "dependencies": ["a", "fix b"]}],
    }
    plan = repaired(checkpointer, reflect)[0]["plan"]
    assert plan.ids() == ["a", "fix_b", "c", "b", "d"] and plan.get("b").dependencies == ["a", "fix_b"]
    assert not plan.rejections


def test_a_new_step_with_null_fields_or_one_dependency_as_text_is_read(checkpointer: SqliteSaver) -> None:
    """The 1.5B's reflection added a step with ``"dependencies": null`` three times ("add_steps.0.dependencies:
    Input should be a valid list") and the run ended without its assessment read: null is no value, and one
    dependency sent as its id alone is that one dependency."""
    reflect = {
        "assessment": "needs_adjustment",
        "reasoning": "b needs its toolchain installed first",
        "add_steps": [
            {"id": "fix_b", "description": "install it", "dependencies": "a", "acceptance": None, "after": "a"}
        ],
        "update_steps": [{"id": "b", "dependencies": ["a", "fix_b"]}],
    }
    plan = repaired(checkpointer, reflect)[0]["plan"]
    assert plan.ids() == ["a", "fix_b", "c", "b", "d"] and plan.get("fix_b").dependencies == ["a"]
    from planmode.nodes._repair import Reflection

    step = {"id": "edit_total", "description": "d", "dependencies": None, "after": "print_sum"}  # the 1.5B's
    assert Reflection.model_validate({"assessment": "failed", "add_steps": [step]}).add_steps[0].dependencies == []


@pytest.mark.parametrize(
    ("proposal", "reason"),
    [
        ({"update_steps": [{"id": "a", "description": "rewrite the config"}]}, "'a' is done"),
        ({"add_steps": [{"id": "an id far too long " * 5, "description": "x"}]}, "proposed patch is invalid"),
        # (removing a step the plan does not have is dropped now: a change of nothing, not a refusal)
        ({"update_steps": [{"id": "b", "dependencies": ["zzz"]}]}, "zzz"),
    ],
)
def test_an_invalid_proposed_patch_is_recorded_and_the_patch_node_asks_again(
    checkpointer: SqliteSaver, proposal: dict[str, Any], reason: str
) -> None:
    reflect = {"assessment": "needs_adjustment", "reasoning": "try this", **proposal}
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, reflect=reflect, patch=FIX_PATCH))
    counting = Counting()
    graph = build(model, checkpointer, counting)

    graph.invoke({"messages": [("user", TASK)]}, thread(), context=HEADLESS)

    values = graph.get_state(thread()).values
    plan = values["plan"]
    assert values["status"] == "completed", values.get("error")
    assert model.calls("patch") == 1  # the proposal was the first attempt; one call fixed it
    [rejection] = plan.rejections
    assert rejection.kind == "patch" and any(reason in r for r in rejection.reasons), rejection.reasons
    [patch_req] = [r for r in model.requests if r.purpose == "patch"]
    assert reason in patch_req.text()  # the reasons were fed back with the proposal
    markers = {"'a' is done": "rewrite the config", "proposed patch is invalid": "an id far too long", "zzz": '"zzz"'}
    marker = markers[reason]
    assert marker in patch_req.text()  # ... with the proposal itself, as the model wrote it
    assert plan.get("a").description == "write the config"
    assert counting.runs["a"] == 1


def test_proposed_patches_count_against_the_patch_attempts(checkpointer: SqliteSaver) -> None:
    bad = {"assessment": "needs_adjustment", "reasoning": "x", "remove_steps": ["a"]}
    model = ScriptedChatModel(responder=PurposeScript(plan=[PLAN, "no plan"], reflect=bad, patch="{not json"))
    graph = build(model, checkpointer, Counting())

    graph.invoke({"messages": [("user", TASK)]}, thread(), context=dataclasses.replace(HEADLESS, max_reflections=1))

    values = graph.get_state(thread()).values
    assert values["status"] == "failed"
    assert "no valid patch after 3 attempt(s)" in values["error"]
    assert model.calls("patch") == 2  # the proposal, then two calls: three attempts in all
    assert len(values["plan"].rejections) == 4  # three patches and the full-plan fallback


ONE_CHECKED_STEP = {"title": "one", "steps": [{"id": "a", "description": "write it", "acceptance": "it works"}]}
GARBAGE_CASES: dict[str, tuple[dict[str, Any], dict[str, Any], bool, int, str]] = {
    # purpose: (script, extra settings, verifier fails b, calls of that purpose, error fragment)
    "plan": ({"plan": "Sure! Here is my plan: do it."}, {}, False, 3, "the planner gave no valid plan"),
    "patch": (
        {"plan": [PLAN, "still no JSON"], "patch": "{not json", "reflect": NEEDS_ADJUSTMENT},
        {},
        True,
        3,
        "no valid patch after 3 attempt(s)",
    ),
    "reflect": ({"plan": PLAN, "reflect": "things are bad"}, {}, True, 3, "no readable assessment"),
    # the LLM judge (asked twice per attempt) only judges steps with acceptance criteria
    "verify": (
        {"plan": ONE_CHECKED_STEP, "verify": "it looks fine I guess", "reflect": FAILED},
        {"max_attempts": 2},
        False,
        4,
        "the run was judged failed",
    ),
}


@pytest.mark.parametrize("purpose", list(GARBAGE_CASES))
def test_garbage_model_output_ends_the_run_cleanly_as_failed(checkpointer: SqliteSaver, purpose: str) -> None:
    script, settings, failing_b, calls, fragment = GARBAGE_CASES[purpose]
    model = ScriptedChatModel(responder=PurposeScript(**script))
    counting = Counting()
    graph = build_graph(
        model, checkpointer=checkpointer, executor=counting.execute, verifier=counting.verify if failing_b else None
    )

    graph.invoke(
        {"messages": [("user", TASK)]},
        thread(),
        context=PlanModeContext(**{"approval": "auto", "max_attempts": 1, **settings}),
    )

    state = graph.get_state(thread())  # readable
    values = state.values
    assert state.next == ()
    assert values["status"] == "failed"
    assert fragment in values["error"]
    assert values["report"]["status"] == "failed"
    assert values["messages"][-1].content.startswith("The run failed:")
    assert model.calls(purpose) == calls  # bounded retries
    if purpose == "verify":
        step = values["plan"].get("a")
        assert step.status is S.FAILED and step.attempts == 2
        assert "verifier gave no verdict" in (step.error or "")
    if purpose == "patch":
        assert len(values["plan"].rejections) == 4  # three patches and the full-plan fallback
        assert model.calls("plan") == 2
    assert list(graph.get_state_history(thread()))  # the whole history stays readable


def test_a_failing_model_call_is_a_clean_failure_too(checkpointer: SqliteSaver) -> None:
    def broken(req: ScriptRequest) -> Any:  # a model that cannot be reached pauses instead: test_model_unavailable
        raise RuntimeError("the model server went away")

    model = ScriptedChatModel(responder=PurposeScript(plan=broken))
    graph = build_graph(model, checkpointer=checkpointer)

    graph.invoke({"messages": [("user", TASK)]}, thread())

    values = graph.get_state(thread()).values
    assert values["status"] == "failed"
    assert "the model server went away" in values["error"]
    assert model.calls("plan") == 3


@pytest.mark.parametrize(
    ("steps", "reason"),
    [
        (
            [
                {"id": "a", "description": "x", "dependencies": ["b"]},
                {"id": "b", "description": "y", "dependencies": ["a"]},
            ],
            "dependency cycle",
        ),
        ([{"id": "a", "description": "x", "dependencies": ["ghost"]}], "unknown step 'ghost'"),
        ([{"id": f"s{i}", "description": "x"} for i in range(5)], "at most 4 are allowed"),
    ],
    ids=["cycle", "missing-dependency", "too-many-steps"],
)
def test_an_invalid_plan_is_sent_back_with_reasons_and_a_valid_retry_is_accepted(
    checkpointer: SqliteSaver, steps: list[dict[str, Any]], reason: str
) -> None:
    model = ScriptedChatModel(responder=PurposeScript(plan=[{"title": "bad", "steps": steps}, PLAN]))
    graph = build_graph(model, checkpointer=checkpointer)

    graph.invoke({"messages": [("user", TASK)]}, thread(), context={"max_steps": 4})

    state = graph.get_state(thread())
    retry = [r for r in model.requests if r.purpose == "plan"][1]
    assert reason in retry.text()
    assert model.calls("plan") == 2
    payload = state.interrupts[0].value
    assert [s["id"] for s in payload["plan"]["steps"]] == ["a", "c", "b", "d"]
    assert state.values["plan"].version == 1


def test_a_deadlock_is_detected_and_reported_to_reflect(checkpointer: SqliteSaver) -> None:
    reflect_requests: list[str] = []

    def reflect(req: ScriptRequest) -> dict[str, Any]:
        reflect_requests.append(req.text())
        return {"assessment": "on_track", "reasoning": "just retry"}  # retrying cannot fix a deadlock

    unblock = {"reason": "b does not need the skipped config", "update_steps": [{"id": "b", "dependencies": []}]}
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, reflect=reflect, patch=unblock))
    counting = Counting()
    graph = build_graph(model, executor=counting.execute, checkpointer=checkpointer)

    shown = graph.invoke({"messages": [("user", TASK)]}, thread())["__interrupt__"][0].value
    # The human skips a; b still depends on it, so b can never become ready.
    events = list(
        graph.stream(
            Command(
                resume={
                    "action": "edit",
                    "revision": shown["revision"],
                    "patch": {"update_steps": [{"id": "a", "status": "skipped"}]},
                }
            ),
            thread(),
            stream_mode="custom",
        )
    )

    values = graph.get_state(thread()).values
    assert values["trouble"].startswith("deadlock")
    assert "b waits for a" in values["trouble"]
    assert len(reflect_requests) == 1 and "deadlock" in reflect_requests[0]
    reflection = next(e for e in events if e["type"] == "reflection")
    assert reflection["data"]["assessment"] == "needs_adjustment"  # on_track is not an answer to a deadlock
    assert values["status"] == "completed", values.get("error")
    assert counting.runs == {"c": 1, "b": 1, "d": 1}
    assert values["plan"].get("a").status is S.SKIPPED


def test_a_blocked_step_is_reported_to_reflect_and_on_track_retries_it(checkpointer: SqliteSaver) -> None:
    reflect_requests: list[str] = []

    def reflect(req: ScriptRequest) -> dict[str, Any]:
        reflect_requests.append(req.text())
        return {"assessment": "on_track", "reasoning": "the credentials are there now"}

    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, reflect=reflect))
    counting = Counting()
    graph = build_graph(model, executor=counting.execute, checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, thread())

    # A human blocks b through update_state while the plan waits for approval. The approval node was reached by
    # a Command, so the update names where to go on (a plain dict update would end the run at this checkpoint).
    blocked = {"id": "b", "status": "blocked", "error": "waiting for credentials"}
    graph.update_state(thread(), Command(update={"plan": blocked}, goto="approve"), as_node="plan")
    graph.invoke(None, thread())  # shows the edited plan for approval
    state = graph.get_state(thread())
    assert state.values["plan"].get("b").status is S.BLOCKED
    revision = state.interrupts[0].value["revision"]
    assert revision == state.values["plan"].revision
    graph.invoke(Command(resume={"action": "approve", "revision": revision}), thread())

    values = graph.get_state(thread()).values
    assert len(reflect_requests) == 1
    assert "step 'b' is blocked: waiting for credentials" in reflect_requests[0]
    assert values["status"] == "completed", values.get("error")
    assert counting.runs == {"a": 1, "c": 1, "b": 1, "d": 1}


@tool
def deploy(target: str) -> str:
    """Deploy to a target."""
    raise ValueError(f"disk on fire while deploying to {target}")


def test_a_raising_tool_becomes_a_failed_attempt_with_the_error(checkpointer: SqliteSaver) -> None:
    # a write step carries acceptance (issue 24: a plan without it is sent back)
    ship = {"id": "ship", "description": "deploy it", "tools": ["deploy"], "acceptance": "it is deployed"}
    plan = {"title": "Deploy", "steps": [ship]}

    def execute(req: ScriptRequest) -> Any:
        if not req.tool_results():
            return {"tool_calls": [tool_call("deploy", target="prod")]}
        return "deployed"  # never reached: the raising tool ends the attempt

    model = ScriptedChatModel(responder=PurposeScript(plan=plan, execute=execute, reflect=FAILED))
    graph = build_graph(model, tools=[deploy], checkpointer=checkpointer)

    events = list(graph.stream({"messages": [("user", TASK)]}, thread(), context=HEADLESS, stream_mode="custom"))

    values = graph.get_state(thread()).values
    step = values["plan"].get("ship")
    assert step.status is S.FAILED
    assert step.attempts == 1
    assert "ValueError" in step.error and "disk on fire while deploying to prod" in step.error
    assert model.calls("execute") == 1
    failed = next(e for e in events if e["type"] == "step_failed")
    assert failed["step_id"] == "ship" and "disk on fire" in failed["message"]
    assert values["status"] == "failed"
    assert "disk on fire" in values["trouble"]


@pytest.mark.parametrize(
    ("update", "kind"),
    [
        (PlanPatch(reason="sneaky", update_steps=[StepUpdate(id="a", description="rewritten")]), "patch"),
        ({"update_steps": [{"id": "a", "dependencies": ["c"]}]}, "patch"),
        ({"remove_steps": ["a"]}, "patch"),
        ({"id": "a", "status": "pending"}, "transition"),
    ],
    ids=["patch-object", "patch-json", "remove", "transition"],
)
def test_update_state_editing_a_done_step_is_rejected_and_recorded(
    checkpointer: SqliteSaver, update: Any, kind: str
) -> None:
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    counting = Counting()
    graph = build_graph(model, executor=counting.execute, checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, thread(), context={"approval": "auto"})
    before = graph.get_state(thread()).values["plan"]
    assert before.get("a").status is S.DONE

    graph.update_state(thread(), {"plan": update})

    after = graph.get_state(thread()).values["plan"]  # readable
    assert after.steps == before.steps
    assert after.version == before.version
    rejection = after.rejections[-1]
    assert rejection.kind == kind
    assert any("'a'" in r and "done" in r for r in rejection.reasons)
    assert len(list(graph.get_state_history(thread()))) > 1


def test_after_an_unreadable_assessment_the_reflection_is_told_what_to_assess(checkpointer: SqliteSaver) -> None:
    """Qwen2.5-Coder-1.5B, told only "that answer could not be read ... answer again", judged the run failed because
    of that message. The retry names what to assess; a readable second answer repairs the plan as usual."""
    seen: list[str] = []

    def reflect(req: ScriptRequest) -> Any:
        if len(seen) == 0:
            seen.append("")
            return "I think the build is broken."  # no JSON object
        seen.append(str(req.messages[-1].content))
        return NEEDS_ADJUSTMENT

    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, reflect=reflect, patch=FIX_PATCH))
    graph = build(model, checkpointer, Counting())

    graph.invoke({"messages": [("user", TASK)]}, thread(), context=HEADLESS)

    values = graph.get_state(thread()).values
    assert values["status"] == "completed", values.get("error")
    retry = seen[1]
    assert retry.startswith("That answer could not be read (")
    assert "your assessment of the plan and of the trouble described above (not of this message)" in retry


def test_an_update_of_a_step_the_plan_lacks_is_a_new_step_and_a_removal_of_one_changes_nothing(
    checkpointer: SqliteSaver,
) -> None:
    """With the small-model adapter on: an update that gives a description of a step the plan lacks is that new
    step; a removal of a step not in the plan is dropped; the patch applies."""
    reflect = {
        **NEEDS_ADJUSTMENT,
        "update_steps": [
            {"id": "fix_b", "description": "install the toolchain", "dependencies": ["a"]},
            {"id": "b", "dependencies": ["a", "fix_b"]},
            {"id": "ghost"},  # no description: dropped
        ],
        "remove_steps": ["never_was"],
    }
    values, _, counting = repaired(checkpointer, reflect, context=dataclasses.replace(HEADLESS, model_profile="small"))
    plan = values["plan"]
    assert plan.get("fix_b").description == "install the toolchain" and plan.get("b").dependencies == ["a", "fix_b"]
    assert plan.get("ghost") is None and counting.runs["fix_b"] == 1 and counting.runs["a"] == 1
    reason = plan.history[-1].reason or ""
    assert "'fix_b' is not in the plan: added as a new step" in reason and "'never_was'" in reason


class FailsOnce(Counting):
    """b fails its first verification only: a retry, without any change, passes."""

    def verify(self, step: Step, output: str, ctx: StepContext) -> tuple[bool, str]:
        if step.id == "b" and self.runs.get("b") == 1:
            return False, "a flaky build"
        return True, "ok"


def test_a_patch_that_gives_a_reason_and_changes_nothing_retries_the_failed_step(checkpointer: SqliteSaver) -> None:
    """The 1.5B's patch model answered "the patch changes nothing, so no change is needed" (ten refusals in the
    rounds recorded, each a call, then the full-plan fallback's). With a reason and no change, it is a retry of the
    failed steps, as on_track is; without even a reason it is refused as before
    (tests/graph/nodes/test_graph_fallback.py)."""
    nothing = {"reason": "b is right as it is: run it again"}
    values, model, counting = headless(checkpointer, NEEDS_ADJUSTMENT, patch=nothing, counting=FailsOnce())
    assert values["status"] == "completed", values.get("error")
    assert model.calls("patch") == 1 and model.calls("plan") == 1  # no refusal, no fallback
    assert not values["plan"].rejections and counting.runs["b"] == 2 and counting.runs["a"] == 1
