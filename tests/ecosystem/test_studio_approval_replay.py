"""Issue 43, item 1, through the LangGraph server: ``langgraph dev`` on the repository's ``langgraph.json``,
driven by the real ``langgraph-sdk`` client. A user of the server copies thread A's sealed ``new_run`` record
and its human's plan grant into thread B with ``threads.update_state(..., as_node="approve")``, and replays a
finished run's records into a later run of the same thread. Neither makes a step run: the records are refused
(and the refusals recorded), the thread waits at its own approval, and it stays readable.

One server for both attacks (starting ``langgraph dev`` takes seconds); the server is started as
``tests/ecosystem/test_studio_server.py`` starts it.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client

from planmode.testing.openai_server import ScriptedOpenAIServer
from tests.ecosystem.test_studio_server import TASK, Responder, _stream, langgraph_dev

pytestmark = pytest.mark.integration


def _taken(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The sealed records the attack copies: the run's start and the human's plan grant."""
    log = values["approvals"]
    taken = [r for r in log if r.get("kind") == "new_run" or (r.get("kind") == "plan" and r.get("by") == "human")]
    assert [r["kind"] for r in taken] == ["new_run", "plan"]
    return taken


async def _start(client: Any, tid: str) -> dict[str, Any]:
    """A run on ``tid`` up to its approval interrupt; the interrupt's payload."""
    _, interrupts, errors = await _stream(
        client, tid, input={"messages": [{"role": "user", "content": TASK}]}, context={"model": "scripted-model"}
    )
    assert not errors and len(interrupts) == 1
    payload: dict[str, Any] = interrupts[0]["value"]
    assert payload["type"] == "planmode.approval"
    return payload


async def _attack(client: Any, tid: str, records: list[dict[str, Any]]) -> None:
    """Write ``records`` "as" the approve node, saying the plan is approved, go on; nothing may run."""
    before = (await client.threads.get_state(tid))["values"]["approvals"]
    update = {"approvals": records, "needs_approval": False, "status": "running", "approval_error": None}
    await client.threads.update_state(tid, update, as_node="approve")
    events, interrupts, errors = await _stream(client, tid, input=None)
    assert not errors, errors
    assert [e for e in events if e["type"] in ("step_started", "step_completed")] == []
    assert [i["value"]["type"] for i in interrupts] == ["planmode.approval"]  # asked again, of its own human
    state = await client.threads.get_state(tid)
    values = state["values"]
    assert values["status"] == "awaiting_approval"
    assert all(s["status"] == "pending" for s in values["plan"]["steps"])
    log = values["approvals"]
    assert log[: len(before)] == before  # nothing reset: what the thread recorded is still there
    assert not [r for r in log if r.get("kind") == "plan" and r.get("by") == "human" and "steps" in r]
    refused = [r for r in log[len(before) :] if r.get("kind") == "refused"]
    assert {r["refused"]["kind"] for r in refused} == {"new_run", "plan"}


async def _drive(url: str) -> None:
    client = get_client(url=url)
    try:
        a = (await client.threads.create())["thread_id"]
        shown = await _start(client, a)
        _, interrupts, errors = await _stream(
            client, a, command={"resume": {"action": "approve", "revision": shown["revision"]}}
        )
        assert not errors and not interrupts
        done = (await client.threads.get_state(a))["values"]
        assert done["status"] == "completed"
        stolen = _taken(done)

        b = (await client.threads.create())["thread_id"]  # another thread, the same task and plan
        await _start(client, b)
        await _attack(client, b, stolen)

        await _start(client, a)  # a later run of thread A, at its approval
        await _attack(client, a, stolen)
    finally:
        await client.aclose()


def test_sealed_approvals_copied_or_replayed_through_the_sdk_run_nothing(tmp_path: Path) -> None:
    responder = Responder()
    with ScriptedOpenAIServer(responder) as llm:
        env = {
            **os.environ,
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "test",
            "LANGSMITH_TRACING": "false",
            "LANGCHAIN_TRACING_V2": "false",
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LANGGRAPH_DISABLE_FILE_PERSISTENCE": "true",
            "PLANMODE_SERVER_DB": str(tmp_path / "server-checkpoints.sqlite"),
            "PYTHONUNBUFFERED": "1",
        }
        with langgraph_dev(env) as server:
            asyncio.run(_drive(server.url))
        assert not llm.errors, llm.errors
    assert "execute" not in responder.purposes()[responder.purposes().index("final") + 1 :]
