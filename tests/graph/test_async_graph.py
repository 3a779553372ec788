"""The graph's async path, with execute_step as the async-native node: ``await graph.ainvoke`` on an
AsyncSqliteSaver file runs steps on the event loop (the executor awaited, the model called with ``ainvoke``),
and the sync path refuses an async executor with the fix while the thread stays readable."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from planmode.errors import ConfigurationError
from planmode.graph import build_graph
from planmode.persistence import planmode_serializer, sqlite_checkpointer
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

PLAN = {
    "title": "three at once",
    "steps": [
        {"id": "a", "description": "first"},
        {"id": "b", "description": "second"},
        {"id": "c", "description": "third"},
        {"id": "d", "description": "last", "dependencies": ["a", "b", "c"]},
    ],
}
HEADLESS = {"mode": "plan", "approval": "auto", "max_attempts": 1, "max_parallel": 4}


async def _run_async(db: Path, **kwargs: Any) -> dict[str, Any]:
    model = kwargs.pop("model", None) or ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:
        saver.serde = planmode_serializer()
        graph = build_graph(model, checkpointer=saver, **kwargs)
        cfg: Any = {"configurable": {"thread_id": "t"}}
        await graph.ainvoke({"messages": [("user", "do a, b and c, then d")]}, cfg, context=HEADLESS)
        state = await graph.aget_state(cfg)
        return dict(state.values)


def test_async_executor_steps_run_concurrently_on_the_event_loop(tmp_path: Path) -> None:
    in_flight = 0
    peak = 0
    threads: set[int] = set()
    loop_threads: set[int] = set()

    async def executor(step: Any, ctx: Any) -> str:
        nonlocal in_flight, peak
        threads.add(threading.get_ident())
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.2)
        in_flight -= 1
        return f"{step.id} done after {sorted(ctx.dependencies)}"

    async def main() -> dict[str, Any]:
        loop_threads.add(threading.get_ident())
        return await _run_async(tmp_path / "runs.sqlite", executor=executor, verifier=lambda s, o, c: True)

    values = asyncio.run(main())
    assert values["status"] == "completed", values.get("error")
    assert values["plan"].get("d").result == "d done after ['a', 'b', 'c']"
    assert threads == loop_threads  # awaited on the event loop, not in a worker thread
    assert peak == 3  # a, b and c overlapped


def test_the_default_executor_calls_the_model_with_ainvoke_on_the_async_path(tmp_path: Path) -> None:
    threads: dict[str, set[int]] = {}

    async def execute(req: Any) -> str:
        threads.setdefault("execute", set()).add(threading.get_ident())
        await asyncio.sleep(0)
        return f"executed {req.step_id}"

    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, execute=execute))

    async def main() -> tuple[dict[str, Any], int]:
        return await _run_async(tmp_path / "runs.sqlite", model=model), threading.get_ident()

    values, loop_thread = asyncio.run(main())
    assert values["status"] == "completed", values.get("error")
    assert model.calls("execute") == 4
    assert threads["execute"] == {loop_thread}  # an async responder can only answer ainvoke: on the loop
    assert values["plan"].get("b").result == "executed b"


def test_the_sync_path_refuses_an_async_executor_and_the_thread_stays_readable(tmp_path: Path) -> None:
    async def executor(step: Any, ctx: Any) -> str:
        return "never"

    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    saver = sqlite_checkpointer(tmp_path / "runs.sqlite")
    graph = build_graph(model, checkpointer=saver, executor=executor)
    cfg: Any = {"configurable": {"thread_id": "t"}}
    with pytest.raises(ConfigurationError, match="ainvoke"):
        graph.invoke({"messages": [("user", "do a, b and c, then d")]}, cfg, context=HEADLESS)
    state = graph.get_state(cfg)
    assert state.values["plan"].get("a").status.value == "running"  # nothing lost, nothing marked done
    assert set(state.next) == {"execute_step"}
    saver.conn.close()


def test_a_model_lost_during_an_async_step_pauses_the_run(tmp_path: Path) -> None:
    def execute(req: Any) -> str:
        raise ConnectionError("connection refused")

    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, execute=execute))
    values = asyncio.run(_run_async(tmp_path / "runs.sqlite", model=model))
    assert values["status"] == "model_unavailable", values.get("error")
    assert all(values["plan"].get(s).status.value != "done" for s in "abcd")
    assert "connection refused" in values["error"]


@pytest.mark.integration
def test_the_async_path_end_to_end_over_http(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ChatOpenAI`` made from the settings, the scripted OpenAI-compatible server, ``await graph.ainvoke``:
    the plan, the steps (async) and the verdicts all cross real HTTP; the steps' calls overlap."""
    import json

    from planmode.testing.openai_server import Fault, ScriptedOpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "test")
    arrivals: list[float] = []

    def respond(body: dict[str, Any]) -> Any:
        first = str(body["messages"][0].get("content") or "")
        purpose = first.split("\n", 1)[0].removeprefix("planmode:")
        if purpose == "plan":
            return json.dumps(PLAN)
        if purpose == "verify":
            return json.dumps({"passed": True, "reason": ""})
        if purpose == "execute":
            arrivals.append(time.monotonic())
            return Fault(delay=0.4, then="step done")
        return "All done."

    async def main(base_url: str) -> dict[str, Any]:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "runs.sqlite")) as saver:
            saver.serde = planmode_serializer()
            graph = build_graph(checkpointer=saver)
            cfg: Any = {"configurable": {"thread_id": "t"}}
            context = {**HEADLESS, "base_url": base_url, "model": "scripted", "context_tokens": 8192}
            await graph.ainvoke({"messages": [("user", "do a, b and c, then d")]}, cfg, context=context)
            return dict((await graph.aget_state(cfg)).values)

    with ScriptedOpenAIServer(respond) as srv:
        values = asyncio.run(main(srv.base_url))
        executes = [b for b in srv.requests if str(b["messages"][0].get("content", "")).startswith("planmode:execute")]
    assert values["status"] == "completed", values.get("error")
    assert len(executes) == 4 and values["plan"].get("a").result == "step done"
    # a, b and c (0.4 s each) were in flight together: all three asked before the first could be answered
    first_three = sorted(arrivals)[:3]
    assert first_three[-1] - first_three[0] < 0.4, arrivals


def test_an_async_tool_that_interrupts_pauses_the_async_step_and_resumes_with_the_answer(tmp_path: Path) -> None:
    """The async tool loop runs as a subgraph on the AsyncSqliteSaver: the interrupt pauses the run, and on
    resume the tool that ran before it is not repeated."""
    from langchain_core.tools import tool
    from langgraph.types import Command, interrupt

    from planmode.testing.scripted import tool_call

    bumps: list[int] = []
    questions: list[str] = []

    @tool
    async def bump() -> str:
        """Count something (changes the world)."""
        bumps.append(1)
        return f"bumped to {len(bumps)}"

    @tool
    async def ask_human(question: str) -> str:
        """Ask the human a question and wait for the answer."""
        questions.append(question)
        return str(interrupt({"type": "question", "question": question}))

    # a step with tools that change the world carries acceptance (issue 24: a plan without it is sent back)
    step = {"id": "c", "description": "choose", "tools": ["bump", "ask_human"], "acceptance": "a colour is chosen"}
    plan = {"title": "one", "steps": [step]}

    def execute(req: Any) -> Any:
        done = req.tool_results()
        if not done:
            return {"tool_calls": [tool_call("bump")]}
        if len(done) == 1:
            return {"tool_calls": [tool_call("ask_human", question="Which colour?")]}
        return f"the human chose {done[-1].content}"

    model = ScriptedChatModel(responder=PurposeScript(plan=plan, execute=execute))

    async def main() -> tuple[Any, Any, dict[str, Any]]:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "runs.sqlite")) as saver:
            saver.serde = planmode_serializer()
            graph = build_graph(model, tools=[bump, ask_human], checkpointer=saver)
            cfg: Any = {"configurable": {"thread_id": "t"}}
            first = await graph.ainvoke({"task": "choose a colour"}, cfg, context=HEADLESS)
            paused = await graph.aget_state(cfg)
            await graph.ainvoke(Command(resume="blue"), cfg, context=HEADLESS)
            return first, paused, dict((await graph.aget_state(cfg)).values)

    first, paused, values = asyncio.run(main())
    (question,) = first["__interrupt__"]
    assert question.value == {"type": "question", "question": "Which colour?"}
    assert paused.next == ("execute_step",)
    assert values["status"] == "completed", values.get("error")
    assert values["plan"].get("c").result == "the human chose blue"
    assert len(bumps) == 1  # the tool before the interrupt did not run again
    assert questions == ["Which colour?", "Which colour?"]
    assert model.calls("execute", "c") == 3
