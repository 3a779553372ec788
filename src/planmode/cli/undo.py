"""The last screen of a run that ended failed or cancelled: the files it changed, and the undo offered.

The undo is ``planmode rollback THREAD START --files`` to the run's start (`run_start`: the checkpoint of the
run's input): every file the run changed goes back to its content before the run (a file it created is deleted),
and the run goes back to its start (its history is kept). At a terminal it is a question (typeahead discarded,
only a typed ``y``/``yes`` undoes); elsewhere, and after a ``no``, the exact command is printed. The restore
itself is `planmode.cli.files.restore_files`, as ``rollback --files`` does it: nothing is changed when a file
changed outside the run since (the error lists them).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from planmode.cli.ask import choose, interactive
from planmode.cli.common import cfg_of, resume_command
from planmode.cli.ui import console, error_text
from planmode.errors import PlanModeError

__all__ = ["UNDONE_STATUSES", "offer_undo", "run_start", "undo_command"]

#: The run statuses whose last screen offers the undo.
UNDONE_STATUSES = ("failed", "cancelled")


def run_start(graph: Any, thread: str) -> str | None:
    """The checkpoint id of the current run's start: the newest checkpoint written from an input (a new run, or a
    follow-up's task); None when the thread has none. Resuming and answering questions write no input checkpoint,
    so it is the start of the run as the human began it."""
    for snap in graph.get_state_history(cfg_of(thread)):  # newest first
        if (snap.metadata or {}).get("source") == "input":
            return str(snap.config["configurable"]["checkpoint_id"])
    return None


def undo_command(thread: str, db: str, start: str) -> str:
    """The complete ``planmode rollback ... --files`` command back to ``start``, runnable from any folder."""
    return f"{resume_command(thread, db, 'rollback')} {start} --files"


def offer_undo(graph: Any, thread: str, db: str, status: str, *, ask: bool = True) -> bool:
    """At the end of a run that ended ``status`` (failed or cancelled) and changed files: list them and offer the
    undo (asked at a terminal unless ``ask`` is False: then the command only). True when the files were restored
    and the run rolled back to its start."""
    from planmode.cli.files import changed_by_step

    if status not in UNDONE_STATUSES:
        return False
    by_step = changed_by_step(graph, cfg_of(thread))
    start = run_start(graph, thread) if by_step else None
    if start is None:
        return False
    command = undo_command(thread, db, start)
    console.print(Text(f"\nThe run {status} and left these changes in the workspace:", style="bold yellow"))
    for step_id, files in by_step.items():
        for name in files:
            console.print(Text.assemble("  ", name, (f"  (step {step_id})", "dim")))
    if not ask or not interactive():
        console.print(Text("Undo them (and roll the run back to its start) with: ") + Text(command), soft_wrap=True)
        return False
    answer = choose("Undo these changes and roll the run back to its start?", ["yes", "no"])
    if answer != "yes":
        console.print(Text("Left as they are. Undo them later with: ") + Text(command), soft_wrap=True)
        return False
    return _undo(graph, thread, db, start, command)


def _undo(graph: Any, thread: str, db: str, start: str, command: str) -> bool:
    """``rollback --files`` to ``start``: the files first (refused whole when one changed outside the run), then
    the run, under the thread's lease."""
    from planmode.cli.files import restore_files, restored_note
    from planmode.persistence.lease import thread_lease
    from planmode.persistence.snapshots import rollback

    try:
        with thread_lease(graph.checkpointer, thread):
            restored = restore_files(graph, db, thread, start)
            rollback(graph, thread, start)
    except PlanModeError as exc:
        console.print(error_text(exc), soft_wrap=True)
        console.print(Text("Nothing was undone. The command, for later: ") + Text(command), soft_wrap=True)
        return False
    console.print(restored_note(restored))
    console.print(
        Text(f"The run is back at its start (its history is kept). Continue it with: {resume_command(thread, db)}"),
        soft_wrap=True,
    )
    return True
