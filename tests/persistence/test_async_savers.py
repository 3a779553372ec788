"""The async checkpointers planmode creates for the server, used in-process with ``ainvoke``: a run through the
approval to its end on `AsyncSqliteSaver` and on `AsyncPostgresSaver` (`server_checkpointer`), the durability
wait included (it asks the saver from the nodes' worker threads)."""

from __future__ import annotations

import asyncio
import operator
import uuid
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from planmode._compat import CONFIG_KEY_CHECKPOINT_MAP
from planmode.graph import build_graph
from planmode.persistence import await_until_durable, server_checkpointer
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

pytestmark = pytest.mark.integration

TASK = "Ship it: build the package, then test it and document it"
PLAN = {
    "title": "Ship",
    "steps": [
        {"id": "build", "description": "build the package"},
        {"id": "test", "description": "test it", "dependencies": ["build"]},
        {"id": "docs", "description": "document it", "dependencies": ["build"]},
    ],
}


async def _through_approval(saver: Any, thread_id: str) -> dict[str, Any]:
    executed: list[str] = []

    def executor(step: Any, ctx: Any) -> str:
        executed.append(step.id)
        return f"did {step.id}"

    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    graph = build_graph(model, executor=executor, verifier=lambda s, o, c: True, checkpointer=saver)
    cfg: Any = {"configurable": {"thread_id": thread_id}}
    await graph.ainvoke({"messages": [("user", TASK)]}, cfg, context={"mode": "plan"})
    state = await graph.aget_state(cfg)
    assert state.next == ("approve",)
    revision = state.interrupts[0].value["revision"]
    await graph.ainvoke(Command(resume={"action": "approve", "revision": revision}), cfg)
    values = (await graph.aget_state(cfg)).values
    assert sorted(executed) == ["build", "docs", "test"]
    history = [s async for s in graph.aget_state_history(cfg)]
    assert len(history) > 5
    return dict(values)


def _check(values: dict[str, Any]) -> None:
    assert values["status"] == "completed"
    assert {s.id: s.status.value for s in values["plan"].steps} == dict.fromkeys(["build", "test", "docs"], "done")
    assert [a["edited"] for a in values["report"]["approvals"]] == [False]


def test_async_sqlite_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANMODE_SERVER_DB", str(tmp_path / "s.sqlite"))

    async def main() -> dict[str, Any]:
        async with server_checkpointer() as saver:
            return await _through_approval(saver, "t-sqlite")

    _check(asyncio.run(main()))


def test_async_postgres_end_to_end(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANMODE_SERVER_DB", pg_url)

    async def main() -> dict[str, Any]:
        async with server_checkpointer() as saver:
            return await _through_approval(saver, f"t-pg-{uuid.uuid4().hex}")

    _check(asyncio.run(main()))


# -- the durability wait for async nodes ------------------------------------------------------------------


class _State(TypedDict, total=False):
    seen: Annotated[list[str], operator.add]


def _durable_graph(saver: Any, *, timeout: float = 120.0) -> Any:
    async def first(state: _State) -> dict[str, Any]:
        return {"seen": ["first"]}

    async def second(state: _State) -> dict[str, Any]:
        await await_until_durable(timeout=timeout)
        conf = get_config()["configurable"]
        parent = conf[CONFIG_KEY_CHECKPOINT_MAP][""]
        found = await saver.aget_tuple(
            {"configurable": {"thread_id": conf["thread_id"], "checkpoint_ns": "", "checkpoint_id": parent}}
        )
        return {"seen": ["durable" if found is not None else "not saved"]}

    builder = StateGraph(_State)
    builder.add_node("first", first)
    builder.add_node("second", second)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    return builder.compile(checkpointer=saver)


def test_await_until_durable_returns_once_the_checkpoint_is_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLANMODE_SERVER_DB", str(tmp_path / "d.sqlite"))

    async def main() -> list[list[str]]:
        out = []
        async with server_checkpointer() as saver:
            for s in (saver, InMemorySaver()):
                graph = _durable_graph(s)
                result = await graph.ainvoke({}, {"configurable": {"thread_id": "d"}}, durability="async")
                out.append(result["seen"])
        return out

    assert asyncio.run(main()) == [["first", "durable"], ["first", "durable"]]


def test_await_until_durable_times_out_on_a_saver_that_never_saves() -> None:
    class Forgetful(InMemorySaver):
        async def aget_tuple(self, config: Any) -> Any:
            if config["configurable"].get("checkpoint_id"):
                return None  # never "saved"
            return await super().aget_tuple(config)

    async def main() -> None:
        await _durable_graph(Forgetful(), timeout=0.2).ainvoke({}, {"configurable": {"thread_id": "f"}})

    with pytest.raises(TimeoutError, match="was not saved within"):
        asyncio.run(main())


def test_await_until_durable_outside_a_run_returns_at_once() -> None:
    asyncio.run(await_until_durable(timeout=0.01))
