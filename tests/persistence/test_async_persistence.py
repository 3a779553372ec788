"""The async entry points on the async checkpointers: ``planmode.arun``/``astream`` with ``aopen_checkpointer``
(AsyncSqliteSaver on a real file, AsyncPostgresSaver on a real server), end to end through the approval and
the resume, under the LangGraph server's blocking-call detector (blockbuster); the thread lease taken on the
async path (two concurrent runs of one thread: one refused; a sync holder in the same database refuses an
async run and the other way round; a dead holder's lease taken over; the heartbeat); and crash durability on
the async path (a process killed just after a dependent step started, resumed by the sync or the async path:
no done step runs again)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from blockbuster import blockbuster_ctx
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command

from planmode import ThreadBusyError, arun, astream, athread_lease, list_runs, thread_lease
from planmode.errors import ConfigurationError
from planmode.graph import build_graph
from planmode.persistence import aopen_checkpointer, sqlite_checkpointer
from planmode.persistence.lease import LEASE_TABLE
from planmode.state.models import StepStatus
from planmode.testing.scripted import PurposeScript, ScriptedChatModel
from tests.persistence.test_crash_resume import ForkServer, Job, run_trials

pytestmark = pytest.mark.integration

PLAN = {
    "title": "Three steps",
    "steps": [
        {"id": "a", "description": "first"},
        {"id": "b", "description": "second", "dependencies": ["a"]},
        {"id": "c", "description": "third", "dependencies": ["a"]},
    ],
}
TASK = {"messages": [("user", "do a, then b and c")]}


def _cfg(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def _graph(saver: Any, executed: list[str] | None = None, pause: float = 0.0) -> Any:
    async def executor(step: Any, ctx: Any) -> str:
        if executed is not None:
            executed.append(step.id)
        await asyncio.sleep(pause)
        return f"did {step.id}"

    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    return build_graph(model, executor=executor, checkpointer=saver)


async def _lease_rows(saver: Any) -> int:
    """How many leases the database holds (through the saver's own async connection)."""
    from planmode.persistence.alease import _astore_for

    store = await _astore_for(saver)
    assert store is not None
    async with store._transaction() as execute:
        cur = await execute(f"SELECT COUNT(*) FROM {LEASE_TABLE} WHERE token <> ''")
        row = await cur.fetchone()
    return int(next(iter(row.values())) if isinstance(row, dict) else row[0])


async def _approve_and_resume(target: str) -> tuple[Any, dict[str, Any], list[str], int]:
    """First process: run until the approval (the lease released after it). Second process (a new saver):
    resume with the approval and run to the end. Under blockbuster: nothing blocks the loop."""
    thread = uuid.uuid4().hex
    with blockbuster_ctx():
        async with aopen_checkpointer(target) as saver:
            first = await arun(_graph(saver), TASK, _cfg(thread), context={"mode": "plan"})
            paused = await _graph(saver).aget_state(_cfg(thread))
            leases_between = await _lease_rows(saver)
        executed: list[str] = []
        async with aopen_checkpointer(target) as saver:
            graph = _graph(saver, executed)
            revision = paused.interrupts[0].value["revision"]
            chunks = [
                c
                async for c in astream(graph, Command(resume={"action": "approve", "revision": revision}), _cfg(thread))
            ]
            values = dict((await graph.aget_state(_cfg(thread))).values)
            assert chunks, "astream yielded nothing"
            assert await _lease_rows(saver) == 0  # released when the stream ended
    assert "__interrupt__" in first
    return paused, values, executed, leases_between


def test_approval_and_resume_end_to_end_on_async_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "deep" / "runs.sqlite"  # its folder is made in a worker thread
    paused, values, executed, leases_between = asyncio.run(_approve_and_resume(str(db)))
    assert paused.values["status"] == "awaiting_approval"
    assert paused.next == ("approve",)
    assert leases_between == 0
    assert values["status"] == "completed", values.get("error")
    assert sorted(executed) == ["a", "b", "c"]
    # the same file through the sync API: readable, the run listed
    saver = sqlite_checkpointer(db)
    try:
        state = build_graph(ScriptedChatModel(responder=PurposeScript(plan=PLAN)), checkpointer=saver).get_state(
            _cfg(list_runs(saver)[0].thread_id)
        )
        assert state.values["status"] == "completed"
        assert all(s.status is StepStatus.DONE for s in state.values["plan"].steps)
    finally:
        saver.conn.close()


def test_approval_and_resume_end_to_end_on_async_postgres(pg_url: str) -> None:
    paused, values, executed, leases_between = asyncio.run(_approve_and_resume(pg_url))
    assert paused.values["status"] == "awaiting_approval"
    assert leases_between == 0
    assert values["status"] == "completed", values.get("error")
    assert sorted(executed) == ["a", "b", "c"]


# -- the lease on the async path ----------------------------------------------------------------------------


async def _two_runs_of_one_thread(target: str) -> tuple[list[Any], dict[str, Any], int]:
    thread = uuid.uuid4().hex
    async with aopen_checkpointer(target) as saver:
        executed: list[str] = []
        graph = _graph(saver, executed, pause=0.2)
        context = {"mode": "plan", "approval": "auto"}
        with blockbuster_ctx():
            results = await asyncio.gather(
                arun(graph, TASK, _cfg(thread), context=context),
                arun(graph, TASK, _cfg(thread), context=context),
                return_exceptions=True,
            )
        values = dict((await graph.aget_state(_cfg(thread))).values)
        return results, values, len(executed)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_two_concurrent_async_runs_of_one_thread_one_is_refused(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    target = str(tmp_path / "runs.sqlite") if backend == "sqlite" else request.getfixturevalue("pg_url")
    results, values, executions = asyncio.run(_two_runs_of_one_thread(target))
    refused = [r for r in results if isinstance(r, ThreadBusyError)]
    finished = [r for r in results if isinstance(r, dict)]
    assert len(refused) == 1 and len(finished) == 1, results
    assert f"{os.uname().nodename}:{os.getpid()}" in str(refused[0])  # says who holds it
    assert values["status"] == "completed"
    assert executions == 3  # the refused run executed nothing


def test_a_sync_holder_refuses_an_async_run_and_the_other_way_round(tmp_path: Path) -> None:
    """One table for both paths: the sync lease (SqliteSaver) and the async one (AsyncSqliteSaver) on one file
    exclude each other."""
    db = tmp_path / "runs.sqlite"
    sync_saver = sqlite_checkpointer(db)

    async def main() -> tuple[str, str]:
        async with aopen_checkpointer(db) as saver:
            graph = _graph(saver)
            with thread_lease(sync_saver, "t"), pytest.raises(ThreadBusyError) as refused_async:
                await arun(graph, TASK, _cfg("t"), context={"mode": "plan"})
            async with athread_lease(graph.checkpointer, "t"):
                with pytest.raises(ThreadBusyError):
                    await asyncio.to_thread(thread_lease(sync_saver, "t").__enter__)
            await arun(graph, TASK, _cfg("t"), context={"mode": "plan"})  # free again: runs to the approval
            return str(refused_async.value), str((await graph.aget_state(_cfg("t"))).values["status"])

    try:
        message, status = asyncio.run(main())
    finally:
        sync_saver.conn.close()
    assert "already running" in message
    assert status == "awaiting_approval"


def test_a_dead_holders_lease_is_taken_over_and_the_heartbeat_renews(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    sync_saver = sqlite_checkpointer(db)
    with thread_lease(sync_saver, "setup"):  # creates the table
        pass
    now = time.time()
    with sqlite3.connect(db) as conn:
        conn.execute(
            f"INSERT INTO {LEASE_TABLE} (thread_id, holder, host, pid, proc_start, token, since, heartbeat, expires) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ("t", f"{os.uname().nodename}:{dead_pid}", os.uname().nodename, dead_pid, None, "x", now, now, now + 600),
        )
    conn.close()

    async def main() -> tuple[str | None, float, float]:
        async with aopen_checkpointer(db) as saver, athread_lease(saver, "t", ttl=0.3) as lease:
            first = await asyncio.to_thread(_expires, db, "t")
            await asyncio.sleep(0.5)  # the heartbeat renews every ttl / 3
            later = await asyncio.to_thread(_expires, db, "t")
            return lease.taken_over, first, later

    try:
        taken_over, first, later = asyncio.run(main())
    finally:
        sync_saver.conn.close()
    assert taken_over == f"{os.uname().nodename}:{dead_pid}"
    assert later > first
    assert _expires(db, "t") is None  # released


def _expires(db: Path, thread: str) -> float | None:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        held = f"SELECT expires FROM {LEASE_TABLE} WHERE thread_id = ? AND token <> ''"  # a released row: no token
        row = conn.execute(held, (thread,)).fetchone()
    return None if row is None else float(row[0])


def test_the_async_lease_refuses_what_is_not_a_checkpointer() -> None:
    async def main() -> None:
        with pytest.raises(ConfigurationError, match="needs a checkpointer"):
            async with athread_lease(object(), "t"):
                pass

    asyncio.run(main())


def test_arun_needs_a_thread_id_and_runs_a_graph_without_checkpointer_without_lease() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    with pytest.raises(ConfigurationError, match="thread id"):
        asyncio.run(arun(build_graph(model, checkpointer=InMemorySaver()), TASK, {"configurable": {}}))
    out = asyncio.run(arun(build_graph(model), TASK, {}, context={"mode": "plan", "approval": "auto"}))
    assert out["status"] == "completed"


# -- set-up errors and imports ---------------------------------------------------------------------------------


def test_aopen_checkpointer_names_a_file_it_cannot_use(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")

    async def main() -> None:
        async with aopen_checkpointer(blocker / "runs.sqlite"):
            pass

    with pytest.raises(ConfigurationError, match="cannot use database file"):
        asyncio.run(main())


def test_is_postgres_imports_nothing() -> None:
    """A first import of psycopg runs ldconfig in a subprocess: the durability check on the event loop must not
    trigger it (blockbuster saw it in the LangGraph server's loop)."""
    code = (
        "import sys\n"
        "from planmode.persistence._savers import is_postgres\n"
        "from planmode.persistence import sqlite_checkpointer\n"
        "assert not is_postgres(object())\n"
        "assert 'psycopg' not in sys.modules and 'langgraph.checkpoint.postgres' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


# -- crash durability on the async path ------------------------------------------------------------------------


def test_killed_async_runs_just_after_a_dependent_started_resume_without_re_running_done_steps(
    fork_server: ForkServer, tmp_path: Path
) -> None:
    """The chain a -> b -> c on the async path (AsyncSqliteSaver, ``arun``, an async executor, LangGraph's
    default "async" durability, checkpoint writes delayed 50 ms), each first process killed 0-100 ms after b (or
    c) began, then resumed by the async path (even trials) or the sync one (odd trials): no done step runs again
    (crash_resume's checks). Without dispatch's durability wait this finds re-runs of done steps."""
    launched: dict[str, int] = {}

    def launch(job: Job) -> Any:
        key = str(job.db)
        launched[key] = launched.get(key, 0) + 1
        index = int(Path(key).stem.removeprefix("trial"))
        first = launched[key] == 1
        job.aio = first or index % 2 == 0
        job.slow_saves = 0.05  # checkpoints land behind the steps: the dependent may start before one is saved
        return fork_server.launch(job)

    results = run_trials(launch, tmp_path, trials=12, seed=16, kill_after="dependent", plan="chain")
    assert sum(t.re_runs_of_done_steps for t in results) == 0
    assert sum(t.kills_after_dependent for t in results) >= 11


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_durability_check_asks_the_async_savers_one_query(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """`await_until_durable`'s check on AsyncSqliteSaver and AsyncPostgresSaver: saved or not, by one query on the
    saver's own connection (no worker thread, no checkpoint loaded)."""
    from planmode.persistence.checkpointers import _acheckpoint_saved

    target = str(tmp_path / "runs.sqlite") if backend == "sqlite" else request.getfixturevalue("pg_url")
    thread = uuid.uuid4().hex

    async def main() -> tuple[bool, bool, bool]:
        async with aopen_checkpointer(target) as saver:
            graph = _graph(saver)
            await graph.ainvoke(TASK, _cfg(thread), context={"mode": "plan"})
            head = (await graph.aget_state(_cfg(thread))).config["configurable"]["checkpoint_id"]
            with blockbuster_ctx():
                saved = await _acheckpoint_saved(graph.checkpointer, (thread, "", head))
                other = await _acheckpoint_saved(graph.checkpointer, (thread, "", "1f0-not-a-checkpoint"))
                elsewhere = await _acheckpoint_saved(graph.checkpointer, ("another", "", head))
            return saved, other, elsewhere

    assert asyncio.run(main()) == (True, False, False)


# -- durability waits wake on the saver's announcement ------------------------------------------------------------


class Forwarding(BaseCheckpointSaver[Any]):
    """A wrapper that forwards what it does not define to the saver it wraps, as the LangGraph server's
    checkpointer adapter does (``__getattr__``); its ``aget_tuple`` is counted (a durability poll through it
    loaded a whole checkpoint)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(serde=inner.serde)
        self._inner = inner
        self.loads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def aget_tuple(self, config: Any) -> Any:
        self.loads += 1
        return await self._inner.aget_tuple(config)

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return await self._inner.aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        await self._inner.aput_writes(config, writes, task_id, task_path)

    def alist(self, config: Any, **kwargs: Any) -> Any:
        return self._inner.alist(config, **kwargs)

    def get_next_version(self, current: Any, channel: Any) -> Any:
        return self._inner.get_next_version(current, channel)


def test_a_durability_wait_wakes_on_the_announcement_and_asks_the_database_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run whose checkpoints land 30 ms behind its steps (LangGraph's "async" durability): every wait of
    execute_step ends on the saver's announcement, with at most one database check per wait (polling took one
    every few ms); through a forwarding wrapper, the check is still the indexed query, never a checkpoint load;
    and every step still runs once."""
    import planmode.persistence.checkpointers as persistence
    from planmode.persistence._saves import SAVES

    checks: list[tuple[str, str, str]] = []
    waits = 0
    check = persistence._acheckpoint_saved
    wait = persistence.await_until_durable

    async def counted_check(saver: Any, key: tuple[str, str, str]) -> bool:
        assert not isinstance(saver, Forwarding)  # unwrapped: the saver's own indexed query
        checks.append(key)
        return await check(saver, key)

    async def counted_wait(**kwargs: Any) -> None:
        nonlocal waits
        waits += 1
        await wait(**kwargs)

    monkeypatch.setattr(persistence, "_acheckpoint_saved", counted_check)
    import planmode.nodes.execute_step as execute_step_module

    monkeypatch.setattr(execute_step_module, "await_until_durable", counted_wait)
    executed: list[str] = []

    async def main() -> tuple[str, int]:
        async with aopen_checkpointer(str(tmp_path / "runs.sqlite")) as saver:
            put = saver.aput

            async def slow_put(*args: Any, **kwargs: Any) -> Any:
                await asyncio.sleep(0.03)
                return await put(*args, **kwargs)

            saver.aput = slow_put  # type: ignore[method-assign]  # checkpoints land behind the steps
            wrapped = Forwarding(saver)
            graph = _graph(saver, executed).copy(update={"checkpointer": wrapped})
            cfg = _cfg(uuid.uuid4().hex)
            await graph.ainvoke(TASK, cfg, context={"mode": "plan", "approval": "auto"})
            return str((await graph.aget_state(cfg)).values.get("status")), wrapped.loads

    status, loads = asyncio.run(main())
    assert status == "completed"
    assert sorted(executed) == ["a", "b", "c"]
    assert waits >= 2  # b and c waited for the checkpoint that recorded a done
    assert len(checks) <= waits
    assert SAVES.waiting() == 0
    assert loads <= 2  # the run's own reads (its start, the final state): no poll loaded a checkpoint


def test_a_checkpoint_saved_elsewhere_ends_the_wait_and_one_never_saved_times_out(tmp_path: Path) -> None:
    """Announcements are a shortcut, not the truth: a checkpoint another process saved (never announced here)
    ends the wait through the database, and one never saved raises TimeoutError after the timeout, leaving no
    waiter behind."""
    from langgraph.config import var_child_runnable_config

    from planmode._compat import (
        CONFIG_KEY_CHECKPOINT_MAP,
        CONFIG_KEY_CHECKPOINT_NS,
        CONFIG_KEY_CHECKPOINTER,
    )
    from planmode.persistence import await_until_durable
    from planmode.persistence._saves import SAVES

    db = str(tmp_path / "runs.sqlite")
    thread = uuid.uuid4().hex

    async def main() -> tuple[float, bool]:
        async with aopen_checkpointer(db) as saver:  # the "other process": saves without this loop waiting
            await _graph(saver).ainvoke(TASK, _cfg(thread), context={"mode": "plan"})
            head = (await _graph(saver).aget_state(_cfg(thread))).config["configurable"]["checkpoint_id"]
        async with aopen_checkpointer(db) as saver:

            def config(checkpoint_id: str) -> Any:
                return {
                    "configurable": {
                        "thread_id": thread,
                        CONFIG_KEY_CHECKPOINTER: Forwarding(saver),
                        CONFIG_KEY_CHECKPOINT_NS: "execute_step:1",
                        CONFIG_KEY_CHECKPOINT_MAP: {"": checkpoint_id},
                    }
                }

            SAVES._recent.clear()  # nothing announced in "this process"
            token = var_child_runnable_config.set(config(head))
            try:
                t0 = time.perf_counter()
                await await_until_durable(timeout=5)
                found = time.perf_counter() - t0
            finally:
                var_child_runnable_config.reset(token)
            token = var_child_runnable_config.set(config("1f0-never-saved"))
            try:
                with pytest.raises(TimeoutError, match="was not saved within"):
                    await await_until_durable(timeout=0.3)
            finally:
                var_child_runnable_config.reset(token)
            return found, SAVES.waiting() == 0

    found, clean = asyncio.run(main())
    assert found < 0.2  # the first database check found it
    assert clean


def test_an_announcement_from_another_thread_wakes_a_waiter_on_its_loop() -> None:
    """`Saves`: a key announced before a watch needs no wait; one announced later, from another thread (a saver
    on another event loop), wakes the waiter on the waiter's loop; unwatch forgets the waiter."""
    import threading

    from planmode.persistence._saves import Saves

    saves = Saves(keep=2)
    saves.announce(("t", "", "1"))

    async def main() -> tuple[bool, bool, int]:
        early = saves.watch(("t", "", "1")) is None
        future = saves.watch(("t", "", "2"))
        assert future is not None
        threading.Timer(0.05, saves.announce, args=(("t", "", "2"),)).start()
        done, _ = await asyncio.wait({future}, timeout=5)
        saves.unwatch(("t", "", "2"), future)
        return early, bool(done), saves.waiting()

    assert asyncio.run(main()) == (True, True, 0)
    saves.announce(("t", "", "3"))
    saves.announce(("t", "", "4"))  # keep=2: the oldest announcement is forgotten

    async def forgotten() -> bool:
        future = saves.watch(("t", "", "1"))
        if future is not None:
            saves.unwatch(("t", "", "1"), future)
        return future is not None

    assert asyncio.run(forgotten())
