"""Studio gets a graph that can work (issue 44, item 6): the graph ``langgraph.json`` serves has the workspace file
tools, on the run's workspace (its context's ``workspace``, kept for a resume) or the server's ``PLANMODE_WORKSPACE``;
and the server's checkpointer implements ``aprune`` and ``adelete_for_runs``, so the server does not warn that
storage grows without bound. The real ``langgraph dev`` and ``langgraph-sdk`` client, the scripted model server."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client

from planmode.persistence.checkpointers import async_sqlite_checkpointer
from planmode.testing import dev_server
from planmode.testing.openai_server import Reply, ScriptedOpenAIServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
_PURPOSE = re.compile(r"^planmode:(\w+)")
PLAN = {
    "title": "Hello",
    "steps": [
        {
            "id": "hello",
            "description": "Write hello.txt with the line hi",
            "tools": ["write_file"],
            "checks": [{"kind": "file", "path": "hello.txt", "contains": ["hi"]}],
        }
    ],
}


def _text(content: Any) -> str:
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [])


def responder(body: dict[str, Any]) -> Reply:
    messages = body.get("messages") or []
    match = _PURPOSE.match(_text(messages[0].get("content")) if messages else "")
    purpose = match.group(1) if match else "unknown"

    def structured(value: dict[str, Any]) -> Reply:
        if body.get("response_format") or not body.get("tools"):
            return json.dumps(value)
        return {"tool_calls": [{"name": body["tools"][0]["function"]["name"], "arguments": value}]}

    if purpose == "detect":
        return structured({"needs_plan": True, "reason": "it writes a file"})
    if purpose == "plan":
        return structured(PLAN)
    if purpose == "verify":
        return structured({"passed": True, "reason": ""})
    if purpose == "execute":
        if not any(m.get("role") == "tool" for m in messages):
            return {"tool_calls": [{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}}]}
        return "Wrote hello.txt."
    if purpose == "explore":
        return "An empty folder."
    return "hello.txt is written."


async def _run(client: Any, context: dict[str, Any]) -> tuple[str, list[Any]]:
    thread = (await client.threads.create())["thread_id"]
    interrupts: list[Any] = []
    async with asyncio.timeout(60):
        async for part in client.runs.stream(
            thread, "planmode", input={"messages": [{"role": "user", "content": "write hello.txt"}]},
            context=context, stream_mode=["updates"],
        ):  # fmt: skip
            if part.event == "updates" and isinstance(part.data, dict) and "__interrupt__" in part.data:
                interrupts.extend(part.data["__interrupt__"])
            assert part.event != "error", part.data
    return thread, interrupts


async def _scenario(url: str, ws_ctx: Path, ws_resumed: Path) -> dict[str, Any]:
    client = get_client(url=url)
    try:
        base = {"model": "scripted", "mode": "plan"}
        # 1. the run's context names the workspace: the file is written there
        first, _ = await _run(client, {**base, "approval": "auto", "workspace": str(ws_ctx)})
        # 2. no workspace in the context: the server's PLANMODE_WORKSPACE
        second, _ = await _run(client, {**base, "approval": "auto"})
        # 3. a run that stops for approval in its own workspace, resumed with no context: it stays there
        third, interrupts = await _run(client, {**base, "approval": "ask", "workspace": str(ws_resumed)})
        assert [i["value"]["type"] for i in interrupts] == ["planmode.approval"]
        revision = interrupts[0]["value"]["revision"]
        async with asyncio.timeout(60):
            async for part in client.runs.stream(
                third, "planmode", command={"resume": {"action": "approve", "revision": revision}}
            ):
                assert part.event != "error", part.data
        return {t: (await client.threads.get_state(t))["values"] for t in (first, second, third)}
    finally:
        await client.aclose()


def test_studio_runs_write_in_the_run_s_workspace(tmp_path: Path) -> None:
    ws_env, ws_ctx, ws_resumed = (tmp_path / n for n in ("env", "ctx", "resumed"))
    for folder in (ws_env, ws_ctx, ws_resumed):
        folder.mkdir()
    with ScriptedOpenAIServer(responder) as llm:
        env = {
            **os.environ,
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "test",
            "LANGSMITH_TRACING": "false",
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LANGGRAPH_DISABLE_FILE_PERSISTENCE": "true",
            "PLANMODE_SERVER_DB": str(tmp_path / "server.sqlite"),
            "PLANMODE_WORKSPACE": str(ws_env),
            "PYTHONUNBUFFERED": "1",
        }
        with dev_server.langgraph_dev(cwd=ROOT, env=env, start_timeout=90) as server:
            try:
                states = asyncio.run(_scenario(server.url, ws_ctx, ws_resumed))
            except AssertionError:
                print("\n".join(server.output[-80:]))  # the server's side of a failure, in the test's report
                raise
    assert [v["status"] for v in states.values()] == ["completed"] * 3, states
    assert (ws_ctx / "hello.txt").read_text() == "hi\n"
    assert (ws_env / "hello.txt").read_text() == "hi\n"
    assert (ws_resumed / "hello.txt").read_text() == "hi\n"
    output = "\n".join(server.output)
    assert "missing aprune" not in output and "missing adelete_for_runs" not in output, output


async def _saver_scenario(db: Path) -> dict[str, Any]:
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class State(TypedDict):
        n: int

    builder = StateGraph(State)
    builder.add_node("inc", lambda s: {"n": s["n"] + 1})
    builder.add_edge(START, "inc")
    builder.add_edge("inc", END)
    async with async_sqlite_checkpointer(db) as saver:
        graph = builder.compile(checkpointer=saver)
        for thread, run in (("a", "r1"), ("a", "r2"), ("b", "r3"), ("c", "r4")):
            cfg: Any = {"configurable": {"thread_id": thread}, "metadata": {"run_id": run}}
            await graph.ainvoke({"n": 0}, cfg)

        async def ids(thread: str) -> list[str]:
            return [t.checkpoint["id"] async for t in saver.alist({"configurable": {"thread_id": thread}})]

        before = {t: await ids(t) for t in "abc"}
        await saver.adelete_for_runs(["r2"])
        after_delete = {t: await ids(t) for t in "abc"}
        await saver.aprune(["a"], strategy="keep_latest")
        await saver.aprune(["b"], strategy="delete")
        after_prune = {t: await ids(t) for t in "abc"}
        head = await graph.aget_state({"configurable": {"thread_id": "a"}})
        with pytest.raises(TypeError):
            await saver.aprune("a")
        with pytest.raises(ValueError, match="unknown prune strategy"):
            await saver.aprune(["a"], strategy="keep_some")
        return {"before": before, "delete": after_delete, "prune": after_prune, "head": head.values}


def test_the_server_saver_prunes_and_deletes_runs(tmp_path: Path) -> None:
    got = asyncio.run(_saver_scenario(tmp_path / "s.sqlite"))
    before, deleted, pruned = got["before"], got["delete"], got["prune"]
    assert len(before["a"]) == 6 and len(before["b"]) == 3  # three checkpoints a run
    assert deleted["a"] == before["a"][3:]  # r2's three (newest first) are gone, r1's stay
    assert deleted["b"] == before["b"] and deleted["c"] == before["c"]
    assert pruned["a"] == [before["a"][3]]  # the newest left
    assert pruned["b"] == [] and pruned["c"] == before["c"]  # other threads untouched
    assert got["head"] == {"n": 1}  # the kept checkpoint holds the whole state
