"""The inspection commands: ``planmode ls``, ``show``, ``history`` and ``rollback`` (registered in `planmode.cli.app`).

Start-up: this module imports click, typer and rich only; each command imports what it needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from planmode.cli.common import DbOpt, ThreadArg, cfg_of, database, friendly, graph_on, resume_command, session
from planmode.cli.ui import console
from planmode.errors import PlanModeError

__all__ = ["history", "ls", "resolve_snapshot", "rollback", "show"]


@friendly
def show(
    thread: ThreadArg,
    db: DbOpt = None,
    mermaid: Annotated[bool, typer.Option("--mermaid", help="Print the plan as a Mermaid diagram only.")] = False,
    png: Annotated[
        Path | None, typer.Option(help="Draw the plan into this PNG file, offline (pip install 'planmode[png]').")
    ] = None,
) -> None:
    """Show a run's plan, statuses and result."""
    from planmode.cli.drive import require_thread, show_result
    from planmode.cli.gates import print_approvals, show_picture

    graph = graph_on(database(db, create=False))
    state = require_thread(graph, cfg_of(thread))
    if mermaid or png is not None:
        show_picture(state.values.get("plan"), mermaid=mermaid, png=png)
        return
    settings = state.values.get("settings") or {}
    console.print(Text.assemble("status: ", (str(state.values.get("status")), "bold")))
    if settings.get("workspace"):
        console.print(Text(f"workspace: {settings['workspace']}"))
    show_result(graph, cfg_of(thread))
    print_approvals(state.values.get("approvals"))


_LS_STYLE = {
    "awaiting_approval": "yellow",
    "running": "cyan",
    "completed": "green",
    "failed": "red",
    "cancelled": "magenta",
    "answered": "green",
    "planning": "cyan",
    "model_unavailable": "red",
    "over_budget": "yellow",
}


@friendly
def ls(
    db: DbOpt = None,
    status: Annotated[
        str | None,
        typer.Option(help="Only runs with this status: awaiting_approval, running, completed, failed, cancelled, ..."),
    ] = None,
    limit: Annotated[int, typer.Option(help="At most this many runs (0: all).", min=0)] = 50,
) -> None:
    """List the runs in the database, newest first."""
    from planmode.persistence import open_checkpointer
    from planmode.persistence.runs import list_runs
    from planmode.text import clip

    path = database(db, create=False)
    saver = open_checkpointer(path)
    try:
        runs = list_runs(saver, status=status, limit=limit or None)
    except ValueError as exc:  # an unknown status: a user error, one line
        raise PlanModeError(str(exc)) from None
    finally:
        saver.conn.close()
    shown = session.get("db", path)  # a PostgreSQL URL is not printed (it may hold a password)
    table = Table(title=Text(f"Runs in {shown} (newest first)"), title_justify="left")
    for name, style in (
        ("thread", "bold"),
        ("status", ""),
        ("goal", ""),
        ("plan", "dim"),
        ("steps", ""),
        ("updated", "dim"),
    ):
        table.add_column(
            name, style=style, justify="right" if name == "plan" else "left", no_wrap=name == "thread", overflow="fold"
        )
    for r in runs:
        thread = Text(r.thread_id)
        if r.checkpoint_ns:
            thread.append(f"\n↳ {r.checkpoint_ns.split(':')[0]} (nested)", style="dim")
        steps = (
            f"{r.steps.get('done', 0)}/{r.total_steps} done"
            + "".join(f", {r.steps[k]} {k}" for k in ("failed", "running", "blocked") if r.steps.get(k))
            if r.total_steps
            else "-"
        )
        goal = clip(r.goal, 70, fold=False)
        updated = r.updated_at.astimezone().strftime("%Y-%m-%d %H:%M:%S") if r.updated_at else ""
        table.add_row(
            thread,
            Text(r.status.replace("_", " "), style=_LS_STYLE.get(r.status, "")),
            Text(goal),
            Text(f"v{r.plan_version}" if r.plan_version else "-"),
            Text(steps),
            Text(updated),
        )
    console.print(table if runs else Text("no runs" + (f" with status {status}" if status else "")))


def _checkpoint_ids(graph: Any, thread: str) -> list[str]:
    """Every checkpoint id of the thread's root namespace, newest first."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    saver = graph.checkpointer
    if isinstance(saver, SqliteSaver):
        with saver.cursor(transaction=False) as cur:
            cur.execute(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
                "ORDER BY checkpoint_id DESC",
                (thread,),
            )
            return [str(row[0]) for row in cur.fetchall()]
    return [
        str(t.config["configurable"]["checkpoint_id"])
        for t in saver.list({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    ]


@friendly
def history(
    thread: ThreadArg,
    db: DbOpt = None,
    limit: Annotated[int, typer.Option(help="At most this many snapshots.", min=1)] = 50,
) -> None:
    """List a run's snapshots, newest first. The checkpoint column is a unique prefix `rollback` accepts."""
    from planmode.cli.drive import require_thread
    from planmode.cli.ui import snapshot_table, unique_prefixes
    from planmode.persistence.snapshots import list_snapshots

    graph = graph_on(database(db, create=False))
    require_thread(graph, cfg_of(thread))
    snaps = list_snapshots(graph, thread, limit=limit)
    prefixes = unique_prefixes(_checkpoint_ids(graph, thread))
    console.print(snapshot_table(snaps, prefixes))


def resolve_snapshot(ids: list[str], given: str) -> str | int:
    """A snapshot argument: N (snapshots back, fewer than 8 digits), else a checkpoint id or a unique prefix."""
    if given.isdigit() and len(given) < 8:
        return int(given)
    if given in ids:
        return given
    matches = [i for i in ids if i.startswith(given)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise PlanModeError(f"no snapshot {given!r} in this thread (see `planmode history`)")
    from planmode.cli.ui import unique_prefixes

    shown = ", ".join(unique_prefixes(ids)[m] for m in matches[:5])
    raise PlanModeError(
        f"snapshot prefix {given!r} is ambiguous: it matches {len(matches)} snapshots ({shown}"
        + (", ..." if len(matches) > 5 else "")
        + "); give more characters"
    )


@friendly
def rollback(
    thread: ThreadArg,
    snapshot: Annotated[
        str, typer.Argument(help="A checkpoint id or unique prefix from `history`, or N (N snapshots back).")
    ],
    db: DbOpt = None,
) -> None:
    """Roll a run back to a snapshot (history is kept); `resume` continues from there. Workspace files are not
    restored."""
    from planmode.cli.drive import require_thread, show_result
    from planmode.persistence.lease import thread_lease
    from planmode.persistence.snapshots import rollback as do_rollback

    path = database(db, create=False)
    graph = graph_on(path)
    require_thread(graph, cfg_of(thread))
    target = resolve_snapshot(_checkpoint_ids(graph, thread), snapshot)
    with thread_lease(graph.checkpointer, thread):  # not under a run: "thread X is already running (...)"
        do_rollback(graph, thread, target)
    console.print(Text(f"Rolled back {thread} to {snapshot}. The history is kept."))
    console.print(Text("Workspace files are not restored: checkpoints hold the run, not your files.", style="yellow"))
    console.print(Text(f"Continue with: {resume_command(thread, path)}"), soft_wrap=True)
    show_result(graph, cfg_of(thread))
