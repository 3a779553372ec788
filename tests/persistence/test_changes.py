"""What each step changed in the workspace (`planmode.persistence.changes`), on real SQLite files: recorded with
the step, the run and the contents before and after; restored to a checkpoint; refused when a file changed
outside the run; not recorded (and said so) with an in-memory checkpointer.

The plan: ``a`` creates ``notes.md`` and a file with a hostile name, ``b`` (after ``a``) edits ``notes.md`` and
overwrites ``data.bin`` (binary content before and after). An executor calls the step's bound workspace tools.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from planmode.errors import PlanModeError
from planmode.graph.builder import build_graph
from planmode.persistence import sqlite_checkpointer
from planmode.persistence.changes import ChangeStore, file_diffs, restore, restore_plan
from planmode.state.models import Step
from planmode.testing.scripted import PurposeScript, ScriptedChatModel
from planmode.tools import WorkspaceLimits, workspace_tools
from planmode.tools._writes import journaling

pytestmark = pytest.mark.integration

HOSTILE = "[bold]evil[/bold] \x1b[31mred\nline.txt"
MARKUP = "[red]not markup[/red] \x1b]52;c;SGVsbG8=\x07 \x1b[2J"
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


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def call(ctx: Any, name: str, **args: Any) -> str:
    tool = next(t for t in ctx.tools if t.name == name)
    return str(tool.invoke(args))


def executor(step: Step, ctx: Any) -> str:
    if step.id == "a":
        call(ctx, "write_file", path="notes.md", content="one\n")
        call(ctx, "write_file", path=HOSTILE, content=MARKUP)
    else:
        call(ctx, "edit_file", path="notes.md", old_string="one", new_string="two")
        call(ctx, "write_file", path="data.bin", content="text now\n")
    return f"did {step.id}"


def cfg(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def run(ws: Path, checkpointer: Any, thread: str = "t") -> Any:
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    graph = build_graph(model, executor=executor, tools=workspace_tools(ws), checkpointer=checkpointer)
    graph.invoke({"messages": [("user", "Write and then edit the notes")]}, cfg(thread))
    payload = graph.get_state(cfg(thread)).interrupts[0].value
    graph.invoke(Command(resume={"action": "approve", "revision": payload["revision"]}), cfg(thread))
    assert graph.get_state(cfg(thread)).values["status"] == "completed"
    return graph


@pytest.fixture
def done(tmp_path: Path) -> tuple[Any, Path, ChangeStore]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "data.bin").write_bytes(b"\x00\x01\xffbinary")
    db = tmp_path / "runs.sqlite"
    graph = run(ws, sqlite_checkpointer(db))
    return graph, ws, ChangeStore(db)


def checkpoint_before(graph: Any, thread: str, step_id: str) -> str:
    """The checkpoint the task of ``step_id`` ran from (the last one before it ran)."""
    for state in graph.get_state_history(cfg(thread)):  # newest first
        plan = state.values.get("plan")
        steps = {s.id: s.status.value for s in plan.steps} if plan is not None else {}
        if steps.get(step_id) in ("pending", "running") and "execute_step" in state.next:
            return str(state.config["configurable"]["checkpoint_id"])
    raise AssertionError(f"no checkpoint before step {step_id}")


def test_every_write_is_recorded_with_its_step_run_and_contents(done: tuple[Any, Path, ChangeStore]) -> None:
    graph, ws, store = done
    changes = store.changes("t")
    real = ws.resolve()
    assert [(c.step_id, c.rel) for c in changes] == [
        ("a", "notes.md"),
        ("a", HOSTILE),
        ("b", "notes.md"),
        ("b", "data.bin"),
    ]
    a1, a2, b1, b2 = changes
    assert a1.path == str(real / "notes.md") and a1.root == str(real)
    assert a1.before_sha is None and a1.after_sha == sha(b"one\n")  # created
    assert b1.before_sha == sha(b"one\n") and b1.after_sha == sha(b"two\n")
    assert store.content(b2.before_sha) == b"\x00\x01\xffbinary"  # binary content, kept exactly
    assert store.content(a2.after_sha) == MARKUP.encode()
    run_id = changes[0].run_id
    assert run_id and all(c.run_id == run_id and c.thread_id == "t" for c in changes)
    assert a1.checkpoint_id == checkpoint_before(graph, "t", "a") < b1.checkpoint_id
    # the same SQLite file as the checkpoints
    with sqlite3.connect(store.path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"checkpoints", "planmode_changes", "planmode_blobs"} <= tables


def test_diffs_are_net_per_file_and_safe_for_hostile_names_and_binary(done: tuple[Any, Path, ChangeStore]) -> None:
    _, _, store = done
    diffs = {d.rel: d for d in file_diffs(store, store.changes("t"))}
    notes = diffs["notes.md"].unified()
    assert notes == "--- /dev/null\n+++ b/notes.md\n@@ -0,0 +1 @@\n+two\n"  # net over the run: created as "two"
    of_b = file_diffs(store, store.changes("t", step_id="b"))
    assert [d.rel for d in of_b] == ["data.bin", "notes.md"]  # by path within a step, whatever order they ran in
    assert of_b[1].unified().endswith("@@ -1 +1 @@\n-one\n+two\n")
    hostile = diffs[HOSTILE].unified()
    assert hostile.splitlines()[1] == '+++ "b/[bold]evil[/bold] \\033[31mred\\nline.txt"'  # one header line
    assert "+" + MARKUP in hostile  # the content itself, as data
    assert diffs["data.bin"].unified() == "Binary files a/data.bin and b/data.bin differ\n"  # as git says it


def test_rollback_restores_the_files_of_that_moment(done: tuple[Any, Path, ChangeStore]) -> None:
    graph, ws, store = done
    plan = restore_plan(store, "t", checkpoint_before(graph, "t", "b"), workspace=ws)
    assert not plan.refused and plan.deletions == []
    assert sorted(restore(store, plan)) == ["data.bin", "notes.md"]
    assert (ws / "notes.md").read_text() == "one\n"
    assert (ws / "data.bin").read_bytes() == b"\x00\x01\xffbinary"
    assert (ws / HOSTILE).read_text() == MARKUP  # written by step a, before that moment: kept
    assert [c.step_id for c in store.changes("t")] == ["a", "a"]  # b's changes are marked undone
    assert len(store.changes("t", include_reverted=True)) == 4


def test_a_rollback_to_before_any_step_deletes_the_files_the_steps_created(
    done: tuple[Any, Path, ChangeStore],
) -> None:
    graph, ws, store = done
    first = list(graph.get_state_history(cfg("t")))[-1]  # the thread's first checkpoint
    plan = restore_plan(store, "t", str(first.config["configurable"]["checkpoint_id"]), workspace=ws)
    assert not plan.refused
    restore(store, plan)
    # notes.md and the hostile file were created: deleted (the folder made for the hostile one is left, empty)
    assert sorted(str(p.relative_to(ws)) for p in ws.rglob("*")) == ["[bold]evil[", "data.bin"]
    assert (ws / "data.bin").read_bytes() == b"\x00\x01\xffbinary"
    assert store.changes("t") == []


def test_a_file_changed_outside_the_run_is_refused_with_the_list_and_nothing_changes(
    done: tuple[Any, Path, ChangeStore],
) -> None:
    graph, ws, store = done
    (ws / "notes.md").write_text("edited by hand\n")
    (ws / "data.bin").unlink()
    plan = restore_plan(store, "t", checkpoint_before(graph, "t", "b"), workspace=ws)
    assert plan.refused == {
        "notes.md": "changed outside the run since planmode last wrote it",
        "data.bin": "deleted outside the run since planmode last wrote it",
    }
    with pytest.raises(PlanModeError, match=r"notes\.md"):
        restore(store, plan)
    assert (ws / "notes.md").read_text() == "edited by hand\n"
    assert len(store.changes("t")) == 4  # nothing marked undone


def test_a_change_that_cannot_be_recorded_is_not_made(tmp_path: Path) -> None:
    class Broken:
        def record(self, *args: Any) -> int:
            raise sqlite3.OperationalError("database is locked")

        def discard(self, ticket: int) -> None:
            raise AssertionError("nothing to discard")

    (tmp_path / "f.txt").write_text("before\n")
    write = next(t for t in workspace_tools(tmp_path) if t.name == "write_file")
    with journaling(Broken()):
        result = str(write.invoke({"path": "f.txt", "content": "after\n"}))
    assert "could not be recorded" in result and "nothing was written" in result
    assert (tmp_path / "f.txt").read_text() == "before\n"


def test_a_failed_write_leaves_no_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = ChangeStore(tmp_path / "c.sqlite")

    class Journal:
        def record(self, root: str, path: str, before: Any, after: Any, before_sha: Any) -> int:
            return store.record(
                thread_id="t", checkpoint_ns="", checkpoint_id="c", run_id="r", step_id="s", attempt=1,
                root=root, path=path, before=before, after=after, before_sha=before_sha,
            )  # fmt: skip

        def discard(self, ticket: int) -> None:
            store.discard(ticket)

    from planmode.tools import workspace

    real = workspace._Workspace._write_bytes

    def disk_full(self: Any, path: str, resolved: Path, data: bytes) -> None:
        if path == "full.txt":
            raise OSError(28, "No space left on device")
        real(self, path, resolved, data)

    monkeypatch.setattr(workspace._Workspace, "_write_bytes", disk_full)
    write = next(t for t in workspace_tools(tmp_path) if t.name == "write_file")
    with journaling(Journal()):
        result = str(write.invoke({"path": "full.txt", "content": "y"}))
        ok = str(write.invoke({"path": "new.txt", "content": "z"}))
    assert "No space left on device" in result, result
    assert ok.startswith("Created")
    assert [c.rel for c in store.changes("t")] == ["new.txt"]


def test_a_huge_file_overwritten_is_recorded_by_hash_and_not_restored(tmp_path: Path) -> None:
    store = ChangeStore(tmp_path / "c.sqlite")
    big = b"x" * 5000

    class Journal:
        def record(self, root: str, path: str, before: Any, after: Any, before_sha: Any) -> int:
            return store.record(
                thread_id="t", checkpoint_ns="", checkpoint_id="c1", run_id="r", step_id="s", attempt=1,
                root=root, path=path, before=before, after=after, before_sha=before_sha,
            )  # fmt: skip

        def discard(self, ticket: int) -> None:
            store.discard(ticket)

    (tmp_path / "big.log").write_bytes(big)
    tools = workspace_tools(tmp_path, limits=WorkspaceLimits(max_file_bytes=1000))
    write = next(t for t in tools if t.name == "write_file")
    with journaling(Journal()):
        assert str(write.invoke({"path": "big.log", "content": "small\n"})).startswith("Overwrote")
    (change,) = store.changes("t")
    assert change.before_sha == sha(big) and store.content(change.before_sha) is None
    assert "too large to keep" in file_diffs(store, [change])[0].unified()
    plan = restore_plan(store, "t", "c0", workspace=tmp_path)
    assert plan.refused == {"big.log": "its earlier content was too large to keep"}


def test_a_huge_diff_is_summarised_not_computed(tmp_path: Path) -> None:
    store = ChangeStore(tmp_path / "c.sqlite")
    after = "".join(f"line {i}\n" for i in range(200_000)).encode()  # 2.2 MB
    store.record(
        thread_id="t", checkpoint_ns="", checkpoint_id="c", run_id="r", step_id="s", attempt=1,
        root=str(tmp_path), path=str(tmp_path / "h.txt"), before=b"old\n", after=after,
    )  # fmt: skip
    (d,) = file_diffs(store, store.changes("t"))
    assert "too large to show: 4 -> " in d.unified()


def test_reading_changes_never_creates_tables_or_files(tmp_path: Path) -> None:
    db = tmp_path / "other.sqlite"
    sqlite3.connect(db).close()
    assert ChangeStore(db).changes("t") == [] and ChangeStore(tmp_path / "none.sqlite").changes("t") == []
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    assert not (tmp_path / "none.sqlite").exists()


def test_an_in_memory_checkpointer_runs_and_says_changes_are_not_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import planmode.persistence.changes as changes_module

    # the warning is said once per checkpointer type and process: an earlier test of the session may have said it
    monkeypatch.setattr(changes_module, "_WARNED", set())
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "data.bin").write_bytes(b"\x00")
    with caplog.at_level(logging.WARNING, logger="planmode"):
        run(ws, InMemorySaver())
    assert (ws / "notes.md").read_text() == "two\n"  # the run itself is unchanged
    assert any("not recorded" in r.getMessage() and "InMemorySaver" in r.getMessage() for r in caplog.records)


def test_an_async_run_on_async_sqlite_records_its_changes(tmp_path: Path) -> None:
    import asyncio

    from planmode.persistence import aopen_checkpointer

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "data.bin").write_bytes(b"\x00")
    db = tmp_path / "runs.sqlite"

    async def main() -> None:
        async with aopen_checkpointer(db) as saver:
            model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
            graph = build_graph(model, executor=executor, tools=workspace_tools(ws), checkpointer=saver)
            await graph.ainvoke({"messages": [("user", "Write and then edit the notes")]}, cfg("t"))
            payload = (await graph.aget_state(cfg("t"))).interrupts[0].value
            await graph.ainvoke(Command(resume={"action": "approve", "revision": payload["revision"]}), cfg("t"))

    asyncio.run(main())
    assert [(c.step_id, c.rel) for c in ChangeStore(db).changes("t")] == [
        ("a", "notes.md"),
        ("a", HOSTILE),
        ("b", "notes.md"),
        ("b", "data.bin"),
    ]
