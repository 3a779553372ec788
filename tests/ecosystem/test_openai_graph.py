"""The graph end to end through the real ``ChatOpenAI`` client over HTTP, against the scripted
OpenAI-compatible server: JSON-schema and tool-calling structured output, retries of 429/500, timeouts and
malformed bodies (clear errors, readable threads), and message normalisation for strict chat templates."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.types import Command

from planmode.graph import build_graph
from planmode.persistence import sqlite_checkpointer
from planmode.testing.openai_server import Fault, ScriptedOpenAIServer

pytestmark = pytest.mark.integration

PLAN = {
    "title": "Two steps",
    "steps": [
        {"id": "collect", "description": "collect the numbers", "acceptance": "numbers collected"},
        {"id": "report", "description": "report the sum", "dependencies": ["collect"]},
    ],
}
ANSWERS: dict[str, Any] = {
    "plan": PLAN,
    "verify": {"passed": True, "reason": ""},
    "execute": "done",
    "final": "The sum was reported.",
    "explore": "nothing to explore",
}


def purpose(body: dict[str, Any]) -> str:
    first = str(body["messages"][0].get("content") or "")
    return first.split("\n", 1)[0].removeprefix("planmode:") if first.startswith("planmode:") else "unknown"


def reply(body: dict[str, Any], value: Any) -> Any:
    """A structured value as the request asks for it: a tool call when tools are forced, else JSON text."""
    if isinstance(value, str):
        return value
    if body.get("tool_choice") and body.get("tools"):
        return {"tool_calls": [{"name": body["tools"][0]["function"]["name"], "arguments": value}]}
    return json.dumps(value)


class Script:
    """Answers by purpose; ``faults`` are served first for the purposes they name."""

    def __init__(self, faults: dict[str, list[Fault]] | None = None) -> None:
        self.faults = {k: list(v) for k, v in (faults or {}).items()}
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> Any:
        self.bodies.append(body)
        p = purpose(body)
        if self.faults.get(p):
            return self.faults[p].pop(0)
        return reply(body, ANSWERS[p])

    def of(self, p: str) -> list[dict[str, Any]]:
        return [b for b in self.bodies if purpose(b) == p]


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    yield


def run(tmp_path: Path, script: Script, **settings: Any) -> tuple[Any, dict[str, Any]]:
    with ScriptedOpenAIServer(script) as srv:
        graph = build_graph(checkpointer=sqlite_checkpointer(tmp_path / "runs.sqlite"))
        cfg: Any = {"configurable": {"thread_id": "t"}}
        context = {"base_url": srv.base_url, "model": "scripted", "mode": "plan", "approval": "auto", **settings}
        graph.invoke({"messages": [("user", "collect the numbers, then report the sum")]}, cfg, context=context)
        return graph, graph.get_state(cfg).values


def test_json_schema_structured_output_end_to_end(tmp_path: Path) -> None:
    script = Script()
    _, values = run(tmp_path, script)
    assert values["status"] == "completed", values.get("error")
    plan_body = script.of("plan")[0]
    assert plan_body["response_format"]["type"] == "json_schema"
    assert "tools" not in plan_body
    assert values["messages"][-1].content == "The sum was reported."


def test_tool_calling_structured_output_end_to_end(tmp_path: Path) -> None:
    script = Script()
    _, values = run(tmp_path, script, structured_output="tool_calling")
    assert values["status"] == "completed", values.get("error")
    plan_body = script.of("plan")[0]
    assert "response_format" not in plan_body
    assert plan_body["tools"][0]["function"]["name"] == "PlanDraft"
    assert plan_body["tool_choice"] not in (None, "none", "auto")
    verify_body = script.of("verify")[0]
    assert verify_body["tools"][0]["function"]["name"] == "Verdict"


def test_429_and_500_are_retried_within_bounds(tmp_path: Path) -> None:
    script = Script({"plan": [Fault(status=429), Fault(status=500)]})
    _, values = run(tmp_path, script, max_retries=2)
    assert values["status"] == "completed", values.get("error")
    assert len(script.of("plan")) == 3  # two refusals, then the answer


def test_errors_past_the_retry_bound_end_the_run_cleanly(tmp_path: Path) -> None:
    """A 400 that names neither a mode nor the context: auto tries each structured-output mode once (a 400 to a
    constrained request may be its schema refused), and the 400 in prompted, which carries nothing to refuse, is a
    plain failed call: bounded, then a failed run."""
    script = Script({"plan": [Fault(status=400)] * 20})
    graph, values = run(tmp_path, script, max_retries=1, max_plan_attempts=2)
    assert values["status"] == "failed"
    assert "model call failed" in values["error"]
    assert len(script.of("plan")) == 2 * 4  # 2 planner attempts of one request per mode; a 400 is not retried
    assert graph.get_state({"configurable": {"thread_id": "t"}}).values["status"] == "failed"


def test_5xx_past_the_retry_bound_pauses_the_run_instead_of_failing_it(tmp_path: Path) -> None:
    """A server that keeps answering 500 is unavailable, not a verdict: the run pauses resumably."""
    script = Script({"plan": [Fault(status=500)] * 20})
    graph, values = run(tmp_path, script, max_retries=1, max_plan_attempts=2)
    assert values["status"] == "model_unavailable"
    assert "unavailable" in values["error"] and "500" in values["error"]
    assert len(script.of("plan")) == 2  # one planner call (1 try + 1 retry), then the pause: bounded
    state = graph.get_state({"configurable": {"thread_id": "t"}})
    assert state.next == ("model_unavailable",)
    assert state.interrupts[0].value["type"] == "planmode.model_unavailable"


def test_a_timeout_is_a_clear_error_and_the_thread_stays_readable(tmp_path: Path) -> None:
    script = Script({"plan": [Fault(delay=3.0, then=json.dumps(PLAN))] * 4})
    graph, values = run(tmp_path, script, request_timeout=0.3, max_retries=0, max_plan_attempts=2)
    assert values["status"] == "failed"
    assert "timed out" in values["error"].lower()
    history = list(graph.get_state_history({"configurable": {"thread_id": "t"}}))
    assert len(history) >= 3


def test_a_malformed_body_is_a_clear_error_and_the_thread_stays_readable(tmp_path: Path) -> None:
    script = Script({"plan": [Fault(malformed=True)] * 4})
    graph, values = run(tmp_path, script, max_retries=0, max_plan_attempts=2)
    assert values["status"] == "failed"
    assert "model call failed" in values["error"]
    assert graph.get_state({"configurable": {"thread_id": "t"}}).values["plan"] is None


def _strict(body: dict[str, Any]) -> bool:
    roles = [m["role"] for m in body["messages"]]
    systems = [i for i, r in enumerate(roles) if r == "system"]
    doubled = any(a == b and a in ("user", "assistant") for a, b in itertools.pairwise(roles))
    return systems in ([], [0]) and not doubled


@pytest.mark.parametrize("normalize", [False, True])
def test_normalize_messages_for_strict_chat_templates(tmp_path: Path, normalize: bool) -> None:
    """A rejection sends the planner the task and the feedback as two user messages in a row; with the
    option on, every request has one system message first and no two same-role messages in a row."""
    script = Script()
    with ScriptedOpenAIServer(script) as srv:
        graph = build_graph(checkpointer=sqlite_checkpointer(tmp_path / "runs.sqlite"))
        cfg: Any = {"configurable": {"thread_id": "t"}}
        context = {"base_url": srv.base_url, "model": "scripted", "mode": "plan", "normalize_messages": normalize}
        graph.invoke({"messages": [("user", "collect the numbers, then report the sum")]}, cfg, context=context)
        graph.invoke(Command(resume={"action": "reject", "feedback": "add a check"}), cfg, context=context)
    revised = script.of("plan")[1]
    assert _strict(revised) is normalize
    if normalize:
        assert all(_strict(b) for b in script.bodies)
        assert "add a check" in json.dumps(revised["messages"])


def test_without_a_key_or_base_url_the_error_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from planmode.errors import ConfigurationError

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    graph = build_graph(checkpointer=sqlite_checkpointer(tmp_path / "runs.sqlite"))
    cfg: Any = {"configurable": {"thread_id": "t"}}
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        graph.invoke({"messages": [("user", "hello there")]}, cfg)
    assert graph.get_state(cfg).values["messages"]  # the input was checkpointed; the thread is readable
    assert os.environ.get("OPENAI_API_KEY") is None
