"""The scripted OpenAI server, exercised through the real ``ChatOpenAI`` client over real HTTP."""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TypedDict

import openai
import pytest
from langchain_core.messages import AIMessageChunk
from langchain_core.messages.ai import add_ai_message_chunks
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel

from planmode.testing.openai_server import (
    Fault,
    Reply,
    ScriptedOpenAIServer,
    ScriptExhaustedError,
    queue_responder,
)

pytestmark = pytest.mark.integration


class Person(BaseModel):
    """A person."""

    name: str
    age: int


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def chat(srv: ScriptedOpenAIServer, **kwargs: Any) -> ChatOpenAI:
    kwargs.setdefault("max_retries", 0)
    return ChatOpenAI(base_url=srv.base_url, api_key="test", model="scripted", **kwargs)


def serve(*items: Reply) -> ScriptedOpenAIServer:
    return ScriptedOpenAIServer(queue_responder(items))


def test_invoke_returns_the_scripted_text_and_records_the_request() -> None:
    with serve("hello there") as srv:
        base_url = srv.base_url
        reply = chat(srv).invoke("hi")

    assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
    assert reply.content == "hello there"
    assert reply.response_metadata["finish_reason"] == "stop"
    assert reply.usage_metadata is not None and reply.usage_metadata["total_tokens"] > 0
    assert len(srv.requests) == 1
    assert srv.requests[0]["model"] == "scripted"
    assert srv.requests[0]["messages"] == [{"role": "user", "content": "hi"}]
    assert srv.errors == []


def test_bind_tools_returns_parsed_tool_calls_with_generated_ids() -> None:
    script = {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "add", "arguments": "{}"}]}
    with serve(script) as srv:
        reply = chat(srv).bind_tools([add]).invoke("add 1 and 2")

    assert [(call["name"], call["args"]) for call in reply.tool_calls] == [
        ("add", {"a": 1, "b": 2}),
        ("add", {}),
    ]
    ids = [call["id"] for call in reply.tool_calls]
    assert all(ids) and len(set(ids)) == 2
    assert reply.response_metadata["finish_reason"] == "tool_calls"
    assert srv.requests[0]["tools"][0]["function"]["name"] == "add"


def test_structured_output_json_schema_parses_content_and_sends_response_format() -> None:
    with serve('{"name": "Ada", "age": 36}') as srv:
        person = chat(srv).with_structured_output(Person, method="json_schema").invoke("who?")

    assert person == Person(name="Ada", age=36)
    response_format = srv.requests[0]["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "Person"
    assert "tools" not in srv.requests[0]


def test_structured_output_function_calling_parses_a_tool_call_and_sends_tool_choice() -> None:
    with serve({"tool_calls": [{"name": "Person", "arguments": {"name": "Bob", "age": 3}}]}) as srv:
        person = chat(srv).with_structured_output(Person, method="function_calling").invoke("who?")

    assert person == Person(name="Bob", age=3)
    request = srv.requests[0]
    assert [t["function"]["name"] for t in request["tools"]] == ["Person"]
    assert request["tool_choice"] == {"type": "function", "function": {"name": "Person"}}
    assert "response_format" not in request


def test_429_then_500_are_retried_within_max_retries() -> None:
    with serve(Fault(status=429), Fault(status=500), "third time lucky") as srv:
        started = time.monotonic()
        reply = chat(srv, max_retries=2).invoke("retry me")
        elapsed = time.monotonic() - started

    assert reply.content == "third time lucky"
    assert len(srv.requests) == 3
    assert elapsed < 1.0  # retry-after-ms: 1 overrides the client's 0.5 s+ backoff


def test_500_without_retries_raises_an_openai_api_error() -> None:
    with serve(Fault(status=500), "never served") as srv, pytest.raises(openai.InternalServerError) as caught:
        chat(srv, max_retries=0).invoke("fail")

    assert isinstance(caught.value, openai.APIError)
    assert caught.value.status_code == 500
    assert "scripted HTTP 500" in str(caught.value)
    assert len(srv.requests) == 1


def test_non_retryable_status_with_custom_body_is_not_retried() -> None:
    body = {"error": {"message": "context too long", "type": "invalid_request_error", "code": None}}
    with (
        serve(Fault(status=400, body=body), "never served") as srv,
        pytest.raises(openai.BadRequestError) as caught,
    ):
        chat(srv, max_retries=2).invoke("fail")

    assert "context too long" in str(caught.value)
    assert len(srv.requests) == 1


def test_a_delay_past_the_timeout_raises_api_timeout_error_quickly() -> None:
    with serve(Fault(delay=30)) as srv:
        started = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            chat(srv, timeout=0.5, max_retries=0).invoke("slow")
        elapsed = time.monotonic() - started
    stopped = time.monotonic() - started

    assert elapsed < 3.0
    assert stopped < 5.0  # stop() cuts the pending delay short


def test_a_delay_within_the_timeout_then_answers() -> None:
    with serve(Fault(delay=0.2, then="late but fine")) as srv:
        assert chat(srv, timeout=5).invoke("slow").content == "late but fine"


def test_a_malformed_body_raises_json_decode_error() -> None:
    with serve(Fault(malformed=True), Fault(malformed=True)) as srv:
        with pytest.raises(json.JSONDecodeError) as caught:
            chat(srv, max_retries=2).invoke("break")
        assert caught.value.response.status_code == 200  # type: ignore[attr-defined]  # langchain attaches it
        with pytest.raises(json.JSONDecodeError):
            list(chat(srv).stream("break"))

    assert len(srv.requests) == 2  # a 200 is never retried


def test_an_exhausted_script_answers_500_with_a_message() -> None:
    with serve("only one") as srv:
        model = chat(srv, max_retries=2)
        assert model.invoke("one").content == "only one"
        with pytest.raises(openai.InternalServerError, match="the script has 1 replies; request #2 has none"):
            model.invoke("two")

    assert len(srv.requests) == 2  # x-should-retry: false
    assert [type(e) for e in srv.errors] == [ScriptExhaustedError]


def test_a_bad_reply_dict_answers_500_naming_the_keys() -> None:
    with (
        serve({"text": "oops"}) as srv,
        pytest.raises(openai.InternalServerError, match="'content', 'tool_calls' and/or 'refusal', not \\['text'\\]"),
    ):
        chat(srv).invoke("x")


def test_stream_yields_text_chunks_that_join_to_the_script() -> None:
    text = "a streamed reply long enough to need several chunks"
    with serve(text) as srv:
        chunks = list(chat(srv).stream("go"))

    assert srv.requests[0]["stream"] is True
    assert len([c for c in chunks if c.content]) > 1
    assert "".join(str(c.content) for c in chunks) == text


def test_stream_reports_usage_when_asked() -> None:
    with serve("counted") as srv:
        chunks = list(chat(srv, stream_usage=True).stream("go"))

    assert srv.requests[0]["stream_options"] == {"include_usage": True}
    usage = [c.usage_metadata for c in chunks if c.usage_metadata]
    assert len(usage) == 1 and usage[0]["total_tokens"] > 0


def test_stream_yields_tool_call_chunks() -> None:
    args = {"a": 12345, "b": 67890}
    with serve({"tool_calls": [{"name": "add", "arguments": args, "id": "call_fixed"}]}) as srv:
        chunks = [c for c in chat(srv).bind_tools([add]).stream("add") if isinstance(c, AIMessageChunk)]

    pieces = [tc for c in chunks for tc in c.tool_call_chunks]
    assert len(pieces) > 1
    assert pieces[0]["name"] == "add" and pieces[0]["id"] == "call_fixed"
    merged = add_ai_message_chunks(chunks[0], *chunks[1:])
    assert merged.tool_calls == [{"name": "add", "args": args, "id": "call_fixed", "type": "tool_call"}]


class _State(TypedDict):
    out: str


def test_chat_openai_streams_under_langgraph_messages_mode_only() -> None:
    with serve("a", "b", "c") as srv:
        model = chat(srv)

        def node(state: _State) -> _State:
            return {"out": str(model.invoke("q").content)}

        graph = StateGraph(_State).add_node("n", node).add_edge(START, "n").add_edge("n", END).compile()
        seen = {}
        for mode in ("updates", "values", "messages"):
            list(graph.stream({"out": ""}, stream_mode=mode))
            seen[mode] = srv.requests[-1].get("stream")

    assert seen == {"updates": False, "values": False, "messages": True}


def test_process_mode_serves_a_script_file(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["from a process", {"fault": {"status": 500}}]))
    record = tmp_path / "requests.jsonl"
    command = [sys.executable, "-m", "planmode.testing.openai_server", "--port", "0", "--script", str(script)]
    with subprocess.Popen(
        [*command, "--record", str(record)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None
            with selectors.DefaultSelector() as selector:
                selector.register(proc.stdout, selectors.EVENT_READ)
                assert selector.select(timeout=30), "the server printed no URL within 30 s"
            base_url = proc.stdout.readline().strip()
            assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")

            model = ChatOpenAI(base_url=base_url, api_key="test", model="scripted", max_retries=0)
            assert model.invoke("hello").content == "from a process"
            with pytest.raises(openai.InternalServerError):
                model.invoke("again")
        finally:
            proc.terminate()
        assert proc.wait(timeout=10) == 0

    bodies = [json.loads(line) for line in record.read_text().splitlines()]
    assert [b["messages"][-1]["content"] for b in bodies] == ["hello", "again"]


def test_a_refused_mode_is_a_500_naming_it_and_the_responder_is_not_asked() -> None:
    """Like llama-cpp-python's server: json_schema is refused with HTTP 500 (retried by the client), while
    json_object with a schema and plain text are served."""
    with ScriptedOpenAIServer(queue_responder(['{"name": "a", "age": 1}']), refuse=("json_schema",)) as srv:
        with pytest.raises(openai.InternalServerError, match="response_format"):
            chat(srv, max_retries=1).with_structured_output(Person, method="json_schema").invoke("a person")
        assert len(srv.requests) == 2  # the refusal was retried once, like any 500
        extra = {"response_format": {"type": "json_object", "schema": Person.model_json_schema()}}
        reply = chat(srv).bind(extra_body=extra).invoke("a person")
    assert json.loads(str(reply.content)) == {"name": "a", "age": 1}
    assert srv.requests[-1]["response_format"]["type"] == "json_object"
    assert srv.errors == []


def test_refusing_tools_and_an_unknown_mode() -> None:
    with (
        ScriptedOpenAIServer(queue_responder([]), refuse=("tools",)) as srv,
        pytest.raises(openai.InternalServerError, match="tools"),
    ):
        chat(srv).bind_tools([add]).invoke("add")
    with pytest.raises(ValueError, match="refuse takes"):
        ScriptedOpenAIServer(queue_responder([]), refuse=("json",))


def test_the_context_size_is_reported_on_props_and_enforced() -> None:
    import urllib.request

    with ScriptedOpenAIServer(queue_responder(["short"]), context_tokens=200) as srv:
        root = srv.base_url.removesuffix("/v1")
        with urllib.request.urlopen(root + "/props", timeout=5) as response:
            assert json.loads(response.read())["default_generation_settings"]["n_ctx"] == 200
        with pytest.raises(openai.BadRequestError, match="maximum context length is 200 tokens"):
            chat(srv, max_tokens=100).invoke("x" * 1000)
        assert chat(srv, max_tokens=10).invoke("hi").content == "short"
