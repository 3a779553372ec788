"""Crash-resume for real: a planmode run in a subprocess on a SQLite file, killed with SIGKILL, resumed.

Each trial runs ``tests/persistence/crash_worker.py`` (six steps in two parallel layers, automatic approval, an executor
whose side effect is a line in a counter file) and kills it one to three times — at a random moment, just
after a step began executing, or just after a step with dependencies began — then lets a last process finish
the run. Checked for every trial:

- the run completes (status ``completed``, every step done, nothing left to run);
- no step executed after the checkpoint that recorded it done (execution times from the counter file
  against checkpoint times from the final history), and every re-execution of a step follows an execution
  in a process that was killed (a step killed mid-execution, or done in a checkpoint the kill lost, may run
  again; nothing else may);
- no done step runs again: a step runs again only if no process that ran it went on to start a step that
  depends on it (starting a dependent proves the step was verified done, and no step starts before
  the checkpoint recording every done step is saved, whatever LangGraph durability the caller passed);
- the database is readable: ``get_state``, ``get_state_history`` and ``PRAGMA integrity_check``.

The targeted test kills every first process just after a step of the second layer (a dependent) started:
the moment when LangGraph's default "async" durability used to lose the first layer's done steps.

The normal suite runs the trials through the worker's fork server (real processes, killed for real, without
paying the interpreter start-up each time); the slow variants run more trials, and one of them starts a
fresh interpreter for every process. Set ``PLANMODE_CRASH_REPORT=1`` and run with ``-s`` to print the numbers.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import select
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Protocol

import pytest

from planmode.graph.builder import build_graph
from planmode.persistence import open_checkpointer
from planmode.state.models import Plan, StepStatus
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

pytestmark = pytest.mark.integration

WORKER = Path(__file__).with_name("crash_worker.py")
from tests.persistence.crash_worker import PLANS, STEP_IDS  # noqa: E402  (after WORKER, which names the script)

THREAD = "crash"


def step_ids(plan: str) -> tuple[str, ...]:
    return tuple(s["id"] for s in PLANS[plan]["steps"])


def dependents(plan: str) -> dict[str, set[str]]:
    """Each step's dependents (the steps that need it)."""
    steps = PLANS[plan]["steps"]
    return {sid: {s["id"] for s in steps if sid in s.get("dependencies", [])} for sid in step_ids(plan)}


def with_dependencies(plan: str) -> frozenset[str]:
    """The steps that start only once another step is done."""
    return frozenset(s["id"] for s in PLANS[plan]["steps"] if s.get("dependencies"))


#: A kill "at a random moment" waits this long at most after the process started its run (a full run in a
#: forked child takes about 0.35 s here: two layers of steps that work 0.05-0.15 s each, plus checkpoints).
RANDOM_WINDOW = 0.3
MAX_KILLS_PER_TRIAL = 3


# -- processes -------------------------------------------------------------------------------------------


class LineReader:
    """Lines from a pipe, with a timeout (``select`` on the raw descriptor)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.fd = stream.fileno()
        self.buffer = b""

    def readline(self, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(self.fd, 4096)
            if not chunk:
                raise EOFError("the worker closed its output")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode()


@dataclass
class Job:
    db: Path | str
    """A SQLite file, or a ``postgresql://`` URL (tests/persistence/test_postgres.py)."""
    counter: Path
    log: Path
    resume_with_context: bool = True
    durability: str | None = None
    kill_after: str = "mixed"
    """When to kill: "mixed" (at random, just after any step began, or just after a step that has
    dependencies began) or "dependent" (always the last)."""
    plan: str = "layers"
    """The worker's plan: "layers" (six steps, two layers) or "chain" (a, b, c)."""
    aio: bool = False
    """The async path: an async checkpointer, ``planmode.arun`` and an async executor (crash_worker.py)."""
    slow_saves: float = 0.0
    """On the async path: seconds every checkpoint write is delayed."""


class Child(Protocol):
    pid: int

    def wait(self, timeout: float) -> int | None:
        """The exit code (``-9`` when killed), or None if still running after ``timeout`` seconds."""

    def kill(self) -> None:
        """SIGKILL this process (nothing when it has already ended)."""


class ForkServer:
    """``crash_worker.py serve``: one interpreter that forks a child per run."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self.proc.stdout is not None
        self.reader = LineReader(self.proc.stdout)

    def launch(self, job: Job) -> ForkedChild:
        request = {
            "db": str(job.db),
            "thread": THREAD,
            "counter": str(job.counter),
            "log": str(job.log),
            "resume_with_context": job.resume_with_context,
            "durability": job.durability,
            "plan": job.plan,
            "aio": job.aio,
            "slow_saves": job.slow_saves,
        }
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        line = self.reader.readline(timeout=120)  # the first request waits for the server's imports
        assert line is not None, "the fork server did not answer"
        return ForkedChild(self, int(json.loads(line)["pid"]))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # our own server process, by its Popen handle
            self.proc.wait(timeout=30)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


class ForkedChild:
    """A child of the fork server, signalled through a pidfd: once the server has reaped it, a kill cannot
    reach another process that got the same pid."""

    def __init__(self, server: ForkServer, pid: int) -> None:
        self.server = server
        self.pid = pid
        try:
            self.pidfd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:  # already ended and reaped (its exit reply is on the way)
            self.pidfd = None

    def wait(self, timeout: float) -> int | None:
        line = self.server.reader.readline(timeout)
        if line is None:
            return None
        reply = json.loads(line)
        assert reply["pid"] == self.pid
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        return int(reply["exit"])

    def kill(self) -> None:
        if self.pidfd is not None:
            with contextlib.suppress(ProcessLookupError):  # it ended on its own a moment ago
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)


class FreshChild:
    """``crash_worker.py run``: a new interpreter per process (slow: about two seconds of start-up each)."""

    def __init__(self, job: Job) -> None:
        with job.log.open("ab") as log:
            args = [sys.executable, str(WORKER), "run", str(job.db), THREAD, str(job.counter)]
            if not job.resume_with_context:
                args.append("--no-context")
            if job.durability:
                args.append(f"--durability={job.durability}")
            args.append(f"--plan={job.plan}")
            if job.aio:
                args.append("--async")
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log)
        self.pid = self.proc.pid
        assert self.proc.stdout is not None
        self.reader = LineReader(self.proc.stdout)
        assert self.reader.readline(timeout=120) == "started", "the worker did not start"

    def wait(self, timeout: float) -> int | None:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return code

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)  # Popen does nothing once it has reaped the process


Launcher = Callable[[Job], Child]


# -- one trial -------------------------------------------------------------------------------------------


@dataclass
class Execution:
    step: str
    attempt: int
    pid: int
    ns: int
    finished: bool = False


@dataclass
class Trial:
    index: int
    launches: int = 0
    killed: list[int] = field(default_factory=list)
    kills_during_step: int = 0
    executions: int = 0
    re_executions: int = 0
    re_executions_after_finish: int = 0
    """Re-executions whose previous execution had finished (its outcome was lost with the process)."""
    re_runs_of_done_steps: int = 0
    """Re-executions of a step after a process had started one of its dependents (so had it done): must be 0."""
    kills_after_dependent: int = 0
    """Kills of a process that had started a step of the second layer."""
    checkpoints: int = 0
    problems: list[str] = field(default_factory=list)


def started_steps(counter: Path, pid: int, only: frozenset[str] | None = None) -> int:
    if not counter.exists():
        return 0
    return sum(
        1
        for line in counter.read_text().splitlines()
        if line.startswith("start ") and line.split()[3] == str(pid) and (only is None or line.split()[1] in only)
    )


def run_and_kill(child: Child, job: Job, rng: random.Random) -> int:
    """Kill ``child`` at a random moment, just after it starts a step, or just after it starts a step that has
    dependencies (when a done step must already be durable); its exit code (-9 when killed)."""
    draw = rng.random()
    if job.kill_after == "dependent" or draw >= 0.7:
        return kill_after_dependent(child, job, rng)
    if draw < 0.35:
        code = child.wait(rng.uniform(0.0, RANDOM_WINDOW))
        if code is not None:
            return code  # it finished first
    else:
        before = started_steps(job.counter, child.pid)
        deadline = time.monotonic() + 60
        while started_steps(job.counter, child.pid) == before:
            code = child.wait(0.005)
            if code is not None:
                return code  # it finished without starting a step (nothing left to execute)
            assert time.monotonic() < deadline, "the worker started no step within a minute"
        time.sleep(rng.uniform(0.0, 0.03))  # a step works at least 0.05 s: this lands inside it
    child.kill()
    code = child.wait(60)
    assert code is not None, f"process {child.pid} did not end after SIGKILL"
    return code


def kill_after_dependent(child: Child, job: Job, rng: random.Random) -> int:
    """Kill ``child`` 0-100 ms after it starts a step that has dependencies (most steps work longer)."""
    deadline = time.monotonic() + 60
    while started_steps(job.counter, child.pid, with_dependencies(job.plan)) == 0:
        code = child.wait(0.002)
        if code is not None:
            return code  # it finished without starting one (the second layer was done already)
        assert time.monotonic() < deadline, "the worker started no dependent step within a minute"
    code = child.wait(rng.uniform(0.0, 0.1))
    if code is not None:
        return code
    child.kill()
    code = child.wait(60)
    assert code is not None, f"process {child.pid} did not end after SIGKILL"
    return code


def run_trial(
    launch: Launcher,
    folder: Path,
    index: int,
    rng: random.Random,
    durability: str | None,
    db_for: Callable[[int], Path | str] | None = None,
    kill_after: str = "mixed",
    plan: str = "layers",
) -> Trial:
    db = db_for(index) if db_for is not None else folder / f"trial{index}.db"
    job = Job(
        db=db,
        counter=folder / f"trial{index}.counter",
        log=folder / f"trial{index}.log",
        resume_with_context=index % 2 == 0,
        durability=durability,
        kill_after=kill_after,
        plan=plan,
    )
    trial = Trial(index)
    kills_wanted = 1 if kill_after == "dependent" else rng.randint(1, MAX_KILLS_PER_TRIAL)
    while True:
        trial.launches += 1
        assert trial.launches <= MAX_KILLS_PER_TRIAL + 1, f"trial {index} did not finish"
        child = launch(job)
        if len(trial.killed) < kills_wanted:
            code = run_and_kill(child, job, rng)
            if code == -signal.SIGKILL:
                trial.killed.append(child.pid)
                continue
        else:
            code = child.wait(120)
        assert code == 0, f"trial {index}: worker exited with {code}\n{_read(job.log)}"
        break
    check_trial(job, trial)
    return trial


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def _ns(created_at: str) -> int:
    stamp = datetime.fromisoformat(created_at)
    return int(stamp.timestamp()) * 1_000_000_000 + stamp.microsecond * 1000


def check_trial(job: Job, trial: Trial) -> None:
    """Everything the trial must show, recorded in ``trial.problems``."""
    done_at = _check_final_state(job, trial)
    _check_integrity(job, trial)
    executions = _executions(job)
    trial.executions = len(executions)
    trial.kills_during_step = sum(1 for pid in trial.killed if any(e.pid == pid and not e.finished for e in executions))
    later = with_dependencies(job.plan)
    trial.kills_after_dependent = sum(
        1 for pid in trial.killed if any(e.pid == pid and e.step in later for e in executions)
    )
    needed_by = dependents(job.plan)
    for step in step_ids(job.plan):
        _check_step_runs(trial, step, executions, needed_by[step], done_at)


def _check_final_state(job: Job, trial: Trial) -> dict[str, int]:
    """Check that the run completed with every step done; the time (ns) of the first checkpoint that shows each
    step done."""
    saver = open_checkpointer(job.db)
    try:
        graph = build_graph(ScriptedChatModel(responder=PurposeScript(plan=PLANS[job.plan])), checkpointer=saver)
        config = {"configurable": {"thread_id": THREAD}}
        state = graph.get_state(config)
        plan = state.values.get("plan")
        if state.values.get("status") != "completed" or state.next:
            trial.problems.append(f"status {state.values.get('status')!r}, next {state.next}")
        if (
            not isinstance(plan, Plan)
            or any(s.status is not StepStatus.DONE for s in plan.steps)
            or {s.id for s in plan.steps} != set(step_ids(job.plan))
        ):
            trial.problems.append(f"plan not done: {plan}")
        history = list(graph.get_state_history(config))
        trial.checkpoints = len(history)
        done_at: dict[str, int] = {}
        for snap in history:
            p = snap.values.get("plan")
            if isinstance(p, Plan) and snap.created_at:
                for s in p.by_status(StepStatus.DONE):
                    done_at[s.id] = min(done_at.get(s.id, _ns(snap.created_at)), _ns(snap.created_at))
    finally:
        saver.conn.close()
    return done_at


def _check_integrity(job: Job, trial: Trial) -> None:
    """Check a SQLite database's integrity (PostgreSQL's is its own)."""
    integrity = "ok"
    if not str(job.db).startswith("postgresql://"):
        with sqlite3.connect(job.db) as conn:
            integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        conn.close()
    if integrity != "ok":
        trial.problems.append(f"integrity_check: {integrity}")


def _executions(job: Job) -> list[Execution]:
    """The step executions the workers counted, each marked finished when its end was counted too."""
    executions: list[Execution] = []
    for line in _read(job.counter).splitlines():
        kind, step, attempt, pid, ns = line.split()
        if kind == "start":
            executions.append(Execution(step, int(attempt), int(pid), int(ns)))
        else:
            for e in executions:
                if (e.step, e.attempt, e.pid) == (step, int(attempt), int(pid)):
                    e.finished = True
    return executions


def _check_step_runs(
    trial: Trial, step: str, executions: list[Execution], needed_by: set[str], done_at: dict[str, int]
) -> None:
    """Check that ``step`` ran, and ran again only after a kill: never after a process started a step that depends
    on it, nor after the checkpoint that recorded it done."""
    runs = sorted((e for e in executions if e.step == step), key=lambda e: e.ns)
    # a process that started a dependent of this step had it done (verified, and durable before that start)
    done_by = {e.pid: e.ns for e in executions if e.step in needed_by}
    for e in runs:
        if any(ns < e.ns and pid != e.pid for pid, ns in done_by.items()):
            trial.re_runs_of_done_steps += 1
            trial.problems.append(
                f"done step {step} ran again (pid {e.pid}) after a process had started a step that depends on it"
            )
    if not runs:
        trial.problems.append(f"step {step} never executed")
        return
    trial.re_executions += len(runs) - 1
    if len(runs) > 1 + len(trial.killed):
        trial.problems.append(f"step {step} executed {len(runs)} times with {len(trial.killed)} kill(s)")
    for e in runs:
        if step in done_at and e.ns >= done_at[step]:
            trial.problems.append(
                f"step {step} executed again (pid {e.pid}) after the checkpoint that recorded it done"
            )
    for previous, again in itertools.pairwise(runs):
        trial.re_executions_after_finish += previous.finished
        if previous.pid not in trial.killed:
            trial.problems.append(
                f"step {step} re-executed by pid {again.pid} although pid {previous.pid}, "
                "which executed it before, was not killed"
            )


def run_trials(
    launch: Launcher,
    folder: Path,
    trials: int,
    seed: int,
    durability: str | None = None,
    db_for: Callable[[int], Path | str] | None = None,
    kill_after: str = "mixed",
    plan: str = "layers",
) -> list[Trial]:
    """``db_for(i)`` names trial i's database (default: a SQLite file in ``folder``)."""
    rng = random.Random(seed)
    results = [run_trial(launch, folder, i, rng, durability, db_for, kill_after, plan) for i in range(trials)]
    totals = Counter[str]()
    for t in results:
        totals.update(
            {
                "launches": t.launches,
                "kills": len(t.killed),
                "kills during a step": t.kills_during_step,
                "executions": t.executions,
                "re-executions": t.re_executions,
                "re-executions of a finished execution": t.re_executions_after_finish,
                "re-runs of done steps": t.re_runs_of_done_steps,
                "kills after a dependent started": t.kills_after_dependent,
                "problems": len(t.problems),
            }
        )
    if os.environ.get("PLANMODE_CRASH_REPORT"):
        print(
            f"\ncrash-resume ({plan}, kill {kill_after}, {durability or 'default'} durability): {trials} trials, "
            + ", ".join(f"{k} {v}" for k, v in totals.items())
        )
    problems = [f"trial {t.index}: {p}" for t in results for p in t.problems]
    assert not problems, "\n".join(problems)
    assert totals["re-runs of done steps"] == 0, totals
    assert totals["kills"] >= trials, totals  # every trial's first process is killed
    if kill_after == "dependent":
        assert totals["kills after a dependent started"] >= trials * 0.9, totals
    else:
        assert totals["kills during a step"] >= trials // 4, totals
        assert totals["kills after a dependent started"] >= trials // 4, totals
    return results


# -- the tests -------------------------------------------------------------------------------------------


def test_killed_runs_resume_to_completion_without_re_executing_done_steps(
    fork_server: ForkServer, tmp_path: Path
) -> None:
    results = run_trials(fork_server.launch, tmp_path, trials=20, seed=20240521)
    assert all(t.checkpoints > 0 for t in results)


def test_killed_just_after_a_dependent_started_no_done_step_runs_again(fork_server: ForkServer, tmp_path: Path) -> None:
    """LangGraph's default durability ("async", what ``graph.invoke`` uses when given none): 30 runs of the
    chain a -> b -> c, each killed 0-100 ms after b (or c) began, then resumed. Before the fix LangGraph
    saved the checkpoint recording a done tens of milliseconds after b began, and runs re-ran a."""
    results = run_trials(fork_server.launch, tmp_path, trials=30, seed=4, kill_after="dependent", plan="chain")
    assert sum(t.re_runs_of_done_steps for t in results) == 0


@pytest.mark.slow
@pytest.mark.parametrize("durability", ["async", "sync"])
def test_many_kills_after_a_dependent_started(fork_server: ForkServer, tmp_path: Path, durability: str) -> None:
    run_trials(
        fork_server.launch, tmp_path, trials=100, seed=40, durability=durability, kill_after="dependent", plan="chain"
    )


@pytest.mark.slow
@pytest.mark.parametrize(("durability", "trials"), [(None, 100), ("sync", 50)])
def test_many_killed_runs(fork_server: ForkServer, tmp_path: Path, durability: str | None, trials: int) -> None:
    run_trials(fork_server.launch, tmp_path, trials=trials, seed=7, durability=durability)


@pytest.mark.slow
def test_killed_runs_in_fresh_interpreters(tmp_path: Path) -> None:
    run_trials(FreshChild, tmp_path, trials=20, seed=11)


def test_the_worker_alone_completes_and_resumes_as_a_no_op(tmp_path: Path) -> None:
    """The worker's own contract: a run completes; starting it again on a finished thread changes nothing."""
    job = Job(db=tmp_path / "w.db", counter=tmp_path / "w.counter", log=tmp_path / "w.log")
    server = ForkServer()
    try:
        assert server.launch(job).wait(120) == 0
        lines = _read(job.counter).splitlines()
        assert sorted(line.split()[1] for line in lines if line.startswith("start ")) == sorted(STEP_IDS)
        with sqlite3.connect(job.db) as conn:
            count = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
        conn.close()
        assert server.launch(job).wait(120) == 0
        with sqlite3.connect(job.db) as conn:
            assert conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0] == count
        conn.close()
        assert _read(job.counter).splitlines() == lines
    finally:
        server.close()
