"""A scripted server that speaks the OpenAI chat-completions protocol on 127.0.0.1.

Tests point the real ``ChatOpenAI(base_url=srv.base_url, api_key="test")`` at it, so every call crosses real
HTTP through the ``openai`` SDK: retries, timeouts, JSON-schema structured output, tool calls and streaming
(SSE) behave as they do against a hosted model. Standard library only.

    with ScriptedOpenAIServer(queue_responder(["hello", Fault(status=429), "again"])) as srv:
        model = ChatOpenAI(base_url=srv.base_url, api_key="test", model="scripted")

A responder receives the decoded request body and returns a :data:`Reply`:

- ``str``: assistant text;
- ``{"content": ..., "tool_calls": [{"name": ..., "arguments": {...} | "raw json", "id": optional}]}``
  (either key may be left out): assistant content and/or tool calls, ``finish_reason`` ``"tool_calls"``
  when there are tool calls;
- a :class:`Fault`: an HTTP error, a delay, or a malformed body.

If the responder raises, the request is answered with HTTP 500 whose message carries the exception, and the
exception is kept in ``srv.errors``.

Like a local server, it can refuse structured-output modes and report a context size:

- ``refuse=("json_schema",)`` answers a request that uses a refused mode (``json_schema`` or ``json_object``
  response formats, ``tools``) with HTTP 500 and a body naming it, as llama-cpp-python's server does for
  ``json_schema`` ("Input should be 'text' or 'json_object'"); the responder is not asked.
- ``context_tokens=N`` reports ``n_ctx`` on ``GET /props`` (as llama.cpp's server does) and answers a request
  whose prompt (about four characters a token) plus ``max_tokens`` exceeds N with llama-cpp-python's HTTP
  400 ``context_length_exceeded``. ``report_context=False`` enforces the size without reporting it, as
  llama-cpp-python's server does.
- ``prompt_cache=True`` reports, in ``usage.prompt_tokens_details.cached_tokens``, the tokens of a leading
  system message already seen in an earlier request (a provider's prefix cache); usage is an estimate (four
  characters a token) either way.

Run as a process (for ``langgraph dev`` subprocess tests)::

    python -m planmode.testing.openai_server --port 0 --script replies.json [--record requests.jsonl] \
        [--refuse json_schema,tools] [--context-tokens 8192]

The script is a JSON list of replies served in order (``{"fault": {...}}`` for a :class:`Fault`); the first
line printed on stdout is the base URL. ``--record`` appends each request body to a JSON-lines file.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType, TracebackType
from typing import Any, Self, TypeAlias

from planmode.errors import PlanModeError

__all__ = [
    "MODES",
    "Fault",
    "Reply",
    "Responder",
    "ScriptExhaustedError",
    "ScriptedOpenAIServer",
    "prompt_tokens",
    "queue_responder",
]


@dataclass(frozen=True, kw_only=True)
class Fault:
    """A scripted failure.

    Attributes:
        status: answer with this HTTP status (``body`` as the error body; by default an OpenAI-style
            ``{"error": {...}}``). Retryable statuses (408, 409, 429, 5xx) get ``Retry-After: 0`` and
            ``retry-after-ms: 1`` unless ``headers`` is given, so the ``openai`` client retries at once
            (it ignores a zero ``Retry-After`` and would otherwise back off for 0.5 s and more).
        body: the error body: a JSON-able value, or a ``str`` sent as is.
        headers: extra response headers (replace the retry defaults above).
        delay: seconds to wait before answering (cut short when the server stops).
        malformed: answer 200 with a body that is not JSON (``application/json``, or an SSE event whose
            data is not JSON when the request streams).
        then: what to answer after ``delay`` when neither ``status`` nor ``malformed`` is set.
    """

    status: int | None = None
    body: Any = None
    headers: Mapping[str, str] | None = None
    delay: float = 0.0
    malformed: bool = False
    then: str | Mapping[str, Any] = ""


Reply: TypeAlias = str | Mapping[str, Any] | Fault
Responder: TypeAlias = Callable[[dict[str, Any]], Reply]


class ScriptExhaustedError(PlanModeError, LookupError):
    """A :func:`queue_responder` was asked for more replies than it was given."""


def queue_responder(items: Iterable[Reply]) -> Responder:
    """A responder that returns ``items`` in order, one per request (thread-safe).

    Once they are used up it raises :class:`ScriptExhaustedError`, which the server answers with HTTP 500.
    """
    queue = list(items)
    lock = threading.Lock()
    served = itertools.count()

    def respond(request: dict[str, Any]) -> Reply:
        with lock:
            index = next(served)
        if index >= len(queue):
            raise ScriptExhaustedError(
                f"the script has {len(queue)} replies; request #{index + 1} has none "
                f"(last message: {_last_message_text(request)[:200]!r})"
            )
        return queue[index]

    return respond


class ScriptedOpenAIServer:
    """An OpenAI chat-completions server on ``host:port`` (0 picks a free port), run in a thread.

    Use as a context manager or call :meth:`start` and :meth:`stop`. ``requests`` holds the decoded JSON
    bodies received on ``/chat/completions``, in order of arrival; ``errors`` the exceptions the responder
    raised.
    """

    def __init__(
        self,
        responder: Responder,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        refuse: Iterable[str] = (),
        context_tokens: int | None = None,
        report_context: bool = True,
        prompt_cache: bool = False,
    ) -> None:
        self.responder = responder
        self.host = host
        self.port = port
        self.refuse = frozenset(refuse)
        unknown = self.refuse - set(MODES)
        if unknown:
            raise ValueError(f"refuse takes {', '.join(MODES)}, not {', '.join(sorted(unknown))}")
        self.context_tokens = context_tokens
        self.report_context = report_context
        self.prompt_cache = prompt_cache
        self._prefixes: set[str] = set()
        self.requests: list[dict[str, Any]] = []
        self.errors: list[BaseException] = []
        self.on_request: Callable[[dict[str, Any]], None] | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The URL to pass as ``base_url`` (ends in ``/v1``)."""
        if self._httpd is None:
            raise RuntimeError("the server is not running: call start() or use it as a context manager")
        return f"http://{self.host}:{self._httpd.server_address[1]}/v1"

    def start(self) -> Self:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = _Server((self.host, self.port), _Handler, self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="scripted-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; pending delays end at once and handler threads are joined."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _record(self, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(body)
            if self.on_request is not None:
                self.on_request(body)

    def cached_tokens(self, body: Mapping[str, Any]) -> int:
        """With ``prompt_cache``: the tokens of the leading system message when an earlier request began with
        the same one (as a provider's prefix cache reports them), else 0."""
        messages = body.get("messages") or []
        first = messages[0] if messages and isinstance(messages[0], Mapping) else {}
        if not self.prompt_cache or first.get("role") != "system":
            return 0
        prefix = json.dumps(first.get("content"))
        with self._lock:
            seen = prefix in self._prefixes
            self._prefixes.add(prefix)
        return min(prompt_tokens(body), len(prefix) // 4) if seen else 0

    def _refusal(self, body: dict[str, Any]) -> Fault | None:
        """The error a local server gives for a refused mode or an overflowing prompt, if any."""
        kind = (body.get("response_format") or {}).get("type")
        used = [m for m in MODES if m == kind or (m == "tools" and body.get("tools"))]
        for mode in used:
            if mode in self.refuse:
                # No x-should-retry: like llama.cpp's, the refusal is a plain 500 that the client retries.
                return Fault(status=500, body=_error_body(_REFUSALS[mode], "internal_server_error"))
        if self.context_tokens is not None:
            prompt = prompt_tokens(body)
            completion = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
            if prompt + completion > self.context_tokens:
                message = (
                    f"This model's maximum context length is {self.context_tokens} tokens. However, you "
                    f"requested {prompt + completion} tokens ({prompt} in the messages, {completion} in "
                    "the completion). Please reduce the length of the messages or completion."
                )
                error = _error_body(message, "invalid_request_error")
                error["error"]["code"] = "context_length_exceeded"
                return Fault(status=400, body=error)
        return None

    def _answer(self, body: dict[str, Any]) -> tuple[Fault | None, dict[str, Any], str]:
        """The responder's fault (if any) and the assistant message with its finish reason."""
        refusal = self._refusal(body)
        if refusal is not None:
            return refusal, {}, "stop"
        try:
            reply = self.responder(body)
            if isinstance(reply, Fault):
                return (reply, *_message(reply.then))
            return (None, *_message(reply))
        except Exception as exc:  # the responder is test code: report its failure to the client
            with self._lock:
                self.errors.append(exc)
            message = f"scripted responder failed: {type(exc).__name__}: {exc}"
            fault = Fault(status=500, body=_error_body(message, "server_error"), headers={"x-should-retry": "false"})
            return fault, {}, "stop"


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # so server_close() joins the handler threads
    request_queue_size = 128  # the listen backlog (default 5): many clients at once (bench/server_load.py)
    owner: ScriptedOpenAIServer

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], owner: ScriptedOpenAIServer
    ) -> None:
        self.owner = owner
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that gave up is not an error
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # one request per connection: nothing idles in keep-alive at stop()
    server: _Server
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read ``srv.requests`` instead."""

    def do_GET(self) -> None:
        n_ctx = self.server.owner.context_tokens
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
        elif self.path.rstrip("/") == "/props" and n_ctx is not None and self.server.owner.report_context:
            self._send_json(200, {"default_generation_settings": {"n_ctx": n_ctx}, "total_slots": 1})
        else:
            self._send_json(404, _error_body(f"no route for GET {self.path}", "invalid_request_error"))

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, _error_body(f"no route for POST {self.path}", "invalid_request_error"))
            return
        try:
            body = json.loads(raw)
        except ValueError as exc:
            self._send_json(400, _error_body(f"request body is not JSON: {exc}", "invalid_request_error"))
            return
        owner = self.server.owner
        owner._record(body)
        fault, message, finish_reason = owner._answer(body)
        if fault is not None:
            if fault.delay > 0 and owner._stopping.wait(fault.delay):
                return  # the server is stopping: drop the connection
            if fault.malformed:  # cut-off JSON, as a plain body or as an SSE event
                broken = b'{"id": "chatcmpl-broken", "choices": ['
                if body.get("stream"):
                    self._send(200, b"data: " + broken + b"\n\n", "text/event-stream")
                else:
                    self._send(200, broken, "application/json")
                return
            if fault.status is not None:
                self._send_fault(fault)
                return
        if body.get("stream"):
            self._send_stream(body, message, finish_reason)
        else:
            self._send_json(200, _completion(body, message, finish_reason, owner.cached_tokens(body)))

    def _send(self, status: int, payload: bytes, content_type: str, headers: Mapping[str, str] = {}) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except ConnectionError:
            pass  # the client timed out and went away

    def _send_json(self, status: int, value: Any, headers: Mapping[str, str] = {}) -> None:
        self._send(status, json.dumps(value).encode(), "application/json", headers)

    def _send_fault(self, fault: Fault) -> None:
        assert fault.status is not None
        retryable = fault.status in (408, 409, 429) or fault.status >= 500
        headers = fault.headers
        if headers is None:
            headers = {"Retry-After": "0", "retry-after-ms": "1"} if retryable else {}
        body = fault.body
        if body is None:
            body = _error_body(
                f"scripted HTTP {fault.status}",
                "rate_limit_exceeded" if fault.status == 429 else "server_error",
            )
        if isinstance(body, str):
            self._send(fault.status, body.encode(), "text/plain; charset=utf-8", headers)
        else:
            self._send_json(fault.status, body, headers)

    def _send_stream(self, request: dict[str, Any], message: dict[str, Any], finish_reason: str) -> None:
        events = [*_chunks(request, message, finish_reason), "[DONE]"]
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            for event in events:
                self.wfile.write(f"data: {event}\n\n".encode())
                self.wfile.flush()
        except ConnectionError:
            pass


#: The modes ``refuse`` takes: response_format types and tool calling.
MODES = ("json_schema", "json_object", "tools")
_REFUSALS = {
    "json_schema": (
        "1 validation error: {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
        "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}"
    ),
    "json_object": "response_format type 'json_object' is not supported by this server",
    "tools": "tools are not supported by this server (tool_choice / tools given)",
}


def prompt_tokens(request: Mapping[str, Any]) -> int:
    """A rough count of a request's prompt tokens: four characters a token."""
    return max(1, len(json.dumps(request.get("messages", []))) // 4)


def _error_body(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


def _last_message_text(request: Mapping[str, Any]) -> str:
    messages = request.get("messages") or [{}]
    content = messages[-1].get("content")
    return content if isinstance(content, str) else json.dumps(content)


def _message(reply: str | Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The assistant message of a non-fault reply, and its finish reason."""
    if isinstance(reply, str):
        return {"role": "assistant", "content": reply, "refusal": None}, "stop"
    unknown = set(reply) - {"content", "tool_calls", "refusal"}
    if unknown:
        raise ValueError(f"a reply dict takes 'content', 'tool_calls' and/or 'refusal', not {sorted(unknown)}")
    calls = [
        {
            "id": call.get("id") or f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {
                "name": call["name"],
                "arguments": call["arguments"] if isinstance(call["arguments"], str) else json.dumps(call["arguments"]),
            },
        }
        for call in reply.get("tool_calls") or []
    ]
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content"), "refusal": reply.get("refusal")}
    if calls:
        message["tool_calls"] = calls
    return message, "tool_calls" if calls else "stop"


def _usage(request: Mapping[str, Any], message: Mapping[str, Any]) -> dict[str, int]:
    """A rough token count, four characters a token: an estimate, not a tokenizer's count (this is a test
    double)."""
    prompt = prompt_tokens(request)
    completion = max(1, len(json.dumps([message.get("content"), message.get("tool_calls")])) // 4)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _envelope(request: Mapping[str, Any], kind: str, choices: list[dict[str, Any]], cid: str) -> dict[str, Any]:
    return {
        "id": cid,
        "object": kind,
        "created": int(time.time()),
        "model": request.get("model") or "scripted",
        "system_fingerprint": None,
        "choices": choices,
    }


def _completion(
    request: Mapping[str, Any], message: dict[str, Any], finish_reason: str, cached: int = 0
) -> dict[str, Any]:
    choice = {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
    cid = f"chatcmpl-{uuid.uuid4().hex}"
    usage: dict[str, Any] = _usage(request, message)
    if cached:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {**_envelope(request, "chat.completion", [choice], cid), "usage": usage}


def _pieces(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _chunks(request: Mapping[str, Any], message: dict[str, Any], finish_reason: str) -> Iterator[str]:
    """The SSE data of a streamed completion: role, content pieces, tool-call pieces, finish, usage."""
    cid = f"chatcmpl-{uuid.uuid4().hex}"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return json.dumps(_envelope(request, "chat.completion.chunk", [choice], cid))

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(message.get("content") or ""):
        yield chunk({"content": piece})
    for index, call in enumerate(message.get("tool_calls", [])):
        head = {"index": index, "id": call["id"], "type": "function"}
        yield chunk({"tool_calls": [{**head, "function": {"name": call["function"]["name"], "arguments": ""}}]})
        for piece in _pieces(call["function"]["arguments"]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, finish_reason)
    if (request.get("stream_options") or {}).get("include_usage"):
        yield json.dumps({**_envelope(request, "chat.completion.chunk", [], cid), "usage": _usage(request, message)})


def _reply_from_json(item: Any) -> Reply:
    if isinstance(item, Mapping) and "fault" in item:
        return Fault(**item["fault"])
    if isinstance(item, str | Mapping):
        return item
    raise ValueError(f"a script item is a string, a reply dict or {{'fault': {{...}}}}, not {item!r}")


def main(argv: Sequence[str] | None = None) -> None:
    """Serve a JSON script until SIGTERM or Ctrl-C; print the base URL first."""
    parser = argparse.ArgumentParser(prog="python -m planmode.testing.openai_server", description=main.__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--script", required=True, help="JSON list of replies, served in order")
    parser.add_argument("--record", help="append each request body to this JSON-lines file")
    parser.add_argument("--refuse", default="", help=f"comma-separated modes to refuse: {', '.join(MODES)}")
    parser.add_argument("--context-tokens", type=int, default=None, help="report and enforce this n_ctx")
    args = parser.parse_args(argv)
    with open(args.script, encoding="utf-8") as f:
        items = json.load(f)
    if not isinstance(items, list):
        parser.error(f"{args.script}: expected a JSON list of replies")
    server = ScriptedOpenAIServer(
        queue_responder(_reply_from_json(i) for i in items),
        host=args.host,
        port=args.port,
        refuse=[m for m in args.refuse.split(",") if m],
        context_tokens=args.context_tokens,
    )
    record: str | None = args.record
    if record is not None:

        def append(body: dict[str, Any]) -> None:
            with open(record, "a", encoding="utf-8") as out:
                out.write(json.dumps(body) + "\n")

        server.on_request = append

    def terminate(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, terminate)
    with server:
        print(server.base_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
