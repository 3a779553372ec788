"""The LangGraph server's strict mode, end to end: ``langgraph dev`` with ``BG_JOB_ISOLATED_LOOPS=true`` (each
run on its own event loop, with the server's blocking-call detector on) on the repository's ``langgraph.json``,
driven by the real ``langgraph-sdk`` client: a run to the approval interrupt, the approval, the run to its end.

Before the fix every run failed there: ``BlockingError: Blocking call to os.mkdir`` in
``persistence.server_checkpointer``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client

from planmode.persistence import async_sqlite_checkpointer, server_checkpointer
from planmode.testing.dev_server import langgraph_dev
from planmode.testing.openai_server import ScriptedOpenAIServer
from planmode.testing.responders import PlanResponder

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 60.0
TASK = "Plan the release: collect the changelog, then write the notes and update the docs, finally publish it."
PLAN = {
    "title": "Release",
    "steps": [
        {"id": "changelog", "description": "Collect the changelog"},
        {"id": "notes", "description": "Write the release notes", "dependencies": ["changelog"]},
        {"id": "docs", "description": "Update the docs", "dependencies": ["changelog"]},
    ],
}


async def _wait(client: Any, tid: str, **kwargs: Any) -> tuple[dict[str, Any], list[Any]]:
    """One run to its end (``runs.wait``); (final values, errors seen on the stream)."""
    errors: list[Any] = []
    async with asyncio.timeout(RUN_TIMEOUT):
        async for part in client.runs.stream(tid, "planmode", stream_mode=["values"], **kwargs):
            if part.event == "error":
                errors.append(part.data)
    state = await client.threads.get_state(tid)
    return state, errors


async def _drive(url: str) -> tuple[str, dict[str, Any]]:
    client = get_client(url=url)
    try:
        tid = (await client.threads.create())["thread_id"]
        state, errors = await _wait(
            client, tid, input={"messages": [{"role": "user", "content": TASK}]}, context={"model": "scripted-model"}
        )
        assert not errors, errors
        assert state["next"] == ["approve"], state
        revision = state["interrupts"][0]["value"]["revision"]
        state, errors = await _wait(client, tid, command={"resume": {"action": "approve", "revision": revision}})
        assert not errors, errors
        runs = await client.runs.list(tid)
        assert [r["status"] for r in runs] == ["success", "success"], runs
        return tid, state
    finally:
        await client.aclose()


def test_a_run_through_approval_under_isolated_loops(tmp_path: Path) -> None:
    db = tmp_path / "nested" / "folder" / "server.sqlite"  # a folder to make: the call that used to block
    responder = PlanResponder(plan=PLAN, final="The release is out.")
    with ScriptedOpenAIServer(responder) as llm:
        env = {
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "test",
            "LANGSMITH_TRACING": "false",
            "PLANMODE_SERVER_DB": str(db),
            "BG_JOB_ISOLATED_LOOPS": "true",
        }
        with langgraph_dev(cwd=ROOT, env=env) as server:
            tid, state = asyncio.run(_drive(server.url))
        assert not llm.errors, llm.errors
    text = "\n".join(server.output)
    assert "BlockingError" not in text and "Blocking call" not in text, text[-3000:]
    values = state["values"]
    assert values["status"] == "completed"
    assert {s["id"]: s["status"] for s in values["plan"]["steps"]} == dict.fromkeys(
        ["changelog", "notes", "docs"], "done"
    )
    assert values["messages"][-1]["content"] == "The release is out."
    assert responder.counts()["execute"] == 3
    with contextlib.closing(sqlite3.connect(db)) as conn:  # the server's checkpoints are in our file
        threads = {r[0] for r in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")}
    assert tid in threads


def test_the_server_checkpointer_makes_no_blocking_call_on_the_loop(tmp_path: Path, monkeypatch: Any) -> None:
    """In process, with os.mkdir refused on the event loop's thread (what the server's detector does): the
    folder is made in a worker thread and the saver round-trips a checkpoint."""
    import os
    import threading

    loop_thread: list[int] = []
    real_mkdir = os.mkdir

    def guarded_mkdir(*args: Any, **kwargs: Any) -> None:
        if loop_thread and threading.get_ident() == loop_thread[0]:
            raise AssertionError("os.mkdir on the event loop")
        real_mkdir(*args, **kwargs)

    monkeypatch.setattr(os, "mkdir", guarded_mkdir)
    monkeypatch.setenv("PLANMODE_SERVER_DB", str(tmp_path / "a" / "b" / "s.sqlite"))

    async def main() -> Any:
        loop_thread.append(threading.get_ident())
        async with server_checkpointer() as saver:
            from langgraph.checkpoint.base import empty_checkpoint

            cfg: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
            saved = await saver.aput(cfg, empty_checkpoint(), {"source": "input", "step": -1}, {})
            return await saver.aget_tuple(saved)

    found = asyncio.run(main())
    assert found is not None and found.config["configurable"]["thread_id"] == "t"
    assert (tmp_path / "a" / "b" / "s.sqlite").exists()


def test_an_unusable_server_database_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")

    async def main() -> None:
        async with async_sqlite_checkpointer(blocker / "s.sqlite", env="PLANMODE_SERVER_DB"):
            pass

    from planmode.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=r"cannot use database file .*PLANMODE_SERVER_DB"):
        asyncio.run(main())


def test_the_server_checkpointer_on_postgres(pg_url: str, monkeypatch: Any) -> None:
    """``PLANMODE_SERVER_DB`` set to a PostgreSQL URL: an AsyncPostgresSaver with planmode's types."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from planmode.state.models import Plan

    monkeypatch.setenv("PLANMODE_SERVER_DB", pg_url)
    plan = Plan(goal="g", steps=[])

    async def main() -> Any:
        async with server_checkpointer() as saver:
            assert isinstance(saver, AsyncPostgresSaver)
            from langgraph.checkpoint.base import empty_checkpoint

            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"plan": plan}
            checkpoint["channel_versions"] = {"plan": 1}
            cfg: Any = {"configurable": {"thread_id": "server-pg", "checkpoint_ns": ""}}
            saved = await saver.aput(cfg, checkpoint, {"source": "input", "step": -1}, {"plan": 1})
            return await saver.aget_tuple(saved)

    found = asyncio.run(main())
    assert found.checkpoint["channel_values"]["plan"] == plan
