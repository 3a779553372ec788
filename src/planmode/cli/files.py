"""``planmode diff`` and ``planmode rollback --files``: what a step changed in the workspace, and undoing it.

The changes are recorded by the workspace tools in the run's SQLite database (`planmode.persistence.changes`).
At a terminal a diff is drawn with rich, every line a `Text` (file contents are never read as markup, and the
console shows control characters as escapes); piped or redirected it is written as it is, a patch that
``git apply`` or ``patch`` reads. Imports only typer and rich at start-up (`planmode --help` stays fast).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from planmode.cli.common import ThreadArg
from planmode.cli.ui import console
from planmode.errors import PlanModeError

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from planmode.persistence.changes import ChangeStore

__all__ = ["changed_by_step", "diff", "one_line", "restore_files", "restored_note"]

#: How `restore_files` marks a recorded path it left alone (not the run's to restore).
_LEFT = " (left as it is: "
_NOT_RECORDED = "file changes are recorded only in a SQLite database (planmode's default); this run's database is {db}"


def one_line(name: str) -> str:
    """A file name on one line of a list: a newline or a tab in it shown as an escape (the console shows every
    other control character as one)."""
    return name.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def _store(db: str) -> ChangeStore:
    from planmode.persistence.changes import ChangeStore

    if db.startswith(("postgres://", "postgresql://")):
        from planmode.persistence.checkpointers import _redact

        raise PlanModeError(_NOT_RECORDED.format(db=_redact(db)))
    return ChangeStore(db)


def _run_of(values: Any) -> str | None:
    from planmode.state.approvals import current_run

    return current_run((values or {}).get("approvals"))


def diff(
    thread: ThreadArg,
    step: Annotated[
        str | None, typer.Argument(help="A step id: only its changes (default: the whole run).", metavar="STEP")
    ] = None,
    db: Annotated[
        str | None,
        typer.Option(help="Database file (default: .planmode/planmode.sqlite here or in a parent folder)."),
    ] = None,
) -> None:
    """Show what the run (or one step) changed in the workspace, as a unified diff."""
    from planmode.cli.common import cfg_of as _cfg
    from planmode.cli.common import database_of as _database
    from planmode.cli.common import graph_on as _graph
    from planmode.cli.drive import require_thread
    from planmode.persistence.changes import file_diffs

    path = _database(db, thread)
    store = _store(path)
    graph = _graph(path)
    state = require_thread(graph, _cfg(thread))
    run = _run_of(state.values)
    changes = store.changes(thread, run_id=run, step_id=step)
    if not changes:
        what = f"step {step!r}" if step else "this run"
        console.print(Text(f"No recorded file changes for {what} of thread {thread!r}."))
        return
    diffs = file_diffs(store, changes)
    if not console.is_terminal:
        for d in diffs:
            sys.stdout.write(d.unified())
        sys.stdout.flush()
        return
    for d in diffs:
        steps = ", ".join(d.step_ids)
        console.print(Text(f"{one_line(d.rel)} ({d.kind}, step {steps})", style="bold"))
        for line in d.unified().splitlines():
            console.print(_styled(line), soft_wrap=True)


def _styled(line: str) -> Text:
    if line.startswith(("---", "+++")):
        style = "bold"
    elif line.startswith("@@"):
        style = "cyan"
    elif line.startswith("+"):
        style = "green"
    elif line.startswith("-"):
        style = "red"
    else:
        style = ""
    return Text(line, style=style)


def changed_by_step(graph: Any, cfg: Any) -> dict[str, list[str]]:
    """The files each step of the thread's current run changed (recorded, not undone): the steps in the order
    they made changes, each step's files by path (its tool calls of one turn run in parallel, so the order of
    its writes varies); empty without a SQLite database."""
    from planmode.persistence.changes import ChangeStore, changes_database

    db = changes_database(graph.checkpointer)
    if db is None:
        return {}
    store = ChangeStore(db)
    values = graph.get_state(cfg).values
    changes = store.changes(str(cfg["configurable"]["thread_id"]), run_id=_run_of(values))
    out: dict[str, dict[str, str]] = {}
    for change in changes:
        files = out.setdefault(change.step_id, {})
        if change.rel not in files:  # the step's first change of the file says whether the step created it
            name = one_line(change.rel)
            files[change.rel] = f"{name} (created)" if change.before_sha is None else name
    return {step: [files[rel] for rel in sorted(files)] for step, files in out.items()}


def restore_files(graph: Any, db: str, thread: str, target: str | int) -> list[str]:
    """Put the workspace files back as they were at snapshot ``target`` (a checkpoint id, or N back): each file
    the run changed since gets its content of then, a file a step created since is deleted. Nothing is changed
    when a file changed outside the run since planmode last wrote it: `PlanModeError` lists them.

    Files are restored only in the run's own workspace, taken from the thread's stored settings (never from the
    journal): a recorded path outside it, behind a symlink, or in planmode's or git's data is left as it is and
    listed with why; the rest is restored (`planmode.persistence.changes.restore_plan`).

    Returns the files restored (relative to the workspace), each with what was done, then the paths left alone."""
    from planmode.persistence.changes import restore, restore_plan

    store = _store(db)
    settings = _settings_of(graph, thread)
    workspace = getattr(settings, "workspace", None)
    if not workspace:
        raise PlanModeError(
            f"thread {thread!r} has no workspace in its settings, so no file is the run's to restore; roll back "
            "without --files"
        )
    if isinstance(target, int):
        states = list(graph.get_state_history(_thread_cfg(thread), limit=target + 1))
        if len(states) <= target:
            raise PlanModeError(f"thread {thread!r} has {len(states)} snapshot(s); cannot go {target} back")
        checkpoint_id = str(states[target].config["configurable"]["checkpoint_id"])
    else:
        checkpoint_id = target
    allow_git = getattr(settings, "allow_git_writes", False) is True
    plan = restore_plan(store, thread, checkpoint_id, workspace=workspace, allow_git_writes=allow_git)
    if plan.refused:
        listed = "; ".join(f"{one_line(rel)} ({why})" for rel, why in plan.refused.items())
        raise PlanModeError(
            f"nothing was rolled back: {len(plan.refused)} file(s) cannot be restored: {listed}. Put them back as "
            "planmode left them (see `planmode diff`), or roll back without --files"
        )
    deleted = {plan.rel[p] for p in plan.deletions}
    restored = restore(store, plan)
    done = [
        f"{one_line(rel)} (deleted: created after that point)" if rel in deleted else one_line(rel) for rel in restored
    ]
    return done + [f"{one_line(path)}{_LEFT}{why})" for path, why in plan.skipped.items()]


def _settings_of(graph: Any, thread: str) -> Any:
    """The thread's stored settings (a `PlanModeContext`), or None."""
    from planmode.context import PlanModeContext, settings_from

    values = graph.get_state(_thread_cfg(thread)).values or {}
    settings = settings_from(values.get("settings"))
    return settings if isinstance(settings, PlanModeContext) else None


def _thread_cfg(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def restored_note(restored: list[str] | None) -> Text:
    """The line `rollback` prints about the workspace files."""
    if restored is None:
        return Text(
            "Workspace files are not restored (checkpoints hold the run, not your files): add --files to restore "
            "the files the run changed since.",
            style="yellow",
        )
    done = [r for r in restored if _LEFT not in r]
    left = [r for r in restored if _LEFT in r]
    if not restored:
        return Text("Workspace files: nothing to restore (the run changed no file since then).")
    note = Text("Restored workspace files: ") + Text(", ".join(done) or "none")
    if left:
        note += Text("\nNot the run's to restore, left as they are: ", style="yellow") + Text("; ".join(left))
    return note
