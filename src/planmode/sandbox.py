"""The sandbox: the one place where planmode runs a command (a step's declared checks, planmode's own probe code).

What holds for every command, with or without an operating-system sandbox (POSIX only):

- **No shell.** ``argv`` is executed as given. ``python`` or ``python3`` as ``argv[0]`` is planmode's own interpreter
  (`sys.executable`); any other name is looked up on the scrubbed ``PATH`` (absolute folders only), a name with a
  slash is a path relative to the workspace. A command that cannot start is a `CommandResult` with ``error`` set.
- **A scrubbed environment** (`scrubbed_env`): an allow-list, so no API key, no approval key, no ``PLANMODE_*``
  and no proxy reaches the command; ``HOME`` and ``TMPDIR`` are fresh folders, removed afterwards.
- **The workspace is the working folder** (or a copy of it without ``.planmode/`` and ``.git/``: ``copy_workspace``).
- **Limits.** stdin is ``/dev/null`` unless given; the address space (``RLIMIT_AS``), CPU seconds (``RLIMIT_CPU``)
  and core files (none) are limited; the command runs in a session of its own, and its whole process group is
  killed at the timeout and again when it exits (no background process outlives a check). ``RLIMIT_NPROC`` is
  left alone: it counts every process of the user on the machine, not those of the sandbox, so a value low
  enough to stop a fork bomb fails checks on a busy machine, and root is exempt from it anyway.
- **Bounded output.** At most `SandboxPolicy.max_output` bytes per stream are kept; the rest is read and dropped
  (``truncated``), so a command printing without end costs no memory.

Under bubblewrap (Linux, when ``bwrap`` can create namespaces here; `sandbox_status` says whether it can), also:
a read-only root; every home folder (the user's, ``/root``, ``/home``) hidden behind an empty read-only
``tmpfs``, with the Python installation re-exposed read-only where it lies in one; ``/tmp`` a private ``tmpfs``
dropped with the sandbox; only the workspace (and the fresh ``HOME``/``TMPDIR``) writable, so nothing written
elsewhere reaches this machine; every ``.planmode/`` from the workspace up (the run database, the journal) and
the approval key file (`planmode.approval_key.key_file`) hidden; no network unless `SandboxPolicy.network`; new
user, PID, IPC and UTS namespaces, no capabilities, and no new user namespace inside (the user namespace where
the kernel allows it); no other process is visible, and when the command's first process ends every process in
the sandbox ends. On macOS, ``sandbox-exec`` denies the network, writes outside the workspace and the fresh
folders, and reading the same secrets (a small profile, untested by the suite).

Without an operating-system sandbox, a command can read and write whatever the user can (including the
approval key file and ``/proc/<pid>/environ`` of planmode's own process), and a process that starts a session
of its own escapes the group kill; `SandboxStatus.reason` says so on the approval screen.
"""

from __future__ import annotations

import codecs
import functools
import os
import resource
import selectors
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal, NamedTuple

from planmode.approval_key import key_file
from planmode.errors import CommandError

__all__ = [
    "CommandResult",
    "SandboxPolicy",
    "SandboxStatus",
    "run_command",
    "run_python_probe",
    "sandbox_status",
    "scrubbed_env",
    "split_command",
]


@dataclass(frozen=True, kw_only=True)
class SandboxPolicy:
    """How a command runs. A value of 0 or less for ``memory_mb`` or ``cpu_seconds`` sets no such limit."""

    isolate: bool = True
    """Use bubblewrap (Linux) or sandbox-exec (macOS) when it works here (`sandbox_status`)."""
    timeout: float = 60.0
    """Seconds of wall-clock time; then the command's whole process group is killed (``timed_out``)."""
    max_output: int = 65_536
    """Bytes kept per stream (stdout, stderr); the rest is dropped and ``truncated`` set."""
    memory_mb: int = 2048
    """The address-space limit (``RLIMIT_AS``) in MiB."""
    cpu_seconds: int = 120
    """The CPU-time limit (``RLIMIT_CPU``): ``SIGXCPU`` at this many seconds, ``SIGKILL`` one second later."""
    network: bool = False
    """Under an operating-system sandbox: allow the network (by default there is none, not even loopback)."""


@dataclass(frozen=True)
class SandboxStatus:
    """Whether commands run under an operating-system sandbox here, in one line a user reads at approval."""

    kind: Literal["bubblewrap", "sandbox-exec", "none"]
    active: bool
    reason: str


@dataclass(frozen=True)
class CommandResult:
    """What one command did. ``exit_code`` is None when it did not start (``error`` says why) or was killed at the
    timeout; a signal that ended it shows as its negative number (``-24``: the CPU limit), or, under bubblewrap,
    as 128 plus its number (as a shell shows it). ``stdout``/``stderr`` are the kept bytes decoded as UTF-8
    (``errors="replace"``; a character cut by truncation is left out). ``timed_out`` with an exit code: the
    command exited, but a process it started kept its output open until the timeout."""

    argv: tuple[str, ...]
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False
    sandboxed: bool = False
    error: str | None = None
    seconds: float = 0.0


_PYTHON_NAMES = frozenset({"python", "python3"})
_NOT_COPIED = frozenset({".planmode", ".git"})
_PLANMODE_DIR = ".planmode"
_CHUNK = 65_536
_POLL = 0.05  # seconds between checks whether the command exited while its pipes stay open
_PROBE_TIMEOUT = 15.0

#: Namespace flags, strongest first; the first that works here is used (`_bwrap_probe`). Capabilities are
#: dropped in both: as root, bubblewrap keeps them otherwise, and a command could remount the root read-write.
_BWRAP_VARIANTS: tuple[tuple[str, ...], ...] = (
    ("--unshare-user", "--disable-userns", "--cap-drop", "ALL"),
    ("--cap-drop", "ALL"),
)
_BWRAP_COMMON = ("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session")

#: Run by `run_python_probe` with ``python -I``: the working folder (the workspace) goes to the END of sys.path,
#: after the standard library and site-packages, then the probe code runs as ``__main__`` with ``sys.argv == ['-c']``.
_PROBE_BOOTSTRAP = (
    "import os, sys\n"
    "sys.path.append(os.getcwd())\n"
    "_code = sys.argv.pop(1)\n"
    "exec(compile(_code, '<probe>', 'exec'), {'__name__': '__main__', '__builtins__': __builtins__})\n"
)


def scrubbed_env(home: str, tmp: str) -> dict[str, str]:
    """The environment of every command: an allow-list, nothing else.

    ``PATH`` (the folder of `sys.executable` first, then the absolute folders of this process's ``PATH``: a
    relative or empty entry would look commands up in the workspace), ``LANG``, ``LC_*``, ``TZ`` and ``TERM``
    when set here; ``HOME=home``, ``TMPDIR=tmp``, ``PYTHONDONTWRITEBYTECODE=1``, ``PYTHONNOUSERSITE=1``.
    """
    first = os.path.dirname(sys.executable)
    folders = [first] if first else []
    for folder in (os.environ.get("PATH") or os.defpath).split(os.pathsep):
        if os.path.isabs(folder) and folder not in folders:
            folders.append(folder)
    env = {"PATH": os.pathsep.join(folders)}
    for name, value in os.environ.items():
        if name in ("LANG", "TZ", "TERM") or name.startswith("LC_"):
            env[name] = value
    env.update(HOME=home, TMPDIR=tmp, PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1")
    return env


def split_command(command: str) -> list[str]:
    """Split a command line into argv as a POSIX shell would quote it (`shlex.split`); no shell ever runs it.

    Raises `CommandError` (a ValueError) on an unclosed quote or a trailing escape, and when nothing is left."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise CommandError(f"cannot split the command {command!r} into arguments: {str(exc).lower()}") from exc
    if not argv:
        raise CommandError(f"the command {command!r} is empty: there is nothing to run")
    return argv


# -- is an operating-system sandbox available? ------------------------------------------------------------------


class _Bwrap(NamedTuple):
    """How bubblewrap runs here: its path, the namespace flags that work, whether it takes ``--size``."""

    exe: str
    flags: tuple[str, ...]
    sized: bool


def _fails(argv: list[str]) -> str | None:
    """None when `argv` runs and exits 0, else the last line it printed on stderr (or what went wrong)."""
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=_PROBE_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode == 0:
        return None
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else f"exit code {done.returncode}"


@functools.cache
def _bwrap_probe() -> _Bwrap | str:
    """How bubblewrap runs here, or why it cannot be used. Runs ``bwrap ... true`` (once per variant tried)."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "bwrap not found (apt-get install bubblewrap)"
    true = shutil.which("true") or "/bin/true"
    base = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net", *_BWRAP_COMMON]
    message = ""
    for flags in _BWRAP_VARIANTS:
        failure = _fails([exe, *flags, *base, "--", true])
        if failure is None:
            sized = _fails([exe, *flags, *base, "--size", str(1 << 20), "--tmpfs", "/tmp", "--", true]) is None
            return _Bwrap(exe, flags, sized)
        message = failure
    return f"bwrap cannot create namespaces here: {message}"


@functools.cache
def _seatbelt_probe() -> str | None:
    """None when ``sandbox-exec`` runs a command here, else why not."""
    exe = shutil.which("sandbox-exec")
    if exe is None:
        return "sandbox-exec not found"
    failure = _fails([exe, "-p", "(version 1)(allow default)", shutil.which("true") or "/usr/bin/true"])
    return None if failure is None else f"sandbox-exec does not run here: {failure}"


def sandbox_status(policy: SandboxPolicy | None = None) -> SandboxStatus:
    """Whether commands run under `policy` are isolated here, and the one line that says so.

    The first call probes the operating system by running ``bwrap ... true`` (or ``sandbox-exec``) once; the answer
    is cached for the process."""
    policy = policy or SandboxPolicy()
    if not policy.isolate:
        return SandboxStatus("none", False, "off: isolation is turned off (SandboxPolicy(isolate=False))")
    network = "network allowed" if policy.network else "no network"
    if sys.platform.startswith("linux"):
        probe = _bwrap_probe()
        if isinstance(probe, str):
            return SandboxStatus("none", False, f"off: {probe}")
        return SandboxStatus(
            "bubblewrap", True, f"bubblewrap: read-only root, only the workspace writable, {network}, home hidden"
        )
    if sys.platform == "darwin":
        why = _seatbelt_probe()
        if why is not None:
            return SandboxStatus("none", False, f"off: {why}")
        return SandboxStatus("sandbox-exec", True, f"sandbox-exec: only the workspace writable, {network}")
    return SandboxStatus("none", False, f"off: no sandbox for {sys.platform}")


# -- running ---------------------------------------------------------------------------------------------------


def run_command(
    argv: Sequence[str],
    workspace: str | Path,
    policy: SandboxPolicy | None = None,
    *,
    copy_workspace: bool = False,
    stdin: str | None = None,
) -> CommandResult:
    """Run `argv` in the sandbox (see the module docstring) with the workspace as the working folder.

    With ``copy_workspace``, the command runs in a fresh copy of the workspace (without ``.planmode/`` and
    ``.git/``, symbolic links copied as links, files that are not regular left out), so it cannot change the
    workspace. Never raises for a command that fails or cannot start: the result says what happened."""
    policy = policy or SandboxPolicy()
    args = tuple(argv)
    started = time.monotonic()

    def failed(error: str) -> CommandResult:
        return CommandResult(args, None, "", "", error=error, seconds=time.monotonic() - started)

    if not args:
        return failed("the command is empty: there is nothing to run")
    ws = Path(workspace).resolve()
    if not ws.is_dir():
        return failed(f"the workspace is not a folder: {ws}")
    status = sandbox_status(policy)
    with tempfile.TemporaryDirectory(prefix="planmode-sandbox-", ignore_cleanup_errors=True) as scratch_name:
        scratch = Path(scratch_name).resolve()
        home, tmp = scratch / "home", scratch / "tmp"
        home.mkdir()
        tmp.mkdir()
        run_dir = ws
        if copy_workspace:
            run_dir = scratch / "copy" / ws.name
            try:
                _copy_workspace(ws, run_dir)
            except (OSError, shutil.Error) as exc:
                return failed(f"cannot copy the workspace {ws}: {exc}")
        env = scrubbed_env(str(home), str(tmp))
        exe = _resolve(args[0], env["PATH"], run_dir)
        if exe is None:
            return failed(f"command not found: {args[0]}")
        command = [exe, *args[1:]]
        if status.kind == "bubblewrap":
            probe = _bwrap_probe()
            assert not isinstance(probe, str)  # the status is active only when the probe succeeded
            command = _bwrap_argv(probe, policy, command, ws=run_dir, keep=(home, tmp), secrets=_secrets(ws))
        elif status.kind == "sandbox-exec":
            profile = _seatbelt_profile(policy, run_dir, (home, tmp), _secrets(ws))
            command = [shutil.which("sandbox-exec") or "/usr/bin/sandbox-exec", "-p", profile, *command]
        stdin_file: IO[bytes] | None = None
        if stdin is not None:
            stdin_path = scratch / "stdin"
            stdin_path.write_bytes(stdin.encode("utf-8", "surrogateescape"))
            stdin_file = stdin_path.open("rb")
        try:
            proc = subprocess.Popen(
                command,
                cwd=run_dir,
                env=env,
                stdin=stdin_file if stdin_file is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=functools.partial(_set_limits, policy.memory_mb, policy.cpu_seconds),
            )
        except (OSError, ValueError) as exc:  # ValueError: a NUL character in an argument
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            return failed(f"cannot start {args[0]}: {reason}")
        finally:
            if stdin_file is not None:
                stdin_file.close()
        out, err, timed_out, killed = _collect(proc, policy)
        return CommandResult(
            args,
            None if killed else proc.returncode,
            out.text(),
            err.text(),
            timed_out=timed_out,
            truncated=out.dropped or err.dropped,
            sandboxed=status.active,
            seconds=time.monotonic() - started,
        )


def run_python_probe(
    code: str, workspace: str | Path, policy: SandboxPolicy | None = None, *, copy_workspace: bool = False
) -> CommandResult:
    """Run planmode's own Python `code` in the sandbox: ``python -I`` (no ``PYTHON*`` variables, no user site, no
    script folder on ``sys.path``), with the workspace appended to ``sys.path`` after the standard library and
    site-packages, so the workspace's modules import and none of them shadows an installed one."""
    return run_command(["python", "-I", "-c", _PROBE_BOOTSTRAP, code], workspace, policy, copy_workspace=copy_workspace)


# -- helpers ---------------------------------------------------------------------------------------------------


def _resolve(name: str, path: str, run_dir: Path) -> str | None:
    """The executable `name` stands for: planmode's interpreter, a workspace path, or a match on `path`."""
    if name in _PYTHON_NAMES:
        return sys.executable
    if os.sep in name:
        candidate = Path(name) if os.path.isabs(name) else run_dir / name
        return name if candidate.is_file() and os.access(candidate, os.X_OK) else None
    return shutil.which(name, path=path)


def _set_limits(memory_mb: int, cpu_seconds: int) -> None:
    """In the child before exec: lower the limits (soft and hard, so the command cannot raise them again)."""

    def lower(which: int, soft: int, hard: int) -> None:
        _, current = resource.getrlimit(which)
        if current != resource.RLIM_INFINITY:
            soft, hard = min(soft, current), min(hard, current)
        resource.setrlimit(which, (soft, hard))

    if memory_mb > 0:
        lower(resource.RLIMIT_AS, memory_mb * 1024 * 1024, memory_mb * 1024 * 1024)
    if cpu_seconds > 0:
        lower(resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 1)
    lower(resource.RLIMIT_CORE, 0, 0)


class _Capture:
    """The first `cap` bytes of a stream; whether more came."""

    def __init__(self, cap: int) -> None:
        self.cap = max(cap, 0)
        self.data = bytearray()
        self.dropped = False

    def feed(self, chunk: bytes) -> None:
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        if len(chunk) > room:
            self.dropped = True

    def text(self) -> str:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        return decoder.decode(bytes(self.data), final=not self.dropped)


def _collect(proc: subprocess.Popen[bytes], policy: SandboxPolicy) -> tuple[_Capture, _Capture, bool, bool]:
    """Read both pipes until they close, the command's group killed once it exits; kill it all at the deadline,
    and on the way out whatever happens (an interrupt of this process included).

    Returns ``(stdout, stderr, timed_out, killed)``; ``killed``: the command itself was still running at the
    deadline. ``timed_out`` without ``killed``: it exited, but a process it left kept its output open."""
    assert proc.stdout is not None and proc.stderr is not None
    out, err = _Capture(policy.max_output), _Capture(policy.max_output)
    captures = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    deadline = time.monotonic() + policy.timeout
    exited = timed_out = False
    try:
        with selectors.DefaultSelector() as selector:
            for fd in captures:
                selector.register(fd, selectors.EVENT_READ)
            while selector.get_map():
                if not exited and _has_exited(proc):
                    _kill_group(proc.pid)  # before reaping: the group id cannot be reused meanwhile
                    exited = True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                for key, _ in selector.select(remaining if exited else min(remaining, _POLL)):
                    chunk = os.read(key.fd, _CHUNK)
                    if chunk:
                        captures[key.fd].feed(chunk)
                    else:
                        selector.unregister(key.fd)
        pause = 0.001
        while not exited and time.monotonic() < deadline:  # the pipes closed: the command is exiting, or closed them
            exited = _has_exited(proc)
            if not exited:
                time.sleep(pause)
                pause = min(pause * 2, _POLL)
    finally:
        _kill_group(proc.pid)
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    return out, err, timed_out or not exited, not exited


def _has_exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the process exited, without reaping it (so its process group id stays reserved)."""
    if proc.returncode is not None:
        return True
    if hasattr(os, "waitid"):
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    return proc.poll() is not None


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:  # the group is already empty
        return
    except PermissionError:  # macOS: the group holds only the leader's zombie
        return


def _copy_workspace(source: Path, dest: Path) -> None:
    """Copy the workspace for a run that must not change it: no ``.planmode/``, no ``.git/``, no approval key."""
    key = _key_file()

    def ignore(folder: str, names: list[str]) -> set[str]:
        skipped = set(names) & _NOT_COPIED if Path(folder) == source else set()
        if key is not None:
            skipped |= {name for name in names if Path(folder, name) == key}
        return skipped

    shutil.copytree(source, dest, symlinks=True, ignore=ignore, copy_function=_copy_regular_file)


def _copy_regular_file(source: str, dest: str) -> None:
    """Copy a regular file; a FIFO, socket or device is left out (opening a FIFO would block the copy)."""
    if stat.S_ISREG(os.lstat(source).st_mode):
        shutil.copy2(source, dest)


def _key_file() -> Path | None:
    """The approval key file, resolved, when it exists."""
    try:
        path = key_file().resolve()
    except (RuntimeError, OSError):  # no home folder to find it in
        return None
    return path if path.is_file() else None


def _home_folders() -> list[Path]:
    """Every folder that holds a user's home: this user's (``$HOME`` and the password database's), ``/root``,
    ``/home``; those that exist, resolved."""
    candidates = [os.environ.get("HOME"), os.path.expanduser("~"), "/root", "/home"]
    found: list[Path] = []
    for candidate in candidates:
        if not candidate:
            continue
        path = Path(candidate).resolve()
        if path.is_dir() and path != Path("/") and path not in found:
            found.append(path)
    return found


def _python_folders() -> list[Path]:
    """Where this Python's installation lies (the interpreter, the standard library, the virtual environment)."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.add(os.path.dirname(sys.executable))
    paths.add(os.path.dirname(os.path.realpath(sys.executable)))
    return sorted({Path(p).resolve() for p in paths if p})


def _outermost(paths: Sequence[Path]) -> list[Path]:
    """The paths that lie under none of the others (a bind of a folder covers what lies under it)."""
    unique = sorted(set(paths), key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in unique:
        if not any(path.is_relative_to(outer) for outer in kept):
            kept.append(path)
    return kept


def _secrets(ws: Path) -> list[Path]:
    """What a command must not read: every ``.planmode/`` folder from the workspace up to the root (where the
    run database is found, as git finds ``.git``), the approval key file and its folder; resolved."""
    found = [(folder / _PLANMODE_DIR).resolve() for folder in (ws, *ws.parents) if (folder / _PLANMODE_DIR).is_dir()]
    key = _key_file()
    if key is not None:
        found += [key.parent, key]
    return found


def _bwrap_argv(
    bwrap: _Bwrap,
    policy: SandboxPolicy,
    command: list[str],
    *,
    ws: Path,
    keep: tuple[Path, ...],
    secrets: Sequence[Path],
) -> list[str]:
    """The bubblewrap command line around `command`. bubblewrap mounts in order: first the hiding ``tmpfs``
    (``/tmp``, a private scratch; the homes), then what is re-exposed read-only (Python), then the writable
    folders, then the `secrets` (an empty ``tmpfs`` over a folder, ``/dev/null`` over a file; a folder that holds
    a re-exposed one is left to its files); last, every hiding ``tmpfs`` but ``/tmp`` is made read-only, so
    nothing a command writes outside the workspace and the fresh ``HOME``/``TMPDIR`` lands anywhere."""
    argv = [bwrap.exe, *bwrap.flags, *_BWRAP_COMMON]
    if not policy.network:
        argv.append("--unshare-net")
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    scratch = Path("/tmp").resolve()
    hidden = _outermost([scratch, *_home_folders()])
    for folder in hidden:
        if folder == scratch and bwrap.sized and policy.memory_mb > 0:  # a tmpfs is memory: count it as such
            argv += ["--size", str(policy.memory_mb << 20)]
        argv += ["--tmpfs", str(folder)]
    readable = list(_python_folders())
    if os.path.isabs(command[0]):  # the command's own folder, when it lies in a hidden one (~/.local/bin)
        readable += [Path(command[0]).parent, Path(command[0]).resolve().parent]
    readable = _outermost([p for p in readable if p.is_dir() and any(p.is_relative_to(h) for h in hidden)])
    for folder in readable:
        argv += ["--ro-bind", str(folder), str(folder)]
    writable = (*keep, ws)
    for folder in writable:
        argv += ["--bind", str(folder), str(folder)]
    sealed = [h for h in hidden if h != scratch and h not in (*readable, *writable)]
    for secret in secrets:
        if secret.is_dir():
            if secret != Path("/") and not any(p.is_relative_to(secret) for p in (*writable, *readable)):
                argv += ["--tmpfs", str(secret)]
                sealed.append(secret)
        elif secret.exists():
            argv += ["--ro-bind", "/dev/null", str(secret)]
    for folder in sealed:
        argv += ["--remount-ro", str(folder)]
    argv += ["--chdir", str(ws), "--", *command]
    return argv


def _seatbelt_profile(policy: SandboxPolicy, ws: Path, keep: tuple[Path, ...], secrets: Sequence[Path]) -> str:
    """A sandbox-exec profile: writes only to the workspace and the fresh folders, no network unless allowed,
    the `secrets` unreadable. (Later rules win in this language.)"""

    def quoted(path: Path) -> str:
        return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'

    rules = ["(version 1)", "(allow default)"]
    if not policy.network:
        rules.append("(deny network*)")
    writable = " ".join(f"(subpath {quoted(p)})" for p in (ws, *keep))
    rules += ["(deny file-write*)", f'(allow file-write* {writable} (literal "/dev/null"))']
    if secrets:
        rules.append("(deny file-read* file-write* " + " ".join(f"(subpath {quoted(p)})" for p in secrets) + ")")
    return "\n".join(rules)
