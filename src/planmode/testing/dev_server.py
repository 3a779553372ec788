"""``langgraph dev`` as a subprocess on 127.0.0.1, for tests and benchmarks (offline: no browser, no analytics,
no reload).

    with langgraph_dev(cwd=repo, env={"OPENAI_BASE_URL": ...}, args=["--n-jobs-per-worker", "50"]) as server:
        client = get_client(url=server.url)

The server moves to another port when the one asked for is taken, so the URL is read from what it prints.
The process group is terminated (then killed) on exit. Needs the ``langgraph-cli[inmem]`` package (the
``dev`` extra).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from planmode.errors import PlanModeError

__all__ = ["OFFLINE_ENV", "DevServer", "DevServerError", "langgraph_dev"]

#: Environment for an offline ``langgraph dev``: no analytics, no file persistence. (Tracing is the caller's
#: to switch off through ``env``: planmode's code never touches the tracing settings.)
OFFLINE_ENV: dict[str, str] = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_DISABLE_FILE_PERSISTENCE": "true",
    "PYTHONUNBUFFERED": "1",
}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_API_URL = re.compile(r"API:\s*(http://127\.0\.0\.1:(\d+))")


class DevServerError(PlanModeError):
    """``langgraph dev`` could not be started, or did not become ready in time."""


@dataclass
class DevServer:
    """A running ``langgraph dev``: its URL and everything it printed so far (ANSI colours removed)."""

    url: str
    output: list[str] = field(default_factory=list)
    pid: int = 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _langgraph_cli() -> Path:
    return Path(sys.executable).with_name("langgraph")


@contextlib.contextmanager
def langgraph_dev(
    *,
    cwd: str | Path,
    env: Mapping[str, str] | None = None,
    config: str | Path | None = None,
    args: Sequence[str] = (),
    start_timeout: float = 60.0,
) -> Iterator[DevServer]:
    """``langgraph dev`` in ``cwd`` (on ``config``, default its ``langgraph.json``) with ``env`` added to this
    process's environment and `OFFLINE_ENV`; yields once ``/ok`` answers.

    Raises:
        DevServerError: the CLI is missing, or the server exited or was not ready within ``start_timeout``.
    """
    cli = _langgraph_cli()
    if not cli.exists():
        raise DevServerError(f"the langgraph CLI is not installed next to {sys.executable}: pip install -e '.[dev]'")
    cmd = [str(cli), "dev", "--no-browser", "--host", "127.0.0.1", "--port", str(_free_port()), "--no-reload"]
    if config is not None:
        cmd += ["--config", str(config)]
    cmd += list(args)
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env={**os.environ, **OFFLINE_ENV, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    server = DevServer(url="", pid=proc.pid)
    found: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            plain = _ANSI.sub("", line.rstrip())
            server.output.append(plain)
            m = _API_URL.search(plain)
            if m and not found:
                found.append(m.group(1))  # the port it really uses (it moves on when ours got taken)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + start_timeout
        ready = False
        while time.monotonic() < deadline and proc.poll() is None:
            if found:
                with contextlib.suppress(OSError), urllib.request.urlopen(found[0] + "/ok", timeout=2) as res:
                    ready = res.status == 200
                if ready:
                    break
            time.sleep(0.2)
        if not ready:
            tail = "\n".join(server.output[-40:])
            raise DevServerError(
                f"langgraph dev did not become ready in {start_timeout:.0f}s (exit code {proc.poll()}):\n{tail}"
            )
        server.url = found[0]
        yield server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        reader.join(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
