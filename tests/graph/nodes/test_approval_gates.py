"""Issue 15 items 3-5 through the graph (a real SQLite file, the scripted model): the staleness question after a
resume, the pluggable approval policy with per-step approval of write steps, and the Mermaid diagram."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from planmode.approval.policy import ApprovalRequest, Decision, read_only_auto, reject
from planmode.approval.staleness import changed_files, explored_paths, fingerprint, stale_payload
from planmode.context import PlanModeContext
from planmode.graph import build_graph
from planmode.nodes import _batch as batch
from planmode.nodes import _gates as gates
from planmode.state.approvals import current_run, decisions, definition_digest
from planmode.state.mermaid import escape_label, layers, plan_to_mermaid
from planmode.state.models import Plan, Step, StepStatus
from planmode.testing.scripted import PurposeScript, ScriptedChatModel
from planmode.tools import read_only

TASK = "Update the config: read it, then write the new value"
PLAN = {
    "title": "Update",
    "steps": [
        {"id": "look", "description": "read the config", "tools": ["read_file"]},
        {  # a write step carries acceptance (issue 24: a plan without it is sent back)
            "id": "change",
            "description": "write the config",
            "tools": ["write_file"],
            "dependencies": ["look"],
            "acceptance": "the config holds the new value",
        },
    ],
}
READ_ONLY_PLAN = {"title": "Look", "steps": [{"id": "look", "description": "read it", "tools": ["read_file"]}]}


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return "content"


@tool
def write_file(path: str, text: str) -> str:
    """Write a file."""
    return "written"


TOOLS = [read_only(read_file), write_file]


def cfg(name: str = "t1") -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def pending(graph: Any, name: str = "t1") -> dict[str, Any]:
    state = graph.get_state(cfg(name))
    assert len(state.interrupts) == 1, state.interrupts
    value: dict[str, Any] = state.interrupts[0].value
    return value


def as_another_process(monkeypatch: pytest.MonkeyPatch, token: str) -> None:
    """This process as another one: the token the gates record and the one the staleness check compares."""
    monkeypatch.setattr(gates, "PROCESS_TOKEN", token)
    monkeypatch.setattr(batch, "PROCESS_TOKEN", token)


def git_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "config.txt").write_text("value = 1\n")
    (ws / "other.txt").write_text("untouched\n")
    for args in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"]):
        subprocess.run(["git", "-C", str(ws), *args], check=True, timeout=30)
    return ws


def make_graph(checkpointer: SqliteSaver, plans: Any = None, **kw: Any) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(responder=PurposeScript(plan=plans or [PLAN]))
    graph = build_graph(model, tools=TOOLS, executor=lambda step, ctx: f"{step.id} ok", checkpointer=checkpointer, **kw)
    return graph, model


def start(graph: Any, ws: Path | None, **settings: Any) -> None:
    ctx = PlanModeContext(mode="plan", workspace=str(ws) if ws else None, max_explore_calls=0, **settings)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=ctx)


def approve_plan(graph: Any) -> None:
    first = pending(graph)
    assert first["type"] == "planmode.approval"
    graph.invoke(Command(resume={"action": "approve", "revision": first["revision"]}), cfg())


def to_stale_question(graph: Any, ws: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Approve the plan, stop at the write step's approval, change a file, and answer as another process."""
    approve_plan(graph)
    step = pending(graph)
    assert step["type"] == "planmode.step_approval" and step["step"]["id"] == "change"
    (ws / "config.txt").write_text("value = 2\n")
    as_another_process(monkeypatch, "another-process")  # the run resumes in another process
    graph.invoke(
        Command(resume={"action": "approve", "step": "change", "definition": pending(graph)["definition"]}), cfg()
    )
    return pending(graph)


# -- 3. staleness --------------------------------------------------------------------------------------------


def test_a_changed_workspace_is_asked_again_with_the_changed_files(
    checkpointer: SqliteSaver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = git_workspace(tmp_path)
    graph, _ = make_graph(checkpointer)
    start(graph, ws, step_approval="writes")
    stale = to_stale_question(graph, ws, monkeypatch)
    assert stale["type"] == "planmode.stale"
    assert stale["changed"] == ["config.txt"]
    assert "config.txt" in stale["markdown"] and stale["actions"] == ["approve", "replan", "cancel"]
    assert graph.get_state(cfg()).values["plan"].get("change").status is StepStatus.PENDING  # nothing ran
    assert graph.get_state(cfg()).values["status"] == "awaiting_approval"  # `planmode ls` lists it as waiting

    # bad answers are refused with a clear error and asked again; nothing is lost
    for bad, needle in [
        ("not json", "unreadable answer"),
        (["approve"], "JSON object"),
        ({"action": "yes"}, "unknown action"),
        ({"action": "approve"}, "must name the fingerprint"),
        ({"action": "approve", "fingerprint": "0000"}, "stale fingerprint"),
        ({"action": "replan", "feedback": 5}, "'feedback' must be a string"),
    ]:
        graph.invoke(Command(resume=bad), cfg())
        again = pending(graph)
        assert again["type"] == "planmode.stale" and needle in again["error"], (bad, again["error"])
        assert again["changed"] == ["config.txt"]

    graph.invoke(Command(resume={"action": "approve", "fingerprint": stale["fingerprint"]}), cfg())
    values = graph.get_state(cfg()).values
    assert values["status"] == "completed"
    assert values["plan"].get("change").status is StepStatus.DONE
    records = [(r["kind"], r["decision"], r["by"]) for r in decisions(values["approvals"])]
    assert ("stale", "approve", "human") in records and ("plan", "approved", "human") in records


def test_replan_sends_the_change_to_the_planner_and_asks_for_approval(
    checkpointer: SqliteSaver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = git_workspace(tmp_path)
    graph, model = make_graph(checkpointer)
    start(graph, ws, step_approval="writes")
    to_stale_question(graph, ws, monkeypatch)
    graph.invoke(Command(resume={"action": "replan", "feedback": "keep value 2"}), cfg())
    assert pending(graph)["type"] == "planmode.approval"
    revision_request = [r for r in model.requests if r.purpose == "plan"][-1]
    assert "config.txt" in revision_request.text() and "keep value 2" in revision_request.text()


def test_cancel_at_the_staleness_question_ends_the_run(
    checkpointer: SqliteSaver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = git_workspace(tmp_path)
    graph, _ = make_graph(checkpointer)
    start(graph, ws, step_approval="writes")
    to_stale_question(graph, ws, monkeypatch)
    graph.invoke(Command(resume={"action": "cancel", "feedback": "not now"}), cfg())
    values = graph.get_state(cfg()).values
    assert values["status"] == "cancelled"
    assert values["plan"].get("change").status is StepStatus.PENDING


def test_the_check_can_be_turned_off(
    checkpointer: SqliteSaver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = git_workspace(tmp_path)
    graph, _ = make_graph(checkpointer)
    start(graph, ws, step_approval="writes", check_staleness=False)
    approve_plan(graph)
    (ws / "config.txt").write_text("value = 2\n")
    as_another_process(monkeypatch, "another-process")
    graph.invoke(
        Command(resume={"action": "approve", "step": "change", "definition": pending(graph)["definition"]}), cfg()
    )
    values = graph.get_state(cfg()).values
    assert values["status"] == "completed" and values.get("workspace_fingerprint") is None


def test_an_unchanged_workspace_is_not_asked_again(
    checkpointer: SqliteSaver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = git_workspace(tmp_path)
    graph, _ = make_graph(checkpointer)
    start(graph, ws, step_approval="writes")
    approve_plan(graph)
    as_another_process(monkeypatch, "another-process")
    graph.invoke(
        Command(resume={"action": "approve", "step": "change", "definition": pending(graph)["definition"]}), cfg()
    )
    assert graph.get_state(cfg()).values["status"] == "completed"


def test_fingerprint_in_git_sees_dirty_untracked_and_committed_changes(tmp_path: Path) -> None:
    ws = git_workspace(tmp_path)
    before = fingerprint(str(ws))
    assert before is not None and before["kind"] == "git" and before["files"] == {}
    (ws / 'new file "q".txt').write_text("x")
    dirty = fingerprint(str(ws))
    assert dirty is not None and changed_files(before, dirty) == ['new file "q".txt']
    subprocess.run(["git", "-C", str(ws), "add", "."], check=True, timeout=30)
    subprocess.run(
        ["git", "-C", str(ws), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"],
        check=True,
        timeout=30,
    )
    committed = fingerprint(str(ws))
    assert committed is not None and committed["head"] != before["head"]
    assert changed_files(before, committed) == ['new file "q".txt']


def test_fingerprint_outside_git_hashes_the_explored_files(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("1")
    (tmp_path / "b.txt").write_text("1")
    messages = [
        AIMessage(content="", tool_calls=[{"name": "read_file", "args": {"path": "a.txt"}, "id": "1"}]),
        AIMessage(content="", tool_calls=[{"name": "read_file", "args": {"path": "gone.txt"}, "id": "2"}]),
    ]
    os.mkfifo(tmp_path / "fifo")  # a FIFO the exploration named is never read (it would block)
    messages.append(AIMessage(content="", tool_calls=[{"name": "read_file", "args": {"path": "fifo"}, "id": "3"}]))
    paths = explored_paths(messages)
    assert paths == ["a.txt", "gone.txt", "fifo"]
    before = fingerprint(str(tmp_path), paths)
    assert before is not None and before["kind"] == "files" and before["files"]["gone.txt"] == "missing"
    assert before["files"]["fifo"] == "not a regular file"
    (tmp_path / "b.txt").write_text("2")  # not read by the exploration: not part of the fingerprint
    same = fingerprint(str(tmp_path), paths)
    assert same is not None and same["digest"] == before["digest"]
    (tmp_path / "a.txt").write_text("2")
    after = fingerprint(str(tmp_path), paths)
    assert after is not None and changed_files(before, after) == ["a.txt"]
    assert fingerprint(None) is None and fingerprint(str(tmp_path / "nope")) is None


# -- 4. the approval policy ----------------------------------------------------------------------------------


def test_read_only_plans_are_approved_by_the_read_only_policy(checkpointer: SqliteSaver) -> None:
    graph, _ = make_graph(checkpointer, [READ_ONLY_PLAN], approval_policy=read_only_auto)
    start(graph, None)
    values = graph.get_state(cfg()).values
    assert values["status"] == "completed"
    first = decisions(values["approvals"])[0]
    plan = values["plan"]
    assert first | {"at": 0} == {
        "kind": "plan",
        "decision": "approved",
        "policy": "read_only_auto",
        "by": "policy",
        "plan_version": 1,
        "revision": first["revision"],
        "at": 0,
        "reason": "initial plan",
        "run": current_run(values["approvals"]),
        "thread": cfg()["configurable"]["thread_id"],
        "ns": "",
        "steps": {"look": definition_digest(plan.get("look"), plan.goal)},
        "tools": {"look": ["read_file"]},
        "shape": plan.shape,
    }


def test_the_read_only_policy_asks_a_human_for_a_plan_that_writes(checkpointer: SqliteSaver) -> None:
    graph, _ = make_graph(checkpointer, approval_policy=read_only_auto)
    start(graph, None)
    assert pending(graph)["type"] == "planmode.approval"


def test_a_policy_that_rejects_cancels_the_run_with_its_reason(checkpointer: SqliteSaver) -> None:
    def no_writes(request: ApprovalRequest) -> Decision:
        return reject("writes are frozen today") if request.kind == "plan" else Decision("approve")

    graph, _ = make_graph(checkpointer, approval_policy=no_writes)
    start(graph, None)
    values = graph.get_state(cfg()).values
    assert values["status"] == "cancelled" and "writes are frozen today" in values["feedback"]
    assert (
        decisions(values["approvals"])[-1]["policy"] == "no_writes"
        and decisions(values["approvals"])[-1]["decision"] == "rejected"
    )
    assert all(s.status is StepStatus.PENDING for s in values["plan"].steps)


@pytest.mark.parametrize("answer", [RuntimeError("boom"), "maybe", None, 3])
def test_a_broken_policy_asks_a_human_and_the_error_is_recorded(checkpointer: SqliteSaver, answer: Any) -> None:
    def broken(request: ApprovalRequest) -> Any:
        if isinstance(answer, Exception):
            raise answer
        return answer

    graph, _ = make_graph(checkpointer, approval_policy=broken)
    start(graph, None)
    approve_plan(graph)
    values = graph.get_state(cfg()).values
    assert values["status"] == "completed"
    record = decisions(values["approvals"])[0]
    assert record["by"] == "human" and record["policy"] == "broken" and "broken" in record["policy_error"]


def test_the_approval_setting_still_works_as_the_default_policy(checkpointer: SqliteSaver) -> None:
    graph, _ = make_graph(checkpointer)
    start(graph, None, approval="auto")
    values = graph.get_state(cfg()).values
    assert values["status"] == "completed"
    assert [(r["decision"], r["policy"], r["by"]) for r in decisions(values["approvals"])] == [
        ("approved", "settings", "policy")
    ]


def test_step_approval_asks_for_write_steps_only_and_shows_dependencies(checkpointer: SqliteSaver) -> None:
    graph, _ = make_graph(checkpointer)
    start(graph, None, step_approval="writes")
    approve_plan(graph)
    asked = pending(graph)
    assert asked["type"] == "planmode.step_approval"
    assert graph.get_state(cfg()).values["status"] == "awaiting_approval"
    plan = graph.get_state(cfg()).values["plan"]
    assert plan.get("look").status is StepStatus.DONE  # the read-only step ran straight through
    assert asked["tools"] == ["write_file"] and asked["write_tools"] == ["write_file"]
    assert asked["dependencies"] == {"look": {"status": "done", "result": "look ok", "output_ref": None}}
    assert "look ok" in asked["markdown"] and "```mermaid" in asked["markdown"]
    for bad, needle in [
        ({"action": "approve"}, "must name the step"),
        ({"action": "approve", "step": "look"}, "must name the step"),
        ({"action": "approve", "step": "change"}, "must name the definition shown"),
        ({"action": "approve", "step": "change", "definition": "0" * 24}, "must name the definition shown"),
        ({"action": "go"}, "unknown action"),
        ("{", "unreadable answer"),
    ]:
        graph.invoke(Command(resume=bad), cfg())
        again = pending(graph)
        assert again["type"] == "planmode.step_approval" and needle in again["error"]
    graph.invoke(
        Command(
            resume={
                "action": "skip",
                "step": "change",
                "definition": pending(graph)["definition"],
                "feedback": "by hand",
            }
        ),
        cfg(),
    )
    values = graph.get_state(cfg()).values
    assert values["plan"].get("change").status is StepStatus.SKIPPED
    assert values["status"] == "completed"
    assert (
        decisions(values["approvals"])[-1]["decision"] == "skip"
        and decisions(values["approvals"])[-1]["step"] == "change"
    )


def test_step_approval_by_a_policy_runs_without_asking(checkpointer: SqliteSaver) -> None:
    def approve_all(request: ApprovalRequest) -> str:
        return "approve"

    graph, _ = make_graph(checkpointer, approval_policy=approve_all)
    start(graph, None, step_approval="writes")
    values = graph.get_state(cfg()).values
    assert values["status"] == "completed"
    assert [(r["kind"], r.get("step")) for r in decisions(values["approvals"])] == [("plan", None), ("step", "change")]


# -- 5. the plan as a picture ------------------------------------------------------------------------------

HOSTILE = 'x"] --> s9; click s0 call alert() %%\n<script>&amp;</script> `code` [link](x) #1; \ud800 |pipe| {b}'


def test_the_approval_markdown_has_the_diagram(checkpointer: SqliteSaver) -> None:
    graph, _ = make_graph(checkpointer)
    start(graph, None)
    markdown = pending(graph)["markdown"]
    assert "```mermaid\nflowchart LR\n" in markdown and "s0 --> s1" in markdown


def test_hostile_step_text_cannot_break_the_diagram() -> None:
    plan = Plan(
        goal="g",
        steps=[
            Step(id="a", description=HOSTILE),
            Step(id="b", description="second", dependencies=["a"]),
            Step(id="c", description=HOSTILE * 3, dependencies=["a"]),
        ],
    )
    text = plan_to_mermaid(plan)
    label_line = re.compile(
        r'^    s\d+\["[A-Za-z0-9 .,:\-_/?!\'#;…]*"\]:::(pending|running|done|failed|blocked|skipped)$'
    )
    for line in text.splitlines():
        if line.startswith("    s"):
            assert label_line.match(line), line
    assert "<" not in text and "\n  s9" not in text and "click" not in text.replace("click s0", "")
    assert "\ud800" not in text and "#60;script" in text
    assert layers(plan) == [["a"], ["b", "c"]]  # b and c run at once: one column
    assert len(escape_label(HOSTILE * 10)) < 1000


def test_layers_tolerate_unknown_dependencies() -> None:
    plan = Plan.model_construct(
        goal="g", steps=[Step(id="a", description="a", dependencies=["zzz"])], version=1, history=[], rejections=[]
    )
    assert layers(plan) == [["a"]]
    assert "s0" in plan_to_mermaid(plan)


def test_auto_approval_with_step_approval_asks_only_before_write_steps(checkpointer: SqliteSaver) -> None:
    graph, _ = make_graph(checkpointer)
    start(graph, None, approval="auto", step_approval="writes")
    asked = pending(graph)
    assert asked["type"] == "planmode.step_approval" and asked["step"]["id"] == "change"
    graph.invoke(Command(resume={"action": "cancel", "feedback": "not today"}), cfg())
    values = graph.get_state(cfg()).values
    assert values["status"] == "cancelled" and values["plan"].get("change").status is StepStatus.PENDING
    assert values["plan"].get("look").status is StepStatus.DONE


def test_a_pause_in_the_same_process_is_checked_after_a_while(
    checkpointer: SqliteSaver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = git_workspace(tmp_path)
    graph, _ = make_graph(checkpointer)
    start(graph, ws, step_approval="writes")
    approve_plan(graph)
    (ws / "other.txt").unlink()
    monkeypatch.setattr(gates, "RECHECK_AFTER_SECONDS", -1.0)  # the human took longer than the recheck interval
    graph.invoke(
        Command(resume={"action": "approve", "step": "change", "definition": pending(graph)["definition"]}), cfg()
    )
    stale = pending(graph)
    assert stale["type"] == "planmode.stale" and stale["changed"] == ["other.txt"]


def test_an_answer_at_a_step_question_is_a_pause_and_is_checked(
    checkpointer: SqliteSaver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = git_workspace(tmp_path)
    graph, _ = make_graph(checkpointer)
    start(graph, ws, step_approval="writes")
    approve_plan(graph)
    (ws / "other.txt").unlink()
    monkeypatch.setattr(gates, "RECHECK_AFTER_SECONDS", 3600.0)  # however quick the answer
    graph.invoke(
        Command(resume={"action": "approve", "step": "change", "definition": pending(graph)["definition"]}), cfg()
    )
    stale = pending(graph)
    assert stale["type"] == "planmode.stale" and stale["changed"] == ["other.txt"]


class Crash(BaseException):
    """Stands in for the process dying in the middle of a step."""


def test_a_run_resumed_after_a_crash_asks_before_the_next_step(
    checkpointer: SqliteSaver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = git_workspace(tmp_path)
    chain = {
        "title": "Chain",
        "steps": [
            {"id": "a", "description": "first"},
            {"id": "b", "description": "second", "dependencies": ["a"]},
            {"id": "c", "description": "third", "dependencies": ["b"]},
        ],
    }
    crashed: list[str] = []

    def executor(step: Step, ctx: Any) -> str:
        if step.id == "b" and not crashed:
            crashed.append(step.id)
            raise Crash
        return f"{step.id} ok"

    model = ScriptedChatModel(responder=PurposeScript(plan=[chain]))
    graph = build_graph(model, executor=executor, checkpointer=checkpointer)
    with pytest.raises(Crash):
        start(graph, ws, approval="auto")
    (ws / "config.txt").write_text("changed while the run was down\n")
    as_another_process(monkeypatch, "the-next-process")
    graph.invoke(None, cfg())
    stale = pending(graph)
    assert stale["type"] == "planmode.stale" and stale["changed"] == ["config.txt"]
    plan = graph.get_state(cfg()).values["plan"]
    # the step that was running when the process died finished; nothing new started before the question
    assert [plan.get(s).status for s in "abc"] == [StepStatus.DONE, StepStatus.DONE, StepStatus.PENDING]
    graph.invoke(Command(resume={"action": "approve", "fingerprint": stale["fingerprint"]}), cfg())
    assert graph.get_state(cfg()).values["status"] == "completed"


def test_fingerprint_ignores_commits_outside_the_workspace_and_survives_hostile_names(tmp_path: Path) -> None:
    ws = git_workspace(tmp_path)
    sub = ws / "sub"
    sub.mkdir()
    (sub / "kept.txt").write_text("1")
    git = ["git", "-C", str(ws), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "."], check=True, timeout=30)
    subprocess.run([*git, "commit", "-qm", "sub"], check=True, timeout=30)
    before = fingerprint(str(sub))
    (ws / "config.txt").write_text("outside the workspace\n")
    subprocess.run([*git, "commit", "-qam", "outside"], check=True, timeout=30)
    after = fingerprint(str(sub))
    assert before is not None and after is not None
    assert after["head"] != before["head"] and after["digest"] == before["digest"]
    hostile = os.fsdecode(b"bad\xff\nname`]<b>.txt")
    (sub / hostile).write_text("x")
    os.mkfifo(sub / "fifo")  # git status does not list it; nothing opens it
    dirty = fingerprint(str(sub))
    assert dirty is not None
    changed = changed_files(before, dirty)
    assert changed == ["sub/bad\ufffd\nname`]<b>.txt"]
    markdown = stale_payload(dirty, changed, error=None)["markdown"]
    assert "\\nname" in markdown and "`]" not in markdown
    json.dumps(dirty)  # storable in a checkpoint


def test_a_step_approved_for_one_task_is_asked_again_for_the_next_task_on_the_thread(
    checkpointer: SqliteSaver,
) -> None:
    graph, _ = make_graph(checkpointer, [PLAN, PLAN])
    start(graph, None, approval="auto", step_approval="writes")
    graph.invoke(
        Command(resume={"action": "approve", "step": "change", "definition": pending(graph)["definition"]}), cfg()
    )
    assert graph.get_state(cfg()).values["status"] == "completed"
    ctx = PlanModeContext(mode="plan", approval="auto", step_approval="writes", max_explore_calls=0)
    graph.invoke({"task": "Update the other config the same way"}, cfg(), context=ctx)
    asked = pending(graph)
    assert asked["type"] == "planmode.step_approval" and asked["step"]["id"] == "change"
