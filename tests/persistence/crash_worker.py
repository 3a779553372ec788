"""A planmode run that the crash-resume tests kill with SIGKILL (see ``tests/persistence/test_crash_resume.py``).

One run on a SQLite file (or a ``postgresql://`` URL in place of the file): the scripted model plans six
steps in two parallel layers, approval is automatic,
and the executor has a side effect — it appends a line to a counter file, then works (sleeps) a little, so
that kills land during steps. On start the run begins, or, when the thread already has a checkpoint,
resumes with ``graph.invoke(None, config)`` — with the start's settings again, or with none (see `run_once`).

Counter file lines (appended with one ``write`` on an ``O_APPEND`` descriptor, so a kill never tears one)::

    start <step_id> <attempt> <pid> <time_ns>    # the side effect: the step began executing
    finish <step_id> <attempt> <pid> <time_ns>   # the executor returned

Two ways to run it:

``python tests/persistence/crash_worker.py run DB THREAD COUNTER [--no-context]
[--durability=sync|async|exit] [--plan=chain] [--lease] [--ttl=SECONDS] [--work=SECONDS] [--barrier=FILE]
[--hold=FILE] [--async]``
    one run in this interpreter; prints ``started`` once the graph is built (and the imports are done); with
    ``--lease`` the run holds the thread's lease (prints ``leased``; ``--ttl``: its time to live), exits 4
    printing ``busy <message>`` when another process holds it, and 5 printing ``lost <message>`` when another
    process took it over meanwhile (`LeaseLostError`).
``python tests/persistence/crash_worker.py serve``
    a fork server: it imports everything once, then for each JSON request line on stdin (``{"db",
    "thread", "counter", "log", "resume_with_context", "durability", "plan", "aio"}``) forks a child that does one run,
    answers ``{"pid": ...}`` and, when the child has ended, ``{"pid": ..., "exit": ...}`` (``-9`` when it
    was killed). The child is a real process on its own SQLite connection; forking only saves the
    interpreter start-up (about two seconds here) so that many kill trials fit in the normal test suite.

With ``--async`` (``"aio": true``) the run is the async path: an async checkpointer (`aopen_checkpointer`:
AsyncSqliteSaver, or AsyncPostgresSaver for a URL), ``planmode.arun`` (so it holds the thread's lease) and an
``async def`` executor awaited on the event loop; ``"slow_saves": SECONDS`` delays every checkpoint write
(a slow disk or network: with "async" durability the run goes on while the write is pending).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import threading
import time
import traceback
from typing import Any

from langgraph.types import Command

from planmode.errors import LeaseLostError, ThreadBusyError
from planmode.graph.builder import build_graph
from planmode.persistence import aopen_checkpointer, open_checkpointer
from planmode.persistence.alease import arun
from planmode.persistence.lease import thread_lease
from planmode.state.models import Step
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

#: Two layers of three parallel steps: a, b, c, then d, e, f (each needs two of the first layer).
PLAN: dict[str, Any] = {
    "title": "Crash test",
    "steps": [
        {"id": "a", "description": "Step a"},
        {"id": "b", "description": "Step b"},
        {"id": "c", "description": "Step c"},
        {"id": "d", "description": "Step d", "dependencies": ["a", "b"]},
        {"id": "e", "description": "Step e", "dependencies": ["b", "c"]},
        {"id": "f", "description": "Step f", "dependencies": ["a", "c"]},
    ],
}
STEP_IDS = tuple(s["id"] for s in PLAN["steps"])
#: The durability trials' plan: a chain, a then b then c. Step a does its side effect and returns at once, as
#: a quick tool call does: then b starts while LangGraph may still be saving the checkpoints behind it.
CHAIN: dict[str, Any] = {
    "title": "Crash chain",
    "steps": [
        {"id": "a", "description": "Step a"},
        {"id": "b", "description": "Step b", "dependencies": ["a"]},
        {"id": "c", "description": "Step c", "dependencies": ["b"]},
    ],
}
PLANS = {"layers": PLAN, "chain": CHAIN}
TASK = "First read the inputs, then run the six crash-test steps and write the results"
#: The settings of the first start; a resume passes none (they are kept in state).
CONTEXT = {"approval": "auto", "mode": "plan", "max_parallel": 4}
#: Run statuses after which there is nothing to resume.
FINISHED = ("completed", "failed", "answered", "cancelled")
#: The lease's time to live in the lease trials: long, so that a takeover within it proves the dead pid was seen.
LEASE_TTL = 120.0
#: How long one step works, in seconds.
WORK = (0.05, 0.15)


class SideEffectExecutor:
    """Appends ``start`` to the counter file (the side effect), works a little, appends ``finish``."""

    def __init__(self, counter: str, instant: frozenset[str] = frozenset(), work: float | None = None) -> None:
        self.counter = counter
        self.instant = instant
        self.work = work
        self.rng = random.Random(os.getpid() ^ time.time_ns())
        self.lock = threading.Lock()

    def _append(self, kind: str, step: Step) -> None:
        line = f"{kind} {step.id} {step.attempts} {os.getpid()} {time.time_ns()}\n"
        fd = os.open(self.counter, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def __call__(self, step: Step, ctx: Any) -> str:
        self._append("start", step)
        with self.lock:
            pause = 0.0 if step.id in self.instant else self.work or self.rng.uniform(*WORK)
        time.sleep(pause)
        self._append("finish", step)
        return f"step {step.id} done"


class AsyncSideEffectExecutor(SideEffectExecutor):
    """The same side effect from an ``async def`` executor (awaited on the event loop by the async path)."""

    async def __call__(self, step: Step, ctx: Any) -> str:  # type: ignore[override]  # the async executor shape
        self._append("start", step)
        with self.lock:
            pause = 0.0 if step.id in self.instant else self.work or self.rng.uniform(*WORK)
        await asyncio.sleep(pause)
        self._append("finish", step)
        return f"step {step.id} done"


def run_once(
    db: str,
    thread: str,
    counter: str,
    *,
    resume_with_context: bool,
    durability: str | None = None,
    announce: bool = False,
    plan: str = "layers",
    lease: bool = False,
    work: float | None = None,
    barrier: str | None = None,
    hold: str | None = None,
    aio: bool = False,
    slow_saves: float = 0.0,
    ttl: float = LEASE_TTL,
) -> str:
    """Start or resume the run of ``thread`` on ``db``; returns the final status.

    A resume either passes the start's settings again (a supervisor restarting the same command), or none —
    like ``planmode resume --auto-approve``: the settings kept in state apply, and if the process died before
    they were kept, the defaults do (approval "ask"), so an approval interrupt is answered here.
    ``durability`` is LangGraph's (None: its default, "async"); ``plan`` names one of `PLANS`. With ``lease``
    the whole run holds the thread's lease (`planmode.thread_lease`); a busy thread returns ``"busy"``.
    ``work``: seconds every step works (default: a random 0.05-0.15). ``barrier``: a file to wait for after
    the start-up (so that several processes begin at the same moment). ``hold``: with ``lease``, a file to wait
    for once the lease is held, before the run. ``aio``: the async path (see the module docstring). ``ttl``: the
    lease's time to live; a lease lost meanwhile returns ``"lost <message>"``.
    """
    if aio:
        return asyncio.run(
            _arun_once(db, thread, counter, resume_with_context, durability, announce, plan, work, barrier, slow_saves)
        )
    model = ScriptedChatModel(responder=PurposeScript(plan=PLANS[plan]))
    executor = SideEffectExecutor(counter, frozenset({"a"}) if plan == "chain" else frozenset(), work)
    saver = open_checkpointer(db)
    graph = build_graph(model, executor=executor, checkpointer=saver)
    if announce:
        import langchain_openai  # noqa: F401  (imported by the first plan call anyway; kills should land in the run)

        print("started", flush=True)
    while barrier is not None and not os.path.exists(barrier):
        time.sleep(0.002)
    if not lease:
        return _run(graph, thread, resume_with_context=resume_with_context, durability=durability)
    try:
        with thread_lease(saver, thread, ttl=ttl):
            print("leased", flush=True)
            while hold is not None and not os.path.exists(hold):
                time.sleep(0.01)
            return _run(graph, thread, resume_with_context=resume_with_context, durability=durability)
    except ThreadBusyError as exc:
        print(f"busy {exc}", flush=True)
        return "busy"
    except LeaseLostError as exc:
        print(f"lost {exc}", flush=True)
        return "lost"


def _run(graph: Any, thread: str, *, resume_with_context: bool, durability: str | None) -> str:
    config = {"configurable": {"thread_id": thread}}
    state = graph.get_state(config)
    if state.created_at is None:
        graph.invoke({"messages": [("user", TASK)]}, config, context=CONTEXT, durability=durability)
    elif state.next or state.values.get("status") not in FINISHED:
        # Not ``state.next`` alone: when every task of the last checkpoint finished (its writes are saved as
        # pending writes) but the process died before the next checkpoint, the live ``next`` is empty.
        graph.invoke(None, config, context=CONTEXT if resume_with_context else None, durability=durability)
    for _ in range(5):
        state = graph.get_state(config)
        if not state.interrupts:
            break
        revision = state.interrupts[0].value["revision"]
        graph.invoke(Command(resume={"action": "approve", "revision": revision}), config, durability=durability)
    return str(graph.get_state(config).values.get("status"))


async def _arun_once(
    db: str,
    thread: str,
    counter: str,
    resume_with_context: bool,
    durability: str | None,
    announce: bool,
    plan: str,
    work: float | None,
    barrier: str | None,
    slow_saves: float = 0.0,
) -> str:
    """`run_once` on the async path; ``"busy"`` when another process holds the thread's lease."""
    model = ScriptedChatModel(responder=PurposeScript(plan=PLANS[plan]))
    executor = AsyncSideEffectExecutor(counter, frozenset({"a"}) if plan == "chain" else frozenset(), work)
    async with aopen_checkpointer(db) as saver:
        graph = build_graph(model, executor=executor, checkpointer=saver)
        if slow_saves:
            _slow_down(graph.checkpointer, slow_saves)
        if announce:
            import langchain_openai  # noqa: F401  (as in run_once)

            print("started", flush=True)
        while barrier is not None and not os.path.exists(barrier):
            await asyncio.sleep(0.002)
        config: Any = {"configurable": {"thread_id": thread}}
        try:
            state = await graph.aget_state(config)
            if state.created_at is None:
                await arun(graph, {"messages": [("user", TASK)]}, config, context=CONTEXT, durability=durability)
            elif state.next or state.values.get("status") not in FINISHED:  # as in _run
                context = CONTEXT if resume_with_context else None
                await arun(graph, None, config, context=context, durability=durability)
            for _ in range(5):
                state = await graph.aget_state(config)
                if not state.interrupts:
                    break
                answer = {"action": "approve", "revision": state.interrupts[0].value["revision"]}
                await arun(graph, Command(resume=answer), config, durability=durability)
        except ThreadBusyError as exc:
            print(f"busy {exc}", flush=True)
            return "busy"
        return str((await graph.aget_state(config)).values.get("status"))


def _slow_down(saver: Any, seconds: float) -> None:
    """Every checkpoint write of ``saver`` lands ``seconds`` late."""
    put = saver.aput

    async def slow_put(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(seconds)
        return await put(*args, **kwargs)

    saver.aput = slow_put


def serve() -> None:
    """The fork server (see the module docstring)."""
    # Imported lazily by planmode.llm on the first structured call (about a second): pay it once, here.
    import langchain_openai  # noqa: F401

    while True:
        line = sys.stdin.readline()
        if not line:
            return
        request = json.loads(line)
        if threading.active_count() != 1:  # forking a process with threads could copy a held lock
            raise RuntimeError("the fork server must stay single-threaded")
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:  # the child: one run, then exit without running the parent's cleanup
            code = 1
            try:
                devnull = os.open(os.devnull, os.O_RDWR)
                os.dup2(devnull, 0)
                os.dup2(devnull, 1)
                log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                os.dup2(log, 2)
                status = run_once(
                    request["db"],
                    request["thread"],
                    request["counter"],
                    resume_with_context=bool(request.get("resume_with_context", True)),
                    durability=request.get("durability"),
                    plan=request.get("plan", "layers"),
                    aio=bool(request.get("aio")),
                    slow_saves=float(request.get("slow_saves") or 0.0),
                )
                code = 0 if status == "completed" else 3
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(code)
        print(json.dumps({"pid": pid}), flush=True)
        _, wait_status = os.waitpid(pid, 0)
        print(json.dumps({"pid": pid, "exit": os.waitstatus_to_exitcode(wait_status)}), flush=True)


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        serve()
        return 0
    if argv[:1] == ["run"] and len(argv) >= 4:
        flags = argv[4:]
        durability = next((f.split("=", 1)[1] for f in flags if f.startswith("--durability=")), None)
        plan = next((f.split("=", 1)[1] for f in flags if f.startswith("--plan=")), "layers")
        work = next((float(f.split("=", 1)[1]) for f in flags if f.startswith("--work=")), None)
        barrier = next((f.split("=", 1)[1] for f in flags if f.startswith("--barrier=")), None)
        hold = next((f.split("=", 1)[1] for f in flags if f.startswith("--hold=")), None)
        ttl = next((float(f.split("=", 1)[1]) for f in flags if f.startswith("--ttl=")), LEASE_TTL)
        status = run_once(
            argv[1],
            argv[2],
            argv[3],
            resume_with_context="--no-context" not in flags,
            durability=durability,
            announce=True,
            plan=plan,
            lease="--lease" in flags,
            work=work,
            barrier=barrier,
            hold=hold,
            aio="--async" in flags,
            ttl=ttl,
        )
        print(f"status {status}", flush=True)
        return {"completed": 0, "busy": 4, "lost": 5}.get(status, 3)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
