"""The network guard in ``conftest.py`` trips on real model requests and lets local servers through."""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

import httpx
import pytest
from langchain_openai import ChatOpenAI

# The guard raises a BaseException subclass (``RealNetworkRequestError`` in conftest.py) so that no
# ``except Exception`` swallows it; tests match it by its message.
GUARD = BaseException


def test_chat_openai_against_api_openai_com_is_refused_quickly(network_guard: Any) -> None:
    model = ChatOpenAI(model="gpt-4o-mini", api_key="sk-fake-key-for-the-guard-test", max_retries=0, timeout=5)
    started = time.monotonic()
    with pytest.raises(GUARD, match=r"network guard: .*api\.openai\.com") as excinfo:
        model.invoke("hello")
    assert time.monotonic() - started < 2.0
    assert excinfo.type.__name__ == "RealNetworkRequestError"
    assert any("api.openai.com" in b for b in network_guard.blocked)
    network_guard.blocked.clear()  # expected here; anything left over fails the test at teardown


def test_guard_unsets_the_api_key() -> None:
    assert "OPENAI_API_KEY" not in os.environ
    assert "OPENAI_BASE_URL" not in os.environ


@pytest.mark.parametrize("target", ["https://example.com/", "http://8.8.8.8/"])
def test_plain_httpx_and_raw_sockets_are_refused(network_guard: Any, target: str) -> None:
    with pytest.raises(GUARD, match="network guard"):
        httpx.get(target, timeout=2)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock, pytest.raises(GUARD, match="network guard"):
        sock.connect(("8.8.8.8", 53))
    assert len(network_guard.blocked) == 2
    network_guard.blocked.clear()


def test_loopback_connections_pass() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        served: dict[str, Any] = {}

        def serve() -> None:
            conn, _ = server.accept()
            with conn:
                served["request"] = conn.recv(1024)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

        thread = threading.Thread(target=serve)
        thread.start()
        response = httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
        thread.join(5)
    assert response.text == "ok"
    assert served["request"].startswith(b"GET / ")
