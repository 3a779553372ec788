"""Shared test configuration.

Hypothesis profiles: ``default`` (about 200 examples per property, derandomized so the normal suite is
deterministic) and ``long`` (about 5000 examples, random seeds) for fuzzing. Select one with the
``HYPOTHESIS_PROFILE`` environment variable; the heavy property tests are marked ``slow``::

    HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest -q -m slow
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    max_examples=200,
    deadline=None,  # plans are built and validated per example; timing varies on shared CI machines
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],  # the plan strategies build whole DAGs on purpose
)
settings.register_profile(
    "long",
    max_examples=5000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# The approval key that seals approval records (planmode.approval_key): one fixed key for the suite and every
# process it starts (CLI runs, crash workers, `langgraph dev`), so no test writes a key file into the home folder.
# tests/graph/nodes/test_execution_guard.py covers the key file itself.
os.environ.setdefault("PLANMODE_APPROVAL_KEY", "planmode-test-suite-approval-key")


# -- the network guard: no test may reach a real model -------------------------------------------------------
#
# Every test runs offline. Requests to anything but this machine are refused at three levels: httpx and
# httpx2 transports (``openai`` >= 3 sends through httpx2, so patching httpx alone would not stop it) and,
# as a backstop for any other client, ``socket.connect``. The guard raises `RealNetworkRequestError`, a
# ``BaseException`` so that no ``except Exception`` on the way (the OpenAI client's retry loop, planmode's
# "a failed model call is a value" handling) can swallow it, and records the attempt so the test also fails
# at teardown if something swallowed it anyway. Tests against local servers (127.0.0.1, localhost, ::1) pass.

_LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


class RealNetworkRequestError(BaseException):
    """A test tried to reach a host other than this machine (a real model, most likely)."""


def _is_local(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    name = host.strip("[]").lower()
    if name in _LOCAL_NAMES:
        return True
    try:
        ip = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return False
    return ip.is_loopback or ip.is_unspecified


class NetworkGuard:
    """What the guard refused during one test (`network_guard` fixture)."""

    def __init__(self) -> None:
        self.blocked: list[str] = []

    def refuse(self, what: str) -> RealNetworkRequestError:
        self.blocked.append(what)
        return RealNetworkRequestError(
            f"network guard: this test tried to reach {what}; tests must stay offline — use "
            "planmode.testing.scripted.ScriptedChatModel or a local server on 127.0.0.1"
        )


@pytest.fixture(autouse=True)
def network_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[NetworkGuard]:
    """Fail any test that reaches beyond this machine; unset credentials and tracing so none is used."""
    for var in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "LANGSMITH_API_KEY",
        "LANGCHAIN_API_KEY",
        "LANGSMITH_TRACING",
        "LANGCHAIN_TRACING_V2",
    ):
        monkeypatch.delenv(var, raising=False)
    guard = NetworkGuard()

    def patch_transports(module: Any) -> None:
        sync_handle = module.HTTPTransport.handle_request
        async_handle = module.AsyncHTTPTransport.handle_async_request

        def handle_request(self: Any, request: Any) -> Any:
            if not _is_local(request.url.host):
                raise guard.refuse(f"{request.method} {request.url}")
            return sync_handle(self, request)

        async def handle_async_request(self: Any, request: Any) -> Any:
            if not _is_local(request.url.host):
                raise guard.refuse(f"{request.method} {request.url}")
            return await async_handle(self, request)

        monkeypatch.setattr(module.HTTPTransport, "handle_request", handle_request)
        monkeypatch.setattr(module.AsyncHTTPTransport, "handle_async_request", handle_async_request)

    for name in ("httpx", "httpx2"):
        try:
            module = __import__(name)
        except ImportError:  # httpx2 only exists alongside openai >= 3
            continue
        patch_transports(module)

    connect, connect_ex = socket.socket.connect, socket.socket.connect_ex

    def check(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _is_local(address[0]):
            raise guard.refuse(f"socket {address!r}")

    def guarded_connect(self: socket.socket, address: Any) -> None:
        check(self, address)
        connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: Any) -> int:
        check(self, address)
        return connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded_connect_ex)
    yield guard
    if guard.blocked:
        pytest.fail(
            "network guard: the test reached beyond this machine (the error may have been swallowed): "
            + "; ".join(guard.blocked),
            pytrace=False,
        )


# -- PostgreSQL: a throwaway server for the integration tests ------------------------------------------------


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A postgresql:// URL: PLANMODE_POSTGRES_URL, or a throwaway server (Debian's postgresql package, which
    .ci/run installs) stopped after the session."""
    from planmode.testing.postgres import postgres_server

    with postgres_server(os.environ.get("PLANMODE_POSTGRES_URL")) as url:
        if url is None:
            pytest.skip("PostgreSQL server binaries are not installed (apt-get install postgresql; .ci/run does)")
        yield url


# -- a real SQLite checkpointer file per test --------------------------------------------------------------


@pytest.fixture
def checkpointer(tmp_path: Any) -> Iterator[Any]:
    """A `SqliteSaver` on a fresh file in the test's temporary folder (planmode's types allowlisted)."""
    from planmode.persistence import sqlite_checkpointer

    saver = sqlite_checkpointer(tmp_path / "db.sqlite")
    yield saver
    saver.conn.close()
