"""Reliability: one process runs a thread at a time (the per-thread lease of `planmode.persistence.lease`).

Real processes on one SQLite file (tests/persistence/test_postgres.py runs the same on PostgreSQL): a second process on
a running thread is refused with a clear error and runs nothing; a holder killed with SIGKILL is taken over
at once (its pid is dead), long before the lease would expire; two ``planmode resume`` processes on one
thread run the plan once. In-process: the error names the holder and the time, a lease from another host
is taken over only once its heartbeat expired, the heartbeat keeps a long run's lease alive, and
``planmode.run`` holds the lease around ``invoke``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import planmode
from planmode.errors import LeaseLostError, ThreadBusyError
from planmode.graph import build_graph
from planmode.persistence import open_checkpointer, sqlite_checkpointer
from planmode.persistence.lease import LEASE_TABLE, assert_lease_held, thread_lease
from planmode.state.models import Step
from planmode.testing.openai_server import ScriptedOpenAIServer
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

pytestmark = pytest.mark.integration

WORKER = Path(__file__).resolve().parents[1] / "persistence" / "crash_worker.py"
THREAD = "leased"
#: The lease row's columns that a holder from before the epoch wrote.
COLUMNS = "thread_id, holder, host, pid, proc_start, token, since, heartbeat, expires"


class Worker:
    """``crash_worker.py run DB THREAD COUNTER --lease``: a fresh interpreter running the six-step plan."""

    def __init__(self, db: str, counter: Path, *extra: str, work: float = 0.3) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), "run", db, THREAD, str(counter), "--lease", f"--work={work}", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []

    def expect(self, prefix: str, timeout: float = 120) -> str:
        """The first output line starting with ``prefix`` (the lines before it are kept)."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line.rstrip("\n"))
            if line.startswith(prefix):
                return line.rstrip("\n")
        raise AssertionError(f"no {prefix!r} line; output: {self.lines}; stderr: {self._stderr()}")

    def finish(self, timeout: float = 120) -> int:
        out, err = self.proc.communicate(timeout=timeout)
        self.lines += out.splitlines()
        self.err = err
        return self.proc.returncode

    def _stderr(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read()


def starts(counter: Path) -> list[tuple[str, int]]:
    """(step, pid) of every execution in the counter file."""
    if not counter.exists():
        return []
    return [(p[1], int(p[3])) for p in (line.split() for line in counter.read_text().splitlines()) if p[0] == "start"]


def wait_for_a_step(counter: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not starts(counter):
        assert time.monotonic() < deadline, "the worker started no step"
        time.sleep(0.01)


def two_processes_on_one_thread(db: str, tmp_path: Path) -> None:
    """The second process is refused while the first holds the lease; the first completes; every step ran
    once. The first process waits, lease held, until the second has been refused (no race with start-up)."""
    counter = tmp_path / "counter"
    hold = tmp_path / "hold"
    first = Worker(db, counter, f"--hold={hold}")
    first.expect("leased")
    second = Worker(db, counter)
    assert second.finish() == 4, (second.lines, second.err)
    hold.touch()
    busy = next(line for line in second.lines if line.startswith("busy "))
    assert f"thread '{THREAD}' is already running (" in busy
    assert f":{first.proc.pid}, since " in busy  # the holder: host:pid of the first process
    assert first.finish() == 0, (first.lines, first.err)
    executions = starts(counter)
    assert sorted(step for step, _ in executions) == ["a", "b", "c", "d", "e", "f"]
    assert {pid for _, pid in executions} == {first.proc.pid}


def sigkilled_holder_is_taken_over(db: str, tmp_path: Path) -> None:
    """A holder killed with SIGKILL leaves its lease behind; the next process takes it over at once (the
    lease's time to live is 120 s) and completes the run."""
    counter = tmp_path / "counter"
    first = Worker(db, counter)
    first.expect("leased")
    wait_for_a_step(counter)
    first.proc.send_signal(signal.SIGKILL)
    assert first.finish() == -signal.SIGKILL
    began = time.monotonic()
    second = Worker(db, counter)
    second.expect("leased", timeout=60)
    assert second.finish() == 0, (second.lines, second.err)
    assert time.monotonic() - began < 60
    assert {pid for _, pid in starts(counter)} <= {first.proc.pid, second.proc.pid}
    saver = open_checkpointer(db)
    try:
        graph = build_graph(ScriptedChatModel(responder=PurposeScript()), checkpointer=saver)
        assert graph.get_state({"configurable": {"thread_id": THREAD}}).values["status"] == "completed"
    finally:
        saver.conn.close()


def history(db: str) -> tuple[int, int, str]:
    """(checkpoints, pending writes, status) of the thread, read through a fresh checkpointer."""
    saver = open_checkpointer(db)
    try:
        config: Any = {"configurable": {"thread_id": THREAD}}
        saved = list(saver.list(config))
        graph = build_graph(ScriptedChatModel(responder=PurposeScript()), checkpointer=saver)
        status = str(graph.get_state(config).values.get("status"))
        return len(saved), sum(len(t.pending_writes or ()) for t in saved), status
    finally:
        saver.conn.close()


def stopped_holder_is_fenced(db: str, tmp_path: Path) -> None:
    """A holder stopped (SIGSTOP, as Ctrl-Z or a paused VM) past its lease's expiry is taken over by a second
    process, which completes the run. Continued (SIGCONT), the first finishes the steps it was in the middle of
    (their side effect had happened) but writes no checkpoint and no pending write, starts no other step, and
    exits with the lease-lost error; the thread stays readable, as the second process left it."""
    counter = tmp_path / "counter"
    first = Worker(db, counter, "--ttl=1", work=3.0)  # ttl 1 s: heartbeats every 1/3 s
    first.expect("leased")
    deadline = time.monotonic() + 60
    while len([s for s, pid in starts(counter) if pid == first.proc.pid]) < 3:  # a, b and c are running
        assert time.monotonic() < deadline, (starts(counter), first._stderr())
        time.sleep(0.01)
    _stop_outside_a_write(first.proc, db)
    try:
        time.sleep(1.5)  # past the lease's expiry: the holder is alive, stopped, and renews nothing
        second = Worker(db, counter, "--ttl=1", work=0.05)
        second.expect("leased", timeout=60)  # took the stopped holder's lease over
        assert second.finish() == 0, (second.lines, second.err)
        before = history(db)
        assert before[2] == "completed"
        first_steps = sorted(s for s, pid in starts(counter) if pid == first.proc.pid)
        assert first_steps == ["a", "b", "c"]
    finally:
        first.proc.send_signal(signal.SIGCONT)
    assert first.finish() == 5, (first.lines, first.err)
    lost = next(line for line in first.lines if line.startswith("lost "))
    assert f"lost the lease of thread '{THREAD}'" in lost and "another process took it over" in lost
    assert sorted(s for s, pid in starts(counter) if pid == first.proc.pid) == first_steps  # no step started
    assert history(db) == before  # not one checkpoint or pending write more: the second's run intact


def _stop_outside_a_write(proc: Any, db: str) -> None:
    """SIGSTOP ``proc`` at a moment it holds no SQLite write lock. A process stopped inside a write transaction
    (a heartbeat, a checkpoint) keeps SQLite's one write lock: nobody can take its lease over until it continues
    (and is then fenced) -- SQLite's limit, not the fence's; on PostgreSQL a stopped fenced write holds the lease
    row the same way until it continues."""
    for _ in range(200):
        proc.send_signal(signal.SIGSTOP)
        time.sleep(0.02)
        if _no_write_held(db):
            return
        proc.send_signal(signal.SIGCONT)  # stopped inside a write: let it finish, stop it again
        time.sleep(0.02)
    raise AssertionError("the holder never left its write transactions")


def _no_write_held(db: str) -> bool:
    """Whether nobody holds what a takeover needs: SQLite's write lock, or PostgreSQL's lock of the lease row (a
    fenced write reads it FOR SHARE in its transaction)."""
    if db.startswith("postgres"):
        import psycopg

        with psycopg.connect(db, autocommit=False) as conn:
            try:
                conn.execute("SET lock_timeout = '100ms'")
                conn.execute(f"SELECT 1 FROM {LEASE_TABLE} WHERE thread_id = %s FOR UPDATE", (THREAD,))
                return True
            except psycopg.errors.LockNotAvailable:
                return False
            finally:
                conn.rollback()
    try:
        with contextlib.closing(sqlite3.connect(db, timeout=0.1)) as conn:
            conn.execute("BEGIN IMMEDIATE")
            conn.rollback()
        return True
    except sqlite3.OperationalError:
        return False


def test_a_stopped_holder_is_fenced_sqlite(tmp_path: Path) -> None:
    stopped_holder_is_fenced(str(tmp_path / "runs.sqlite"), tmp_path)


def test_two_processes_on_one_thread_sqlite(tmp_path: Path) -> None:
    two_processes_on_one_thread(str(tmp_path / "runs.sqlite"), tmp_path)


def test_a_sigkilled_holder_is_taken_over_sqlite(tmp_path: Path) -> None:
    sigkilled_holder_is_taken_over(str(tmp_path / "runs.sqlite"), tmp_path)


# -- in one process --------------------------------------------------------------------------------------


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[Any]:
    s = sqlite_checkpointer(tmp_path / "lease.sqlite")
    yield s
    s.conn.close()


def test_a_second_holder_is_refused_with_holder_and_time(saver: Any) -> None:
    with thread_lease(saver, "t") as lease:
        assert lease.holder.endswith(f":{os.getpid()}")
        with pytest.raises(ThreadBusyError) as info, thread_lease(saver, "t"):
            pytest.fail("two leases on one thread")
        assert info.value.thread_id == "t" and info.value.holder == lease.holder
        assert str(info.value).startswith(f"thread 't' is already running ({lease.holder}, since ")
        assert f"{lease.since:%Y-%m-%d %H:%M:%S} UTC" in str(info.value)
        with thread_lease(saver, "other thread"):  # other threads are free
            pass
    with thread_lease(saver, "t"):  # released at the end of the block
        pass
    rows = saver.conn.execute(f"SELECT count(*) FROM {LEASE_TABLE} WHERE token <> ''").fetchone()[0]
    assert rows == 0  # released: the rows stay, without a holder, keeping their epoch


def _foreign_lease(saver: Any, expires_in: float) -> None:
    now = time.time()
    with saver.cursor() as cur:
        cur.execute(
            f"INSERT INTO {LEASE_TABLE} ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ("t", "elsewhere:123", "elsewhere", 123, None, "tok", now - 5, now - 5, now + expires_in),
        )


def test_a_lease_from_another_host_is_taken_over_only_once_expired(saver: Any) -> None:
    with thread_lease(saver, "setup"):  # creates the table
        pass
    _foreign_lease(saver, expires_in=60)
    with pytest.raises(ThreadBusyError, match=r"already running \(elsewhere:123, since "), thread_lease(saver, "t"):
        pass
    with saver.cursor() as cur:
        cur.execute(f"DELETE FROM {LEASE_TABLE}")
    _foreign_lease(saver, expires_in=-1)  # its heartbeat stopped a second ago
    with thread_lease(saver, "t") as lease:
        assert lease.taken_over == "elsewhere:123"


def test_a_dead_local_pid_is_taken_over_and_a_live_one_is_not(saver: Any) -> None:
    with thread_lease(saver, "setup"):
        pass
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    host = __import__("socket").gethostname()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        now = time.time()
        with saver.cursor() as cur:
            cur.execute(
                f"INSERT INTO {LEASE_TABLE} ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                ("dead", f"{host}:{gone.pid}", host, gone.pid, None, "x", now, now, now + 600),
            )
            cur.execute(
                f"INSERT INTO {LEASE_TABLE} ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                ("live", f"{host}:{alive.pid}", host, alive.pid, None, "y", now, now, now + 600),
            )
        with thread_lease(saver, "dead") as lease:
            assert lease.taken_over == f"{host}:{gone.pid}"
        with pytest.raises(ThreadBusyError), thread_lease(saver, "live"):
            pass
    finally:
        alive.kill()
        alive.wait()


def test_the_heartbeat_keeps_a_long_run_leased(saver: Any) -> None:
    with thread_lease(saver, "t", ttl=0.3) as lease:
        time.sleep(1.0)  # three times the time to live
        assert not lease.lost
        expires = saver.conn.execute(f"SELECT expires FROM {LEASE_TABLE} WHERE thread_id = 't'").fetchone()[0]
        assert expires > time.time()
        with pytest.raises(ThreadBusyError), thread_lease(saver, "t", ttl=0.3):
            pass


def test_planmode_run_holds_the_lease_around_invoke(saver: Any) -> None:
    refused: list[str] = []

    def executor(step: Step, ctx: Any) -> str:
        try:
            with thread_lease(saver, "run"):
                pass
        except ThreadBusyError as exc:
            refused.append(str(exc))
        return "ok"

    plan = {"title": "One", "steps": [{"id": "a", "description": "the only step"}]}
    graph = build_graph(ScriptedChatModel(responder=PurposeScript(plan=plan)), executor=executor, checkpointer=saver)
    config = {"configurable": {"thread_id": "run"}}
    out = planmode.run(
        graph,
        {"messages": [("user", "do the one step and then report")]},
        config,
        context={"mode": "plan", "approval": "auto"},
    )
    assert out["status"] == "completed"
    assert len(refused) == 1 and "already running" in refused[0]
    with thread_lease(saver, "run"):  # released afterwards
        pass
    with pytest.raises(planmode.ConfigurationError, match="thread id"):
        planmode.run(graph, None, {"configurable": {}})


def test_leases_on_one_thread_from_many_threads_admit_one(saver: Any, tmp_path: Path) -> None:
    """Eight threads, each with its own connection to the file, race for one lease: exactly one wins."""
    barrier = threading.Barrier(8)
    won: list[int] = []
    busy: list[int] = []
    hold = threading.Event()

    def contender(i: int) -> None:
        own = sqlite_checkpointer(tmp_path / "lease.sqlite")
        try:
            barrier.wait(timeout=30)
            with thread_lease(own, "race"):
                won.append(i)
                hold.wait(timeout=5)
        except ThreadBusyError:
            busy.append(i)
        finally:
            own.conn.close()

    threads = [threading.Thread(target=contender, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while len(won) + len(busy) < 8 and time.monotonic() < deadline:
        if len(busy) == 7:
            break
        time.sleep(0.01)
    hold.set()
    for t in threads:
        t.join(timeout=30)
    assert len(won) == 1 and len(busy) == 7, (won, busy)


# -- the CLI ---------------------------------------------------------------------------------------------

PLAN_CLI = {
    "title": "Slow",
    "steps": [
        {"id": "one", "description": "the first slow step"},
        {"id": "two", "description": "the second slow step", "dependencies": ["one"]},
    ],
}


def test_two_planmode_resume_processes_on_one_thread_run_the_plan_once(tmp_path: Path) -> None:
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def respond(body: dict[str, Any]) -> Any:
        first = body["messages"][0]
        text = first["content"] if isinstance(first["content"], str) else json.dumps(first["content"])
        purpose = text.split("\n", 1)[0].removeprefix("planmode:") if text.startswith("planmode:") else "unknown"
        with lock:
            seen[purpose] = seen.get(purpose, 0) + 1
        if purpose == "plan":
            return json.dumps(PLAN_CLI)
        if purpose == "execute":
            time.sleep(2.0)  # long enough for the second process to start meanwhile
            return "done"
        if purpose == "verify":
            return json.dumps({"passed": True, "reason": "the step reported done"})
        return "All done."

    db = tmp_path / "runs.sqlite"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PLANMODE_"))}
    env.update(LANGSMITH_TRACING="false", COLUMNS="200", OPENAI_API_KEY="test")
    cli = [sys.executable, "-m", "planmode.cli"]
    with ScriptedOpenAIServer(respond) as srv:
        first = subprocess.run(
            [
                *cli,
                "run",
                "Do the first slow step, then the second",
                "--db",
                str(db),
                "--thread",
                "T",
                "--mode",
                "plan",
                "--base-url",
                srv.base_url,
                "--workspace",
                str(tmp_path),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert "planmode resume T" in first.stdout, first.stdout + first.stderr  # left at the approval
        resumes = [
            subprocess.Popen(
                [*cli, "resume", "T", "--db", str(db), "--auto-approve", "--workspace", str(tmp_path)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                stdin=subprocess.DEVNULL,
            )
            for _ in range(2)
        ]
        outputs = [p.communicate(timeout=120)[0] for p in resumes]
    codes = sorted(p.returncode for p in resumes)
    assert codes == [0, 2], outputs
    refused = next(o for p, o in zip(resumes, outputs, strict=True) if p.returncode == 2)
    assert "thread 'T' is already running (" in refused and "since" in refused
    assert seen["execute"] == 2  # each step executed once: the plan ran once
    with sqlite3.connect(db) as conn:
        assert conn.execute(f"SELECT count(*) FROM {LEASE_TABLE} WHERE token <> ''").fetchone()[0] == 0  # released
    conn.close()


# -- concurrent resumes, many rounds (slow) ---------------------------------------------------------------

ROUNDS = 10
RACERS = 3


@pytest.mark.slow
@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_concurrent_resumes_of_one_thread_run_it_once(
    tmp_path: Path, database: str, request: pytest.FixtureRequest
) -> None:
    """10 rounds, each starting 3 processes at once on one new thread: exactly one runs the plan, the others
    are refused with the busy error, and every step runs once. The first round also races to create the
    lease table."""
    db = str(tmp_path / "race.sqlite")
    if database == "postgres":
        import uuid

        import psycopg

        url: str = request.getfixturevalue("pg_url")
        name = f"race_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        db = f"{url.rsplit('/', 1)[0]}/{name}"
    for r in range(ROUNDS):
        counter = tmp_path / f"counter{r}"
        thread = f"race{r}"
        go = tmp_path / f"go{r}"
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    str(WORKER),
                    "run",
                    db,
                    thread,
                    str(counter),
                    "--lease",
                    "--work=1",
                    f"--barrier={go}",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(RACERS)
        ]
        for p in procs:  # every process has started up: then they all begin at once
            assert p.stdout is not None
            line = p.stdout.readline().strip()
            if line != "started":  # a worker died before its run: say why, and leave no process or pipe behind
                for q in procs:
                    q.kill()
                errors = [q.communicate(timeout=30)[1][-2000:] for q in procs]
                pytest.fail(f"a worker did not start (round {r}, read {line!r}): {errors}")
        go.touch()
        results = [(p.communicate(timeout=180), p.returncode) for p in procs]
        codes = sorted(code for _, code in results)
        assert codes == [0] + [4] * (RACERS - 1), [(code, out) for out, code in results]
        for (out, _), code in results:
            if code == 4:
                assert f"thread '{thread}' is already running (" in out
        assert sorted(step for step, _ in starts(counter)) == ["a", "b", "c", "d", "e", "f"]


def test_planmode_rollback_takes_the_lease_of_a_running_thread(tmp_path: Path) -> None:
    """``planmode rollback`` on a thread another process is running is refused with the holder and time, and
    adds nothing to the history; once that process is gone it rolls back."""
    db = str(tmp_path / "runs.db")
    assert Worker(db, tmp_path / "first").finish() == 0  # a finished run with a history to roll back in

    def checkpoints() -> int:
        with sqlite3.connect(db) as conn:
            n = int(conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id = ?", (THREAD,)).fetchone()[0])
        conn.close()
        return n

    def rollback() -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PLANMODE_"))}
        return subprocess.run(
            [sys.executable, "-m", "planmode.cli", "rollback", THREAD, "2", "--db", db],
            env={**env, "COLUMNS": "300"},
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )

    before = checkpoints()
    hold = tmp_path / "hold"
    holder = Worker(db, tmp_path / "second", f"--hold={hold}")
    holder.expect("leased")
    try:
        refused = rollback()
        assert refused.returncode == 2, (refused.stdout, refused.stderr)
        assert f"thread '{THREAD}' is already running (" in refused.stderr  # planmode's errors go to stderr
        assert f":{holder.proc.pid}, since " in refused.stderr
        assert checkpoints() == before  # nothing written while another process holds the thread
    finally:
        hold.touch()
        assert holder.finish() == 0, (holder.lines, holder.err)
    done = rollback()
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert f"Rolled back {THREAD} to 2" in done.stdout
    assert checkpoints() == before + 1


# -- the fence (shared with tests/persistence/test_postgres.py) ------------------------------------------

FENCED = "fenced"
TAKEOVER = (
    f"UPDATE {LEASE_TABLE} SET epoch = epoch + 1, token = 'theirs', holder = 'elsewhere:1' WHERE thread_id = '{FENCED}'"
)
OLD_TABLE = (
    f"CREATE TABLE {LEASE_TABLE} (thread_id TEXT PRIMARY KEY, holder TEXT NOT NULL, host TEXT NOT NULL, "
    "pid INTEGER NOT NULL, proc_start TEXT, token TEXT NOT NULL, since REAL NOT NULL, heartbeat REAL NOT NULL, "
    "expires REAL NOT NULL)"
)
OLD_ROW = f"INSERT INTO {LEASE_TABLE} VALUES ('{FENCED}', 'elsewhere:9', 'elsewhere', 9, NULL, 'old', 1, 1, 2)"


def _config(checkpoint_id: str | None = None) -> Any:
    conf = {"thread_id": FENCED, "checkpoint_ns": ""}
    return {"configurable": {**conf, "checkpoint_id": checkpoint_id} if checkpoint_id else conf}


def stale_epoch_write_is_refused(saver: Any, sql: Any) -> None:
    """Another process takes the lease over (``sql`` runs on a connection of its own): the old holder's next
    check before a step, checkpoint and pending writes are refused with `LeaseLostError`, nothing is written,
    and the thread stays readable."""
    from langgraph.checkpoint.base import empty_checkpoint

    with thread_lease(saver, FENCED) as lease:
        saved = saver.put(_config(), empty_checkpoint(), {}, {})  # the holder writes
        saver.put_writes(saved, [("x", 1)], "task-1")
        assert_lease_held(_config())  # held: passes
        sql(TAKEOVER)
        lease.renewed -= 100  # as after a stop: not confirmed for longer than its ttl
        with pytest.raises(LeaseLostError, match=f"lost the lease of thread '{FENCED}' \\(epoch {lease.epoch}\\)"):
            assert_lease_held(_config())
        with pytest.raises(LeaseLostError):
            saver.put(_config(), empty_checkpoint(), {}, {})
        with pytest.raises(LeaseLostError):
            saver.put_writes(saved, [("y", 2)], "task-2")
    kept = list(saver.list({"configurable": {"thread_id": FENCED}}))
    assert len(kept) == 1 and [w[1] for w in kept[0].pending_writes or ()] == ["x"]
    saver.put(_config(), empty_checkpoint(), {}, {})  # no lease held here any more: not fenced
    assert len(list(saver.list({"configurable": {"thread_id": FENCED}}))) == 2


def epoch_increments(saver: Any, sql: Any, epoch_of: Any) -> None:
    """Every acquisition increments the epoch: a new lease, one after a release, a takeover."""
    with thread_lease(saver, FENCED) as first:
        assert first.epoch == 1 and epoch_of() == 1
    with thread_lease(saver, FENCED) as second:
        assert second.epoch == 2 and epoch_of() == 2
        sql(f"UPDATE {LEASE_TABLE} SET expires = 0 WHERE thread_id = '{FENCED}'")  # its heartbeat stopped
        with thread_lease(saver, FENCED) as third:
            assert third.taken_over == second.holder and third.epoch == 3 and epoch_of() == 3
    with thread_lease(saver, FENCED) as fourth:
        assert fourth.epoch == 4


def test_a_write_with_a_stale_epoch_is_refused_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "fence.sqlite"
    saver = sqlite_checkpointer(db)

    def sql(statement: str) -> None:
        with sqlite3.connect(db) as other:
            other.execute(statement)
        other.close()

    try:
        stale_epoch_write_is_refused(saver, sql)
    finally:
        saver.conn.close()


def test_a_stock_sqlite_saver_is_fenced_too(tmp_path: Path) -> None:
    """A `SqliteSaver` made by the caller: the fence is a trigger on the lease's connection."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = tmp_path / "stock.sqlite"
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
    with pytest.raises(LeaseLostError), thread_lease(saver, FENCED):
        saver.put(_config(), empty_checkpoint(), {}, {})
        with sqlite3.connect(db) as other:
            other.execute(TAKEOVER)
        other.close()
        saver.put(_config(), empty_checkpoint(), {}, {})
    assert len(list(saver.list({"configurable": {"thread_id": FENCED}}))) == 1
    saver.conn.close()


def test_the_epoch_increments_on_each_acquisition_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "epoch.sqlite"
    saver = sqlite_checkpointer(db)

    def sql(statement: str) -> None:
        with saver.cursor() as cur:
            cur.execute(statement)

    def epoch_of() -> int:
        return int(saver.conn.execute(f"SELECT epoch FROM {LEASE_TABLE} WHERE thread_id = ?", (FENCED,)).fetchone()[0])

    try:
        epoch_increments(saver, sql, epoch_of)
    finally:
        saver.conn.close()


def test_an_old_lease_table_is_migrated_sqlite(tmp_path: Path) -> None:
    """A lease table made before the epoch (with an expired lease in it) gets the column, once, and works."""
    db = tmp_path / "old.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute(OLD_TABLE)
        conn.execute(OLD_ROW)
    conn.close()
    for _ in range(2):  # a second process (a new saver) finds the column there
        saver = sqlite_checkpointer(db)
        try:
            with thread_lease(saver, FENCED) as lease:
                assert lease.epoch == (1 if _ == 0 else 2)
            columns = [r[1] for r in saver.conn.execute(f"PRAGMA table_info({LEASE_TABLE})")]
            assert columns.count("epoch") == 1
        finally:
            saver.conn.close()


def test_a_lease_lost_stops_the_next_step_in_execute_step(tmp_path: Path) -> None:
    """execute_step checks the lease first: a step of a run whose lease another process took over never
    starts, and the run ends with `LeaseLostError` (not one more checkpoint)."""
    db = tmp_path / "steps.sqlite"
    saver = sqlite_checkpointer(db)
    ran: list[str] = []

    def executor(step: Step, ctx: Any) -> str:
        ran.append(step.id)
        with sqlite3.connect(db) as other:  # meanwhile, another process takes the lease over
            other.execute(TAKEOVER)
        other.close()
        return "ok"

    plan = {
        "title": "Two",
        "steps": [{"id": "a", "description": "first"}, {"id": "b", "description": "second", "dependencies": ["a"]}],
    }
    graph = build_graph(ScriptedChatModel(responder=PurposeScript(plan=plan)), executor=executor, checkpointer=saver)
    try:
        with pytest.raises(LeaseLostError):
            planmode.run(
                graph,
                {"messages": [("user", "do the first step, then the second")]},
                {"configurable": {"thread_id": FENCED}},
                context={"mode": "plan", "approval": "auto"},
            )
        assert ran == ["a"]
    finally:
        saver.conn.close()
