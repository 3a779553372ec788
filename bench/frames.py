"""``python -m bench.frames [--out bench/results/frames.json]``: the Python stack at a model call.

Issue 22's measure of how deep a node's model call sits: one plan-mode run of the real graph (scripted model,
the default executor and verifier, so the plan, execute_step and verify nodes all call the model; a two-step
plan, approval asked and answered), once with ``invoke`` (the sync path) and once with ``ainvoke`` (the async
path). At the first model call of each purpose (``plan``, ``execute``, ``verify``) the scripted model's responder
walks the live stack (``frame.f_back``) and counts

- ``planmode_frames``: frames whose code is a file of src/planmode, leaving out ``planmode/testing`` (the scripted
  model itself stands in for the model, it is not planmode's machinery);
- ``drivers``: frames of ``planmode._drive.drive`` / ``adrive`` (the loops that run a generator body).

Generator bodies suspended at a ``yield`` are not on the stack while their driver makes the call; only live
frames are counted. The issue's target: at most 6 planmode frames and one driver. Prints a table and writes
the JSON (``{"runs": {"sync": {"status": ..., "plan": {...}, ...}, "async": {...}}, "target": {...},
"reproduced": {...}}``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

import planmode
from planmode.context import PlanModeContext
from planmode.graph import build_graph
from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(planmode.__file__).resolve().parent
STAND_IN = PACKAGE / "testing"
PURPOSES = ("plan", "execute", "verify")
TARGET = {"planmode_frames": 6, "drivers": 1}
PLAN = {
    "title": "two steps",
    "steps": [
        {"id": "a", "description": "write the notes", "acceptance": "the notes exist"},
        {"id": "b", "description": "check the notes", "dependencies": ["a"], "acceptance": "they were read"},
    ],
}


def _is_planmode(frame: FrameType) -> bool:
    path = Path(frame.f_code.co_filename).resolve()
    return path.is_relative_to(PACKAGE) and not path.is_relative_to(STAND_IN)


def _is_driver(frame: FrameType) -> bool:
    code = frame.f_code
    return code.co_name in ("drive", "adrive") and Path(code.co_filename).resolve() == PACKAGE / "_drive.py"


def _name(frame: FrameType) -> str:
    rel = Path(frame.f_code.co_filename).resolve().relative_to(PACKAGE.parent)
    return f"{rel.with_suffix('').as_posix().replace('/', '.')}:{frame.f_code.co_name}"


def _live(frame: FrameType | None) -> list[FrameType]:
    """The running stack from ``frame`` outward."""
    out = []
    while frame is not None:
        out.append(frame)
        frame = frame.f_back
    return out


def _awaiting(task: asyncio.Task[Any]) -> list[FrameType]:
    """The frames of a suspended task, innermost first: its coroutine and what it awaits, down the chain."""
    out: list[FrameType] = []
    obj: Any = task.get_coro()
    while obj is not None:
        frame = getattr(obj, "cr_frame", None) or getattr(obj, "ag_frame", None) or getattr(obj, "gi_frame", None)
        if frame is not None:
            out.append(frame)
        obj = getattr(obj, "cr_await", None) or getattr(obj, "ag_await", None) or getattr(obj, "gi_yieldfrom", None)
    return out[::-1]


def stack_at_call(frame: FrameType | None) -> dict[str, Any]:
    """The counts for the stack of a model call, innermost first, with the frames by name.

    The model is often called one hop away from the node: LangChain runs a structured-output call's parts in a
    worker thread (``invoke``) or in a task of their own (``ainvoke``), and the verify node judges in a thread
    pool. So the stack of the call is the calling thread's (or task's) stack, followed by the stacks of the other
    threads and tasks that hold planmode frames at that moment, i.e. the node waiting for the call; the run is
    sequential (``max_parallel=1``), so there is no other node. ``stacks`` says how many were joined."""
    stacks = [_live(frame)]
    me = threading.get_ident()
    for ident, top in sys._current_frames().items():
        if ident != me:
            stacks.append(_live(top))
    try:
        current = asyncio.current_task()
    except RuntimeError:  # no running event loop: the sync path
        current = None
    if current is not None:
        stacks += [_awaiting(t) for t in asyncio.all_tasks() if t is not current and not t.done()]
    joined = [stacks[0], *(s for s in stacks[1:] if any(_is_planmode(f) for f in s))]
    frames = [f for s in joined for f in s]
    names = [_name(f) for f in frames if _is_planmode(f)]
    return {
        "planmode_frames": len(names),
        "drivers": sum(_is_driver(f) for f in frames),
        "all_frames": len(frames),
        "stacks": len(joined),
        "planmode": names,
    }


class Recorder:
    """A responder: answers as `PurposeScript` does, and records the stack at the first call of each purpose."""

    def __init__(self) -> None:
        self.script = PurposeScript(plan=PLAN)
        self.seen: dict[str, dict[str, Any]] = {}

    def __call__(self, req: ScriptRequest) -> Any:
        if req.purpose in PURPOSES and req.purpose not in self.seen:
            self.seen[req.purpose] = stack_at_call(sys._getframe(1))
        return self.script(req)


def _graph(recorder: Recorder) -> Any:
    return build_graph(ScriptedChatModel(responder=recorder), checkpointer=InMemorySaver())


CONTEXT = PlanModeContext(mode="plan", max_parallel=1)


def run_sync() -> dict[str, Any]:
    recorder = Recorder()
    graph = _graph(recorder)
    cfg: Any = {"configurable": {"thread_id": "frames-sync"}}
    graph.invoke({"messages": [("user", "write and check the notes")]}, cfg, context=CONTEXT)
    revision = graph.get_state(cfg).interrupts[0].value["revision"]
    graph.invoke(Command(resume={"action": "approve", "revision": revision}), cfg, context=CONTEXT)
    return {"status": graph.get_state(cfg).values["status"], **recorder.seen}


async def run_async() -> dict[str, Any]:
    recorder = Recorder()
    graph = _graph(recorder)
    cfg: Any = {"configurable": {"thread_id": "frames-async"}}
    await graph.ainvoke({"messages": [("user", "write and check the notes")]}, cfg, context=CONTEXT)
    revision = (await graph.aget_state(cfg)).interrupts[0].value["revision"]
    await graph.ainvoke(Command(resume={"action": "approve", "revision": revision}), cfg, context=CONTEXT)
    return {"status": (await graph.aget_state(cfg)).values["status"], **recorder.seen}


def measure() -> dict[str, Any]:
    from bench.report import provenance

    runs = {"sync": run_sync(), "async": asyncio.run(run_async())}
    return {"runs": runs, "target": TARGET, "reproduced": provenance()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.frames", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "frames.json")
    parser.add_argument("--verbose", action="store_true", help="list the planmode frames of each call")
    args = parser.parse_args(argv)
    data = measure()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print("| path | node's call | planmode frames | drivers | all frames | stacks joined |")
    print("|---|---|---|---|---|---|")
    for path, run in data["runs"].items():
        for purpose in PURPOSES:
            c = run.get(purpose)
            if c is None:
                print(f"| {path} | {purpose} | (no call) | | | |")
                continue
            print(
                f"| {path} | {purpose} | {c['planmode_frames']} | {c['drivers']} | {c['all_frames']} | {c['stacks']} |"
            )
            if args.verbose:
                for name in c["planmode"]:
                    print(f"|   | | {name} | | | |")
    print(
        f"target: at most {TARGET['planmode_frames']} planmode frames and {TARGET['drivers']} driver; "
        f"written {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
