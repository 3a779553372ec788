"""A model server cannot hang a run or fill its memory (issue 43, item 9): the request timeout bounds the whole
request, connect to last byte, and a reply past ``max_reply_bytes`` is refused without being read whole.

Real local servers on sockets: a slow-loris that sends a byte every 2 s (in its headers, or in its body), and one
that sends a 300 MB reply generated as it goes. The model is the one planmode builds (`ModelProvider`)."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from planmode.context import PlanModeContext
from planmode.llm import ModelProvider, failure_kind
from planmode.llm.failures import describe
from planmode.llm.http import ReplyTooLargeError
from tests.cli.test_cli_daily import cli

pytestmark = pytest.mark.integration

MB = 1024 * 1024


class RawServer:
    """A socket server on 127.0.0.1 that reads a request's head and answers with ``answer(conn, stop)``."""

    def __init__(self, kind: str, give_up: float = 20.0) -> None:
        self.kind = kind
        self.give_up = time.monotonic() + give_up  # a slow answer ends here (a client without a deadline waits)
        self.stop = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.threads: list[threading.Thread] = []
        self.served = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def __enter__(self) -> RawServer:
        self.threads.append(threading.Thread(target=self._accept, daemon=True))
        self.threads[0].start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=10)
        self.sock.close()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    head += chunk
                self.served += 1
                self._answer(conn)
            except OSError:  # the client gave up: what this server is for
                return

    def _answer(self, conn: socket.socket) -> None:
        if self.kind == "slow-headers":
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            while not self.stop.wait(2.0) and time.monotonic() < self.give_up:
                conn.sendall(b"X")  # a header line that does not end
        elif self.kind == "slow-body":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{")
            while not self.stop.wait(2.0) and time.monotonic() < self.give_up:
                conn.sendall(b" ")
        elif self.kind in ("big", "big-declared"):
            length = f"Content-Length: {300 * MB + 2}\r\n" if self.kind == "big-declared" else ""
            conn.sendall(
                f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{length}Connection: close\r\n\r\n".encode()
            )
            block = b"a" * MB
            conn.sendall(b'"')
            for _ in range(300):
                if self.stop.is_set():
                    return
                conn.sendall(block)
            conn.sendall(b'"')


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")


def _model(base_url: str, **settings: object) -> object:
    return ModelProvider().get(PlanModeContext(base_url=base_url, model="m", **settings))  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["slow-headers", "slow-body"])
def test_a_slow_loris_server_cannot_hold_a_call_past_its_timeout(key: None, kind: str) -> None:
    """A byte every 2 s never trips a 3 s read timeout; the deadline on the whole request does."""
    with RawServer(kind) as srv:
        model = _model(srv.base_url, request_timeout=3.0, max_retries=0)
        started = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            model.invoke("hi")  # type: ignore[attr-defined]
        took = time.monotonic() - started
    assert took < 3.0 + 1.5, took


def test_the_async_client_has_the_same_deadline(key: None) -> None:
    with RawServer("slow-body") as srv:
        model = _model(srv.base_url, request_timeout=3.0, max_retries=0)
        started = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            asyncio.run(model.ainvoke("hi"))  # type: ignore[attr-defined]
        took = time.monotonic() - started
    assert took < 3.0 + 1.5, took


def test_retries_multiply_the_deadline_and_no_more(key: None) -> None:
    """The bound of one model call: (max_retries + 1) x request_timeout, plus the client's back-off (< 2 s)."""
    with RawServer("slow-body") as srv:
        model = _model(srv.base_url, request_timeout=2.0, max_retries=2)
        started = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            model.invoke("hi")  # type: ignore[attr-defined]
        took = time.monotonic() - started
        served = srv.served
    assert served == 3
    assert took < 3 * 2.0 + 2.0 + 1.5, took


def test_a_run_against_a_slow_loris_server_ends_in_bounded_time(tmp_path: Path) -> None:
    """``planmode run --request-timeout 3``: each of the planner's three attempts is one request (no retries)
    bounded at 3 s, the server probe at 2 s a route, so the run ends failed well inside a minute."""
    with RawServer("slow-body", give_up=120) as srv:
        started = time.monotonic()
        proc = cli(
            "run", "write a file", "--workspace", str(tmp_path), "--db", str(tmp_path / "r.sqlite"), "--mode", "plan",
            "--base-url", srv.base_url, "--request-timeout", "3", "--max-retries", "0", "--auto-approve",
            OPENAI_API_KEY="test", timeout=170,
        )  # fmt: skip
        took = time.monotonic() - started
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "timed out" in out, out
    assert took < 50, (took, out)


def test_a_reply_with_a_declared_length_past_the_cap_is_refused_before_its_body(key: None) -> None:
    with RawServer("big-declared") as srv:
        model = _model(srv.base_url, max_retries=0)
        started = time.monotonic()
        with pytest.raises((ReplyTooLargeError, openai.APIConnectionError)) as caught:
            model.invoke("hi")  # type: ignore[attr-defined]
        took = time.monotonic() - started
    assert took < 5, took
    assert failure_kind(caught.value) == "other"  # not "unavailable": the server answered, too much
    assert "max_reply_bytes (16,777,216 bytes)" in describe(caught.value)


def test_a_300_mb_reply_is_refused_at_the_cap_without_filling_memory(tmp_path: Path) -> None:
    """In a subprocess, so its peak memory (ru_maxrss) is the call's: a 300 MB reply with no declared length is
    cut at 16 MB, and the peak grows by far less than the reply."""
    with RawServer("big") as srv:
        code = textwrap.dedent(
            f"""
            import json, os, resource, sys
            os.environ["OPENAI_API_KEY"] = "test"
            from planmode.context import PlanModeContext
            from planmode.llm import ModelProvider
            from planmode.llm.failures import describe
            model = ModelProvider().get(PlanModeContext(base_url={srv.base_url!r}, model="m", max_retries=0))
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            try:
                model.invoke("hi")
                error = None
            except Exception as exc:
                error = describe(exc)
            after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            print(json.dumps({{"grew_kb": after - before, "error": error}}))
            """
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["error"] and "max_reply_bytes" in result["error"], result
    assert result["grew_kb"] < 100 * 1024, result  # well below the 300 MB reply


def test_the_server_probe_is_bounded_too() -> None:
    """Detecting the server's kind and context size asks it over HTTP: a slow-loris cannot hold that either."""
    from planmode.local_server import detect_local_server

    with RawServer("slow-body") as srv:
        started = time.monotonic()
        assert detect_local_server(srv.base_url, timeout=1.0) is None
        took = time.monotonic() - started
    assert took < 3 * 1.0 + 1.5, took


@pytest.fixture(autouse=True)
def _no_env_proxies(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    yield
