"""``planmode run --base-url`` on llama.cpp's own server, with default settings (issue 44, item 1).

A front server stands before the scripted OpenAI-compatible one and behaves as llama-server does: ``GET /props``
answers with ``default_generation_settings`` (its ``n_ctx``), and a request whose schema (response_format
json_schema or json_object, or a tool's parameters) holds a pattern with the escape ``\\-`` is refused with
``400 Failed to parse grammar``, the way llama.cpp refuses the grammar it cannot build from it. Everything else is
passed to the scripted server. Real HTTP, the real ``ChatOpenAI`` client, the real command line."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from planmode.context import PlanModeContext
from planmode.graph import build_graph
from planmode.llm import grammar_safe_schema
from planmode.local_server import detect_local_server, with_profile
from planmode.persistence import sqlite_checkpointer
from planmode.testing.openai_server import ScriptedOpenAIServer
from planmode.tools import workspace_tools
from tests.cli.test_cli_daily import cli

pytestmark = pytest.mark.integration

GRAMMAR_ERROR = {"error": {"code": 400, "message": "Failed to parse grammar", "type": "invalid_request_error"}}


def _schemas(body: dict[str, Any]) -> list[Any]:
    """The schemas a request carries, which llama.cpp turns into a grammar."""
    found: list[Any] = []
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        found.append((fmt.get("json_schema") or {}).get("schema"))
    elif fmt.get("schema") is not None:
        found.append(fmt["schema"])
    found += [(t.get("function") or {}).get("parameters") for t in body.get("tools") or []]
    return found


def _escaped_dash(spec: Any) -> bool:
    if isinstance(spec, dict):
        pattern = spec.get("pattern")
        if isinstance(pattern, str) and "\\-" in pattern:
            return True
        return any(_escaped_dash(v) for v in spec.values())
    return isinstance(spec, list) and any(_escaped_dash(v) for v in spec)


class LlamaCppFront:
    """llama-server's answers in front of ``upstream``: ``/props``, and its grammar refusals (see the module)
    plus, while ``refuse_every_schema`` is set, a refusal of every request that carries a json_schema."""

    def __init__(self, upstream: ScriptedOpenAIServer, n_ctx: int = 8192) -> None:
        self.upstream = upstream
        self.n_ctx = n_ctx
        self.refused: list[dict[str, Any]] = []
        self.refuse_every_schema = False
        front = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/props":
                    props = {"default_generation_settings": {"n_ctx": front.n_ctx}, "total_slots": 1}
                    self._send(200, json.dumps(props).encode(), "application/json")
                else:
                    self._relay("GET", None)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw)
                fmt = body.get("response_format") or {}
                every = front.refuse_every_schema and fmt.get("type") == "json_schema"
                if every or any(_escaped_dash(s) for s in _schemas(body)):
                    front.refused.append(body)
                    self._send(400, json.dumps(GRAMMAR_ERROR).encode(), "application/json")
                    return
                self._relay("POST", raw)

            def _relay(self, method: str, raw: bytes | None) -> None:
                url = front.upstream.base_url.removesuffix("/v1") + self.path
                request = urllib.request.Request(url, data=raw, method=method)
                request.add_header("Content-Type", "application/json")
                try:
                    with urllib.request.urlopen(request, timeout=60) as response:
                        status, data, kind = response.status, response.read(), response.headers["Content-Type"]
                except urllib.error.HTTPError as exc:
                    status, data, kind = exc.code, exc.read(), exc.headers["Content-Type"]
                self._send(status, data, kind or "application/json")

            def _send(self, status: int, data: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> LlamaCppFront:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _purpose(body: dict[str, Any]) -> str:
    first = str(body["messages"][0].get("content") or "")
    return first.split("\n", 1)[0].removeprefix("planmode:") if first.startswith("planmode:") else "unknown"


PLAN = {
    "title": "Notes",
    "steps": [
        {
            "id": "write-notes",  # the dash the step-id pattern's \- allows
            "description": "Write notes.md with the line 'hello'",
            "tools": ["write_file"],
            "acceptance": "notes.md exists",
        }
    ],
}


def responder(body: dict[str, Any]) -> Any:
    purpose = _purpose(body)
    if purpose == "detect":
        return json.dumps({"needs_plan": True, "reason": "it writes a file"})
    if purpose == "plan":
        return json.dumps(PLAN)
    if purpose == "execute":
        if not any(m["role"] == "tool" for m in body["messages"]):
            return {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": "hello\n"}}]}
        return "Wrote notes.md."
    if purpose == "verify":
        return json.dumps({"passed": True, "reason": "notes.md holds hello"})
    if purpose == "explore":
        return "The workspace is empty."
    return "Wrote notes.md with hello."


@pytest.fixture
def front() -> Iterator[tuple[ScriptedOpenAIServer, LlamaCppFront]]:
    with ScriptedOpenAIServer(responder) as srv, LlamaCppFront(srv) as llama:
        yield srv, llama


def test_run_with_default_settings_completes_on_a_llama_cpp_server(
    tmp_path: Path, front: tuple[ScriptedOpenAIServer, LlamaCppFront]
) -> None:
    """The issue's setting: llama-server, planmode's default settings, ``planmode run --base-url``. The run
    completes, the file is written, and the header says which profile and output mode were chosen."""
    _srv, llama = front
    ws = tmp_path / "ws"
    ws.mkdir()
    proc = cli(
        "run", "Write notes.md with the line hello", "--workspace", str(ws), "--db", str(tmp_path / "r.sqlite"),
        "--base-url", llama.base_url, "--model", "qwen", "--auto-approve", OPENAI_API_KEY="test",
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert (ws / "notes.md").read_text() == "hello\n"
    assert "structured output prompted · profile small (llama.cpp server detected" in out
    assert "one step at a time, context 8192 tokens" in out
    assert not llama.refused  # prompted: no grammar to refuse


def test_auto_with_the_default_profile_sends_grammar_safe_schemas(
    tmp_path: Path, front: tuple[ScriptedOpenAIServer, LlamaCppFront]
) -> None:
    """Without the small profile, auto's json_schema carries the plan schema made grammar-safe: nothing is
    refused, and the plan's dashed step id is still valid."""
    srv, llama = front
    ws = tmp_path / "ws"
    ws.mkdir()
    proc = cli(
        "run", "Write notes.md with the line hello", "--workspace", str(ws), "--db", str(tmp_path / "r.sqlite"),
        "--base-url", llama.base_url, "--model", "qwen", "--auto-approve", "--model-profile", "default",
        OPENAI_API_KEY="test",
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "structured output auto · profile default" in out
    assert not llama.refused
    plans = [b for b in srv.requests if _purpose(b) == "plan"]
    assert plans and plans[0]["response_format"]["type"] == "json_schema"
    assert "{0,63}" not in json.dumps(plans[0]["response_format"])


def test_a_schema_refused_after_an_accepted_one_falls_back_and_is_remembered(
    tmp_path: Path, front: tuple[ScriptedOpenAIServer, LlamaCppFront]
) -> None:
    """detect is answered in json_schema; from then on the server refuses every json_schema with a 400 that names
    no mode. auto moves on to json_object for the plan (the earlier success does not lock json_schema), and every
    later call starts there: one refusal in all."""
    srv, llama = front
    graph = build_graph(tools=workspace_tools(tmp_path), checkpointer=sqlite_checkpointer(tmp_path / "r.sqlite"))
    cfg: Any = {"configurable": {"thread_id": "t"}}
    context = {"base_url": llama.base_url, "model": "qwen", "approval": "auto", "max_retries": 0}

    def refuse_after_detect(body: dict[str, Any]) -> None:
        if _purpose(body) == "detect":
            llama.refuse_every_schema = True

    srv.on_request = refuse_after_detect
    graph.invoke({"messages": [("user", "Write notes.md with the line hello, then check it")]}, cfg, context=context)
    values = graph.get_state(cfg).values
    assert values["status"] == "completed", values.get("error")
    assert (tmp_path / "notes.md").read_text() == "hello\n"
    detect = [b for b in srv.requests if _purpose(b) == "detect"]
    assert detect and detect[0]["response_format"]["type"] == "json_schema"
    assert [_purpose(b) for b in llama.refused] == ["plan"]  # refused once, then json_object for every call
    later = [b for b in srv.requests if _purpose(b) in ("plan", "verify")]
    assert later and {(b.get("response_format") or {}).get("type") for b in later} == {"json_object"}
    assert values["negotiated_output"].startswith("json_object ")


def test_a_400_that_is_no_refusal_is_the_calls_error_and_is_not_remembered(tmp_path: Path) -> None:
    """A server that answers 400 to everything: auto tries each mode once, prompted last (it carries nothing to
    refuse), and the error is the server's, naming what was refused before; no mode is remembered."""
    from planmode.testing.openai_server import Fault

    bad = Fault(status=400, body={"error": {"message": "messages: bad role 'x'"}})
    with ScriptedOpenAIServer(lambda body: bad) as srv:
        graph = build_graph(checkpointer=sqlite_checkpointer(tmp_path / "r.sqlite"))
        cfg: Any = {"configurable": {"thread_id": "t"}}
        context = {
            "base_url": srv.base_url, "model": "m", "approval": "auto", "max_retries": 0, "mode": "plan",
            "max_plan_attempts": 1,
        }  # fmt: skip
        graph.invoke({"messages": [("user", "do it")]}, cfg, context=context)
        values = graph.get_state(cfg).values
    assert values["status"] == "failed"
    assert "bad role 'x'" in values["error"] and "after the server refused json_schema" in values["error"]
    kinds = [
        (b.get("response_format") or {}).get("type") or ("tools" if b.get("tools") else "text") for b in srv.requests
    ]
    assert kinds == ["json_schema", "json_object", "tools", "text"]
    assert not values.get("negotiated_output")


def test_grammar_safe_schema_keeps_properties_named_like_keywords() -> None:
    spec = {
        "type": "object",
        "properties": {"format": {"type": "string", "format": "date"}, "pattern": {"type": "string"}},
        "required": ["format", "pattern"],
        "$defs": {"minLength": {"type": "string", "minLength": 1}},
    }
    safe = grammar_safe_schema(spec)
    assert set(safe["properties"]) == {"format", "pattern"}  # fields, not keywords
    assert safe["properties"]["format"] == {"type": "string"}  # the keyword inside is dropped
    assert safe["$defs"] == {"minLength": {"type": "string"}}


def test_detection_of_ollama_llama_cpp_and_other_servers(front: tuple[ScriptedOpenAIServer, LlamaCppFront]) -> None:
    srv, llama = front
    found = detect_local_server(llama.base_url)
    assert found is not None and (found.kind, found.n_ctx) == ("llama.cpp", 8192)
    assert detect_local_server(srv.base_url) is None  # an OpenAI-compatible server that is neither
    assert detect_local_server("http://127.0.0.1:9/v1", timeout=0.5) is None  # nothing listening


def test_detection_of_ollama_by_its_version_route() -> None:
    class Ollama(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            routes = {
                "/api/version": {"version": "0.6.2"},
                "/api/ps": {"models": [{"name": "qwen:1.5b", "model": "qwen:1.5b", "context_length": 6144}]},
            }
            value = routes.get(self.path)
            data = json.dumps(value or {"error": "not found"}).encode()
            self.send_response(200 if value else 404)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Ollama)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        loaded = detect_local_server(base, "qwen:1.5b")
        other = detect_local_server(base, "llama3")
        ctx, why = with_profile(PlanModeContext(base_url=base, model="qwen:1.5b", max_parallel=3))
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert loaded is not None and (loaded.kind, loaded.n_ctx) == ("ollama", 6144)
    assert other is not None and other.n_ctx == 4096  # not loaded: Ollama's default
    assert why == "ollama server detected" and ctx.model_profile == "small"
    assert ctx.max_parallel == 3  # a value the user gave stays
    assert (ctx.structured_output, ctx.normalize_messages, ctx.context_tokens) == ("prompted", True, 6144)


def test_an_explicit_profile_wins_over_detection(front: tuple[ScriptedOpenAIServer, LlamaCppFront]) -> None:
    srv, llama = front
    kept, why = with_profile(PlanModeContext(base_url=llama.base_url, model_profile="default"))
    assert (kept.model_profile, kept.structured_output, why) == ("default", "auto", None)
    chosen, why = with_profile(PlanModeContext(base_url=srv.base_url, model_profile="small"))
    assert (chosen.model_profile, chosen.structured_output, why) == ("small", "prompted", "chosen")
    plain, why = with_profile(PlanModeContext(base_url=srv.base_url))
    assert (plain.model_profile, plain.structured_output, why) == ("default", "auto", None)
