"""dispatch, verify and model_unavailable as async-native nodes: on ``ainvoke`` their async functions run on the
event loop (the judges awaited together, bounded by ``max_parallel``; step outputs read with the store's
``aget``), execute_step's durability wait is awaited (``await_until_durable``), with no blocking call on the
loop (the LangGraph server's detector, blockbuster, is on during the runs); the sync path works unchanged."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from blockbuster import blockbuster_ctx
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from planmode._compat import RunnableCallable
from planmode.graph import build_graph
from planmode.nodes import execute_step as execute_step_module
from planmode.nodes.verify import bounded_gather
from planmode.persistence import async_sqlite_checkpointer, await_until_durable, sqlite_checkpointer
from planmode.state.models import Plan, StepStatus
from planmode.state.reducer import restore_plan
from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest

WIDE = {
    "title": "four at once",
    "steps": [
        {"id": "a", "description": "first", "acceptance": "says a"},
        {"id": "b", "description": "second", "acceptance": "says b"},
        {"id": "c", "description": "third", "acceptance": "says c"},
        {"id": "d", "description": "fourth", "acceptance": "says d"},
    ],
}
CHAIN = {
    "title": "a chain",
    "steps": [
        {"id": "a", "description": "first"},
        {"id": "b", "description": "second", "dependencies": ["a"]},
        {"id": "c", "description": "third", "dependencies": ["b"]},
    ],
}
HEADLESS = {"mode": "plan", "approval": "auto", "max_attempts": 1, "max_parallel": 4}
TASK = {"messages": [("user", "do the steps of the plan")]}


def _cfg(thread: str = "t") -> Any:
    return {"configurable": {"thread_id": thread}}


def _arun(
    db: Path, model: Any, context: dict[str, Any] | None = None, *, detect_blocking: bool = True, **kwargs: Any
) -> dict[str, Any]:
    """One ``ainvoke`` run on an AsyncSqliteSaver file, under the blocking-call detector; the final values."""

    async def main() -> dict[str, Any]:
        async with async_sqlite_checkpointer(db) as saver:
            graph = build_graph(model, checkpointer=saver, **kwargs)
            if detect_blocking:
                with blockbuster_ctx():
                    await graph.ainvoke(TASK, _cfg(), context=context or HEADLESS)
            else:
                await graph.ainvoke(TASK, _cfg(), context=context or HEADLESS)
            return dict((await graph.aget_state(_cfg())).values)

    return asyncio.run(main())


# -- the nodes are two-path runnables ------------------------------------------------------------------------


def test_dispatch_verify_and_model_unavailable_have_an_async_path() -> None:
    graph = build_graph(ScriptedChatModel(responder=PurposeScript(plan=WIDE)))
    for name in ("dispatch", "verify", "model_unavailable"):
        node = graph.builder.nodes[name].runnable
        assert isinstance(node, RunnableCallable), name
        assert node.func is not None and node.afunc is not None, name  # invoke and ainvoke paths


# -- verify ---------------------------------------------------------------------------------------------------


def test_the_default_judge_is_awaited_on_the_event_loop_and_the_judges_overlap(tmp_path: Path) -> None:
    """An ``async def`` responder can only answer ``ainvoke``: the old verify (a sync node calling the judge with
    ``invoke`` in a thread pool) could not run this at all."""
    in_flight = 0
    peak = 0
    threads: set[int] = set()

    async def judge(req: ScriptRequest) -> dict[str, Any]:
        nonlocal in_flight, peak
        threads.add(threading.get_ident())
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.1)
        in_flight -= 1
        return {"passed": True, "reason": ""}

    model = ScriptedChatModel(responder=PurposeScript(plan=WIDE, verify=judge))
    values = _arun(tmp_path / "runs.sqlite", model, {**HEADLESS, "max_parallel": 3})
    assert values["status"] == "completed", values.get("error")
    assert model.calls("verify") == 4
    assert len(threads) == 1  # all on the loop's thread
    assert peak == 3  # a, b and c judged together (bounded by max_parallel = 3), then d


def test_an_async_verifier_is_bounded_by_max_parallel_and_its_verdicts_keep_their_steps(tmp_path: Path) -> None:
    seen: list[str] = []
    in_flight = 0
    peak = 0

    async def verifier(step: Any, output: str, ctx: Any) -> Any:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.05 if step.id == "a" else 0.01)  # a finishes last: the verdicts stay in order
        in_flight -= 1
        seen.append(step.id)
        return (step.id != "b", f"judged {step.id}")

    model = ScriptedChatModel(responder=PurposeScript(plan=WIDE, reflect={"assessment": "failed", "reasoning": "x"}))
    values = _arun(tmp_path / "runs.sqlite", model, verifier=verifier)
    plan: Plan = values["plan"]
    assert peak == 4
    assert seen[-1] == "a"
    assert {s.id: s.status for s in plan.steps} == {
        "a": StepStatus.DONE,
        "b": StepStatus.FAILED,
        "c": StepStatus.DONE,
        "d": StepStatus.DONE,
    }
    assert plan.get("b").error == "judged b"


class _AsyncOnlyStore(InMemoryStore):
    """A store whose sync ``get`` must not be used from the async path (it would block a real server's loop)."""

    def get(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the sync store.get was called on the async path")


def test_verify_reads_the_full_output_with_the_stores_aget(tmp_path: Path) -> None:
    long = "x" * 5000  # longer than result_chars: the outcome keeps only its beginning, the store the rest
    outputs: dict[str, str] = {}

    async def executor(step: Any, ctx: Any) -> str:
        return f"{step.id}:{long}"

    async def verifier(step: Any, output: str, ctx: Any) -> bool:
        outputs[step.id] = output
        return True

    store = _AsyncOnlyStore()
    model = ScriptedChatModel(responder=PurposeScript(plan=CHAIN))
    values = _arun(tmp_path / "runs.sqlite", model, store=store, executor=executor, verifier=verifier)
    assert values["status"] == "completed", values.get("error")
    assert outputs == {s: f"{s}:{long}" for s in "abc"}  # the full text, from the store


def test_a_verifier_that_loses_the_model_pauses_the_async_run_and_an_async_retry_resumes_it(tmp_path: Path) -> None:
    """verify's async path raises `ModelUnavailableError` through `pausable`; model_unavailable's async path
    interrupts, and ``ainvoke(Command(resume=...))`` goes back to verify, which judges again."""
    down = True

    async def judge(req: ScriptRequest) -> dict[str, Any]:
        if down:
            raise ConnectionError("connection refused")
        return {"passed": True, "reason": ""}

    model = ScriptedChatModel(responder=PurposeScript(plan=WIDE, verify=judge))

    async def main() -> tuple[dict[str, Any], Any, dict[str, Any]]:
        nonlocal down
        async with async_sqlite_checkpointer(tmp_path / "runs.sqlite") as saver:
            graph = build_graph(model, checkpointer=saver)
            with blockbuster_ctx():
                await graph.ainvoke(TASK, _cfg(), context=HEADLESS)
            paused = await graph.aget_state(_cfg())
            down = False
            with blockbuster_ctx():
                await graph.ainvoke(Command(resume={"action": "retry"}), _cfg())
            return dict(paused.values), paused, dict((await graph.aget_state(_cfg())).values)

    before, snapshot, after = asyncio.run(main())
    assert before["status"] == "model_unavailable"
    assert "connection refused" in before["error"]
    assert snapshot.interrupts[0].value["type"] == "planmode.model_unavailable"
    assert snapshot.interrupts[0].value["node"] == "verify"
    assert all(s.status is not StepStatus.DONE for s in before["plan"].steps)  # no verdict while the model is gone
    assert after["status"] == "completed", after.get("error")
    assert model.calls("execute") == 4  # the steps were not executed again: only their verdicts were missing


def test_the_sync_path_still_judges_in_threads(tmp_path: Path) -> None:
    threads: set[int] = set()

    def verifier(step: Any, output: str, ctx: Any) -> bool:
        threads.add(threading.get_ident())
        time.sleep(0.05)
        return True

    saver = sqlite_checkpointer(tmp_path / "runs.sqlite")
    graph = build_graph(ScriptedChatModel(responder=PurposeScript(plan=WIDE)), checkpointer=saver, verifier=verifier)
    graph.invoke(TASK, _cfg(), context=HEADLESS)
    values = graph.get_state(_cfg()).values
    saver.conn.close()
    assert values["status"] == "completed", values.get("error")
    assert len(threads) > 1 and threading.get_ident() not in threads


# -- bounded_gather --------------------------------------------------------------------------------------------


def test_bounded_gather_keeps_order_and_bound() -> None:
    in_flight = 0
    peak = 0

    async def work(i: int) -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01 * (5 - i))
        in_flight -= 1
        return i * 10

    assert asyncio.run(bounded_gather(work, list(range(5)), 2)) == [0, 10, 20, 30, 40]
    assert peak == 2
    assert asyncio.run(bounded_gather(work, [], 0)) == []


def test_bounded_gather_raises_the_first_error_itself_and_cancels_the_rest() -> None:
    finished: list[int] = []
    cancelled: list[int] = []

    async def work(i: int) -> int:
        try:
            if i == 1:
                await asyncio.sleep(0.01)
                raise KeyError("lost")
            await asyncio.sleep(1.0)
            finished.append(i)
            return i
        except asyncio.CancelledError:
            cancelled.append(i)
            raise

    async def main() -> None:
        with pytest.raises(KeyError, match="lost"):  # not an ExceptionGroup: pausable and LangGraph see it
            await bounded_gather(work, [0, 1, 2, 3], 3)

    started = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - started < 0.5  # the others were cancelled, not awaited to the end
    assert finished == []
    assert sorted(cancelled) == [0, 2, 3]  # 3 was waiting for the semaphore: cancelled too


# -- durability on the async path ------------------------------------------------------------------------


def test_the_async_durability_wait_does_not_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On ``ainvoke`` a step that follows a done one awaits `await_until_durable` (the blocking
    `wait_until_durable`, which this test forbids, took a worker thread per waiting step: the 6-thread cap)."""
    awaited: list[float] = []

    def blocking(**kwargs: Any) -> None:
        raise AssertionError("the blocking durability wait was called on the async path")

    async def counted(**kwargs: Any) -> None:
        awaited.append(time.monotonic())
        await await_until_durable(**kwargs)

    monkeypatch.setattr(execute_step_module, "wait_until_durable", blocking)
    monkeypatch.setattr(execute_step_module, "await_until_durable", counted)
    values = _arun(tmp_path / "runs.sqlite", ScriptedChatModel(responder=PurposeScript(plan=CHAIN)))
    assert values["status"] == "completed", values.get("error")
    assert len(awaited) == 2  # before b (a done) and before c (a, b done)


class _SlowSaver(AsyncSqliteSaver):
    """An AsyncSqliteSaver whose checkpoints land late (a slow disk or network), as "async" durability allows."""

    async def aput(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.15)
        return await super().aput(*args, **kwargs)


def test_a_step_starts_only_once_its_done_dependency_is_durable_on_the_async_path(tmp_path: Path) -> None:
    """With checkpoints written behind execution (LangGraph's default "async" durability) and a slow saver,
    each step still starts only once a saved checkpoint records its dependency done."""
    seen: dict[str, list[str]] = {}
    holder: dict[str, Any] = {}

    async def executor(step: Any, ctx: Any) -> str:
        tup = await holder["saver"].aget_tuple(_cfg())  # the newest checkpoint saved so far
        plan = restore_plan(tup.checkpoint["channel_values"].get("plan")) if tup is not None else None
        seen[step.id] = sorted(s.id for s in plan.by_status(StepStatus.DONE)) if isinstance(plan, Plan) else []
        return f"{step.id} done"

    async def main() -> dict[str, Any]:
        import aiosqlite

        async with aiosqlite.connect(str(tmp_path / "runs.sqlite")) as conn:
            saver = _SlowSaver(conn)
            graph = build_graph(
                ScriptedChatModel(responder=PurposeScript(plan=CHAIN)), checkpointer=saver, executor=executor
            )
            holder["saver"] = graph.checkpointer  # with planmode's types allowlisted
            await graph.ainvoke(TASK, _cfg(), context=HEADLESS, durability="async")
            return dict((await graph.aget_state(_cfg())).values)

    values = asyncio.run(main())
    assert values["status"] == "completed", values.get("error")
    assert seen == {"a": [], "b": ["a"], "c": ["a", "b"]}


def test_two_async_runs_share_the_loop_while_one_waits_for_durability(tmp_path: Path) -> None:
    """The durability wait sleeps with ``asyncio.sleep``: a second run on another thread goes on meanwhile
    (a blocking wait on the loop would stall it, and blockbuster would refuse it)."""
    model = ScriptedChatModel(responder=PurposeScript(plan=CHAIN))

    async def main() -> list[Any]:
        async with aiosqlite_saver(tmp_path / "runs.sqlite") as saver:
            graph = build_graph(model, checkpointer=saver)
            with blockbuster_ctx():
                await asyncio.gather(
                    graph.ainvoke(TASK, _cfg("one"), context=HEADLESS),
                    graph.ainvoke(TASK, _cfg("two"), context=HEADLESS),
                )
            return [(await graph.aget_state(_cfg(t))).values["status"] for t in ("one", "two")]

    assert asyncio.run(main()) == ["completed", "completed"]


def aiosqlite_saver(path: Path) -> Any:
    """A slow-writing AsyncSqliteSaver on ``path`` (an async context manager)."""
    from contextlib import asynccontextmanager

    import aiosqlite

    @asynccontextmanager
    async def cm() -> Any:
        async with aiosqlite.connect(str(path)) as conn:
            saver = _SlowSaver(conn)
            await saver.setup()
            yield saver

    return cm()
