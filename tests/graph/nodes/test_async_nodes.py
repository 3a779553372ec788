"""The graph's nodes on the async path: ``await graph.ainvoke`` on an AsyncSqliteSaver file runs detect, plan,
approve, respond, reflect, patch and finalize on the event loop, their model calls awaited (``ainvoke``).

The model is the scripted chat model with an async responder (it can only answer ``ainvoke``) whose sync
call fails the test, so a node that called the model synchronously, or ran in a worker thread, shows.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command
from pydantic import PrivateAttr

from planmode.graph import build_graph
from planmode.nodes import heuristic_decision
from planmode.persistence import planmode_serializer, sqlite_checkpointer
from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest, tool_call
from planmode.tools import read_only

CFG: Any = {"configurable": {"thread_id": "t"}}
HEADLESS = {"mode": "plan", "approval": "auto", "max_attempts": 1}
#: A request the heuristics are unsure about (one action, no sequence): detect asks its classifier.
UNSURE = "Look into the flaky deploy"
PLAN = {
    "title": "Service",
    "steps": [
        {"id": "a", "description": "write the config"},
        {"id": "b", "description": "build the service", "dependencies": ["a"], "acceptance": "it builds"},
    ],
}
FIX_PATCH = {
    "reason": "b needs its toolchain installed first",
    "add_steps": [{"id": "fix_b", "description": "install the toolchain", "dependencies": ["a"], "after": "a"}],
    "update_steps": [{"id": "b", "dependencies": ["a", "fix_b"]}],
}
FIXED_PLAN = {  # the full-plan fallback's answer: the same plan with the fix step
    "title": "Service",
    "steps": [
        {"id": "a", "description": "write the config"},
        {"id": "fix_b", "description": "install the toolchain", "dependencies": ["a"]},
        {"id": "b", "description": "build the service", "dependencies": ["a", "fix_b"], "acceptance": "it builds"},
    ],
}
NEEDS_ADJUSTMENT = {"assessment": "needs_adjustment", "reasoning": "b lacks a toolchain", "guidance": "install it"}
#: Edits a done step: the reducer's preview refuses it.
EDITS_DONE_STEP = {"reason": "redo the config", "update_steps": [{"id": "a", "description": "rewrite it"}]}
#: The nodes this file is about, and the module of each (where `settings_of` is looked up).
NODES = ("detect", "plan", "approve", "respond", "reflect", "patch", "finalize")


class LoopOnlyModel(ScriptedChatModel):
    """A scripted model for the async path: a sync call is recorded (and fails the call)."""

    _sync_calls: list[str] = PrivateAttr(default_factory=list)

    @property
    def sync_calls(self) -> list[str]:
        return list(self._sync_calls)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._sync_calls.append(str(messages[0].content).split("\n", 1)[0])
        raise AssertionError("a sync model call on the async path")


class OnLoop:
    """An async responder: answers as ``script`` does after an await, recording the threads it ran on and the
    calls in flight at once (per purpose, and the peak)."""

    def __init__(self, script: Callable[[ScriptRequest], Any], delay: float = 0.0) -> None:
        self.script = script
        self.delay = delay
        self.threads: set[int] = set()
        self.in_flight: dict[str, int] = {}
        self.peak: dict[str, int] = {}

    async def __call__(self, req: ScriptRequest) -> Any:
        self.threads.add(threading.get_ident())
        self.in_flight[req.purpose] = self.in_flight.get(req.purpose, 0) + 1
        self.peak[req.purpose] = max(self.peak.get(req.purpose, 0), self.in_flight[req.purpose])
        try:
            await asyncio.sleep(self.delay)
            answer = self.script(req)
            return await answer if asyncio.iscoroutine(answer) else answer
        finally:
            self.in_flight[req.purpose] -= 1


@pytest.fixture
def node_threads(monkeypatch: pytest.MonkeyPatch) -> dict[str, set[int]]:
    """The threads each of this file's nodes ran on (recorded where each reads its settings)."""
    import importlib

    seen: dict[str, set[int]] = {}
    for name in NODES:
        module = importlib.import_module(f"planmode.nodes.{name}")
        original = module.settings_of

        def recording(state: Any, runtime: Any, _name: str = name, _original: Any = original) -> Any:
            seen.setdefault(_name, set()).add(threading.get_ident())
            return _original(state, runtime)

        monkeypatch.setattr(module, "settings_of", recording)
    return seen


@asynccontextmanager
async def session(db: Path, model: ScriptedChatModel, **kwargs: Any) -> AsyncIterator[Any]:
    async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:
        saver.serde = planmode_serializer()
        yield build_graph(model, checkpointer=saver, **kwargs)


class Repair:
    """A run needing a repair: b fails verification until fix_b has run. The verifier is a plain function (the
    verify node is not under test here: its judge would call the model)."""

    def __init__(self) -> None:
        self.executed: list[str] = []

    def script(self, **entries: Any) -> PurposeScript:
        def execute(req: ScriptRequest) -> str:
            self.executed.append(str(req.step_id))
            return f"{req.step_id} finished"

        return PurposeScript(**{"plan": PLAN, "execute": execute, **entries})

    def verify(self, step: Any, output: str, ctx: Any) -> tuple[bool, str]:
        if step.id == "b" and "fix_b" not in self.executed:
            return False, "the build failed: no toolchain"
        return True, ""


def passes(step: Any, output: str, ctx: Any) -> bool:
    return True


def test_approval_interrupts_and_resumes_on_the_event_loop(tmp_path: Path, node_threads: dict[str, set[int]]) -> None:
    """detect's classifier, plan's exploring (an async read-only tool) and plan calls, the approval interrupt
    (rejected with feedback, then approved by revision) and finalize's summary, all on the loop."""
    looked: list[int] = []

    @tool
    async def look(path: str) -> str:
        """Read a file (read-only)."""
        looked.append(threading.get_ident())
        return f"{path}: retries=0"

    responder = OnLoop(
        PurposeScript(
            detect={"needs_plan": True, "reason": "a task"},
            explore=[{"tool_calls": [tool_call("look", path="deploy.yml")]}, "deploy.yml has no retries"],
            plan=[PLAN, FIXED_PLAN],
            final="Deployed, with retries.",
        )
    )
    model = LoopOnlyModel(responder=responder)
    assert heuristic_decision(UNSURE) is None  # the classifier decides

    async def main() -> tuple[int, list[Any], dict[str, Any]]:
        async with session(tmp_path / "runs.sqlite", model, tools=[read_only(look)], verifier=passes) as graph:
            payloads = []
            out = await graph.ainvoke({"messages": [("user", UNSURE)]}, CFG, context={"max_explore_calls": 2})
            payloads.append(out["__interrupt__"][0].value)
            assert (await graph.aget_state(CFG)).next == ("approve",)
            answer = {"action": "reject", "feedback": "retry the build twice"}
            out = await graph.ainvoke(Command(resume=answer), CFG)
            payloads.append(out["__interrupt__"][0].value)
            out = await graph.ainvoke(Command(resume={"action": "approve", "revision": payloads[1]["revision"]}), CFG)
            return threading.get_ident(), payloads, dict((await graph.aget_state(CFG)).values)

    loop_thread, payloads, values = asyncio.run(main())
    assert values["status"] == "completed", values.get("error")
    assert values["messages"][-1].content == "Deployed, with retries."  # finalize's awaited call answered
    assert model.sync_calls == []
    assert responder.threads == {loop_thread}
    assert looked == [loop_thread]  # explored once, before the first plan (not again for the revision)
    plan_requests = [r for r in model.requests if r.purpose == "plan"]
    assert len(plan_requests) == 2
    assert "deploy.yml has no retries" in plan_requests[0].text()  # what exploring found reached the planner
    assert "retry the build twice" in plan_requests[1].text()  # the feedback reached the revision
    assert payloads[0]["revision"] != payloads[1]["revision"]
    # the revision made from the feedback, then the human's approval of it (planmode.approval.approver)
    assert [r.source for r in values["plan"].history[-2:]] == ["planner (revision)", "approval"]
    assert (model.calls("detect"), model.calls("explore")) == (1, 2)
    # interrupt() paused the async approve node and it ran again (from its start) on each resume
    assert node_threads["approve"] == {loop_thread}
    for name in ("detect", "plan", "finalize"):
        assert node_threads[name] == {loop_thread}, name


@pytest.mark.parametrize("with_tool", [False, True], ids=["no-tools", "async-tool"])
def test_the_classifier_sends_a_simple_request_to_respond_on_the_event_loop(
    tmp_path: Path, node_threads: dict[str, set[int]], with_tool: bool
) -> None:
    used: list[int] = []

    @tool
    async def clock() -> str:
        """The time."""
        used.append(threading.get_ident())
        return "12:00"

    def respond(req: ScriptRequest) -> Any:
        if with_tool and not req.tool_results():
            return {"tool_calls": [tool_call("clock")]}
        return f"It is {req.tool_results()[-1].content}." if with_tool else "It is noon."

    responder = OnLoop(PurposeScript(detect={"needs_plan": False, "reason": "a question"}, respond=respond))
    model = LoopOnlyModel(responder=responder)

    async def main() -> tuple[int, dict[str, Any]]:
        tools = [clock] if with_tool else []
        async with session(tmp_path / "runs.sqlite", model, tools=tools) as graph:
            await graph.ainvoke({"messages": [("user", UNSURE)]}, CFG, context={"approval": "auto"})
            return threading.get_ident(), dict((await graph.aget_state(CFG)).values)

    loop_thread, values = asyncio.run(main())
    assert values["status"] == "answered", values.get("error")
    assert values["route"] == "direct"
    assert values["messages"][-1].content == ("It is 12:00." if with_tool else "It is noon.")
    assert (model.calls("detect"), model.calls("plan")) == (1, 0)
    assert model.calls("respond") == (2 if with_tool else 1)
    assert used == ([loop_thread] if with_tool else [])
    assert model.sync_calls == []
    assert responder.threads == {loop_thread}
    assert node_threads["detect"] == node_threads["respond"] == {loop_thread}


def test_a_repair_reflects_and_patches_on_the_event_loop(tmp_path: Path, node_threads: dict[str, set[int]]) -> None:
    """reflect assesses, patch's first patch is refused by the reducer's preview (the reasons fed back) and
    its second applies; the done step is not run again."""
    repair = Repair()
    responder = OnLoop(repair.script(reflect=NEEDS_ADJUSTMENT, patch=[EDITS_DONE_STEP, FIX_PATCH]))
    model = LoopOnlyModel(responder=responder)

    async def main() -> tuple[int, list[str], dict[str, Any]]:
        async with session(tmp_path / "runs.sqlite", model, verifier=repair.verify) as graph:
            task = {"messages": [("user", "build the service")]}
            events = [e["type"] async for e in graph.astream(task, CFG, context=HEADLESS, stream_mode="custom")]
            return threading.get_ident(), events, dict((await graph.aget_state(CFG)).values)

    loop_thread, events, values = asyncio.run(main())
    plan = values["plan"]
    assert values["status"] == "completed", values.get("error")
    assert [s.id for s in plan.steps] == ["a", "fix_b", "b"]
    # the async nodes' progress events reach the custom stream, in order
    repair_events = [e for e in events if e in ("reflection", "patch_rejected", "plan_patched", "run_finished")]
    assert repair_events == ["reflection", "patch_rejected", "plan_patched", "run_finished"]
    assert (model.calls("reflect"), model.calls("patch")) == (1, 2)
    assert "'a' is done" in [r for r in model.requests if r.purpose == "patch"][1].text()
    [rejection] = plan.rejections
    assert rejection.kind == "patch"
    assert plan.history[-1].source == "patch"
    assert repair.executed == ["a", "b", "fix_b", "b"]  # the done step a ran once
    assert model.sync_calls == []
    assert responder.threads == {loop_thread}
    for name in ("reflect", "patch", "finalize"):
        assert node_threads[name] == {loop_thread}, name


def test_the_full_plan_fallback_is_awaited_too(tmp_path: Path) -> None:
    """Every patch is unreadable: the fallback asks for a whole plan (awaited) and applies it by diff."""
    repair = Repair()
    responder = OnLoop(repair.script(plan=[PLAN, FIXED_PLAN], reflect=NEEDS_ADJUSTMENT, patch="{not json"))
    model = LoopOnlyModel(responder=responder)

    async def main() -> tuple[int, dict[str, Any]]:
        async with session(tmp_path / "runs.sqlite", model, verifier=repair.verify) as graph:
            await graph.ainvoke({"messages": [("user", "build the service")]}, CFG, context=HEADLESS)
            return threading.get_ident(), dict((await graph.aget_state(CFG)).values)

    loop_thread, values = asyncio.run(main())
    plan = values["plan"]
    assert values["status"] == "completed", values.get("error")
    assert (model.calls("patch"), model.calls("plan")) == (3, 2)
    assert plan.history[-1].source == "diff"
    assert plan.history[-1].added == ["fix_b"]
    assert len(plan.rejections) == 3  # the three unreadable patches
    assert model.sync_calls == []
    assert responder.threads == {loop_thread}


@pytest.mark.parametrize("lost", ["plan", "respond", "reflect", "patch"])
def test_a_model_lost_on_the_async_path_pauses_the_run_and_a_retry_resumes_it(tmp_path: Path, lost: str) -> None:
    down = threading.Event()
    down.set()
    entries: dict[str, Any] = {"reflect": NEEDS_ADJUSTMENT, "patch": FIX_PATCH, "respond": "Here you are."}

    def failing(purpose: str) -> Callable[[ScriptRequest], Any]:
        def answer(req: ScriptRequest) -> Any:
            if down.is_set():
                raise ConnectionRefusedError("[Errno 111] Connection refused")
            return entries.get(purpose, PLAN)

        return answer

    repair = Repair()
    model = LoopOnlyModel(responder=OnLoop(repair.script(**{**entries, lost: failing(lost)})))
    context = {**HEADLESS, "mode": "direct" if lost == "respond" else "plan"}

    async def main() -> tuple[Any, dict[str, Any]]:
        async with session(tmp_path / "runs.sqlite", model, verifier=repair.verify) as graph:
            await graph.ainvoke({"messages": [("user", "build the service")]}, CFG, context=context)
            paused = await graph.aget_state(CFG)
            down.clear()
            await graph.ainvoke(Command(resume={"action": "retry"}), CFG)
            return paused, dict((await graph.aget_state(CFG)).values)

    paused, values = asyncio.run(main())
    assert paused.values["status"] == "model_unavailable"
    assert "Connection refused" in paused.values["error"]
    assert paused.next == ("model_unavailable",)
    assert paused.interrupts[0].value["node"] == lost
    assert values["status"] == ("answered" if lost == "respond" else "completed"), values.get("error")
    assert model.calls(lost) == 2  # the lost call, then the retried one
    assert model.sync_calls == []


def test_the_sync_guard_is_real_the_same_model_fails_on_invoke(tmp_path: Path) -> None:
    """The checks above can fail: the same model on the sync path records every sync call."""
    model = LoopOnlyModel(responder=OnLoop(PurposeScript(plan=PLAN)))
    graph = build_graph(model, checkpointer=sqlite_checkpointer(tmp_path / "runs.sqlite"))
    graph.invoke({"messages": [("user", "build the service")]}, CFG, context=HEADLESS)
    values = graph.get_state(CFG).values
    assert values["status"] == "failed"
    assert model.sync_calls and all(c == "planmode:plan" for c in model.sync_calls)


def test_several_threads_run_concurrently_on_one_event_loop(tmp_path: Path) -> None:
    """Runs of several threads awaited together overlap: every run's plan call is in flight before any is
    answered (a barrier that only concurrent runs can pass), and their steps' and summaries' calls overlap."""
    runs = 5
    arrived = 0
    all_there = asyncio.Event()

    async def plan(req: ScriptRequest) -> dict[str, Any]:
        nonlocal arrived
        arrived += 1
        if arrived == runs:
            all_there.set()
        await asyncio.wait_for(all_there.wait(), timeout=30)
        return {"title": "one", "steps": [{"id": "only", "description": "do it"}]}

    responder = OnLoop(PurposeScript(plan=plan), delay=0.2)
    model = LoopOnlyModel(responder=responder)

    async def main() -> tuple[int, list[dict[str, Any]]]:
        async with session(tmp_path / "runs.sqlite", model) as graph:
            cfgs = [{"configurable": {"thread_id": f"t{i}"}} for i in range(runs)]
            await asyncio.gather(
                *(graph.ainvoke({"messages": [("user", f"task {i}")]}, c, context=HEADLESS) for i, c in enumerate(cfgs))
            )
            return threading.get_ident(), [dict((await graph.aget_state(c)).values) for c in cfgs]

    loop_thread, finals = asyncio.run(main())
    assert [v["status"] for v in finals] == ["completed"] * runs, [v.get("error") for v in finals]
    assert responder.peak["plan"] == runs
    assert responder.peak["execute"] > 1 and responder.peak["final"] > 1  # the later calls overlap too
    assert responder.threads == {loop_thread}
    assert model.sync_calls == []


def test_no_blocking_call_on_the_event_loop(tmp_path: Path) -> None:
    """The whole async path under blockbuster (the LangGraph server's detector of blocking calls on the event
    loop): classifier, exploring with a tool, plan, approval, steps, a repair and the summary."""
    from blockbuster import blockbuster_ctx

    @tool
    async def look(path: str) -> str:
        """Read a file (read-only)."""
        return f"{path}: fine"

    tools: list[BaseTool] = [read_only(look)]
    repair = Repair()
    script = repair.script(
        detect={"needs_plan": True},
        explore=[{"tool_calls": [tool_call("look", path="x")]}, "x is fine"],
        reflect=NEEDS_ADJUSTMENT,
        patch=[EDITS_DONE_STEP, FIX_PATCH],
        final="All built.",
    )
    model = LoopOnlyModel(responder=OnLoop(script))

    async def main() -> dict[str, Any]:
        async with session(tmp_path / "runs.sqlite", model, tools=tools, verifier=repair.verify) as graph:
            with blockbuster_ctx():
                out = await graph.ainvoke({"messages": [("user", UNSURE)]}, CFG, context={"max_attempts": 1})
                revision = out["__interrupt__"][0].value["revision"]
                out = await graph.ainvoke(Command(resume={"action": "approve", "revision": revision}), CFG)
                revision = out["__interrupt__"][0].value["revision"]  # the repair adds a step: asked (issue 43)
                await graph.ainvoke(Command(resume={"action": "approve", "revision": revision}), CFG)
                return dict((await graph.aget_state(CFG)).values)

    values = asyncio.run(main())
    assert values["status"] == "completed", values.get("error")
    assert values["messages"][-1].content == "All built."  # a blocked summary call would say why it failed
    assert [s.id for s in values["plan"].steps] == ["a", "fix_b", "b"]
    assert (model.calls("detect"), model.calls("explore"), model.calls("reflect"), model.calls("patch")) == (1, 2, 1, 2)
    assert model.sync_calls == []


def test_a_tool_interrupt_while_exploring_pauses_the_async_plan_node_and_resumes_it(tmp_path: Path) -> None:
    """The interrupt of a read-only tool in plan's awaited exploring loop passes through the node's body: the
    run pauses on the AsyncSqliteSaver, and the answer reaches the planner on resume."""
    from langgraph.types import interrupt

    asked: list[str] = []

    @tool
    async def ask_human(question: str) -> str:
        """Ask the human (read-only)."""
        asked.append(question)
        return str(interrupt({"type": "question", "question": question}))

    def explore(req: ScriptRequest) -> Any:
        done = req.tool_results()
        if not done:
            return {"tool_calls": [tool_call("ask_human", question="Which environment?")]}
        return f"the human said {done[-1].content}"

    model = LoopOnlyModel(responder=OnLoop(PurposeScript(explore=explore, plan=PLAN)))

    async def main() -> tuple[Any, Any, dict[str, Any]]:
        async with session(tmp_path / "runs.sqlite", model, tools=[read_only(ask_human)], verifier=passes) as graph:
            first = await graph.ainvoke({"messages": [("user", "deploy")]}, CFG, context={"mode": "plan"})
            paused = await graph.aget_state(CFG)
            second = await graph.ainvoke(Command(resume="staging"), CFG)
            return first, paused, second

    first, paused, second = asyncio.run(main())
    assert first["__interrupt__"][0].value == {"type": "question", "question": "Which environment?"}
    assert paused.next == ("plan",)
    assert second["__interrupt__"][0].value["type"] == "planmode.approval"
    [plan_request] = [r for r in model.requests if r.purpose == "plan"]
    assert "the human said staging" in plan_request.text()
    assert asked == ["Which environment?", "Which environment?"]  # the tool re-runs from its start on resume
    assert model.sync_calls == []
