"""Issue 21 §7, staleness: git runs nothing the workspace configures, large files are fingerprinted by all of
their content, and the run's own writes and database are not outside changes."""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from langgraph.types import Command

from planmode.approval.staleness import fingerprint
from planmode.context import PlanModeContext
from planmode.graph import build_graph
from planmode.nodes import approve as approve_node
from planmode.nodes import dispatch as dispatch_node
from planmode.persistence import sqlite_checkpointer
from planmode.testing.scripted import PurposeScript, ScriptedChatModel
from planmode.tools import workspace_tools
from planmode.tools._writes import path_key


def git(ws: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(ws), *args], check=True, timeout=30, capture_output=True)


def git_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "config.txt").write_text("value = 1\n")
    git(ws, "init", "-q")
    git(ws, "add", ".")
    git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    return ws


def hook_script(tmp_path: Path, marker: Path) -> Path:
    script = tmp_path / "hook.sh"
    script.write_text(f"#!/bin/sh\ntouch '{marker}'\ncat\n")
    script.chmod(0o755)
    return script


def test_a_workspace_fsmonitor_hook_is_not_run_by_the_fingerprint(tmp_path: Path) -> None:
    ws = git_workspace(tmp_path)
    marker = tmp_path / "fsmonitor-ran"
    git(ws, "config", "core.fsmonitor", str(hook_script(tmp_path, marker)))  # what a step could write
    (ws / "config.txt").write_text("value = 2\n")
    fp = fingerprint(str(ws))
    assert fp is not None and fp["kind"] == "git" and "config.txt" in fp["files"]
    assert not marker.exists()


def test_a_workspace_filter_driver_is_not_run_by_the_fingerprint(tmp_path: Path) -> None:
    ws = git_workspace(tmp_path)
    marker = tmp_path / "filter-ran"
    (ws / ".gitattributes").write_text("*.txt filter=evil diff=evil\n")
    git(ws, "add", ".gitattributes")
    git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "attrs")
    script = hook_script(tmp_path, marker)
    for key in ("filter.evil.clean", "filter.evil.process", "diff.evil.textconv", "diff.external"):
        git(ws, "config", key, str(script))
    git(ws, "config", "filter.evil.required", "true")
    (ws / "config.txt").write_text("value = 9\n")  # same size: git compares the content, through the filter
    fp = fingerprint(str(ws))
    assert fp is not None and fp["kind"] == "git" and "config.txt" in fp["files"]
    assert not marker.exists()


BIG = 16 * 1024 * 1024


def test_files_past_16_mib_differing_after_16_mib_or_in_length_fingerprint_differently(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    big = ws / "big.bin"

    def digest(data: bytes) -> str:
        big.write_bytes(data)
        fp = fingerprint(str(ws), ["big.bin"])
        assert fp is not None and fp["kind"] == "files"
        return str(fp["digest"])

    base = b"a" * BIG + b"tail one" + b"b" * 1000
    first = digest(base)
    assert digest(b"a" * BIG + b"tail two" + b"b" * 1000) != first  # differs only after 16 MiB
    assert digest(base + b"longer") != first  # differs in length only
    assert digest(base) == first  # the same content: the same fingerprint


# -- the run's own writes and database are not outside changes ----------------------------------------------

WRITE_PLAN = {
    "title": "Write two files",
    "steps": [
        # write steps carry acceptance that names their file (issue 24: a plan without it is sent back)
        {"id": "one", "description": "write one.txt", "tools": ["write_file"], "acceptance": "one.txt exists"},
        {
            "id": "two",
            "description": "write two.txt",
            "tools": ["write_file"],
            "dependencies": ["one"],
            "acceptance": "two.txt exists",
        },
    ],
}


def write_executor(step: Any, ctx: Any) -> str:
    write = next(t for t in ctx.tools if t.name == "write_file")
    return str(write.invoke({"path": f"{step.id}.txt", "content": f"{step.id} written by the run\n"}))


def run_graph(ws: Path, saver: Any) -> Any:
    model = ScriptedChatModel(responder=PurposeScript(plan=[WRITE_PLAN]))
    tools = workspace_tools(ws, protected=[ws / "runs.sqlite"])
    return build_graph(model, tools=tools, executor=write_executor, checkpointer=saver)


def answer_steps_until_done(graph: Any, config: dict[str, Any]) -> list[str]:
    """Approve the plan and each step question; the types of the questions asked."""
    asked = []
    ctx = PlanModeContext(mode="plan", step_approval="writes", max_explore_calls=0)
    for _ in range(10):
        state = graph.get_state(config)
        if not state.interrupts:
            break
        value = state.interrupts[0].value
        asked.append(value["type"])
        if value["type"] == "planmode.approval":
            answer = {"action": "approve", "revision": value["revision"]}
        elif value["type"] == "planmode.step_approval":
            answer = {"action": "approve", "step": value["step"]["id"], "definition": value["definition"]}
        else:
            break
        graph.invoke(Command(resume=answer), config, context=ctx)
    return asked


def test_the_runs_own_writes_and_database_are_not_asked_about(tmp_path: Path) -> None:
    ws = git_workspace(tmp_path)
    config = {"configurable": {"thread_id": "own"}}
    saver = sqlite_checkpointer(ws / "runs.sqlite")
    with contextlib.closing(saver.conn):
        graph = run_graph(ws, saver)
        ctx = PlanModeContext(mode="plan", workspace=str(ws), step_approval="writes", max_explore_calls=0)
        graph.invoke({"messages": [("user", "write the files")]}, config, context=ctx)
        asked = answer_steps_until_done(graph, config)
        values = graph.get_state(config).values
    # the step questions (pauses) were checked; the run's own one.txt, two.txt and runs.sqlite* are not changes
    assert "planmode.stale" not in asked, asked
    assert asked.count("planmode.step_approval") == 2
    assert values["status"] == "completed"
    assert (ws / "one.txt").read_text() == "one written by the run\n"
    assert set(values["run_writes"]) == {path_key(ws / "one.txt"), path_key(ws / "two.txt")}


def test_a_change_to_a_file_the_run_wrote_is_asked_about(tmp_path: Path) -> None:
    ws = git_workspace(tmp_path)
    config = {"configurable": {"thread_id": "own"}}
    saver = sqlite_checkpointer(ws / "runs.sqlite")
    with contextlib.closing(saver.conn):
        graph = run_graph(ws, saver)
        ctx = PlanModeContext(mode="plan", workspace=str(ws), step_approval="writes", max_explore_calls=0)
        graph.invoke({"messages": [("user", "write the files")]}, config, context=ctx)
        first = graph.get_state(config).interrupts[0].value
        graph.invoke(Command(resume={"action": "approve", "revision": first["revision"]}), config)
        step = graph.get_state(config).interrupts[0].value
        assert step["type"] == "planmode.step_approval" and step["step"]["id"] == "one"
        graph.invoke(Command(resume={"action": "approve", "step": "one", "definition": step["definition"]}), config)
        step = graph.get_state(config).interrupts[0].value
        assert step["type"] == "planmode.step_approval" and step["step"]["id"] == "two"
        (ws / "one.txt").write_text("changed by someone else\n")  # while the run waits at the question
        graph.invoke(Command(resume={"action": "approve", "step": "two", "definition": step["definition"]}), config)
        stale = graph.get_state(config).interrupts[0].value
    assert stale["type"] == "planmode.stale"
    assert stale["changed"] == ["one.txt"]


def test_the_check_does_not_run_on_a_timer_within_one_invocation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = git_workspace(tmp_path)
    calls: list[str] = []
    real = dispatch_node.fingerprint

    def counting(*args: Any) -> Any:
        calls.append("fingerprint")
        return real(*args)

    for module in (dispatch_node, approve_node):  # the two nodes that take the fingerprint
        monkeypatch.setattr(module, "fingerprint", counting)
    clock = iter(range(10**9, 10**10, 3))  # every reading of the clock 3 s after the last: steps that take a while
    monkeypatch.setattr(time, "time", lambda: float(next(clock)))
    chain = {
        "title": "Chain",
        "steps": [
            {"id": "a", "description": "a"},
            {"id": "b", "description": "b", "dependencies": ["a"]},
            {"id": "c", "description": "c", "dependencies": ["b"]},
        ],
    }
    model = ScriptedChatModel(responder=PurposeScript(plan=[chain]))
    saver = sqlite_checkpointer(tmp_path / "runs.sqlite")
    with contextlib.closing(saver.conn):
        graph = build_graph(model, executor=lambda s, c: f"{s.id} ok", checkpointer=saver)
        ctx = PlanModeContext(mode="plan", workspace=str(ws), approval="auto", max_explore_calls=0)
        out = graph.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "t"}}, context=ctx)
    assert out["status"] == "completed"
    assert calls == ["fingerprint"]  # taken at the approval; no pause within the invocation, no recheck
