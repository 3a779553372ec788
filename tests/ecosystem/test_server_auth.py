"""Who may approve, end to end: ``langgraph dev`` on ``examples/auth/langgraph.json`` (LangGraph custom auth),
driven by the real ``langgraph-sdk`` client as two users with bearer tokens. Bob (no approve permission) starts
a run, but his answer to the approval interrupt, his state edit and a plain run of his whose context says
``approval: "auto"`` are refused before the graph sees them; the thread stays readable and waiting; Alice
(``planmode:approve``) approves, and her identity is recorded in the plan's history and the run report.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from planmode.testing.dev_server import langgraph_dev
from planmode.testing.openai_server import ScriptedOpenAIServer
from planmode.testing.responders import PlanResponder

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "auth" / "langgraph.json"
RUN_TIMEOUT = 60.0
TASK = "Rotate the keys: make new keys, then deploy them, then revoke the old ones."
PLAN = {
    "title": "Rotate",
    "steps": [
        {"id": "make", "description": "Make new keys"},
        {"id": "deploy", "description": "Deploy them", "dependencies": ["make"]},
    ],
}


def _client(url: str, token: str | None) -> Any:
    return get_client(url=url, headers={"Authorization": f"Bearer {token}"} if token else None)


async def _run(client: Any, tid: str, **kwargs: Any) -> dict[str, Any]:
    async with asyncio.timeout(RUN_TIMEOUT):
        await client.runs.wait(tid, "planmode", **kwargs)
    state: dict[str, Any] = await client.threads.get_state(tid)
    return state


async def _scenario(url: str) -> dict[str, Any]:
    alice, bob, nobody = _client(url, "alice-token"), _client(url, "bob-token"), _client(url, None)
    try:
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await nobody.threads.create()
        assert refused.value.response.status_code == 401
        assert "bearer token" in refused.value.response.text

        tid = (await bob.threads.create())["thread_id"]
        state = await _run(
            bob, tid, input={"messages": [{"role": "user", "content": TASK}]}, context={"model": "scripted-model"}
        )
        assert state["next"] == ["approve"]
        revision = state["interrupts"][0]["value"]["revision"]
        answer = {"resume": {"action": "approve", "revision": revision}}

        # Bob may not answer: refused with a clear error before any run is made
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await bob.runs.wait(tid, "planmode", command=answer)
        assert refused.value.response.status_code == 403
        text = refused.value.response.text
        assert "'bob' may not answer the approval" in text and "planmode:approve" in text
        # ... nor approve by the back door (a state edit as the approve node)
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await bob.threads.update_state(tid, {"needs_approval": False, "status": "running"}, as_node="approve")
        assert refused.value.response.status_code == 403
        # ... nor by starting a plain run whose context (or configurable) says approval "auto": it approved the
        # plan on the unchanged example (issue 21)
        for settings in ({"context": {"approval": "auto"}}, {"config": {"configurable": {"approval": "auto"}}}):
            with pytest.raises(httpx.HTTPStatusError) as refused:
                await bob.runs.wait(tid, "planmode", **settings)
            assert refused.value.response.status_code == 403, settings
            assert (
                "approval='auto'" in refused.value.response.text and "planmode:approve" in refused.value.response.text
            )
        # ... and the thread is intact: still waiting at the same approval, one run only
        state = await bob.threads.get_state(tid)
        assert state["next"] == ["approve"] and state["interrupts"][0]["value"]["revision"] == revision
        assert len(await bob.runs.list(tid)) == 1

        # Alice approves; the run completes and records her
        state = await _run(alice, tid, command=answer)
        return state
    finally:
        for c in (alice, bob, nobody):
            await c.aclose()


def test_only_a_user_with_the_approve_permission_answers_the_approval(tmp_path: Path) -> None:
    responder = PlanResponder(plan=PLAN, final="Keys rotated.")
    with ScriptedOpenAIServer(responder) as llm:
        env = {
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "test",
            "LANGSMITH_TRACING": "false",
            "PLANMODE_SERVER_DB": str(tmp_path / "server.sqlite"),
            "BG_JOB_ISOLATED_LOOPS": "true",
        }
        with langgraph_dev(cwd=CONFIG.parent, env=env) as server:
            state = asyncio.run(_scenario(server.url))
        assert not llm.errors, llm.errors
    values = state["values"]
    assert values["status"] == "completed", "\n".join(server.output[-30:])
    assert values["messages"][-1]["content"] == "Keys rotated."
    history = values["plan"]["history"]
    assert [(r["source"], r["approved_by"]) for r in history] == [("planner", None), ("approval", "alice")]
    assert values["report"]["approvals"] == [{"version": 1, "by": "alice", "edited": False}]
    assert responder.counts()["execute"] == 2  # bob's refused answer ran nothing
