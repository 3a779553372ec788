"""Run settings are resolved once: one settings object reaches every node of a run, a resumed run keeps
the settings it started with, and a resume's context overrides them only with the values it was given."""

from __future__ import annotations

import threading
from dataclasses import FrozenInstanceError, fields, replace
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

import planmode.context as context_module
from planmode.context import PlanModeContext, resolve_settings, settings_dict
from planmode.executors import StepContext
from planmode.graph import build_graph
from planmode.state.approvals import decisions
from planmode.state.models import Step
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

PLAN = {"title": "four", "steps": [{"id": f"s{i}", "description": f"step {i}"} for i in range(4)]}


def thread(name: str = "t1") -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


class Seen:
    """An executor and a verifier that record the settings object each call is given."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.settings: list[PlanModeContext] = []
        self.parallel: list[int] = []

    def execute(self, step: Step, ctx: StepContext) -> str:
        with self.lock:
            self.settings.append(ctx.settings)
            self.parallel.append(ctx.settings.max_parallel)
        return f"did {step.id}"

    def verify(self, step: Step, output: str, ctx: StepContext) -> bool:
        with self.lock:
            self.settings.append(ctx.settings)
        return True


def test_a_run_resolves_its_settings_once_and_its_nodes_read_the_stored_ones(
    checkpointer: SqliteSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The settings are resolved where the run starts (detect: its budget check and the node); every later node,
    across the approval interrupt too, reads the settings kept in state (each node and wrapper resolved them
    again: 214 resolutions for a 40-step chain, bench/settings_bench.py)."""
    import planmode.budget as budget_module

    resolved: list[PlanModeContext] = []

    def counting(context: Any, stored: Any, **kwargs: Any) -> PlanModeContext:
        resolved.append(original(context, stored, **kwargs))
        return resolved[-1]

    original = context_module.resolve_settings
    monkeypatch.setattr(context_module, "resolve_settings", counting)
    monkeypatch.setattr(budget_module, "resolve_settings", counting)
    seen = Seen()
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    graph = build_graph(model, executor=seen.execute, verifier=seen.verify, checkpointer=checkpointer)
    graph.invoke({"messages": [("user", "do four things")]}, thread(), context={"mode": "plan", "max_parallel": 2})
    graph.invoke(Command(resume={"action": "approve", "revision": _revision(graph)}), thread())
    assert graph.get_state(thread()).values["status"] == "completed"
    assert len(seen.settings) == 8  # four executions, four verifications
    assert len(resolved) == 2  # the run's start: detect's budget check and detect
    assert all(s == resolved[0] for s in seen.settings) and seen.parallel == [2, 2, 2, 2]
    assert len({id(s) for s in seen.settings}) == 1  # one object, held typed in state: nothing checked per node
    saved = checkpointer.get_tuple(thread())
    assert saved is not None and saved.checkpoint["channel_values"]["settings"] == settings_dict(resolved[0])


def _revision(graph: Any) -> str:
    value: str = graph.get_state(thread()).interrupts[0].value["revision"]
    return value


def test_a_given_value_overrides_the_stored_one_even_when_it_is_the_default(checkpointer: SqliteSaver) -> None:
    """A resume that passes max_parallel=4 (the default) gets 4; the old "differs from the default" guess
    kept the stored 1."""
    seen = Seen()
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    graph = build_graph(model, executor=seen.execute, verifier=seen.verify, checkpointer=checkpointer)
    graph.invoke({"messages": [("user", "do four things")]}, thread(), context={"mode": "plan", "max_parallel": 1})
    assert graph.get_state(thread()).values["settings"].max_parallel == 1
    graph.invoke(
        Command(resume={"action": "approve", "revision": _revision(graph)}), thread(), context={"max_parallel": 4}
    )
    assert set(seen.parallel) == {4}


def test_a_resume_that_brings_a_new_value_resolves_once_and_the_run_keeps_it(
    checkpointer: SqliteSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first node of the resume resolves the new value and writes it to state: the nodes after it read it
    from there (each resolved it again), and a later resume without a context keeps it (it went back to the
    settings the run started with, so `planmode resume` kept its endpoint in checkpoint metadata)."""
    resolved: list[PlanModeContext] = []
    original = context_module.resolve_settings

    def counting(context: Any, stored: Any, **kwargs: Any) -> PlanModeContext:
        resolved.append(original(context, stored, **kwargs))
        return resolved[-1]

    seen = Seen()
    graph = _waiting_at_approval(checkpointer, seen, max_parallel=1)
    monkeypatch.setattr(context_module, "resolve_settings", counting)
    revision = _revision(graph)
    graph.invoke(Command(resume={"action": "approve", "revision": revision}), thread(), context={"max_parallel": 3})
    state = graph.get_state(thread())
    assert state.values["status"] == "completed" and set(seen.parallel) == {3}
    assert len(resolved) == 1  # approve, the resume's first node
    assert state.values["settings"].max_parallel == 3
    assert all("planmode_endpoint" not in (s.metadata or {}) for s in graph.get_state_history(thread()))


def test_a_default_read_from_another_environment_does_not_override_the_stored_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A resume in a process whose PLANMODE_MODEL differs builds a default context with another model: it
    was not given, so the run keeps its model (the old guess switched models)."""
    stored = settings_dict(PlanModeContext(model="scripted-model"))
    monkeypatch.setenv("PLANMODE_MODEL", "other-model")
    assert resolve_settings(PlanModeContext(), stored).model == "scripted-model"
    assert resolve_settings(PlanModeContext(model="m2"), stored).model == "m2"


def test_settings_are_frozen_and_remember_the_values_they_were_given() -> None:
    ctx = PlanModeContext(approval="auto")
    assert ctx.given() == {"approval": "auto"}
    with pytest.raises(FrozenInstanceError):
        ctx.model = "m"  # type: ignore[misc]  # what the test checks: a frozen dataclass refuses it
    assert ctx.given() == {"approval": "auto"}
    assert set(replace(ctx, mode="plan").given()) == set(settings_dict(ctx))  # a full copy names every field
    stored = settings_dict(PlanModeContext(model="s"))
    assert resolve_settings({"max_parallel": 3, "unknown": 1}, stored).max_parallel == 3
    assert (
        resolve_settings(None, stored) == resolve_settings(PlanModeContext(), dict(stored)) == PlanModeContext(**stored)
    )
    typed = PlanModeContext(**stored)
    assert resolve_settings(PlanModeContext(model="s"), typed) is typed  # nothing new: the stored object itself
    assert "negotiated_output" not in settings_dict(ctx)  # planmode's own record is a state key, not a setting
    old = {**stored, "negotiated_output": "json_object u s"}  # a checkpoint written when it was one
    assert resolve_settings(None, old) == typed


def test_reflect_has_its_own_bound() -> None:
    ctx = PlanModeContext()
    assert ctx.max_reflect_attempts == ctx.max_plan_attempts == 3
    assert "max_reflect_attempts" in settings_dict(PlanModeContext(max_reflect_attempts=1))


@pytest.mark.parametrize(("reflect_attempts", "plan_attempts"), [(1, 3), (2, 1)])
def test_reflect_retries_an_unreadable_answer_up_to_its_own_bound(reflect_attempts: int, plan_attempts: int) -> None:
    """reflect used to borrow max_plan_attempts."""
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, reflect="not an assessment"))
    graph = build_graph(model, executor=lambda step, ctx: "x", verifier=lambda s, o, c: (False, "wrong"))
    settings = {"mode": "plan", "approval": "auto", "max_attempts": 1, "max_reflections": 1}
    settings |= {"max_reflect_attempts": reflect_attempts, "max_plan_attempts": plan_attempts}
    out = graph.invoke({"messages": [("user", "do four things")]}, context=settings)
    assert out["status"] == "failed" and "no readable assessment" in out["report"]["error"]
    assert model.calls("reflect") == reflect_attempts


def test_the_context_json_schema_is_rendered_once_and_kept_by_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    """The LangGraph server asks for the context's JSON schema on every run given a context; planmode's graph
    renders it once (LangGraph built a new TypeAdapter of the dataclass each time), the server's per-run copy
    keeps that, and each caller gets its own dict."""
    import langgraph.pregel.main as pregel_main
    from pydantic import TypeAdapter

    import planmode.graph.builder as builder_module

    adapters = 0

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal adapters
        adapters += 1
        return TypeAdapter(*args, **kwargs)

    monkeypatch.setattr(pregel_main, "TypeAdapter", counting)
    monkeypatch.setattr(builder_module, "_CONTEXT_JSONSCHEMA", {})
    graph = build_graph()
    copies = [graph.copy(update={"checkpointer": None}) for _ in range(3)]
    schemas = [g.get_context_jsonschema() for g in (graph, *copies, graph)]
    assert adapters == 1
    assert all(type(g) is type(graph) for g in copies)
    expected = TypeAdapter(PlanModeContext).json_schema()
    assert all(s == expected for s in schemas)
    schemas[0]["properties"].clear()  # a caller that changes its copy changes nobody else's
    assert graph.get_context_jsonschema() == expected


# -- the caller of a resumed run cannot loosen approval or the budget (issue 21, section 4) ------------------


def _waiting_at_approval(checkpointer: SqliteSaver, seen: Seen, **settings: Any) -> Any:
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    graph = build_graph(model, executor=seen.execute, verifier=seen.verify, checkpointer=checkpointer)
    graph.invoke({"messages": [("user", "do four things")]}, thread(), context={"mode": "plan", **settings})
    assert graph.get_state(thread()).next == ("approve",)
    return graph


def test_a_resume_context_with_approval_auto_does_not_approve_the_waiting_plan(checkpointer: SqliteSaver) -> None:
    """``invoke(None, context={"approval": "auto"})`` on a thread waiting at the approval approved it."""
    seen = Seen()
    graph = _waiting_at_approval(checkpointer, seen)
    events = [
        chunk
        for chunk in graph.stream(None, thread(), context={"approval": "auto"}, stream_mode="custom")
        if isinstance(chunk, dict)
    ]
    state = graph.get_state(thread())
    assert state.next == ("approve",) and state.values["status"] == "awaiting_approval"
    granted = [r for r in decisions(state.values["approvals"]) if r["decision"] == "approved"]
    assert granted == [] and seen.settings == []  # nothing approved, nothing ran
    assert state.values["settings"].approval == "ask"
    ignored = [e for e in events if e.get("type") == "settings_ignored"]
    assert ignored and "approval='auto'" in ignored[0]["message"]  # said, not silent
    # the same context as a PlanModeContext object: ignored too
    graph.invoke(None, thread(), context=PlanModeContext(approval="auto"))
    assert graph.get_state(thread()).next == ("approve",) and seen.settings == []
    # answering the interrupt still approves
    graph.invoke(Command(resume={"action": "approve", "revision": _revision(graph)}), thread())
    assert graph.get_state(thread()).values["status"] == "completed"


@pytest.mark.parametrize(
    ("stored", "given"),
    [
        ({"approval": "ask"}, {"approval": "auto"}),
        ({"step_approval": "writes"}, {"step_approval": "off"}),
        ({"check_staleness": True}, {"check_staleness": False}),
        ({"reapprove_patches": True}, {"reapprove_patches": False}),
        ({"max_tokens": 1000}, {"max_tokens": 1001}),
        ({"max_tokens": 1000}, {"max_tokens": 0}),
        ({"max_cost": 1.0}, {"max_cost": 2.5}),
        ({"max_cost": 1.0}, {"max_cost": 0}),
        ({"max_cost": 1.0, "prices": {"*": {"input": 5.0}}}, {"prices": {"*": {"input": 0.0}}}),
    ],
)
def test_a_resume_may_not_loosen_a_setting(stored: dict[str, Any], given: dict[str, Any]) -> None:
    kept = settings_dict(PlanModeContext(**stored))
    for context in (given, PlanModeContext(**given)):
        resolved = resolve_settings(context, kept)
        for name, value in stored.items():
            assert getattr(resolved, name) == value, (name, context)


@pytest.mark.parametrize(
    ("stored", "given"),
    [
        ({"approval": "auto"}, {"approval": "ask"}),
        ({"step_approval": "off"}, {"step_approval": "writes"}),
        ({"check_staleness": False}, {"check_staleness": True}),
        ({"max_tokens": 1000}, {"max_tokens": 999}),
        ({"max_tokens": 0}, {"max_tokens": 50}),
        ({"max_cost": 0.0}, {"max_cost": 0.5}),
        ({"max_cost": 2.0}, {"max_cost": 0.5}),
        ({}, {"prices": {"*": {"input": 1.0}}}),  # a run without prices may be given them (to set max_cost)
    ],
)
def test_a_resume_may_tighten_a_setting(stored: dict[str, Any], given: dict[str, Any]) -> None:
    resolved = resolve_settings(given, settings_dict(PlanModeContext(**stored)))
    for name, value in given.items():
        assert getattr(resolved, name) == value


def test_a_resume_context_cannot_lift_the_budget_pause(checkpointer: SqliteSaver) -> None:
    """A run paused at its budget stays paused when resumed with a larger budget (or none) in its context; the
    answer at the pause raises it."""
    from planmode.budget import INTERRUPT_TYPE

    seen = Seen()
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    graph = build_graph(model, executor=seen.execute, verifier=seen.verify, checkpointer=checkpointer)
    graph.invoke({"messages": [("user", "do four things")]}, thread(), context={"mode": "plan", "max_tokens": 100})

    def paused() -> bool:
        return any(i.value.get("type") == INTERRUPT_TYPE for i in graph.get_state(thread()).interrupts)

    assert paused()
    for loosened in ({"max_tokens": 10_000_000}, {"max_tokens": 0}):
        graph.invoke(None, thread(), context=loosened)
        assert paused() and model.calls("plan") == 0
    graph.invoke(Command(resume={"max_tokens": 10_000_000}), thread())
    assert graph.get_state(thread()).next == ("approve",) and model.calls("plan") == 1


def test_approval_policy_is_not_a_run_setting() -> None:
    """The approval policy is an argument of build_graph: a context cannot name one."""
    assert "approval_policy" not in {f.name for f in fields(PlanModeContext)}
    assert "approval_policy" not in vars(
        resolve_settings({"approval_policy": "auto"}, settings_dict(PlanModeContext()))
    )


# -- every number a human or a model sends is bounded (issue 21, section 7) -----------------------------------


@pytest.mark.parametrize(
    ("values", "error"),
    [
        ({"max_tokens": 10**30}, "max_tokens must be a whole number of tokens from 0"),
        ({"max_tokens": -1}, "max_tokens"),
        ({"max_tokens": 1.5}, "whole number"),
        ({"max_cost": float("nan")}, "max_cost"),
        ({"max_cost": float("inf")}, "max_cost"),
        ({"max_cost": 10**10}, "max_cost"),
        ({"max_parallel": 10**30}, "max_parallel"),
        ({"max_steps": True}, "max_steps"),
        ({"request_timeout": float("inf")}, "request_timeout"),
        ({"context_tokens": 10**13}, "context_tokens"),
        ({"approval": "always"}, "approval must be one of"),
        ({"check_staleness": "no"}, "check_staleness must be true or false"),
        ({"prices": {"*": {"input": float("nan")}}}, "prices"),
        ({"prices": {"*": {"input": 10**10}}}, "prices"),
        ({"prices": {"*": 3}}, "prices"),
    ],
)
def test_an_out_of_range_setting_is_a_clear_error(values: dict[str, Any], error: str) -> None:
    from planmode.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=error):
        PlanModeContext(**values)
    with pytest.raises(ConfigurationError, match=error):
        resolve_settings(values, None)
    with pytest.raises(ConfigurationError, match=error):  # a copy is checked too
        replace(PlanModeContext(), **values)


def test_a_huge_budget_in_the_context_is_refused_before_anything_is_saved(checkpointer: SqliteSaver) -> None:
    """``{"max_tokens": 10**30}`` was accepted, then no checkpoint could be saved (a 120 s hang)."""
    from planmode.errors import ConfigurationError

    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    graph = build_graph(model, executor=Seen().execute, checkpointer=checkpointer)
    with pytest.raises(ConfigurationError, match="max_tokens"):
        graph.invoke({"messages": [("user", "do four things")]}, thread(), context={"max_tokens": 10**30})
    assert model.requests == []


def test_the_settings_channel_checkpoints_each_settings_object_as_its_own_data() -> None:
    """The settings channel makes the checkpoint data of a settings object once (every super-step checkpoints
    the same settings), and never hands one object's data for another's."""
    from planmode.state.graph_state import SettingsChannel

    first = PlanModeContext(model="a", max_parallel=2)
    second = replace(first, max_parallel=3)
    channel = SettingsChannel(PlanModeContext)
    channel.update([first])
    data = channel.checkpoint()
    assert data == settings_dict(first) and channel.checkpoint() is data  # made once
    channel.update([second])
    assert channel.checkpoint() == settings_dict(second) and channel.checkpoint()["max_parallel"] == 3
    channel.update([first])
    assert channel.checkpoint() == settings_dict(first)
    channel.update([{"model": "hand-edited"}])  # not valid settings data of its own: checkpointed as it is
    assert channel.checkpoint() in ({"model": "hand-edited"}, settings_dict(PlanModeContext(model="hand-edited")))
