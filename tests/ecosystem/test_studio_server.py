"""LangGraph Studio's path, end to end: ``langgraph dev`` on the repository's ``langgraph.json``, driven by the
real ``langgraph-sdk`` client, with the graph's ``ChatOpenAI`` pointed at the scripted OpenAI server.

One server, one test (starting ``langgraph dev`` takes seconds): create a thread, stream a run with the
progress events, receive the approval interrupt, resume with an edit, run to completion, read the history,
fork from the checkpoint at the approval (on a copy of the thread) and run the fork; the server's checkpoints
land in the SQLite file named by ``langgraph.json``'s checkpointer setting.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client

from planmode.context import PlanModeContext, resolve_settings
from planmode.testing import dev_server
from planmode.testing.dev_server import DevServer
from planmode.testing.openai_server import Reply, ScriptedOpenAIServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0
RUN_TIMEOUT = 30.0

TASK = "Plan the release: collect the changelog, then write the notes and update the docs, finally publish it."
PLAN = {
    "title": "Release",
    "steps": [
        {"id": "changelog", "description": "Collect the changelog", "acceptance": "a list of changes"},
        {"id": "notes", "description": "Write the release notes", "dependencies": ["changelog"]},
        {"id": "docs", "description": "Update the docs", "dependencies": ["changelog"]},
        {"id": "publish", "description": "Publish the release", "dependencies": ["notes", "docs"]},
    ],
}
EDIT = {
    "reason": "tell people",
    "add_steps": [{"id": "announce", "description": "Announce the release", "dependencies": ["publish"]}],
}
_PURPOSE = re.compile(r"^planmode:(\w+)")
_STEP = re.compile(r"Step `([^`]+)`")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def _structured(body: dict[str, Any], value: dict[str, Any]) -> Reply:
    """A structured answer in the form the request asked for: JSON content, or a call of the schema's tool."""
    if body.get("response_format") or not body.get("tools"):
        return json.dumps(value)
    return {"tool_calls": [{"name": body["tools"][0]["function"]["name"], "arguments": value}]}


@dataclass
class Responder:
    """Answers each chat-completions request by the purpose its system prompt starts with."""

    seen: list[tuple[str, str | None, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        system = next((_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer")), "")
        match = _PURPOSE.match(system)
        purpose = match.group(1) if match else "unknown"
        step = _STEP.search("\n".join(_text(m.get("content")) for m in messages[:3]))
        with self.lock:
            self.seen.append((purpose, step.group(1) if step else None, str(body.get("model"))))
        if purpose == "detect":
            return _structured(body, {"needs_plan": True, "reason": "several steps"})
        if purpose == "plan":
            return _structured(body, PLAN)
        if purpose == "verify":
            return _structured(body, {"passed": True, "reason": ""})
        if purpose == "execute":
            return f"Step {step.group(1) if step else '?'} is done."
        if purpose == "final":
            return "The release is out."
        raise AssertionError(f"unexpected {purpose!r} call")

    def purposes(self) -> list[str]:
        with self.lock:
            return [p for p, _, _ in self.seen]


@contextlib.contextmanager
def langgraph_dev(env: dict[str, str]) -> Iterator[DevServer]:
    """``langgraph dev`` from the repository root on a free port (`planmode.testing.dev_server`)."""
    with dev_server.langgraph_dev(cwd=ROOT, env=env, start_timeout=START_TIMEOUT) as server:
        yield server


async def _stream(
    client: Any, thread_id: str, graph: str = "planmode", **kwargs: Any
) -> tuple[list[dict[str, Any]], list[Any], list[Any]]:
    """One streamed run: (planmode events, interrupts from the updates stream, errors)."""
    events: list[dict[str, Any]] = []
    interrupts: list[Any] = []
    errors: list[Any] = []
    async with asyncio.timeout(RUN_TIMEOUT):
        async for part in client.runs.stream(thread_id, graph, stream_mode=["updates", "custom"], **kwargs):
            if part.event == "custom" and isinstance(part.data, dict) and part.data.get("source") == "planmode":
                events.append(part.data)
            elif part.event == "updates" and isinstance(part.data, dict) and "__interrupt__" in part.data:
                interrupts.extend(part.data["__interrupt__"])
            elif part.event == "error":
                errors.append(part.data)
    return events, interrupts, errors


def _steps(values: dict[str, Any]) -> dict[str, str]:
    return {s["id"]: s["status"] for s in values["plan"]["steps"]}


async def _drive(url: str, responder: Responder) -> dict[str, Any]:
    client = get_client(url=url)
    try:
        result = await _scenario(client, responder)
        await _parent_agent_scenario(client)
        return result
    finally:
        await client.aclose()


async def _scenario(client: Any, responder: Responder) -> dict[str, Any]:
    assistants = await client.assistants.search(graph_id="planmode")
    assert assistants, "the planmode graph of langgraph.json is not served"

    thread = await client.threads.create()
    tid = thread["thread_id"]

    # 1. A streamed run: progress events on the custom stream, then the approval interrupt.
    events, interrupts, errors = await _stream(
        client, tid, input={"messages": [{"role": "user", "content": TASK}]}, context={"model": "scripted-model"}
    )
    assert not errors
    kinds = [e["type"] for e in events]
    assert "plan_created" in kinds, kinds
    created = next(e for e in events if e["type"] == "plan_created")
    assert created["data"]["steps"] == 4
    assert len(interrupts) == 1
    payload = interrupts[0]["value"]
    assert payload["type"] == "planmode.approval"
    assert [s["id"] for s in payload["plan"]["steps"]] == ["changelog", "notes", "docs", "publish"]
    state = await client.threads.get_state(tid)
    assert state["next"] == ["approve"]
    assert state["values"]["status"] == "awaiting_approval"
    assert state["interrupts"][0]["value"]["revision"] == payload["revision"]

    # 2. Resume with an edit that adds a step; run to completion.
    events, interrupts, errors = await _stream(
        client, tid, command={"resume": {"action": "edit", "revision": payload["revision"], "patch": EDIT}}
    )
    assert not errors and not interrupts
    kinds = [e["type"] for e in events]
    assert kinds[0] == "plan_approved" and kinds[-1] == "run_finished", kinds
    started = [e["step_id"] for e in events if e["type"] == "step_started"]
    assert sorted(started) == ["announce", "changelog", "docs", "notes", "publish"]
    # notes and docs ran in the same super-step (after changelog, before publish)
    assert set(started[1:3]) == {"notes", "docs"}
    final = await client.threads.get_state(tid)
    values = final["values"]
    assert values["status"] == "completed"
    assert _steps(values) == dict.fromkeys(["changelog", "notes", "docs", "publish", "announce"], "done")
    assert values["plan"]["version"] == 2
    assert values["messages"][-1]["content"] == "The release is out."
    assert final["next"] == [] and not final["interrupts"]
    # The settings survive the interrupt: every model call used the run's model, resumed ones included.
    assert {model for _, _, model in responder.seen} == {"scripted-model"}

    # 3. The history: newest first, from the end back to the input.
    history = await client.threads.get_history(tid, limit=100)
    assert history[0]["checkpoint"]["checkpoint_id"] == final["checkpoint"]["checkpoint_id"]
    at_approval = [h for h in history if h["next"] == ["approve"]]
    assert len(at_approval) == 1
    fork_point = at_approval[0]
    assert fork_point["values"]["plan"]["version"] == 1
    assert all(s == "pending" for s in _steps(fork_point["values"]).values())

    # 4. Fork: copy the thread, replay the copy from the approval checkpoint (the interrupt fires again; no
    #    node before it re-runs), then answer it differently: a plain approval instead of the edit.
    #    (A resume sent straight to a superseded checkpoint would get the answer already recorded there:
    #    LangGraph keeps a checkpoint's resume values when resuming. Replaying drops them.)
    copy = await client.threads.copy(tid)
    fork_tid = copy["thread_id"]
    plans_before = responder.purposes().count("plan")
    events, interrupts, errors = await _stream(
        client, fork_tid, input=None, checkpoint_id=fork_point["checkpoint"]["checkpoint_id"]
    )
    assert not errors and not events
    assert [i["value"]["revision"] for i in interrupts] == [payload["revision"]]
    events, interrupts, errors = await _stream(
        client, fork_tid, command={"resume": {"action": "approve", "revision": payload["revision"]}}
    )
    assert not errors and not interrupts
    kinds = [e["type"] for e in events]
    assert (events[0]["type"], events[0]["message"]) == ("plan_approved", "approved")
    assert kinds[-1] == "run_finished"
    assert responder.purposes().count("plan") == plans_before  # the fork started at the approval, not earlier
    fork = await client.threads.get_state(fork_tid)
    assert fork["values"]["status"] == "completed"
    assert _steps(fork["values"]) == dict.fromkeys(["changelog", "notes", "docs", "publish"], "done")
    assert fork["values"]["plan"]["version"] == 1
    fork_history = await client.threads.get_history(fork_tid, limit=100)
    assert fork_point["checkpoint"]["checkpoint_id"] in {h["checkpoint"]["checkpoint_id"] for h in fork_history}
    parents = {
        h["checkpoint"]["checkpoint_id"]: (h["parent_checkpoint"] or {}).get("checkpoint_id") for h in fork_history
    }
    lineage, cid = [], fork_history[0]["checkpoint"]["checkpoint_id"]
    while cid is not None:
        lineage.append(cid)
        cid = parents.get(cid)
    assert fork_point["checkpoint"]["checkpoint_id"] in lineage  # the fork branches off at the approval
    assert final["checkpoint"]["checkpoint_id"] not in lineage  # ... and leaves the edited branch behind
    # The original thread is untouched by its fork.
    again = await client.threads.get_state(tid)
    assert again["checkpoint"]["checkpoint_id"] == final["checkpoint"]["checkpoint_id"]
    assert "announce" in _steps(again["values"])

    return {
        "thread_id": tid,
        "fork_thread_id": fork_tid,
        "checkpoint_ids": {h["checkpoint"]["checkpoint_id"] for h in history},
    }


def test_studio_path_through_langgraph_dev(tmp_path: Path) -> None:
    db = tmp_path / "server-checkpoints.sqlite"
    responder = Responder()
    with ScriptedOpenAIServer(responder) as llm:
        env = {
            **os.environ,
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "test",
            "LANGSMITH_TRACING": "false",
            "LANGCHAIN_TRACING_V2": "false",
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LANGGRAPH_DISABLE_FILE_PERSISTENCE": "true",  # no .langgraph_api pickles left behind
            "PLANMODE_SERVER_DB": str(db),
            "PYTHONUNBUFFERED": "1",
        }
        with langgraph_dev(env) as server:
            result = asyncio.run(_drive(server.url, responder))
        assert not llm.errors, llm.errors

    # langgraph.json's checkpointer setting kept the server's checkpoints in our SQLite file.
    assert any("AsyncSqliteSaver" in line for line in server.output), "the custom checkpointer was not used"
    assert db.exists()
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT thread_id, checkpoint_id FROM checkpoints WHERE checkpoint_ns = ''").fetchall()
    stored = {cid for tid, cid in rows if tid == result["thread_id"]}
    assert result["checkpoint_ids"] <= stored
    assert any(tid == result["fork_thread_id"] for tid, _ in rows)


async def _parent_agent_scenario(client: Any) -> None:
    """The example parent agent (planmode as a node) under the same server: the approval surfaces at the parent,
    the thread state shows the subgraph's plan, and the resume goes through the parent."""
    assert await client.assistants.search(graph_id="parent_agent")
    tid = (await client.threads.create())["thread_id"]
    _, interrupts, errors = await _stream(
        client,
        tid,
        "parent_agent",
        input={"messages": [{"role": "user", "content": TASK}]},
        context={"model": "scripted-model"},
    )
    assert not errors
    assert [i["value"]["type"] for i in interrupts] == ["planmode.approval"]
    state = await client.threads.get_state(tid, subgraphs=True)
    assert state["next"] == ["planmode"]
    sub = state["tasks"][0]["state"]
    assert sub["next"] == ["approve"]
    assert [s["id"] for s in sub["values"]["plan"]["steps"]] == ["changelog", "notes", "docs", "publish"]
    revision = interrupts[0]["value"]["revision"]
    _, interrupts, errors = await _stream(
        client, tid, "parent_agent", command={"resume": {"action": "approve", "revision": revision}}
    )
    assert not errors and not interrupts
    values = (await client.threads.get_state(tid))["values"]
    assert values["status"] == "completed"
    assert [(m["type"], m.get("name")) for m in values["messages"]] == [
        ("human", None),
        ("ai", "planmode"),
        ("ai", "summarize"),
    ]


def test_a_default_context_on_resume_keeps_the_settings_the_run_started_with() -> None:
    """The server resumes a run with a default ``PlanModeContext`` (runtime context is not kept across an
    interrupt): the stored settings win over defaults; values the resume really sets still win over them."""
    stored = {"model": "scripted-model", "max_parallel": 2, "approval": "ask"}
    resumed = resolve_settings(PlanModeContext(), stored)
    assert (resumed.model, resumed.max_parallel) == ("scripted-model", 2)
    changed = resolve_settings(PlanModeContext(approval="auto", max_parallel=3), stored)
    # a value the resume sets wins, except one that loosens approval: that is an answer at the interrupt
    assert (changed.model, changed.approval, changed.max_parallel) == ("scripted-model", "ask", 3)
    assert resolve_settings({"max_parallel": 4}, stored).max_parallel == 4  # a dict key is always "given"
    assert resolve_settings(None, stored).model == "scripted-model"
    assert resolve_settings(PlanModeContext(model="m"), None).model == "m"
