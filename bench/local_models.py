"""Local models, measured: planmode against a real llama.cpp server and against the scripted server.

    python -m bench.local_models [--real N] [--scripted N] [--modes auto json_object ...] [--out FILE]

For each structured-output mode, N runs of one task through the Python API (``build_graph`` with a
``base_url``), behind a recording proxy that keeps every request's settings and the server's reported usage.
A run is *clean* when it ended within the time bound as ``completed``, or ``failed`` with a reason, with no
exception; the figures are how many runs were clean, calls, tokens and wall-clock time. The real server is
llama-cpp-python's (``planmode[local]``) serving Gemma 3 270M (Q4_K_M); the scripted server is
`planmode.testing.openai_server`, answering like a model that follows the schema, and refusing
``json_schema`` with the same HTTP 500 as llama-cpp-python so that "auto" has to negotiate.

tests/ecosystem/test_local_llama.py uses the same helpers (`RecordingProxy`, `run_api`, `run_cli`, `role_violation`).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Call", "RecordingProxy", "RunResult", "role_violation", "run_api", "run_cli", "summarise"]

RESULTS = Path(__file__).resolve().parent / "results" / "local_models.json"
TASK = "Write stats.py with mean() and median(), then write tests for it and a README"
MODES = ("auto", "json_object", "json_schema", "tool_calling")

# Small bounds: a 270M model seldom makes a good plan, and every call costs seconds on a laptop CPU.
SMALL_RUN: dict[str, Any] = {
    "mode": "plan",
    "approval": "auto",
    "normalize_messages": True,
    "max_steps": 3,
    "max_attempts": 1,
    "max_reflections": 1,
    "max_patch_attempts": 1,
    "max_plan_attempts": 2,
    "max_explore_calls": 1,
    "max_executor_iterations": 2,
    "max_retries": 0,
    "request_timeout": 90.0,
}


# -- the recording proxy ------------------------------------------------------------------------------------


@dataclass
class Call:
    """One request through the proxy: what was asked, and what the server answered."""

    path: str
    status: int
    seconds: float
    roles: list[str] = field(default_factory=list)
    max_tokens: int | None = None
    response_format: str | None = None
    tools: bool = False
    forced_tool: bool = False
    stream: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    exchange: dict[str, Any] | None = None
    """The request's messages and the reply's message, when the proxy keeps them (``keep_exchanges``)."""


class RecordingProxy:
    """An HTTP proxy on 127.0.0.1 in front of an OpenAI-compatible server; ``calls`` records every
    ``/chat/completions`` request with the usage the server reported. ``base_url`` ends in ``/v1``."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80
        self.calls: list[Call] = []
        self.keep_exchanges = False
        """Keep each call's messages and reply (`Call.exchange`), to read what a model was asked and said."""
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "the proxy is not running"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def take(self) -> list[Call]:
        """The calls recorded so far; the record starts afresh."""
        with self._lock:
            calls, self.calls = self.calls, []
        return calls

    def __enter__(self) -> RecordingProxy:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                owner._forward(self, b"")

            def do_POST(self) -> None:
                owner._forward(self, self.rfile.read(int(self.headers.get("Content-Length") or 0)))

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        started = time.perf_counter()
        conn = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=600)
        headers = {k: v for k, v in handler.headers.items() if k.lower() in ("content-type", "authorization", "accept")}
        try:
            conn.request(handler.command, handler.path, body=body or None, headers=headers)
            response = conn.getresponse()
            payload = response.read()
            status, content_type = response.status, response.getheader("Content-Type", "application/json")
        except OSError as exc:  # the server went away: answer as a gateway would
            payload = json.dumps({"error": {"message": str(exc)}}).encode()
            status, content_type = 502, "application/json"
        finally:
            conn.close()
        if handler.command == "POST" and handler.path.rstrip("/").endswith("/chat/completions"):
            call = _call(handler.path, body, status, payload, time.perf_counter() - started, self.keep_exchanges)
            with self._lock:
                self.calls.append(call)
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", content_type)
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except ConnectionError:
            pass  # the client timed out and left


def _call(path: str, body: bytes, status: int, payload: bytes, seconds: float, keep: bool = False) -> Call:
    try:
        request = json.loads(body)
    except ValueError:
        request = {}
    fmt = request.get("response_format")
    choice = request.get("tool_choice")
    call = Call(
        path=path,
        status=status,
        seconds=round(seconds, 3),
        roles=[str(m.get("role")) for m in request.get("messages") or []],
        max_tokens=request.get("max_tokens", request.get("max_completion_tokens")),
        response_format=fmt.get("type") if isinstance(fmt, dict) else None,
        tools=bool(request.get("tools")),
        forced_tool=isinstance(choice, dict) or choice == "required",
        stream=bool(request.get("stream")),
    )
    text = payload.decode("utf-8", "replace")
    if status != 200:
        call.error = text[:300]
        return call
    if call.stream:  # one SSE event a token on llama.cpp; a usage event when the server sends one
        events = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        chunks = [json.loads(e) for e in events if e and e != "[DONE]"]
        usage = next((c["usage"] for c in chunks if c.get("usage")), None)
        deltas = sum(
            1
            for c in chunks
            for ch in c.get("choices") or []
            if ch.get("delta", {}).get("content") or ch.get("delta", {}).get("tool_calls")
        )
        call.completion_tokens = usage["completion_tokens"] if usage else deltas
        call.prompt_tokens = usage["prompt_tokens"] if usage else None
        call.finish_reason = next(
            (ch.get("finish_reason") for c in chunks for ch in c.get("choices") or [] if ch.get("finish_reason")), None
        )
        return call
    try:
        data = json.loads(text)
    except ValueError:
        call.error = "non-JSON body: " + text[:200]
        return call
    usage = data.get("usage") or {}
    call.prompt_tokens, call.completion_tokens = usage.get("prompt_tokens"), usage.get("completion_tokens")
    choices = data.get("choices") or [{}]
    call.finish_reason = choices[0].get("finish_reason")
    if keep:
        call.exchange = {"messages": request.get("messages"), "reply": choices[0].get("message")}
    return call


def role_violation(roles: Sequence[str]) -> str | None:
    """Why a message list breaks a strict chat template (Gemma's): at most one system message, first; then
    user and assistant alternating, starting with user. None when it is fine."""
    rest = list(roles[1:] if roles[:1] == ["system"] else roles)
    if "system" in rest:
        return f"a system message after the first position: {list(roles)}"
    for i, role in enumerate(rest):
        expected = "user" if i % 2 == 0 else "assistant"
        if role != expected:
            return f"message {i + len(roles) - len(rest)} is {role!r}, expected {expected!r}: {list(roles)}"
    return None


# -- one run ------------------------------------------------------------------------------------------------


@dataclass
class RunResult:
    """How one run ended, and what it cost."""

    surface: str  # "api" or "cli"
    mode: str
    status: str  # completed, failed, ... or "timeout" / "exception" when the run did not end cleanly
    reason: str | None
    seconds: float
    clean: bool
    readable: bool
    listed: bool
    calls: list[Call] = field(default_factory=list)
    exit_code: int | None = None
    output_tail: str = ""

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens or 0 for c in self.calls)

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens or 0 for c in self.calls)


def _thread_state(db: Path, thread: str) -> tuple[bool, bool, str | None, str | None]:
    """(readable, listed, status, reason) of a thread in a SQLite file, read afresh as another process would."""
    from planmode.graph import build_graph
    from planmode.persistence import sqlite_checkpointer
    from planmode.persistence.runs import list_runs

    saver = sqlite_checkpointer(db)
    try:
        graph = build_graph(checkpointer=saver)
        values = graph.get_state({"configurable": {"thread_id": thread}}).values
        listed = any(r.thread_id == thread for r in list_runs(saver, limit=None))
        reason = values.get("error") or (values.get("report") or {}).get("error")
        return True, listed, values.get("status"), reason
    except Exception as exc:
        return False, False, None, f"state unreadable: {type(exc).__name__}: {exc}"
    finally:
        saver.conn.close()


def _clean(status: str | None, reason: str | None) -> bool:
    if status == "completed":
        return True
    return status == "failed" and bool(reason and reason.strip())


def run_api(
    base_url: str,
    mode: str,
    workdir: Path,
    *,
    proxy: RecordingProxy | None = None,
    time_limit: float = 600.0,
    **settings: Any,
) -> RunResult:
    """One run through the Python API in a fresh workspace and SQLite file under ``workdir``."""
    from planmode.context import PlanModeContext
    from planmode.graph import build_graph
    from planmode.persistence import sqlite_checkpointer
    from planmode.tools import workspace_tools

    ws = workdir / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    db = workdir / "runs.sqlite"
    thread = uuid.uuid4().hex[:12]
    ctx = PlanModeContext(
        **{**SMALL_RUN, "base_url": base_url, "model": "gemma", "structured_output": mode, **settings}
    )
    if proxy is not None:
        proxy.take()
    saver = sqlite_checkpointer(db)
    graph = build_graph(tools=workspace_tools(ws), checkpointer=saver)
    started = time.perf_counter()
    pool = concurrent.futures.ThreadPoolExecutor(1)
    future = pool.submit(
        graph.invoke, {"messages": [("user", TASK)]}, {"configurable": {"thread_id": thread}}, context=ctx
    )
    failure: str | None = None
    try:
        future.result(timeout=time_limit)
    except concurrent.futures.TimeoutError:
        failure = "timeout"
    except Exception as exc:
        failure = "exception: " + "".join(traceback.format_exception_only(exc)).strip()
    seconds = time.perf_counter() - started
    pool.shutdown(wait=failure != "timeout")
    if failure != "timeout":
        saver.conn.close()
    readable, listed, status, reason = _thread_state(db, thread)
    calls = proxy.take() if proxy is not None else []
    if failure is not None:
        return RunResult("api", mode, failure.split(":")[0], failure, round(seconds, 2), False, readable, listed, calls)
    return RunResult(
        "api", mode, status or "unknown", reason, round(seconds, 2), _clean(status, reason), readable, listed, calls
    )


def planmode_command() -> list[str]:
    """The ``planmode`` console script of this interpreter's environment (or ``python -m planmode.cli``)."""
    script = Path(sys.executable).parent / "planmode"
    return [str(script)] if script.exists() else [sys.executable, "-m", "planmode.cli"]


def run_cli(
    args: Sequence[str],
    mode: str,
    workdir: Path,
    *,
    proxy: RecordingProxy | None = None,
    time_limit: float = 600.0,
    env: Mapping[str, str] | None = None,
    approve: bool = True,
    thread: str | None = None,
    command: str = "run",
) -> RunResult:
    """One ``planmode run TASK --auto-approve --mode plan ARGS`` in a subprocess, in a fresh workspace (or,
    with ``command="resume"``, ``planmode resume THREAD ARGS`` of a run in ``workdir``)."""
    ws = workdir / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    db = workdir / "runs.sqlite"
    thread = thread or uuid.uuid4().hex[:12]
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PLANMODE_"))}
    full_env.update(
        {"OPENAI_API_KEY": "dummy", "COLUMNS": "160", "NO_COLOR": "1", "LANGSMITH_TRACING": "false", **(env or {})}
    )
    if command == "run":
        argv = [
            *planmode_command(),
            "run",
            TASK,
            "--mode",
            "plan",
            "--db",
            str(db),
            "--workspace",
            str(ws),
            "--thread",
            thread,
            *args,
        ]
    else:
        argv = [*planmode_command(), command, thread, "--db", str(db), *args]
    if approve:
        argv.append("--auto-approve")
    if proxy is not None:
        proxy.take()
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            argv, env=full_env, capture_output=True, text=True, timeout=time_limit, stdin=subprocess.DEVNULL
        )
        output, code = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        output = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        code = None
    seconds = time.perf_counter() - started
    readable, listed, status, reason = _thread_state(db, thread)
    calls = proxy.take() if proxy is not None else []
    tail = output[-6000:]
    if code is None:
        return RunResult(
            "cli",
            mode,
            "timeout",
            "no exit within the time bound",
            round(seconds, 2),
            False,
            readable,
            listed,
            calls,
            None,
            tail,
        )
    clean = (_clean(status, reason) or status == "awaiting_approval") and "Traceback" not in output
    return RunResult(
        "cli", mode, status or "unknown", reason, round(seconds, 2), clean, readable, listed, calls, code, tail
    )


# -- the servers --------------------------------------------------------------------------------------------


def gemma_gguf() -> Path:
    """The Gemma 3 270M GGUF file, fetched and checked by ``python -m bench.real_models setup`` (on first use)."""
    from bench.real_models import assemble

    return assemble("gemma3-270m")


def scripted_responder() -> Any:
    """Answers every planmode call as a model that follows the schema; refuses ``json_schema`` as
    llama-cpp-python does (HTTP 500 naming response_format)."""
    from planmode.testing.openai_server import Fault

    plan = {
        "title": "stats.py",
        "steps": [
            {"id": "code", "description": "write stats.py with mean() and median()", "acceptance": "stats.py exists"},
            {"id": "tests", "description": "write test_stats.py", "dependencies": ["code"]},
            {"id": "readme", "description": "write README.md", "dependencies": ["code"]},
        ],
    }
    answers: dict[str, Any] = {
        "plan": plan,
        "verify": {"passed": True, "reason": ""},
        "final": "Done.",
        "explore": "empty workspace",
        "execute": "done",
    }
    refusal = {
        "error": {
            "message": "1 validation error: response_format.type: Input should be 'text' or 'json_object'",
            "type": "internal_server_error",
            "param": None,
            "code": None,
        }
    }

    def respond(body: dict[str, Any]) -> Any:
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            return Fault(status=500, body=refusal, headers={})
        first = str((body.get("messages") or [{}])[0].get("content") or "")
        purpose = first.split("\n", 1)[0].removeprefix("planmode:") if first.startswith("planmode:") else ""
        value = answers.get(purpose, "ok")
        if purpose == "execute" and not any(m.get("role") == "tool" for m in body["messages"]):
            return {
                "tool_calls": [
                    {"name": "write_file", "arguments": {"path": f"{uuid.uuid4().hex[:6]}.txt", "content": "x\n"}}
                ]
            }
        if isinstance(value, str):
            return value
        if body.get("tools") and isinstance(body.get("tool_choice"), dict):
            return {"tool_calls": [{"name": body["tool_choice"]["function"]["name"], "arguments": value}]}
        return json.dumps(value)

    return respond


# -- the benchmark ------------------------------------------------------------------------------------------


def summarise(results: Sequence[RunResult]) -> dict[str, Any]:
    calls = [c for r in results for c in r.calls]
    return {
        "runs": len(results),
        "clean": sum(r.clean for r in results),
        "completed": sum(r.status == "completed" for r in results),
        "failed_cleanly": sum(r.clean and r.status == "failed" for r in results),
        "calls_per_run": round(len(calls) / max(len(results), 1), 1),
        "http_errors": sum(c.status != 200 for c in calls),
        "completion_tokens_per_run": round(sum(r.completion_tokens for r in results) / max(len(results), 1), 1),
        "prompt_tokens_per_run": round(sum(r.prompt_tokens for r in results) / max(len(results), 1), 1),
        "max_completion_tokens_of_a_call": max((c.completion_tokens or 0 for c in calls), default=0),
        "seconds_median": round(statistics.median(r.seconds for r in results), 2) if results else None,
        "seconds_max": max((r.seconds for r in results), default=None),
        "reasons": sorted({(r.reason or "")[:160] for r in results if r.status != "completed"}),
        "each": [
            {
                "status": r.status,
                "seconds": r.seconds,
                "calls": len(r.calls),
                "completion_tokens": r.completion_tokens,
                "prompt_tokens": r.prompt_tokens,
            }
            for r in results
        ],
    }


def _measure(
    label: str, base_url: str, modes: Sequence[str], n: int, settings: dict[str, Any], time_limit: float
) -> Iterator[tuple[str, dict[str, Any]]]:
    with RecordingProxy(base_url.removesuffix("/v1")) as proxy:
        for mode in modes:
            results = []
            for i in range(n):
                with tempfile.TemporaryDirectory(prefix="planmode-bench-") as tmp:
                    r = run_api(proxy.base_url, mode, Path(tmp), proxy=proxy, time_limit=time_limit, **settings)
                results.append(r)
                print(
                    f"[local_models] {label} {mode} #{i + 1}: {r.status} in {r.seconds} s, {len(r.calls)} calls, "
                    f"{r.completion_tokens} completion tokens",
                    flush=True,
                )
            yield mode, summarise(results)


def table(data: Mapping[str, Any]) -> str:
    """The results as the markdown table of docs/local-models.md."""
    rows = [
        "| server | mode | runs | completed | failed cleanly | not clean | calls / run | HTTP errors "
        "| output tokens / run | largest output | prompt tokens / run | median s | max s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, label in (("llama_cpp", "llama.cpp (Gemma 3 270M)"), ("scripted", "scripted")):
        for mode, m in (data.get(key) or {}).get("modes", {}).items():
            rows.append(
                f"| {label} | {mode} | {m['runs']} | {m['completed']} | {m['failed_cleanly']} "
                f"| {m['runs'] - m['clean']} | {m['calls_per_run']} | {m['http_errors']} "
                f"| {m['completion_tokens_per_run']} | {m['max_completion_tokens_of_a_call']} "
                f"| {m['prompt_tokens_per_run']} | {m['seconds_median']} | {m['seconds_max']} |"
            )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.local_models", description=__doc__)
    parser.add_argument("--real", type=int, default=3, help="runs per mode on the llama.cpp server (0: skip)")
    parser.add_argument("--scripted", type=int, default=20, help="runs per mode on the scripted server (0: skip)")
    parser.add_argument("--modes", nargs="*", default=list(MODES))
    parser.add_argument("--max-output-tokens", type=int, default=160, help="per-call output cap of the runs")
    parser.add_argument(
        "--max-explore-calls",
        type=int,
        default=0,
        help="read-only tool calls while planning (0: no exploration call, which saves a slow call)",
    )
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--commit", help="the commit measured (default: git rev-parse HEAD)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--keep", action="store_true", help="keep the other server's results already in --out")
    parser.add_argument("--table", action="store_true", help="print the table of --out as markdown and stop")
    args = parser.parse_args(argv)
    if args.table:
        print(table(json.loads(args.out.read_text(encoding="utf-8"))))
        return 0
    os.environ.setdefault("OPENAI_API_KEY", "dummy")
    settings = {
        "max_output_tokens": args.max_output_tokens,
        "request_timeout": 120.0,
        "max_explore_calls": args.max_explore_calls,
    }
    keep = json.loads(args.out.read_text(encoding="utf-8")) if args.keep and args.out.exists() else {}
    commit = (
        args.commit
        or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
        ).stdout.strip()
    )
    data: dict[str, Any] = {
        **keep,
        "task": TASK,
        "settings": {**SMALL_RUN, **settings},
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def save(key: str, entry: dict[str, Any]) -> None:  # after every mode: a long run that stops keeps its results
        data[key] = entry
        args.out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")

    if args.scripted:
        from planmode.testing.openai_server import ScriptedOpenAIServer

        entry: dict[str, Any] = {"n": args.scripted, "commit": commit, "modes": {}}
        with ScriptedOpenAIServer(scripted_responder()) as srv:
            for mode, summary in _measure("scripted", srv.base_url, args.modes, args.scripted, settings, 120):
                entry["modes"][mode] = summary
                save("scripted", entry)
    if args.real:
        from planmode.local_server import llama_server

        entry = {
            "n": args.real,
            "commit": commit,
            "model": "Gemma 3 270M Q4_K_M (python -m bench.real_models setup --model gemma3-270m)",
            "server": "llama-cpp-python 0.3.16",
            "n_ctx": args.n_ctx,
            "modes": {},
        }
        threads = ["--n_threads", str(os.cpu_count() or 1)]  # llama-cpp-python's default is half the cores
        with llama_server(gemma_gguf(), n_ctx=args.n_ctx, alias="gemma", extra_args=threads) as server:
            for mode, summary in _measure("llama.cpp", server.base_url, args.modes, args.real, settings, 600):
                entry["modes"][mode] = summary
                save("llama_cpp", entry)
    print(f"[local_models] wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
