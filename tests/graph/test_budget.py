"""Token accounting and budgets: usage per node, step and model in state, the report and the events; the
``planmode.budget`` pause before the call that would overspend, raised or stopped, bad answers asked again,
a crash around the pause, and the thread readable throughout."""

from __future__ import annotations

import json
import math
import operator
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.graph import START, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

from planmode.budget import INTERRUPT_TYPE, Limits, cost_of, parse_budget_answer, price_of
from planmode.context import PlanModeContext
from planmode.errors import ConfigurationError
from planmode.graph import build_graph
from planmode.observability.usage import merge_usage, total_tokens
from planmode.persistence import sqlite_checkpointer
from planmode.testing.scripted import SCRIPTED_MODEL_NAME, PurposeScript, ScriptedChatModel

TASK = "Build the report: gather the data, then compute the totals, then write it up"
PLAN = {
    "title": "Report",
    "steps": [
        {"id": "gather", "description": "gather the data", "acceptance": "rows exist"},
        {"id": "totals", "description": "compute the totals", "dependencies": ["gather"], "acceptance": "sums"},
        {"id": "write", "description": "write it up", "dependencies": ["totals"], "acceptance": "a report"},
    ],
}


def cfg(name: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def settings(**kw: Any) -> PlanModeContext:
    return PlanModeContext(mode="plan", approval="auto", max_parallel=1, **kw)


def _model(**script: Any) -> ScriptedChatModel:
    return ScriptedChatModel(responder=PurposeScript(plan=PLAN, **script))


class Parent(TypedDict, total=False):
    messages: list[Any]
    usage: Annotated[int, operator.add]


def _pause(graph: Any, config: dict[str, Any]) -> dict[str, Any] | None:
    for item in graph.get_state(config).interrupts:
        if isinstance(item.value, dict) and item.value.get("type") == INTERRUPT_TYPE:
            return dict(item.value)
    return None


# -- accounting --------------------------------------------------------------------------------------------


def test_every_call_is_counted_per_node_step_and_model(checkpointer: Any) -> None:
    model = _model()
    graph = build_graph(model, checkpointer=checkpointer)
    events: list[dict[str, Any]] = []
    for chunk in graph.stream({"messages": [("user", TASK)]}, cfg(), context=settings(), stream_mode="custom"):
        events.append(chunk)
    values = graph.get_state(cfg()).values
    usage = values["usage"]
    assert values["status"] == "completed"
    # every model call the scripted model saw is counted once
    assert usage["total"]["calls"] == len(model.requests)
    assert set(usage["nodes"]) == {"plan", "execute_step", "verify", "finalize"}
    assert usage["nodes"]["execute_step"]["calls"] == 3 and usage["nodes"]["verify"]["calls"] == 3
    for step in ("gather", "totals", "write"):  # execution and verification both count for the step
        assert usage["steps"][step]["calls"] == 2
    assert list(usage["models"]) == [SCRIPTED_MODEL_NAME]  # labelled a test double with estimated usage
    parts = sum(c["input"] + c["output"] for c in usage["nodes"].values())
    assert total_tokens(usage) == parts > 0
    # the report and the events carry it
    assert values["report"]["usage"]["total"] == usage["total"]
    finished = [e for e in events if e["type"] == "run_finished"][-1]
    assert finished["data"]["usage"] == usage["total"]
    done = [e for e in events if e["type"] == "step_completed"]
    assert all(e["data"]["usage"]["calls"] == 1 for e in done)  # the verify call behind each completion


def test_cached_tokens_and_reported_usage_are_taken_from_the_message(checkpointer: Any) -> None:
    def execute(req: Any) -> AIMessage:
        return AIMessage(
            content="ok",
            usage_metadata={
                "input_tokens": 1000,
                "output_tokens": 50,
                "total_tokens": 1050,
                "input_token_details": {"cache_read": 800},
            },
            response_metadata={"model_name": "gpt-4o-mini-2024-07-18"},
        )

    graph = build_graph(_model(execute=execute), checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=settings())
    usage = graph.get_state(cfg()).values["usage"]
    assert usage["nodes"]["execute_step"] == {"calls": 3, "input": 3000, "output": 150, "cached": 2400, "estimated": 0}
    assert usage["models"]["gpt-4o-mini-2024-07-18"]["cached"] == 2400
    prices = {"gpt-4o-mini": {"input": 0.15, "output": 0.6, "cached": 0.075}}
    only = {"models": {"gpt-4o-mini-2024-07-18": usage["models"]["gpt-4o-mini-2024-07-18"]}}
    assert cost_of(only, prices) == pytest.approx((600 * 0.15 + 2400 * 0.075 + 150 * 0.6) / 1e6)


def test_a_call_without_reported_usage_is_estimated_and_says_so(checkpointer: Any) -> None:
    class Silent(ScriptedChatModel):
        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
            result = super()._generate(messages, stop, run_manager, **kw)
            msg = result.generations[0].message
            result.generations[0].message = msg.model_copy(update={"usage_metadata": None})
            return result

    graph = build_graph(Silent(responder=PurposeScript(plan=PLAN)), checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=settings())
    total = graph.get_state(cfg()).values["usage"]["total"]
    assert total["estimated"] == total["calls"] > 0 and total["input"] > 0


@pytest.mark.parametrize(
    "update",
    [None, "garbage", 5, ["a"], {"total": "x"}, {"total": {"input": -5, "output": float("nan")}}, {"nodes": 3},
     {"steps": {"a": "junk"}}, {"total": {"calls": True, "input": float("inf")}}],
)  # fmt: skip
def test_the_usage_reducer_never_raises_and_ignores_junk(update: Any) -> None:
    current = merge_usage(None, {"total": {"calls": 1, "input": 10, "output": 2}, "steps": {"a": {"calls": 1}}})
    merged = merge_usage(current, update)
    assert merged["total"] == current["total"]
    assert merge_usage(update, None)["total"]["calls"] == 0


def test_the_usage_reducer_reads_a_section_key_that_is_not_text_as_text() -> None:
    """A section whose keys are text is copied as it is (one key per step: no walk in Python); one with a key of
    another type (a hand-edited state) still has it read as text, so its counters add up with the update's."""
    merged = merge_usage({"steps": {1: {"calls": 1}, "a": {"calls": 4}}}, {"steps": {"1": {"calls": 2}}})
    assert merged["steps"]["1"]["calls"] == 3 and 1 not in merged["steps"]
    assert merged["steps"]["a"] == {"calls": 4}


def test_the_usage_reducer_adds_and_a_new_run_resets() -> None:
    a = merge_usage(None, {"total": {"calls": 1, "input": 10}, "nodes": {"plan": {"calls": 1, "input": 10}}})
    b = merge_usage(a, {"total": {"calls": 2, "output": 4}, "nodes": {"plan": {"calls": 2, "output": 4}}})
    assert b["total"] == {"calls": 3, "input": 10, "output": 4, "cached": 0, "estimated": 0}
    assert b["nodes"]["plan"]["calls"] == 3
    assert merge_usage(b, {"reset": True, "total": {"calls": 1}})["total"]["calls"] == 1


def test_a_second_run_on_the_thread_counts_from_zero(checkpointer: Any) -> None:
    graph = build_graph(_model(), checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=settings())
    first = graph.get_state(cfg()).values["usage"]["total"]["calls"]
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=settings())
    assert graph.get_state(cfg()).values["usage"]["total"]["calls"] == first


def test_usage_stays_inside_a_parent_graph_with_its_own_usage_key(checkpointer: Any) -> None:
    inner = build_graph(_model(), checkpointer=None)
    parent = StateGraph(Parent)
    parent.add_node("planmode", inner)
    parent.add_edge(START, "planmode")
    app = parent.compile(checkpointer=checkpointer)
    out = app.invoke({"messages": [("user", TASK)], "usage": 7}, cfg(), context=settings())
    assert out["usage"] == 7  # the subgraph's usage is declared out of its output schema: not added, not duplicated


# -- the budget --------------------------------------------------------------------------------------------


def test_the_approval_shows_the_estimate_beside_the_budget(checkpointer: Any) -> None:
    graph = build_graph(_model(), checkpointer=checkpointer)
    ctx = PlanModeContext(mode="plan", max_tokens=50_000)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=ctx)
    payload = graph.get_state(cfg()).interrupts[0].value
    section = payload["budget"]
    assert section["max_tokens"] == 50_000 and section["fits"] is True
    est = section["estimate"]
    assert est["spent"] > 0 and est["remaining"] > 0 and est["total"] == est["spent"] + est["remaining"]
    assert "Estimated tokens" in payload["markdown"] and "50000 tokens" in payload["markdown"]


def test_a_run_pauses_before_the_call_that_would_overspend_and_a_raise_continues(checkpointer: Any) -> None:
    executor_model = _model()
    graph = build_graph(executor_model, checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=settings(max_tokens=1_500))
    pause = _pause(graph, cfg())
    assert pause is not None, graph.get_state(cfg()).values.get("status")
    spent = graph.get_state(cfg()).values["usage"]
    assert pause["spent"]["tokens"] == total_tokens(spent) <= 1_500  # paused before overspending
    assert pause["spent"]["tokens"] + pause["next"]["tokens"] > 1_500
    calls_at_pause = len(executor_model.requests)
    graph.invoke(Command(resume={"max_tokens": 200_000}), cfg())
    values = graph.get_state(cfg()).values
    assert values["status"] == "completed" and len(executor_model.requests) > calls_at_pause
    assert values["budget"]["max_tokens"] == 200_000 and values["report"]["budget"]["max_tokens"] == 200_000


def test_a_budget_stop_raised_in_its_callback_is_not_logged_as_an_error(
    checkpointer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The budget's callback raises on purpose (a pause, or a skipped call: here the final summary that does not
    fit): LangChain's "Error in CallGuard... callback" warning, printed to a CLI user's terminal, is not logged for
    it; another callback's error still is."""
    import logging

    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.language_models import FakeListChatModel

    graph = build_graph(_model(), checkpointer=checkpointer)
    with caplog.at_level(logging.WARNING, logger="langchain_core.callbacks.manager"):
        graph.invoke({"messages": [("user", TASK)]}, cfg(), context=settings(max_tokens=3_600))
    values = graph.get_state(cfg()).values
    assert values["status"] == "completed" and total_tokens(values["usage"]) <= 3_600  # the summary was skipped
    assert not [r for r in caplog.records if "callback" in r.getMessage()], [r.getMessage() for r in caplog.records]

    class Broken(BaseCallbackHandler):
        def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
            raise RuntimeError("a broken handler")

    with caplog.at_level(logging.WARNING, logger="langchain_core.callbacks.manager"):
        FakeListChatModel(responses=["ok"]).invoke("hi", config={"callbacks": [Broken()]})
    assert any("Error in Broken.on_chat_model_start callback" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ({"max_tokens": -5}, "must be positive"),
        ({"max_tokens": "lots"}, "whole number"),
        ({"max_tokens": 1.5}, "whole number"),
        ({"max_tokens": 10**13}, "at most 1,000,000,000,000"),
        ({"max_cost": 1e300}, "at most 1,000,000,000 dollars"),
        ({"max_cost": float("inf")}, "number of dollars"),
        ({"max_cost": float("nan")}, "number of dollars"),
        ({"max_tokens": True}, "whole number"),
        ({"action": "raise"}, "name the new budget"),
        ({"tokens": 5}, "unknown keys"),
        ({"action": "approve"}, "unknown action"),
        (42, "expected"),
    ],
)
def test_a_bad_resume_value_is_asked_again_with_a_clear_error(checkpointer: Any, answer: Any, error: str) -> None:
    graph = build_graph(_model(), checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=settings(max_tokens=100))
    first = _pause(graph, cfg())
    assert first is not None and first["node"] == "plan" and first["answer_error"] is None
    graph.invoke(Command(resume=answer), cfg())
    again = _pause(graph, cfg())
    assert again is not None and error in again["answer_error"]
    state = graph.get_state(cfg())  # readable, nothing lost
    assert state.values["goal"] == TASK and state.values.get("plan") is None
    graph.invoke(Command(resume={"max_tokens": 500_000}), cfg())
    assert graph.get_state(cfg()).values["status"] == "completed"


def test_an_empty_resume_resumes_nothing_and_the_pause_stays(checkpointer: Any) -> None:
    # LangGraph reads a dict resume value as a map from interrupt ids: an empty one resumes no interrupt
    graph = build_graph(_model(), checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=settings(max_tokens=100))
    graph.invoke(Command(resume={}), cfg())
    assert _pause(graph, cfg()) is not None and graph.get_state(cfg()).values["status"] == "planning"


def test_a_raise_that_is_still_too_small_is_asked_again(checkpointer: Any) -> None:
    graph = build_graph(_model(), checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=settings(max_tokens=100))
    graph.invoke(Command(resume={"max_tokens": 101}), cfg())
    again = _pause(graph, cfg())
    assert again is not None and "does not cover" in again["answer_error"] and again["budget"]["max_tokens"] == 101


LONG = "The totals were computed and checked against the ledger. " * 25  # ~1400 characters, a real answer's size


def _long_model() -> ScriptedChatModel:
    return _model(execute=LONG)


def _second_dispatch_budget(checkpointer: Any) -> tuple[int, int]:
    """A budget that covers the plan and the first step's prior but not the second step (measured on a run
    without a budget); and that run's total."""
    from planmode.budget import CALL_OUTPUT, MARGIN, step_estimate

    graph = build_graph(_long_model(), checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg("measure"), context=settings())
    values = graph.get_state(cfg("measure")).values
    usage, plan = values["usage"], values["plan"]
    prior = math.ceil(step_estimate(plan.steps[0], plan, settings()) * MARGIN)
    first = total_tokens(usage, "steps", "gather")
    # each call reserves its answer (CALL_OUTPUT) at its own check: gather's calls fit with that reserve
    return total_tokens(usage, "nodes", "plan") + max(prior, first + CALL_OUTPUT + 100) + 1, total_tokens(usage)


def test_every_pause_comes_before_the_overspend_and_raises_go_on(checkpointer: Any) -> None:
    budget, full = _second_dispatch_budget(checkpointer)
    graph = build_graph(_long_model(), checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg("b"), context=settings(max_tokens=budget))
    pause = _pause(graph, cfg("b"))
    # every model call is checked (planmode.budget.CallGuard): the pause comes before dispatch or before a call
    # of the step it started, whichever does not fit first (here gather's verification: a call reserves its
    # answer, CALL_OUTPUT, and the scripted judge answers in a few tokens)
    assert pause is not None and pause["node"] in ("dispatch", "execute_step", "verify")
    values = graph.get_state(cfg("b")).values
    assert total_tokens(values["usage"]) <= budget  # spent within the budget at the pause
    pauses = 1
    while (pause := _pause(graph, cfg("b"))) is not None:  # small raises: every pause within its budget
        assert pause["spent"]["tokens"] <= pause["budget"]["max_tokens"]
        graph.invoke(Command(resume={"max_tokens": pause["spent"]["tokens"] + pause["next"]["tokens"]}), cfg("b"))
        pauses += 1
        assert pauses < 20
    values = graph.get_state(cfg("b")).values
    assert values["status"] == "completed" and total_tokens(values["usage"]) <= values["budget"]["max_tokens"] < full
    assert "the final summary was skipped" in values["messages"][-1].content  # it did not fit: a plain summary


def test_stop_ends_the_run_cancelled_with_a_report_and_keeps_done_steps(checkpointer: Any) -> None:
    budget, _ = _second_dispatch_budget(checkpointer)
    model = _long_model()
    graph = build_graph(model, checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=settings(max_tokens=budget))
    assert _pause(graph, cfg()) is not None
    graph.invoke(Command(resume={"action": "stop"}), cfg())
    values = graph.get_state(cfg()).values
    assert values["status"] == "cancelled" and values["budget"]["stopped"] is True
    assert values["report"]["status"] == "cancelled" and values["report"]["done"] == ["gather"]
    assert values["report"]["budget"]["stopped_at"] == "dispatch"
    assert "stopped at its budget" in values["messages"][-1].content
    assert [s.status.value for s in values["plan"].steps] == ["done", "pending", "pending"]
    assert model.calls("execute") == 1 and model.calls("final") == 0  # nothing ran after the stop


def test_a_crash_at_the_pause_resumes_in_a_new_process_with_the_raise(tmp_path: Path, checkpointer: Any) -> None:
    budget, _ = _second_dispatch_budget(checkpointer)
    db = tmp_path / "runs.sqlite"
    script = f"""
import os
from planmode.context import PlanModeContext
from planmode.graph import build_graph
from planmode.persistence import sqlite_checkpointer
from planmode.testing.scripted import PurposeScript, ScriptedChatModel
plan = {json.dumps(PLAN)}
saver = sqlite_checkpointer({str(db)!r})
model = ScriptedChatModel(responder=PurposeScript(plan=plan, execute={LONG!r}))
graph = build_graph(model, checkpointer=saver)
ctx = PlanModeContext(mode="plan", approval="auto", max_parallel=1, max_tokens={budget})
graph.invoke({{"messages": [("user", {TASK!r})]}}, {{"configurable": {{"thread_id": "c"}}}}, context=ctx)
os._exit(9)  # dies at the pause: no clean shutdown
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 9, proc.stderr
    saver = sqlite_checkpointer(db)
    try:
        model = _long_model()
        graph = build_graph(model, checkpointer=saver)
        pause = _pause(graph, cfg("c"))
        assert pause is not None and pause["steps"] == ["totals"]
        # a resume brings no context: the budget comes from state, and the raise is kept there
        graph.invoke(Command(resume={"max_tokens": 400_000}), cfg("c"))
        values = graph.get_state(cfg("c")).values
        assert values["status"] == "completed" and values["budget"]["max_tokens"] == 400_000
        assert model.calls("execute", "gather") == 0  # the step done before the crash was not executed again
        assert model.calls("execute", "totals") == 1
    finally:
        saver.conn.close()


def test_max_cost_pauses_with_prices_and_a_missing_price_is_a_clear_error(checkpointer: Any) -> None:
    prices = {"*": {"input": 100.0, "output": 400.0}}  # dear, so a cent goes fast
    graph = build_graph(_model(), checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=settings(max_cost=0.01, prices=prices))
    pause = _pause(graph, cfg())
    assert pause is not None and "max_cost" in pause["reason"] and pause["budget"]["max_cost"] == 0.01
    graph.invoke(Command(resume={"max_cost": 100.0}), cfg())
    values = graph.get_state(cfg()).values
    assert values["status"] == "completed" and values["report"]["cost"] > 0.01
    # a cost budget without a price pauses with the reason (it used to raise, and every resume raised again,
    # a stop included): a stop ends it, prices given on the resume let it go on
    bad = build_graph(_model(), checkpointer=checkpointer)
    bad.invoke({"messages": [("user", TASK)]}, cfg("x"), context=settings(max_cost=1.0, prices={"o1": {}}))
    pause = _pause(bad, cfg("x"))
    assert pause is not None and "needs a price for model" in pause["reason"]
    bad.invoke(Command(resume={"action": "stop"}), cfg("x"))
    assert bad.get_state(cfg("x")).values["status"] == "cancelled"


def test_parse_budget_answer_and_prices() -> None:
    assert parse_budget_answer({"max_tokens": 10}) == Limits(10, 0.0)
    assert parse_budget_answer({"max_cost": 2, "action": "raise"}) == Limits(0, 2.0)
    assert not isinstance(parse_budget_answer("stop"), Limits)
    assert not isinstance(parse_budget_answer({"action": "stop"}), Limits)
    assert price_of({"gpt-4o": {"input": 1}, "gpt-4o-mini": {"input": 2}}, "gpt-4o-mini-2024")["input"] == 2
    assert price_of({"x": {"input": -1}}, "x") is None and price_of({}, "x") is None
    assert math.isclose(price_of({"*": {"input": 1, "output": 3}}, "any")["cached"], 1)


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANMODE_MAX_TOKENS", "1234")
    monkeypatch.setenv("PLANMODE_MAX_COST", "0.5")
    monkeypatch.setenv("PLANMODE_PRICES", '{"m": {"input": 1, "output": 2}}')
    ctx = PlanModeContext()
    assert (ctx.max_tokens, ctx.max_cost, ctx.prices) == (1234, 0.5, {"m": {"input": 1, "output": 2}})
    monkeypatch.setenv("PLANMODE_MAX_COST", "-1")
    with pytest.raises(ValueError, match="non-negative"):
        PlanModeContext()
    monkeypatch.setenv("PLANMODE_MAX_COST", "0")
    monkeypatch.setenv("PLANMODE_PRICES", "[1]")
    with pytest.raises(ValueError, match="JSON object"):
        PlanModeContext()


# -- the command line --------------------------------------------------------------------------------------


@pytest.mark.integration
def test_cli_pauses_at_the_budget_exit_6_and_resume_raises_it(tmp_path: Path) -> None:
    from planmode.testing.openai_server import ScriptedOpenAIServer

    def respond(body: dict[str, Any]) -> Any:
        first = str(body["messages"][0]["content"])
        if first.startswith("planmode:plan"):
            return json.dumps(PLAN)
        if first.startswith("planmode:verify"):
            return json.dumps({"passed": True, "reason": ""})
        return LONG

    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("OPENAI_", "PLANMODE_"))}
    env.update(LANGSMITH_TRACING="false", COLUMNS="160", OPENAI_API_KEY="test", PLANMODE_MAX_TOKENS="2500")
    db = tmp_path / "runs.sqlite"
    cli = [sys.executable, "-m", "planmode.cli"]
    with ScriptedOpenAIServer(respond) as srv:
        common = ["--db", str(db)]
        args = [*cli, "run", TASK, "--workspace", str(tmp_path), "--thread", "b", "--auto-approve", "--mode", "plan"]
        proc = subprocess.run(
            [*args, *common, "--base-url", srv.base_url, "--max-parallel", "1"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 6, proc.stdout + proc.stderr
        assert "Budget reached" in proc.stdout and "--max-tokens" in proc.stdout
        bad = subprocess.run(
            [*cli, "resume", "b", *common, "--max-tokens", "-4"], env=env, capture_output=True, text=True, timeout=60
        )
        assert bad.returncode == 2 and "--max-tokens" in bad.stderr  # refused by the option, run untouched
        proc = subprocess.run(
            [*cli, "resume", "b", *common, "--max-tokens", "500000"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    show = subprocess.run([*cli, "show", "b", *common], env=env, capture_output=True, text=True, timeout=60)
    assert show.returncode == 0 and "tokens:" in show.stdout and "budget 500000 tokens" in show.stdout, show.stdout
    assert "by node: plan " in show.stdout and "by step: gather " in show.stdout


@pytest.mark.integration
def test_cli_stop_at_the_budget_ends_cancelled(tmp_path: Path) -> None:
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("OPENAI_", "PLANMODE_"))}
    env.update(LANGSMITH_TRACING="false", COLUMNS="160")
    db = tmp_path / "runs.sqlite"
    saver = sqlite_checkpointer(db)
    try:
        graph = build_graph(_model(), checkpointer=saver)
        ctx = PlanModeContext(mode="plan", approval="auto", max_tokens=100, workspace=str(tmp_path))
        graph.invoke({"messages": [("user", TASK)]}, cfg("s"), context=ctx)
        assert _pause(graph, cfg("s")) is not None
    finally:
        saver.conn.close()
    cli = [sys.executable, "-m", "planmode.cli"]
    proc = subprocess.run(
        [*cli, "resume", "s", "--db", str(db), "--stop"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr  # cancelled
    assert "stopped at its budget" in proc.stdout


def test_the_cli_approval_screen_shows_the_estimate_and_the_budget(checkpointer: Any) -> None:
    from rich.console import Console

    from planmode.cli.ui import approval_screen

    graph = build_graph(_model(), checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=PlanModeContext(mode="plan", max_tokens=50_000))
    console = Console(record=True, width=160)
    console.print(approval_screen(graph.get_state(cfg()).interrupts[0].value))
    text = console.export_text()
    assert "Estimated tokens: ~" in text and "budget: 50000 tokens" in text


def test_the_direct_path_pauses_before_respond_and_stop_answers_with_the_reason(checkpointer: Any) -> None:
    model = _model()
    graph = build_graph(model, checkpointer=checkpointer)
    ctx = PlanModeContext(mode="direct", approval="auto", max_tokens=10)
    graph.invoke({"messages": [("user", "What is a margin?")]}, cfg(), context=ctx)
    pause = _pause(graph, cfg())
    assert pause is not None and pause["node"] == "respond" and model.calls("respond") == 0
    graph.invoke(Command(resume="stop"), cfg())
    values = graph.get_state(cfg()).values
    assert values["status"] == "cancelled" and "Stopped at the budget" in values["messages"][-1].content
    assert model.calls("respond") == 0


def test_the_detect_classifier_is_counted(checkpointer: Any) -> None:
    model = ScriptedChatModel(responder=PurposeScript(detect={"needs_plan": False, "reason": "simple"}))
    graph = build_graph(model, checkpointer=checkpointer)
    graph.invoke({"messages": [("user", "Le budget du projet")]}, cfg(), context=PlanModeContext(approval="auto"))
    usage = graph.get_state(cfg()).values["usage"]
    assert model.calls("detect") == 1 and usage["nodes"]["detect"]["calls"] == 1
    assert usage["nodes"]["respond"]["calls"] == 1 and usage["total"]["calls"] == 2


def test_the_pipeline_keeps_async_nodes_async() -> None:
    import asyncio
    import inspect

    from planmode._compat import RunnableCallable
    from planmode.graph.pipeline import pipeline

    async def node(state: Any, runtime: Any) -> dict[str, Any]:
        return {"status": "running"}

    wrapped = pipeline("reflect", node)  # as the graph builder wraps reflect: accounted among its parts
    assert isinstance(wrapped, RunnableCallable) and wrapped.func is None and wrapped.afunc is not None
    assert inspect.iscoroutinefunction(wrapped.afunc)
    assert asyncio.run(wrapped.afunc({"settings": {}}, None)) == {"status": "running"}  # no budget, no calls: as is


@pytest.mark.integration
def test_cached_tokens_reported_over_http_reach_the_accounting(checkpointer: Any) -> None:
    from langchain_openai import ChatOpenAI

    from planmode.testing.openai_server import ScriptedOpenAIServer

    def respond(body: dict[str, Any]) -> Any:
        first = str(body["messages"][0]["content"])
        if first.startswith("planmode:plan"):
            return json.dumps(PLAN)
        if first.startswith("planmode:verify"):
            return json.dumps({"passed": True, "reason": ""})
        return "done"

    with ScriptedOpenAIServer(respond, prompt_cache=True) as srv:
        model = ChatOpenAI(base_url=srv.base_url, api_key="test", model="gpt-4o-mini", max_retries=0)
        graph = build_graph(model, checkpointer=checkpointer)
        graph.invoke({"messages": [("user", TASK)]}, cfg(), context=settings())
    usage = graph.get_state(cfg()).values["usage"]
    assert usage["total"]["calls"] == len(srv.requests) and usage["total"]["estimated"] == 0
    # the 2nd and 3rd execute (and verify) calls start with a system prompt the server saw before
    assert usage["nodes"]["execute_step"]["cached"] > 0 and usage["nodes"]["verify"]["cached"] > 0
    assert usage["nodes"]["plan"]["cached"] == 0
    assert usage["steps"]["gather"]["cached"] == 0 < usage["steps"]["write"]["cached"]
    assert list(usage["models"]) == ["gpt-4o-mini"]


def test_hand_edited_junk_in_budget_and_usage_keeps_the_thread_readable(checkpointer: Any) -> None:
    graph = build_graph(_model(), checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=settings(max_tokens=100))
    assert _pause(graph, cfg()) is not None
    graph.update_state(cfg(), {"budget": "garbage", "usage": ["junk"]})
    state = graph.get_state(cfg())  # readable: the reducer ignored the junk, the budget key holds it as data
    assert state.values["budget"] == "garbage" and state.values["usage"]["total"]["calls"] == 0
    # (the edit lands "as" detect, whose Command route an update_state drops: a new run on the thread goes on)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=settings(max_tokens=500_000))
    values = graph.get_state(cfg()).values
    assert values["status"] == "completed" and values["budget"] is None and values["usage"]["total"]["calls"] > 0


def test_a_budget_setting_of_the_wrong_type_is_a_clear_error(checkpointer: Any) -> None:
    graph = build_graph(_model(), checkpointer=checkpointer)
    with pytest.raises(ConfigurationError, match="max_tokens must be a whole number"):
        graph.invoke({"messages": [("user", TASK)]}, cfg(), context={"mode": "plan", "max_tokens": "lots"})


# -- a raise that cannot be checked, a number past its bound, a command line that does not loop -----------------


def test_a_raise_of_max_cost_without_prices_is_asked_again_and_stop_still_works(checkpointer: Any) -> None:
    """``{"max_cost": X}`` on a run without prices wedged the thread: every later resume raised, a stop too."""
    graph = build_graph(_model(), checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=settings(max_tokens=100))
    graph.invoke(Command(resume={"max_cost": 5.0}), cfg())
    again = _pause(graph, cfg())
    assert again is not None and "needs a price for model" in again["answer_error"]
    graph.invoke(Command(resume={"action": "stop"}), cfg())
    assert graph.get_state(cfg()).values["status"] == "cancelled"


def test_prices_given_on_the_resume_price_a_raised_cost_budget_for_the_rest_of_the_run(checkpointer: Any) -> None:
    prices = {"*": {"input": 1.0, "output": 2.0}}
    graph = build_graph(_model(), checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=settings(max_tokens=100))
    graph.invoke(Command(resume={"max_cost": 5.0, "max_tokens": 500_000}), cfg(), context={"prices": prices})
    values = graph.get_state(cfg()).values
    assert values["status"] == "completed" and values["budget"]["prices"] == prices
    assert values["budget"]["max_cost"] == 5.0 and values["report"]["cost"] > 0


def test_a_budget_answer_past_its_bound_is_asked_again_and_the_thread_stays_savable(checkpointer: Any) -> None:
    """``{"max_tokens": 10**30}`` at the pause was accepted, then no checkpoint could be saved."""
    graph = build_graph(_model(), checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=settings(max_tokens=100))
    graph.invoke(Command(resume={"max_tokens": 10**18}), cfg())  # fits a checkpoint, past the bound
    again = _pause(graph, cfg())
    assert again is not None and "at most" in again["answer_error"]
    # past 64 bits the answer itself cannot be saved (LangGraph writes it before planmode sees it): an error at
    # once, and the thread is still paused and resumable
    with pytest.raises(TypeError, match="64-bit"):
        graph.invoke(Command(resume={"max_tokens": 10**30}), cfg())
    assert _pause(graph, cfg()) is not None
    graph.invoke(Command(resume={"max_tokens": 500_000}), cfg())
    assert graph.get_state(cfg()).values["status"] == "completed"


def _paused_thread(db: Path, workspace: Path, thread: str) -> None:
    saver = sqlite_checkpointer(db)
    try:
        graph = build_graph(_model(), checkpointer=saver)
        ctx = PlanModeContext(mode="plan", approval="auto", max_tokens=100, workspace=str(workspace))
        graph.invoke({"messages": [("user", TASK)]}, cfg(thread), context=ctx)
        assert _pause(graph, cfg(thread)) is not None
    finally:
        saver.conn.close()


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("OPENAI_", "PLANMODE_"))}
    env.update(LANGSMITH_TRACING="false", COLUMNS="160")
    try:
        return subprocess.run(
            [sys.executable, "-m", "planmode.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else str(exc.stdout or "")
        pytest.fail(f"planmode {' '.join(args)} did not end in {timeout} s ({out.count(chr(10))} lines printed)")


@pytest.mark.integration
def test_cli_resume_with_a_raise_still_too_small_ends_with_exit_6_and_does_not_loop(tmp_path: Path) -> None:
    """``planmode resume T --max-tokens N`` with N still too small answered the same pause forever (98,000 lines
    in 60 s), and a later resume replayed them."""
    db = tmp_path / "runs.sqlite"
    _paused_thread(db, tmp_path, "s")
    proc = _cli("resume", "s", "--db", str(db), "--max-tokens", "101", timeout=60)
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert "does not cover" in proc.stdout and len(proc.stdout.splitlines()) < 40, proc.stdout[-3000:]
    huge = _cli("resume", "s", "--db", str(db), "--max-tokens", str(10**30))  # refused: its error, exit 6
    assert huge.returncode == 6 and "at most" in huge.stdout, huge.stdout + huge.stderr
    stop = _cli("resume", "s", "--db", str(db), "--stop")
    assert stop.returncode == 4 and len(stop.stdout.splitlines()) < 60, stop.stdout[-3000:]


@pytest.mark.integration
def test_cli_resume_with_max_cost_on_a_run_without_prices_does_not_wedge_it(tmp_path: Path) -> None:
    """``resume --max-cost X`` on a run without prices made every later resume fail, ``--stop`` included."""
    db = tmp_path / "runs.sqlite"
    _paused_thread(db, tmp_path, "c")
    proc = _cli("resume", "c", "--db", str(db), "--max-cost", "2")
    assert proc.returncode == 6 and "--prices" in proc.stdout, proc.stdout + proc.stderr
    priced = _cli("resume", "c", "--db", str(db), "--max-cost", "2", "--prices", '{"*": {"input": 1, "output": 2}}')
    assert priced.returncode == 6 and "does not cover" in priced.stdout, priced.stdout + priced.stderr  # tokens
    stop = _cli("resume", "c", "--db", str(db), "--stop")
    assert stop.returncode == 4 and "stopped at its budget" in stop.stdout, stop.stdout + stop.stderr


def test_the_cost_budget_holds_at_every_model_call_the_final_summary_included(checkpointer: Any) -> None:
    """The final summary call ignored max_cost; the budget is checked before every model call now."""
    prices = {"*": {"input": 1.0, "output": 1.0}}  # a dollar per million tokens: cost is tokens / 1e6
    graph = build_graph(_long_model(), checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=settings(max_cost=0.0005, prices=prices))
    pauses = 0
    while (pause := _pause(graph, cfg())) is not None:  # raise to exactly what the next call needs
        assert pause["spent"]["cost"] <= pause["budget"]["max_cost"] + 1e-9
        need = pause["spent"]["cost"] + (pause["next"]["tokens"] + 1) / 1e6
        graph.invoke(Command(resume={"max_cost": need}), cfg())
        pauses += 1
        assert pauses < 30
    values = graph.get_state(cfg()).values
    assert values["status"] == "completed" and pauses > 0
    assert values["report"]["cost"] <= values["budget"]["max_cost"] + 1e-9  # never over, finalize included
    assert "the final summary was skipped" in values["messages"][-1].content


def test_a_call_inside_a_node_pauses_before_it_would_overspend(checkpointer: Any) -> None:
    """The check is made where the model is called: a node's later call (here a step's verification after its
    long execution) pauses the run when it does not fit, though the node's estimate did."""
    graph = build_graph(_long_model(), checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg("m"), context=settings())
    measured = graph.get_state(cfg("m")).values["usage"]
    budget = total_tokens(measured, "nodes", "plan") + total_tokens(measured, "steps", "gather") - 1
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=settings(max_tokens=budget))
    pause = _pause(graph, cfg())
    assert pause is not None and pause["node"] in ("execute_step", "verify")
    assert total_tokens(graph.get_state(cfg()).values["usage"]) <= budget
    graph.invoke(Command(resume={"action": "stop"}), cfg())
    values = graph.get_state(cfg()).values
    assert values["status"] == "cancelled" and total_tokens(values["usage"]) <= budget
