"""A llama.cpp server for the length of a run: ``planmode run --gguf FILE`` runs fully offline.

    with llama_server("model.gguf") as server:
        ctx = settings_for(server, PlanModeContext())  # the small-model profile, pointed at the server

The server is llama-cpp-python's OpenAI-compatible one (``python -m llama_cpp.server``, from the ``local``
extra) on 127.0.0.1 and a free port. It is stopped when the block ends, also on an error or Ctrl-C, and it
exits on its own when this process dies (it watches its stdin, a pipe from this process).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from planmode.context import PlanModeContext
from planmode.errors import ConfigurationError

__all__ = [
    "DEFAULT_CHAT_FORMAT",
    "GGUF_MAGIC",
    "INSTALL_HINT",
    "OLLAMA_DEFAULT_CTX",
    "SMALL_PROFILE",
    "DetectedServer",
    "LocalServer",
    "check_gguf",
    "detect_local_server",
    "llama_server",
    "missing_server_modules",
    "replace_given",
    "server_environment",
    "settings_for",
    "small_profile",
    "with_profile",
]

INSTALL_HINT = "pip install 'planmode[local]'"
DEFAULT_N_CTX = 8192
"""Context size of the server: room for a plan and a few tool results without the memory of a 128k context."""
DEFAULT_CHAT_FORMAT = "planmode-tool-calls"
"""The server's chat format: the GGUF's own template, with tool calls the model writes as text returned as real
``tool_calls`` (`planmode.adapters.small_models.llama_tools`). llama-cpp-python's server parses no tool calls
from a model's text."""

# llama_cpp.server imports these (the `server` extra of llama-cpp-python).
_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")

# The child: a watchdog thread ends the server when its stdin (a pipe from the parent) closes, so a parent
# killed with SIGKILL leaves no server behind; then llama_cpp.server runs with the remaining arguments.
_CHILD = """\
import os, runpy, sys, threading
if any(a.endswith("planmode-tool-calls") for a in sys.argv):
    # the small-model adapter's chat format that reads tool calls written as text, and null contents accepted
    import planmode.adapters.small_models.llama_tools as planmode_llama_tools
    planmode_llama_tools.accept_null_content()
def _watch():
    sys.stdin.buffer.read()
    os._exit(0)
threading.Thread(target=_watch, daemon=True).start()
sys.argv = ["llama_cpp.server", *sys.argv[1:]]
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


@dataclass(frozen=True)
class LocalServer:
    """A running server: what to pass as ``base_url`` and ``model``, and its context size in tokens."""

    base_url: str
    model: str
    n_ctx: int
    pid: int


def settings_for(server: LocalServer, settings: PlanModeContext) -> PlanModeContext:
    """``settings`` pointed at ``server`` (``--gguf``), with the small-model profile (`small_profile`) and the
    server's context size."""
    return small_profile(replace_given(settings, base_url=server.base_url, model=server.model), server.n_ctx)


def replace_given(settings: PlanModeContext, **changes: Any) -> PlanModeContext:
    """``settings`` with ``changes``, remembering as given only what ``settings`` was given plus ``changes`` (a
    ``dataclasses.replace`` copy counts every field as given, which `small_profile` reads)."""
    given = {**settings.given(), **changes}
    return PlanModeContext(**given)


#: What the small-model profile sets, each unless the settings were given a value for it: prompted structured
#: output (the JSON shape in the prompt and no grammar to fail or slow decoding, and a shorter prompt than
#: json_object's schema: bench/NOTES.md), messages normalised for strict chat templates, steps one at a time (a local
#: server answers one request at a time, so parallel steps only queue there, and a step that runs another step's file
#: fails when the two run in the other order), a retry of steps a reflection judged failed, and no final summary call
#: (the run's record is the answer).
SMALL_PROFILE: Mapping[str, Any] = MappingProxyType(
    {
        "structured_output": "prompted",
        "normalize_messages": True,
        "max_parallel": 1,
        "retry_judged_failed": True,
        "final_summary": False,
    }
)


def small_profile(settings: PlanModeContext, n_ctx: int | None) -> PlanModeContext:
    """``settings`` with ``model_profile="small"`` and each value of `SMALL_PROFILE` they were not given, and the
    server's context size ``n_ctx`` as the context budget unless one was given. A copy made by
    ``dataclasses.replace`` counts as given every field: pass the settings as the caller made them."""
    given = settings.given()
    changes: dict[str, Any] = {k: v for k, v in SMALL_PROFILE.items() if k not in given}
    if n_ctx and not given.get("context_tokens"):
        changes["context_tokens"] = n_ctx
    return replace_given(settings, model_profile="small", **changes)


@dataclass(frozen=True)
class DetectedServer:
    """A local model server found at a base URL: its kind and the context size it reports (None: it reports none)."""

    kind: Literal["llama.cpp", "ollama"]
    n_ctx: int | None


#: The context size Ollama gives a model when nothing (a Modelfile's num_ctx, OLLAMA_CONTEXT_LENGTH) sets one and no
#: loaded model reports its own (its documented default on small machines); the OpenAI-compatible endpoint cannot
#: change it per request, and a longer prompt is cut silently.
OLLAMA_DEFAULT_CTX = 4096


def detect_local_server(base_url: str, model: str | None = None, *, timeout: float = 2.0) -> DetectedServer | None:
    """The llama.cpp or Ollama server at ``base_url``, by what it answers (one short request each, no retries):
    llama.cpp's ``GET /props`` holds ``default_generation_settings`` (its ``n_ctx`` the context size); Ollama answers
    ``GET /api/version`` with a version (its context size from ``GET /api/ps`` for ``model`` when loaded); a models
    list whose entries are ``owned_by`` ``llamacpp`` is llama.cpp too. None for any other server, or none."""
    from planmode.llm.window import get_json

    root = base_url.rstrip("/")
    root = root[: -len("/v1")] if root.endswith("/v1") else root
    props = get_json(root + "/props", timeout)
    if isinstance(props, dict) and isinstance(props.get("default_generation_settings"), dict):
        n_ctx = props["default_generation_settings"].get("n_ctx") or props.get("n_ctx")
        return DetectedServer("llama.cpp", _positive(n_ctx))
    version = get_json(root + "/api/version", timeout)
    if isinstance(version, dict) and isinstance(version.get("version"), str):
        return DetectedServer("ollama", _ollama_context(root, model, timeout) or OLLAMA_DEFAULT_CTX)
    models = get_json(base_url.rstrip("/") + "/models", timeout)
    data = models.get("data") if isinstance(models, dict) else None
    if isinstance(data, list) and any(isinstance(m, dict) and m.get("owned_by") == "llamacpp" for m in data):
        return DetectedServer("llama.cpp", None)
    return None


def _ollama_context(root: str, model: str | None, timeout: float) -> int | None:
    from planmode.llm.window import get_json

    running = get_json(root + "/api/ps", timeout)
    loaded = running.get("models") if isinstance(running, dict) else None
    for entry in loaded if isinstance(loaded, list) else []:
        if isinstance(entry, dict) and model in (entry.get("name"), entry.get("model")):
            return _positive(entry.get("context_length"))
    return None


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def with_profile(settings: PlanModeContext) -> tuple[PlanModeContext, str | None]:
    """The run's settings with its model profile resolved, and why (None when the profile is default).

    ``model_profile`` small: `small_profile`. default: the settings as they are. Not set, with a ``base_url``: small
    when a llama.cpp or Ollama server answers there (`detect_local_server`), with the context size it reports;
    otherwise default."""
    if settings.model_profile == "default":
        return settings, None
    found = detect_local_server(settings.base_url, settings.model) if settings.base_url else None
    if settings.model_profile == "small":
        return small_profile(settings, found.n_ctx if found else None), "chosen"
    if found is None:
        return replace_given(settings, model_profile="default"), None
    return small_profile(settings, found.n_ctx), f"{found.kind} server detected"


#: The first four bytes of every GGUF file (the format's magic number).
GGUF_MAGIC = b"GGUF"


def check_gguf(model_path: str | os.PathLike[str]) -> Path:
    """The GGUF file at ``model_path``, checked before any server starts: it exists, is a file, and begins with
    the GGUF magic bytes. `ConfigurationError` naming the path otherwise (a server given another file would only
    print its crash text)."""
    path = Path(model_path).expanduser()
    shown = repr(str(path))
    if not path.exists():
        raise ConfigurationError(f"no GGUF model file at {shown}: the file does not exist")
    if not path.is_file():
        raise ConfigurationError(f"no GGUF model file at {shown}: it is a folder, not a file")
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(GGUF_MAGIC))
    except OSError as exc:
        raise ConfigurationError(f"cannot read the GGUF model file {shown}: {exc.strerror or exc}") from None
    if head != GGUF_MAGIC:
        raise ConfigurationError(
            f"{shown} is not a GGUF model file (it does not begin with the GGUF magic bytes): "
            "pass a .gguf model, e.g. one downloaded from Hugging Face"
        )
    return path


def missing_server_modules() -> list[str]:
    """The modules llama-cpp-python's server needs that are not importable here (empty when it can run)."""
    return [name for name in _SERVER_MODULES if not _importable(name)]


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # ValueError: a module set to None in sys.modules (blocked)
        return False


@contextlib.contextmanager
def llama_server(
    model_path: str | os.PathLike[str],
    *,
    n_ctx: int | None = None,
    alias: str | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    extra_args: Sequence[str] | None = None,
    startup_timeout: float = 300.0,
    log_path: str | os.PathLike[str] | None = None,
    chat_format: str | None = DEFAULT_CHAT_FORMAT,
) -> Iterator[LocalServer]:
    """Serve the GGUF file at ``model_path`` on ``host`` for the block; stop the server when it ends.

    Args:
        n_ctx: context size in tokens (default: ``--n_ctx`` in ``extra_args``, else 8192).
        alias: the model name the server answers to (default: the file name without ``.gguf``). A
            llama.cpp server with one model serves it whatever name a request gives.
        port: 0 picks a free port.
        extra_args: more ``llama_cpp.server`` flags, e.g. ``["--n_threads", "4"]`` (default: the
            ``PLANMODE_LLAMA_ARGS`` environment variable, split like a shell). ``--n_threads`` and
            ``--n_threads_batch`` default to the machine's cores (``os.cpu_count()``).
        startup_timeout: seconds to wait for the model to load and ``/v1/models`` to answer.
        log_path: keep the server's output in this file (default: a temporary file, removed afterwards).
        chat_format: the server's ``--chat_format``: `DEFAULT_CHAT_FORMAT` (the GGUF's template, tool calls
            written as text returned as ``tool_calls``), None for the server's own choice (the GGUF's
            template, tool calls left as text), or any format name of llama-cpp-python. A ``--chat_format``
            in ``extra_args`` wins.

    Raises:
        ConfigurationError: the file is missing or not a GGUF model (checked first, also without the extra),
            llama-cpp-python is not installed, or the server did not start (the message quotes the end of its log).
    """
    path = check_gguf(model_path)
    missing = missing_server_modules()
    if missing:
        raise ConfigurationError(
            f"running a GGUF model needs llama-cpp-python with its server (missing: {', '.join(missing)}): "
            f"{INSTALL_HINT}"
        )
    extra = list(extra_args) if extra_args is not None else shlex.split(os.environ.get("PLANMODE_LLAMA_ARGS", ""))
    size = n_ctx if n_ctx is not None else _flag_value(extra, "--n_ctx") or DEFAULT_N_CTX
    name = alias or path.name.removesuffix(".gguf")
    if chat_format is not None and not _has_flag(extra, "--chat_format"):
        extra = [*extra, "--chat_format", chat_format]
    for flag in ("--n_threads", "--n_threads_batch"):  # llama-cpp-python's default leaves cores idle
        if not _has_flag(extra, flag):
            extra = [*extra, flag, str(os.cpu_count() or 1)]
    with contextlib.ExitStack() as stack:
        if log_path is None:
            log_path = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="planmode-llama-"))) / "server.log"
        attempts = 3 if port == 0 else 1  # a free port can be taken between the probe and the bind: retry
        for attempt in range(attempts):
            chosen = port or _free_port(host)
            args = [
                "--model",
                str(path),
                "--model_alias",
                name,
                "--host",
                host,
                "--port",
                str(chosen),
                "--n_ctx",
                str(size),
                *_without_flag(extra, "--n_ctx"),
            ]
            with open(log_path, "wb") as log:
                proc = subprocess.Popen(
                    [sys.executable, "-c", _CHILD, *args],
                    stdin=subprocess.PIPE,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # Ctrl-C reaches planmode, which stops the server after saving
                    env=server_environment(os.environ),
                )
            stack.callback(_stop, proc)
            base_url = f"http://{host}:{chosen}/v1"
            try:
                _wait_ready(proc, base_url, startup_timeout, Path(log_path))
            except _PortTaken:
                if attempt + 1 < attempts:
                    continue
                raise ConfigurationError(f"the llama.cpp server could not bind {host}:{chosen}") from None
            yield LocalServer(base_url=base_url, model=name, n_ctx=size, pid=proc.pid)
            return


class _PortTaken(Exception):
    pass


def server_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The server process's environment: ``environ`` with unbuffered output and, unless ``environ`` sets it,
    ``OMP_WAIT_POLICY=PASSIVE``. llama.cpp's OpenMP threads otherwise spin while they wait for each other; on a
    machine whose cores are busy with other work (a test run, a second server) the spinning threads take the cores
    from the ones with work to do; passive waiting leaves them to the threads that have work (measurements:
    docs/local-models.md)."""
    return {"OMP_WAIT_POLICY": "PASSIVE", **environ, "PYTHONUNBUFFERED": "1"}


def _wait_ready(proc: subprocess.Popen[bytes], base_url: str, timeout: float, log_path: Path) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            tail = _log_tail(log_path)
            if "address already in use" in tail.lower():
                raise _PortTaken
            raise ConfigurationError(f"the llama.cpp server exited with code {proc.returncode} while starting: {tail}")
        try:
            with urllib.request.urlopen(base_url + "/models", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise ConfigurationError(
                f"the llama.cpp server did not answer within {timeout:.0f} s: {_log_tail(log_path) or 'no output'}"
            )
        time.sleep(0.25)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate the server (its own process group), kill it if it lingers, and reap it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdin is not None:
        proc.stdin.close()


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _has_flag(args: Sequence[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in args)


def _flag_value(args: Sequence[str], flag: str) -> int | None:
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args) and args[i + 1].isdigit():
            return int(args[i + 1])
        if arg.startswith(flag + "=") and arg.split("=", 1)[1].isdigit():
            return int(arg.split("=", 1)[1])
    return None


def _without_flag(args: Sequence[str], flag: str) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == flag:
            skip = True
        elif not arg.startswith(flag + "="):
            out.append(arg)
    return out


def _log_tail(path: Path, lines: int = 3) -> str:
    """The last non-empty lines of the server log, joined into one line."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept)[:600]
