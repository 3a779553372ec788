"""Attacks on the sandbox (`planmode.sandbox`): each test is something a command run by a check must not be able
to do, or a promise of `run_command` that a plain ``subprocess.run(argv, cwd=workspace)`` would break.

Tests marked with `require_bubblewrap` run only where bubblewrap works (CI installs it, `.ci/run`); elsewhere they
check that `sandbox_status` says the sandbox is off, then skip with its reason."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from planmode import sandbox
from planmode.errors import CommandError, PlanModeError
from planmode.sandbox import (
    CommandResult,
    SandboxPolicy,
    run_command,
    run_python_probe,
    sandbox_status,
    scrubbed_env,
    split_command,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the sandbox runs commands on POSIX systems")

#: Both ways a command can run here: under the operating-system sandbox when there is one, and without it.
BOTH = pytest.mark.parametrize("isolate", [True, False], ids=["isolated", "plain"])


def require_bubblewrap() -> None:
    """Skip unless commands run under bubblewrap here; then the status must say that the sandbox is off."""
    status = sandbox_status()
    if status.kind != "bubblewrap":
        assert not status.active
        assert status.reason.startswith("off: "), status.reason
        pytest.skip(status.reason)
    assert status.active


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


def py(code: str, ws: Path, **policy: Any) -> CommandResult:
    return run_command(["python", "-c", code], ws, SandboxPolicy(**policy))


def ok(result: CommandResult) -> CommandResult:
    assert result.error is None and result.exit_code == 0, result
    return result


# -- the environment -----------------------------------------------------------------------------------------


@BOTH
def test_a_command_sees_no_key_and_no_planmode_setting(
    ws: Path, isolate: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = {
        "OPENAI_API_KEY": "sk-sandbox-test-openai",
        "PLANMODE_APPROVAL_KEY": "sandbox-test-approval-key-0123456789",
        "PLANMODE_POSTGRES_URL": "postgresql://user:secret@db/planmode",
        "ANTHROPIC_API_KEY": "sk-ant-sandbox-test",
        "HTTPS_PROXY": "http://user:secret@proxy:3128",
        "PYTHONPATH": "/planmode-sandbox-test/site",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    result = ok(py("import json, os; print(json.dumps(dict(os.environ)))", ws, isolate=isolate))
    seen = json.loads(result.stdout)
    assert not set(secrets) & set(seen)
    assert not any(name.startswith("PLANMODE_") for name in seen)
    assert not any(value in result.stdout for value in secrets.values())


def test_the_environment_is_an_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", os.pathsep.join(["", ".", "bin", "/usr/bin"]))
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret")
    env = scrubbed_env("/h", "/t")
    assert set(env) == {"PATH", "LC_ALL", "HOME", "TMPDIR", "PYTHONDONTWRITEBYTECODE", "PYTHONNOUSERSITE"} | (
        {"LANG", "TZ", "TERM"} & set(os.environ)
    )
    assert env["PATH"].split(os.pathsep) == [os.path.dirname(sys.executable), "/usr/bin"]
    assert (env["HOME"], env["TMPDIR"]) == ("/h", "/t")


def test_a_relative_path_entry_does_not_find_a_command_in_the_workspace(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = ws / "planmode-sandbox-tool"
    tool.write_text("#!/bin/sh\necho PWNED\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([".", os.environ.get("PATH", os.defpath)]))
    result = run_command(["planmode-sandbox-tool"], ws)
    assert result.error == "command not found: planmode-sandbox-tool"
    assert "PWNED" not in result.stdout
    # named as a path, it is the workspace's own program and runs
    assert ok(run_command(["./planmode-sandbox-tool"], ws)).stdout == "PWNED\n"


def test_python_is_planmodes_interpreter_not_one_on_the_path(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    for name in ("python", "python3"):
        (fake / name).write_text("#!/bin/sh\necho FAKE\n")
        (fake / name).chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(fake), os.environ.get("PATH", os.defpath)]))
    for name in ("python", "python3"):
        result = ok(run_command([name, "-c", "import sys; print(sys.executable)"], ws, SandboxPolicy(isolate=False)))
        assert result.stdout.strip() == sys.executable


@BOTH
def test_home_and_tmpdir_are_fresh_folders_removed_afterwards(ws: Path, isolate: bool) -> None:
    code = (
        "import json, os, tempfile; home = os.environ['HOME']; open(os.path.join(home, 'f'), 'w').write('x');"
        "print(json.dumps([home, os.listdir(home), os.environ['TMPDIR'], tempfile.gettempdir()]))"
    )
    home, listed, tmp, gettempdir = json.loads(ok(py(code, ws, isolate=isolate)).stdout)
    assert home != str(Path.home()) and Path(home).resolve() != Path.home().resolve()
    assert listed == ["f"]  # it was empty
    assert gettempdir == tmp
    assert not Path(home).exists() and not Path(tmp).exists()


def test_the_real_home_is_hidden(ws: Path) -> None:
    require_bubblewrap()
    files = [str(p) for p in Path.home().iterdir() if p.is_file() and os.access(p, os.R_OK)]
    if not files:
        pytest.skip(f"no readable file in the home folder {Path.home()} to look for")
    code = "import json, os, sys; print(json.dumps([os.path.exists(p) for p in sys.argv[1:]]))"
    result = ok(run_command(["python", "-c", code, *files], ws))
    assert json.loads(result.stdout) == [False] * len(files), files


def test_the_approval_key_file_is_hidden(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_bubblewrap()
    for key in (ws / "keys" / "approval.key", ws / "approval.key"):  # in a folder of its own, and beside the code
        key.parent.mkdir(exist_ok=True)
        key.write_text("k" * 64)
        monkeypatch.setenv("PLANMODE_APPROVAL_KEY_FILE", str(key))
        code = "import sys; print(repr(open(sys.argv[1]).read()))"
        result = run_command(["python", "-c", code, str(key)], ws)
        assert "k" * 16 not in result.stdout + result.stderr, result
        assert key.read_text() == "k" * 64  # and it is still there


def test_a_copied_workspace_leaves_the_approval_key_out(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = ws / "approval.key"
    key.write_text("k" * 64)
    monkeypatch.setenv("PLANMODE_APPROVAL_KEY_FILE", str(key))
    (ws / "a.txt").write_text("a")
    result = ok(run_command(["python", "-c", "import os; print(sorted(os.listdir()))"], ws, copy_workspace=True))
    assert result.stdout.strip() == "['a.txt']"


def test_the_run_database_folder_is_hidden(ws: Path) -> None:
    require_bubblewrap()
    state = ws / ".planmode"
    state.mkdir()
    (state / "runs.db").write_text("approvals")
    code = "import os, shutil; print(os.listdir('.planmode')); shutil.rmtree('.planmode', ignore_errors=True)"
    assert ok(run_command(["python", "-c", code], ws)).stdout.strip() == "[]"
    assert (state / "runs.db").read_text() == "approvals"


@pytest.fixture
def visible_root() -> Iterator[Path]:
    """A folder outside /tmp and the homes (which bubblewrap hides whole), so that only the sandbox's own
    hiding of what lies in it is tested."""
    base = Path("/var/tmp")
    if not base.is_dir() or not os.access(base, os.W_OK):
        pytest.skip("/var/tmp is not a writable folder here")
    folder = Path(tempfile.mkdtemp(prefix="planmode-sandbox-test-", dir=base))
    yield folder
    shutil.rmtree(folder)


@pytest.mark.parametrize("copy", [False, True], ids=["in-place", "copy"])
def test_every_run_database_folder_above_the_workspace_is_hidden(visible_root: Path, copy: bool) -> None:
    require_bubblewrap()
    ws = visible_root / "project" / "ws"
    for state in (visible_root / ".planmode", ws / ".planmode"):  # the database is found upward, as git finds .git
        state.mkdir(parents=True)
        (state / "planmode.sqlite").write_text("approvals")
    databases = [str(visible_root / ".planmode" / "planmode.sqlite"), str(ws / ".planmode" / "planmode.sqlite")]
    code = "import json, os, sys; print(json.dumps([os.path.exists(p) for p in sys.argv[1:]]))"
    result = ok(run_command(["python", "-c", code, *databases], ws, copy_workspace=copy))
    assert json.loads(result.stdout) == [False, False]


def test_no_other_process_environment_is_readable(ws: Path) -> None:
    require_bubblewrap()
    token = f"planmode-sandbox-secret-{uuid.uuid4().hex}"
    holder = subprocess.Popen(["sleep", "30"], env={**os.environ, "HOLDER_SECRET": token})
    try:
        code = (
            "import os, sys\n"
            "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
            "    try:\n"
            "        data = open(f'/proc/{pid}/environ', 'rb').read()\n"
            "    except OSError:\n"
            "        continue\n"
            "    if sys.argv[1].encode() in data:\n"
            "        print('FOUND', pid)\n"
        )
        result = ok(run_command(["python", "-c", code, token], ws))
        assert "FOUND" not in result.stdout
    finally:
        holder.kill()
        holder.wait()


# -- the file system and the network under bubblewrap ----------------------------------------------------------


def test_a_command_cannot_write_outside_the_workspace(ws: Path, tmp_path: Path) -> None:
    require_bubblewrap()
    sibling = tmp_path / "outside.txt"  # /tmp is the sandbox's own: a write there never reaches this one
    refused = [
        Path.home() / f"planmode-sandbox-{uuid.uuid4().hex}.txt",
        Path(sys.prefix) / f"planmode-sandbox-{uuid.uuid4().hex}.txt",
        Path("/") / f"planmode-sandbox-{uuid.uuid4().hex}.txt",
    ]
    code = (
        "import sys\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        open(path, 'w').write('pwned')\n"
        "        print('wrote', path)\n"
        "    except OSError as exc:\n"
        "        print('refused', exc.errno, path)\n"
        "open('inside.txt', 'w').write('ok')\n"
    )
    try:
        result = ok(run_command(["python", "-c", code, str(sibling), *map(str, refused)], ws))
        assert [t for t in [sibling, *refused] if t.exists()] == []
        for target in refused:
            assert f"refused 30 {target}" in result.stdout, result.stdout  # EROFS
        assert (ws / "inside.txt").read_text() == "ok"
    finally:
        for target in [sibling, *refused]:
            target.unlink(missing_ok=True)


def test_a_command_cannot_reach_the_network(ws: Path) -> None:
    require_bubblewrap()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        code = (
            "import socket, sys\n"
            "try:\n"
            "    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5).close()\n"
            "    print('connected')\n"
            "except OSError as exc:\n"
            "    print('refused', exc)\n"
        )
        closed = ok(run_command(["python", "-c", code, str(port)], ws))
        assert closed.stdout.startswith("refused"), closed
        # the same command with the network allowed does connect: the check above can see a connection
        opened = ok(run_command(["python", "-c", code, str(port)], ws, SandboxPolicy(network=True)))
        assert opened.stdout.startswith("connected"), opened


# -- planmode's own probe code --------------------------------------------------------------------------------


@BOTH
def test_a_workspace_module_does_not_shadow_the_standard_library_in_a_probe(ws: Path, isolate: bool) -> None:
    marker = ws / "shadowed"
    (ws / "json.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\ndumps = lambda value: 'FAKE'\n")
    (ws / "mymod.py").write_text("VALUE = 42\n")
    code = "import json, mymod, sys; print(json.dumps([mymod.VALUE, sys.argv]))"
    result = ok(run_python_probe(code, ws, SandboxPolicy(isolate=isolate)))
    assert json.loads(result.stdout) == [42, ["-c"]]
    assert not marker.exists()


# -- limits --------------------------------------------------------------------------------------------------


def _processes_with(token: str) -> list[int]:
    """Host processes whose command line holds `token` (Linux /proc)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline:
            found.append(int(pid))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="looks for the processes in /proc")
@BOTH
def test_the_timeout_kills_the_command_and_its_children(ws: Path, isolate: bool) -> None:
    token = f"{uuid.uuid4().int % 10**6}.{uuid.uuid4().int % 10**6 + 10**6}"  # a unique `sleep` argument
    code = (
        "import subprocess, sys\n"
        "subprocess.Popen(['sleep', sys.argv[1]])\n"
        "print('started', flush=True)\n"
        "while True:\n"
        "    pass\n"
    )
    result = run_command(["python", "-c", code, token], ws, SandboxPolicy(timeout=1.5, isolate=isolate))
    assert result.timed_out and result.exit_code is None, result
    assert result.stdout == "started\n"
    assert result.seconds < 10
    deadline = time.monotonic() + 3
    while _processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_with(token) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="looks for the processes in /proc")
@BOTH
def test_no_background_process_outlives_a_command(ws: Path, isolate: bool) -> None:
    token = f"{uuid.uuid4().int % 10**6}.{uuid.uuid4().int % 10**6 + 10**6}"
    code = "import subprocess, sys; subprocess.Popen(['sleep', sys.argv[1]]); print('started')"
    result = ok(run_command(["python", "-c", code, token], ws, SandboxPolicy(timeout=20, isolate=isolate)))
    assert not result.timed_out and result.seconds < 10
    deadline = time.monotonic() + 3
    while _processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_with(token) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="looks for the processes in /proc")
@BOTH
def test_a_process_that_leaves_the_session(ws: Path, isolate: bool) -> None:
    """Under bubblewrap it ends with the command; without, it escapes the group kill (the documented limit), and
    while it holds the output open the command is reported timed out, with its exit code."""
    if isolate:
        require_bubblewrap()
    token = f"{uuid.uuid4().int % 10**6}.{uuid.uuid4().int % 10**6 + 10**6}"
    code = "import subprocess, sys; subprocess.Popen(['sleep', sys.argv[1]], start_new_session=True); print('up')"
    try:
        result = run_command(["python", "-c", code, token], ws, SandboxPolicy(timeout=2, isolate=isolate))
        assert result.exit_code == 0 and result.stdout == "up\n", result
        deadline = time.monotonic() + 3
        while isolate and _processes_with(token) and time.monotonic() < deadline:
            time.sleep(0.05)
        if isolate:
            assert not result.timed_out and _processes_with(token) == []
        else:
            assert result.timed_out and _processes_with(token) != []
    finally:
        for pid in _processes_with(token):
            os.kill(pid, signal.SIGKILL)


class _Interrupted(Exception):
    pass


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="looks for the processes in /proc")
@BOTH
def test_an_interrupted_run_leaves_no_process(ws: Path, isolate: bool) -> None:
    token = f"{uuid.uuid4().int % 10**6}.{uuid.uuid4().int % 10**6 + 10**6}"

    def interrupt(signum: int, frame: object) -> None:
        raise _Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(_Interrupted):
            run_command(["sleep", token], ws, SandboxPolicy(timeout=30, isolate=isolate))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        leftover = _processes_with(token)
        for pid in leftover:
            os.kill(pid, signal.SIGKILL)
    assert leftover == []


def test_the_cpu_limit_stops_a_busy_command(ws: Path) -> None:
    result = py("while True: pass", ws, cpu_seconds=1, timeout=30)
    # killed by SIGXCPU (or SIGKILL at the hard limit); bubblewrap reports a signal as 128 + its number
    signals = (signal.SIGXCPU, signal.SIGKILL)
    assert result.exit_code in [128 + s if result.sandboxed else -s for s in signals], result
    assert not result.timed_out and result.seconds < 20


def test_the_memory_limit_stops_a_large_allocation(ws: Path) -> None:
    code = (
        "try:\n    b = bytearray(600 * 1024 * 1024)\n    print('allocated')\nexcept MemoryError:\n    print('refused')"
    )
    assert ok(py(code, ws, memory_mb=256)).stdout.strip() == "refused"


def test_the_private_tmp_counts_against_the_memory_limit(ws: Path) -> None:
    require_bubblewrap()
    probe = sandbox._bwrap_probe()
    assert not isinstance(probe, str)  # the sandbox is active: the probe found a working bubblewrap
    if not probe.sized:
        pytest.skip("this bubblewrap cannot size a tmpfs (--size)")
    target = Path("/tmp") / f"planmode-sandbox-fill-{uuid.uuid4().hex}"
    code = (
        "import sys\n"
        "with open(sys.argv[1], 'wb') as f:\n"
        "    for i in range(160):\n"
        "        try:\n"
        "            f.write(b'x' * (1 << 20)); f.flush()\n"
        "        except OSError as exc:\n"
        "            print('full at', i, exc.errno); break\n"
    )
    try:
        result = ok(run_command(["python", "-c", code, str(target)], ws, SandboxPolicy(memory_mb=64)))
        assert result.stdout.startswith("full at"), result
        assert int(result.stdout.split()[2]) <= 64
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)


def test_output_is_capped_while_it_is_read(ws: Path) -> None:
    code = "import sys\nfor _ in range(50):\n    sys.stdout.write('é' * 512 * 1024)\nsys.stderr.write('e' * 100000)"
    result = ok(py(code, ws, max_output=1001))
    assert result.truncated
    assert result.stdout == "é" * 500  # 1000 bytes kept; the character cut at byte 1001 is left out
    assert result.stderr == "e" * 1001
    assert len(result.stdout.encode()) <= 1001


def test_stdin_is_empty_unless_given(ws: Path) -> None:
    read = "import sys; print(repr(sys.stdin.read()))"
    # this process's own stdin holds data: a command must not read it
    reader, writer = os.pipe()
    os.write(writer, b"planmode's own input")
    os.close(writer)
    saved = os.dup(0)
    os.dup2(reader, 0)
    try:
        assert ok(py(read, ws, timeout=10)).stdout.strip() == "''"
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(reader)
    given = ok(run_command(["python", "-c", read], ws, stdin="line 1\nline 2\n"))
    assert given.stdout.strip() == repr("line 1\nline 2\n")


# -- the copy of the workspace -------------------------------------------------------------------------------


@BOTH
def test_a_command_in_a_copy_cannot_change_the_workspace(ws: Path, isolate: bool) -> None:
    (ws / "a.txt").write_text("keep me")
    (ws / "sub").mkdir()
    (ws / "sub" / "b.txt").write_text("b")
    (ws / ".planmode").mkdir()
    (ws / ".planmode" / "runs.db").write_text("db")
    (ws / ".git").mkdir()
    (ws / "link").symlink_to(ws / "a.txt")
    os.mkfifo(ws / "pipe")  # copying a FIFO's content would block
    code = (
        "import os, shutil\n"
        "print(sorted(os.listdir()), open('sub/b.txt').read())\n"
        "os.remove('a.txt'); shutil.rmtree('sub'); open('new.txt', 'w').write('n')\n"
    )
    result = ok(run_command(["python", "-c", code], ws, SandboxPolicy(isolate=isolate), copy_workspace=True))
    assert result.stdout.strip() == "['a.txt', 'link', 'sub'] b"
    assert (ws / "a.txt").read_text() == "keep me" and (ws / "sub" / "b.txt").exists()
    assert not (ws / "new.txt").exists()


# -- no shell ------------------------------------------------------------------------------------------------


@BOTH
def test_arguments_are_data_not_shell(ws: Path, isolate: bool) -> None:
    command = (
        "python -c 'import sys; print(sys.argv[1:])' "
        "'; touch pwned1' '$(touch pwned2)' '`touch pwned3`' && touch pwned4"
    )
    argv = split_command(command)
    result = ok(run_command(argv, ws, SandboxPolicy(isolate=isolate)))
    assert result.stdout.strip() == repr(
        ["; touch pwned1", "$(touch pwned2)", "`touch pwned3`", "&&", "touch", "pwned4"]
    )
    assert list(ws.iterdir()) == []


def test_split_command_reads_quotes_as_a_shell_would() -> None:
    assert split_command("python hello.py 'a b' \"c d\"") == ["python", "hello.py", "a b", "c d"]


@pytest.mark.parametrize("command", ["python -c 'print(1)", 'echo "open', "echo \\"])
def test_split_command_refuses_an_unclosed_quote_with_one_line(command: str) -> None:
    with pytest.raises(CommandError) as caught:
        split_command(command)
    message = str(caught.value)
    assert repr(command) in message and "\n" not in message
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, PlanModeError)


@pytest.mark.parametrize("command", ["", "   ", "\n"])
def test_split_command_refuses_an_empty_command(command: str) -> None:
    with pytest.raises(CommandError, match="empty"):
        split_command(command)


@BOTH
def test_a_command_that_cannot_start_is_a_result(ws: Path, isolate: bool) -> None:
    policy = SandboxPolicy(isolate=isolate)
    missing = run_command(["planmode-no-such-command-xyz", "--version"], ws, policy)
    assert missing.error == "command not found: planmode-no-such-command-xyz"
    assert missing.exit_code is None and not missing.sandboxed
    assert run_command([], ws, policy).error == "the command is empty: there is nothing to run"
    assert run_command(["python", "-c", "print('\0')"], ws, policy).error is not None
    gone = run_command(["python", "-V"], ws / "missing", policy)
    assert gone.error is not None and "not a folder" in gone.error
    (ws / "data.txt").write_text("not a program")
    assert run_command(["./data.txt"], ws, policy).error == "command not found: ./data.txt"


# -- the status tells the truth ------------------------------------------------------------------------------


@pytest.fixture
def fresh_probe() -> Iterator[None]:
    sandbox._bwrap_probe.cache_clear()
    yield
    sandbox._bwrap_probe.cache_clear()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux's")
@pytest.mark.usefixtures("fresh_probe")
def test_without_bwrap_the_status_says_the_sandbox_is_off(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    status = sandbox_status()
    assert status == sandbox.SandboxStatus("none", False, "off: bwrap not found (apt-get install bubblewrap)")
    result = ok(run_command(["python", "-c", "print(1)"], ws))
    assert not result.sandboxed


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux's")
@pytest.mark.usefixtures("fresh_probe")
def test_a_bwrap_that_cannot_create_namespaces_is_reported(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(fake), os.environ.get("PATH", os.defpath)]))
    status = sandbox_status()
    assert not status.active and status.kind == "none"
    assert status.reason == "off: bwrap cannot create namespaces here: bwrap: No permissions to create new namespace"
    assert not ok(run_command(["python", "-c", "print(1)"], ws)).sandboxed


def test_turning_isolation_off_is_said(ws: Path) -> None:
    status = sandbox_status(SandboxPolicy(isolate=False))
    assert (status.kind, status.active) == ("none", False) and status.reason.startswith("off: ")
    assert not ok(run_command(["python", "-c", "print(1)"], ws, SandboxPolicy(isolate=False))).sandboxed


def test_an_active_sandbox_is_said_and_used(ws: Path) -> None:
    require_bubblewrap()
    assert sandbox_status().reason == (
        "bubblewrap: read-only root, only the workspace writable, no network, home hidden"
    )
    assert "network allowed" in sandbox_status(SandboxPolicy(network=True)).reason
    assert ok(run_command(["python", "-c", "print(1)"], ws)).sandboxed


def test_the_macos_profile_quotes_a_hostile_path() -> None:
    """A workspace path cannot close the profile's string and add a rule (the profile itself runs only on macOS)."""
    ws = Path('/tmp/a")(allow file-write* (subpath "/")) ("\\x')
    profile = sandbox._seatbelt_profile(SandboxPolicy(), ws, (Path("/tmp/h"),), [Path("/k/approval.key")])
    assert '(subpath "/tmp/a\\")(allow file-write* (subpath \\"/\\")) (\\"\\\\x")' in profile
    assert '(allow file-write* (subpath "/"))' not in profile
    assert "(deny network*)" in profile
    assert "(deny network*)" not in sandbox._seatbelt_profile(SandboxPolicy(network=True), ws, (), [])
