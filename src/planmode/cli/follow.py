"""Following a run from another terminal: ``planmode show THREAD --follow`` and ``planmode watch [THREAD]``
(registered in `planmode.cli.app`).

The follower only reads: it polls the thread's checkpoints (`POLL_SECONDS`), prints each new one as ``history``
labels it, with its number, and stops when the run is no longer running (finished, waiting for a human, paused,
or stopped), with the run's exit code; Ctrl-C stops the follower, never the run (exit 130).

Start-up: this module imports click, typer and rich only; the LangGraph stack is imported when a run is followed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from planmode.cli.common import (
    EXIT_CODES,
    EXIT_INTERRUPTED,
    DbOpt,
    cfg_of,
    complete_thread,
    database_of,
    friendly,
    graph_on,
)
from planmode.cli.ui import console
from planmode.errors import PlanModeError

__all__ = ["POLL_SECONDS", "follow_run", "watch"]

#: How often the follower reads the database.
POLL_SECONDS = 0.5
#: The exit code of a run that stopped before it finished (`planmode.cli.runlist.run_state` "interrupted").
_STOPPED = {"interrupted": EXIT_INTERRUPTED}


def follow_run(graph: Any, path: str, thread: str, *, poll: float = POLL_SECONDS) -> int:
    """Print the run's state and plan, then each new snapshot as it lands, until the run is no longer running;
    returns the exit code its own command would have (`EXIT_CODES`; 130 when it stopped before it finished)."""
    from planmode.cli.drive import require_thread
    from planmode.cli.inspect import _checkpoint_ids, _holders, snapshot_numbers
    from planmode.cli.runlist import STATE_LABELS, interrupt_type, run_state
    from planmode.persistence.snapshots import list_snapshots

    require_thread(graph, cfg_of(thread))
    console.print(Text(f"following {thread} (Ctrl-C stops following; the run goes on)", style="dim"), soft_wrap=True)
    seen: set[str] = set()
    shown_plan: int | None = None
    first = True
    try:
        while True:
            ids = _checkpoint_ids(graph, thread)
            new = [cid for cid in ids if cid not in seen]
            state = graph.get_state(cfg_of(thread))
            if new:
                numbers = snapshot_numbers(ids)
                # At the start, the head alone says where the run is; after that, every new snapshot, oldest first.
                snaps = list_snapshots(graph, thread, limit=1 if first else len(new))
                for snap in reversed(snaps):
                    if snap.plan_version and snap.plan_version != shown_plan:
                        shown_plan = snap.plan_version
                        _print_plan(state.values.get("plan") if snap is snaps[0] else None, graph, snap)
                    line = Text(f"#{numbers.get(snap.checkpoint_id, '?')} ", style="dim")
                    line.append(snap.label)
                    console.print(line, soft_wrap=True)
                seen.update(ids)
                first = False
            status = str(state.values.get("status"))
            interrupt = interrupt_type(state.interrupts) if state.interrupts else None
            what = run_state(status, interrupt, thread in _holders(graph.checkpointer, path))
            if what != "running":
                console.print(Text.assemble(("state: ", ""), (STATE_LABELS.get(what, what), "bold")))
                return EXIT_CODES.get(what, _STOPPED.get(what, 1))
            time.sleep(poll)
    except KeyboardInterrupt:
        console.print(Text("\nStopped following; the run is not affected.", style="dim"))
        return EXIT_INTERRUPTED


def _print_plan(plan: Any, graph: Any, snap: Any) -> None:
    """The plan of a snapshot, one line per step: its id and what it does."""
    if plan is None or getattr(plan, "version", None) != snap.plan_version:
        plan = graph.get_state(snap.config).values.get("plan")
    steps = list(getattr(plan, "steps", []) or [])
    if not steps:
        return
    console.print(Text(f"plan v{snap.plan_version}: {getattr(plan, 'title', '') or ''}".rstrip(": "), style="bold"))
    for s in steps:
        after = f" (after {', '.join(s.dependencies)})" if s.dependencies else ""
        console.print(Text(f"  {s.id}: {s.description}{after}"), soft_wrap=True)


def latest_run(graph: Any, path: str, folder: Path) -> str:
    """The thread `watch` follows when none is named: the newest running run whose workspace is ``folder`` or
    holds it, else the newest run of that workspace; `PlanModeError` when it has none in ``path``."""
    from planmode.cli.inspect import _runs
    from planmode.context import settings_dict

    here = folder.resolve()
    found: list[tuple[str, str]] = []
    for row in _runs(path, wanted=None, limit=None):  # newest first
        if row.checkpoint_ns:
            continue
        settings = settings_dict(graph.get_state(cfg_of(row.thread_id)).values.get("settings"))
        workspace = settings.get("workspace")
        if workspace and (here == Path(workspace) or Path(workspace) in here.parents):
            found.append((str(row.thread_id), str(row.state)))
    for thread, state in found:
        if state == "running":
            return thread
    if found:
        return found[0][0]
    raise PlanModeError(f"no run of this workspace ({here}) in {path}: name the thread (see `planmode ls`)")


@friendly
def watch(
    thread: Annotated[
        str | None,
        typer.Argument(
            help="Thread id (default: the running run of this workspace, the current folder, else its latest run).",
            metavar="THREAD",
            show_default=False,
            autocompletion=complete_thread,
        ),
    ] = None,
    db: DbOpt = None,
) -> None:
    """Follow a run as it goes (the same as `show THREAD --follow`): its plan, then each new snapshot, until it
    finishes or waits for a human; read-only. Exits with the run's exit code."""
    path = database_of(db, thread)
    graph = graph_on(path)
    chosen = thread or latest_run(graph, path, Path.cwd())
    raise typer.Exit(follow_run(graph, path, chosen))
