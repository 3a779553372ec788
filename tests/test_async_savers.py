"""The async checkpointers planmode creates for the server, used in-process with ``ainvoke``: a run through the
approval to its end on `AsyncSqliteSaver` and on `AsyncPostgresSaver` (`server_checkpointer`), the durability
wait included (it asks the saver from the nodes' worker threads)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from langgraph.types import Command

from planmode.graph import build_graph
from planmode.persistence import server_checkpointer
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
