"""Local OpenAI-compatible servers: structured-output negotiation, the output cap and the context budget, over
real HTTP with the real ``ChatOpenAI`` client against the scripted server (which refuses modes and enforces a
context size as llama.cpp's server does)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from planmode.graph import build_graph
from planmode.llm import discover_context_tokens, failure_kind, grammar_safe_pattern, grammar_safe_schema
from planmode.llm.trim import approx_tokens, fit_messages
from planmode.persistence import sqlite_checkpointer
from planmode.state.draft import PlanDraft
from planmode.testing.openai_server import ScriptedOpenAIServer, prompt_tokens
from planmode.tools import read_only

pytestmark = pytest.mark.integration

PLAN = {
    "title": "Two steps",
    "steps": [
        {"id": "collect", "description": "collect the numbers", "acceptance": "numbers collected"},
        {"id": "report", "description": "report the sum", "dependencies": ["collect"], "acceptance": "a sum"},
    ],
}
CFG: Any = {"configurable": {"thread_id": "t"}}


def purpose(body: dict[str, Any]) -> str:
    first = str(body["messages"][0].get("content") or "")
    return first.split("\n", 1)[0].removeprefix("planmode:") if first.startswith("planmode:") else "unknown"


def mode_of(body: dict[str, Any]) -> str:
    kind = (body.get("response_format") or {}).get("type")
    if kind:
        return str(kind)
    return "tool_calling" if body.get("tool_choice") and body.get("tools") else "text"


class Script:
    """Answers by purpose; ``execute_tool_calls`` makes each step's executor call ``big`` that many times."""

    def __init__(self, execute_tool_calls: int = 0) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.execute_tool_calls = execute_tool_calls

    def __call__(self, body: dict[str, Any]) -> Any:
        self.bodies.append(body)
        p = purpose(body)
        if p == "execute" and self.execute_tool_calls:
            done = sum(1 for m in body["messages"] if m["role"] == "tool")
            if done < self.execute_tool_calls:
                return {"tool_calls": [{"name": "big", "arguments": {"n": done}}]}
        value: Any = {"plan": PLAN, "verify": {"passed": True, "reason": ""}}.get(p)
        if value is None:
            return f"{p} done"
        if mode_of(body) == "tool_calling":
            return {"tool_calls": [{"name": body["tools"][0]["function"]["name"], "arguments": value}]}
        return json.dumps(value)

    def of(self, p: str) -> list[dict[str, Any]]:
        return [b for b in self.bodies if purpose(b) == p]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    yield


def run(
    tmp_path: Path,
    script: Script,
    *,
    refuse: tuple[str, ...] = (),
    n_ctx: int | None = None,
    tools: tuple[Any, ...] = (),
    **settings: Any,
) -> tuple[ScriptedOpenAIServer, dict[str, Any]]:
    """Run the graph against a scripted server that refuses ``refuse`` and has a context of ``n_ctx``."""
    srv = ScriptedOpenAIServer(script, refuse=refuse, context_tokens=n_ctx)
    with srv:
        graph = build_graph(tools=tools, checkpointer=sqlite_checkpointer(tmp_path / "runs.sqlite"))
        context = {
            "base_url": srv.base_url,
            "model": "scripted",
            "mode": "plan",
            "approval": "auto",
            "max_retries": 0,
            **settings,
        }
        graph.invoke({"messages": [("user", "collect the numbers, then report the sum")]}, CFG, context=context)
        return srv, graph.get_state(CFG).values


# -- structured-output modes ---------------------------------------------------------------------------------


def test_auto_falls_back_to_json_object_with_the_schema_when_json_schema_is_refused(tmp_path: Path) -> None:
    """llama-cpp-python's server answers json_schema with HTTP 500: auto moves on to json_object, with the
    schema attached (the server constrains decoding to it), and keeps that choice for every later call."""
    script = Script()
    srv, values = run(tmp_path, script, refuse=("json_schema",))
    assert values["status"] == "completed", values.get("error")
    structured = [b for b in srv.requests if mode_of(b) != "text"]
    assert mode_of(structured[0]) == "json_schema"  # refused once ...
    assert [mode_of(b) for b in structured[1:]] == ["json_object"] * (len(structured) - 1)  # ... then kept
    plan_body = script.of("plan")[0]
    schema = plan_body["response_format"]["schema"]
    assert set(schema["properties"]) == {"title", "steps"}
    assert "{0,63}" not in json.dumps(schema)  # llama.cpp's grammar parser died on PlanDraft's id pattern
    assert "matches this JSON schema" in plan_body["messages"][0]["content"]  # the prompt states it too
    assert len(script.of("verify")) == 2


def test_auto_falls_back_to_tool_calling_when_both_response_formats_are_refused(tmp_path: Path) -> None:
    script = Script()
    srv, values = run(tmp_path, script, refuse=("json_schema", "json_object"))
    assert values["status"] == "completed", values.get("error")
    modes = [mode_of(b) for b in srv.requests if mode_of(b) != "text"]
    assert modes[:3] == ["json_schema", "json_object", "tool_calling"]
    assert set(modes[3:]) == {"tool_calling"}
    tool = script.of("plan")[-1]["tools"][0]["function"]
    assert tool["name"] == "PlanDraft"
    assert "{0,63}" not in json.dumps(tool["parameters"])  # llama-cpp-python builds a grammar from it too


def test_when_every_constrained_mode_is_refused_auto_ends_in_prompted(tmp_path: Path) -> None:
    script = Script()
    srv, values = run(tmp_path, script, refuse=("json_schema", "json_object", "tools"), max_plan_attempts=1)
    assert values["status"] == "completed", values.get("error")
    modes = [mode_of(b) for b in srv.requests]
    assert modes[:4] == ["json_schema", "json_object", "tool_calling", "text"]  # one request per refused mode
    assert set(modes[4:]) == {"text"}  # prompted kept for every later call
    assert values["negotiated_output"].startswith("prompted ")


def test_a_forced_mode_that_the_server_refuses_names_the_setting(tmp_path: Path) -> None:
    srv, values = run(tmp_path, Script(), refuse=("json_schema",), structured_output="json_schema", max_plan_attempts=1)
    assert values["status"] == "failed"
    assert "structured_output='json_schema'" in values["error"] and "'auto'" in values["error"]
    assert "Input should be 'text' or 'json_object'" in values["error"]  # the cause, not just its first line
    assert {mode_of(b) for b in srv.requests} == {"json_schema"}  # forced: nothing else is tried


@pytest.mark.parametrize("mode", ["json_object", "tool_calling", "json_schema"])
def test_each_forced_mode_completes_a_run(tmp_path: Path, mode: str) -> None:
    script = Script()
    srv, values = run(tmp_path, script, structured_output=mode)
    assert values["status"] == "completed", values.get("error")
    expected = "json_object" if mode == "json_object" else mode
    assert {mode_of(b) for b in srv.requests if purpose(b) in ("plan", "verify")} == {expected}


# -- the output cap ------------------------------------------------------------------------------------------


def test_every_call_carries_the_output_cap_as_max_tokens(tmp_path: Path) -> None:
    srv, values = run(tmp_path, Script(), max_output_tokens=321)
    assert values["status"] == "completed", values.get("error")
    assert srv.requests
    for body in srv.requests:  # llama-cpp-python 0.3.16 reads max_tokens only; OpenAI max_completion_tokens
        assert body["max_tokens"] == 321 and body["max_completion_tokens"] == 321


# -- the context budget --------------------------------------------------------------------------------------


@tool("big")
def _big(n: int) -> str:
    """Return a large block of text."""
    return f"block {n}: " + ("lorem ipsum dolor sit amet " * 400)


big = read_only(_big)  # read-only: every step is bound to it (a step runs with the read-only tools it needs)


def test_execution_transcripts_are_trimmed_to_the_context_the_server_reports(tmp_path: Path) -> None:
    """Four 11,000-character tool results do not fit a 6,000-token context: the server reports that size on
    /props, old results are trimmed, and no request overflows."""
    script = Script(execute_tool_calls=4)
    srv, values = run(tmp_path, script, n_ctx=6000, tools=(big,), max_output_tokens=512)
    assert values["status"] == "completed", values.get("error")
    executes = script.of("execute")
    assert len(executes) == 10  # two steps x (4 tool calls + the answer)
    for body in srv.requests:
        assert prompt_tokens(body) + body["max_tokens"] <= 6000
    last = executes[4]["messages"]
    tool_results = [m["content"] for m in last if m["role"] == "tool"]
    assert len(tool_results) == 4
    assert "left out to fit the context budget" in tool_results[0]
    assert tool_results[0].startswith("block 0:")  # the head survives
    assert [m.get("tool_call_id") for m in last if m["role"] == "tool"] == [
        c["tool_calls"][0]["id"] for c in last if c["role"] == "assistant" and c.get("tool_calls")
    ]


def test_a_server_that_does_not_report_its_context_teaches_it_by_the_first_overflow(tmp_path: Path) -> None:
    """llama-cpp-python reports no n_ctx: the budget starts at 8192, the first overflow names 3000, the attempt
    fails with a context-overflow error, and the retry is trimmed to fit."""
    script = Script(execute_tool_calls=3)
    srv = ScriptedOpenAIServer(script, context_tokens=3000, report_context=False)
    with srv:
        graph = build_graph(tools=(big,), checkpointer=sqlite_checkpointer(tmp_path / "runs.sqlite"))
        context = {
            "base_url": srv.base_url,
            "model": "scripted",
            "mode": "plan",
            "approval": "auto",
            "max_retries": 0,
            "max_output_tokens": 512,
            "max_attempts": 2,
        }
        graph.invoke({"messages": [("user", "collect the numbers, then report the sum")]}, CFG, context=context)
    values = graph.get_state(CFG).values
    assert values["status"] == "completed", values.get("error")
    collect = values["plan"].get("collect")
    assert collect.attempts == 2  # the first attempt overflowed ...
    over = [b for b in srv.requests if prompt_tokens(b) + b["max_tokens"] > 3000]
    assert len(over) == 1  # ... once: every later request fits the size the error named


def test_the_context_tokens_setting_beats_what_the_server_reports(tmp_path: Path) -> None:
    script = Script(execute_tool_calls=2)
    _, values = run(tmp_path, script, n_ctx=100_000, tools=(big,), max_output_tokens=256, context_tokens=3000)
    assert values["status"] == "completed", values.get("error")
    third = script.of("execute")[2]["messages"]
    assert "left out to fit the context budget" in json.dumps(third)


def test_a_context_overflow_is_reported_as_one_naming_the_settings(tmp_path: Path) -> None:
    """An output cap larger than the server's whole context cannot fit: the error says so and names the
    settings that fix it (and the run fails cleanly, readable)."""
    _, values = run(tmp_path, Script(), n_ctx=1000, max_output_tokens=2048, max_plan_attempts=1)
    assert values["status"] == "failed"
    error = values["error"]
    assert "context overflow" in error and "maximum context length is 1000" in error
    assert "context_tokens" in error and "max_output_tokens" in error


def test_context_discovery_reads_llama_cpp_props() -> None:
    with ScriptedOpenAIServer(lambda body: "x", context_tokens=4096) as srv:
        assert discover_context_tokens(srv.base_url) == 4096
    with ScriptedOpenAIServer(lambda body: "x") as srv:
        assert discover_context_tokens(srv.base_url) is None  # llama-cpp-python reports none: the default
    assert discover_context_tokens("http://127.0.0.1:9/v1", timeout=0.5) is None  # nobody there: no error


# -- units -----------------------------------------------------------------------------------------------------


def transcript(results: int, size: int) -> list[Any]:
    msgs: list[Any] = [SystemMessage(content="system"), HumanMessage(content="do the thing")]
    for i in range(results):
        msgs.append(AIMessage(content="", tool_calls=[{"name": "big", "args": {"n": i}, "id": f"c{i}"}]))
        msgs.append(ToolMessage(content=f"result {i} " + "x" * size, tool_call_id=f"c{i}", name="big"))
    return msgs


def test_fit_messages_trims_the_oldest_tool_results_first_and_keeps_the_structure() -> None:
    msgs = transcript(5, 3000)
    out = fit_messages(msgs, 4000, reserve=500)
    assert sum(approx_tokens(m) for m in out) <= 3500
    assert [type(m) for m in out] == [type(m) for m in msgs]
    assert [getattr(m, "tool_call_id", None) for m in out] == [getattr(m, "tool_call_id", None) for m in msgs]
    assert out[-1].content == msgs[-1].content  # the newest result stays whole
    assert "left out" in str(out[3].content) and str(out[3].content).startswith("result 0")
    assert msgs[3].content.endswith("x")  # the caller's transcript is untouched


def test_fit_messages_leaves_a_transcript_that_fits_alone_and_cuts_a_huge_prompt() -> None:
    msgs = transcript(2, 100)
    assert fit_messages(msgs, 8192, reserve=2048) == msgs
    huge = [SystemMessage(content="s"), HumanMessage(content="y" * 100_000)]
    out = fit_messages(huge, 4000, reserve=1000)
    assert sum(approx_tokens(m) for m in out) <= 3000
    assert "left out" in str(out[1].content)


def test_failure_kinds() -> None:
    import httpx
    import openai

    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")

    def status(code: int, message: str) -> openai.APIStatusError:
        response = httpx.Response(code, request=request)
        return openai.APIStatusError(message, response=response, body={"error": {"message": message}})

    assert failure_kind(openai.APIConnectionError(request=request)) == "unavailable"
    assert failure_kind(openai.APITimeoutError(request=request)) == "other"
    assert failure_kind(status(500, "scripted HTTP 500")) == "unavailable"
    assert failure_kind(status(503, "loading model")) == "unavailable"
    assert failure_kind(status(500, "Input should be 'text' or 'json_object' (response_format)")) == "refused"
    assert failure_kind(status(400, "This model's maximum context length is 8192 tokens")) == "overflow"
    assert failure_kind(status(400, "bad request")) == "other"
    assert failure_kind(status(401, "Incorrect API key provided (tools)")) == "unauthorized"
    assert failure_kind(status(403, "no access to this model")) == "unauthorized"
    assert failure_kind(ConnectionRefusedError()) == "unavailable"
    assert failure_kind(ValueError("no")) == "other"


def test_grammar_safe_schema_simplifies_only_string_constraints() -> None:
    spec = PlanDraft.model_json_schema()
    safe = grammar_safe_schema(spec)
    step_id = safe["$defs"]["StepDefinition"]["properties"]["id"]
    assert step_id["pattern"] == "^[A-Za-z_][A-Za-z0-9_-]*$"  # what llama.cpp's converter takes (measured)
    assert "maxLength" not in json.dumps(safe) and "{0," not in json.dumps(safe)
    assert safe["required"] == spec["required"] and set(safe["$defs"]) == set(spec["$defs"])
    assert grammar_safe_pattern(r"^\d{3}$") is None  # escapes left: no pattern rather than a risky one
    assert grammar_safe_pattern("a{2,5}b{0,3}") == "a+b*"


def test_a_run_resumed_by_another_process_starts_from_the_negotiated_mode(tmp_path: Path) -> None:
    """The choice is kept in the run's state (``negotiated_output``): a new graph (as a new CLI process builds)
    resuming at the approval asks the verifier in json_object mode straight away."""
    from langgraph.types import Command

    script = Script()
    with ScriptedOpenAIServer(script, refuse=("json_schema",)) as srv:
        db = tmp_path / "runs.sqlite"
        context = {"base_url": srv.base_url, "model": "scripted", "mode": "plan", "max_retries": 0}
        graph = build_graph(checkpointer=sqlite_checkpointer(db))
        graph.invoke({"messages": [("user", "collect the numbers, then report the sum")]}, CFG, context=context)
        state = graph.get_state(CFG)
        assert state.values["negotiated_output"] == f"json_object {srv.base_url} scripted"
        before = len(srv.requests)
        fresh = build_graph(checkpointer=sqlite_checkpointer(db))
        revision = state.interrupts[0].value["revision"]
        fresh.invoke(Command(resume={"action": "approve", "revision": revision}), CFG)
        assert fresh.get_state(CFG).values["status"] == "completed"
        later = [mode_of(b) for b in srv.requests[before:] if mode_of(b) != "text"]
    assert later and set(later) == {"json_object"}
