"""The inspection commands: ``planmode ls``, ``show``, ``history`` and ``rollback`` (registered in `planmode.cli.app`).

Start-up: this module imports click, typer and rich only; each command imports what it needs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from planmode.cli.common import (
    DbOpt,
    ThreadArg,
    cfg_of,
    database,
    database_of,
    databases,
    friendly,
    graph_on,
    resume_command,
    session,
)
from planmode.cli.ui import console
from planmode.errors import PlanModeError

__all__ = ["history", "ls", "resolve_snapshot", "rollback", "show", "snapshot_numbers"]


# -- what a run is, and what to do next -------------------------------------------------------------------------


def next_command(state: str, thread: str, db: str, *, nested: bool = False) -> str | None:
    """The exact command that continues a run in ``state`` (`planmode.cli.runlist.RUN_STATES`); None when nothing
    continues it (it runs now, it is finished, or it is nested in a parent agent's run)."""
    if nested or state == "running" or state in _FINISHED:
        return None
    return resume_command(thread, db)


def _what_next(state: str, thread: str, db: str, holder: str | None) -> str:
    """The ``next:`` line of `show`: what to do with a run in ``state``, with the exact command."""
    resume = resume_command(thread, db)
    if state == "running":
        watch = resume_command(thread, db, "watch")
        return f"it is running now ({holder or 'another process'}); watch it with: {watch}"
    if state == "interrupted":
        return f"it stopped before it finished; continue it with: {resume}"
    if state == "awaiting_approval":
        return f"approve or change the plan with: {resume}"
    if state == "over_budget":
        return f"raise the budget with: {resume} --max-tokens N (or --max-cost X); stop it with: {resume} --stop"
    if state == "model_unavailable":
        return f"try the model again with: {resume} (or pass --base-url URL / --model NAME)"
    follow = _follow_up_command(thread, db)
    if state == "failed":
        snapshots = resume_command(thread, db, "history")
        return f"it failed; see its snapshots with: {snapshots}, or give it a follow-up task with: {follow}"
    return f"nothing, it is finished; give it a follow-up task with: {follow}"


def _follow_up_command(thread: str, db: str) -> str:
    """``planmode run TASK --follow-up THREAD`` (with ``--db`` when needed), TASK being a placeholder."""
    return resume_command(thread, db, "run TASK --follow-up")


_FINISHED = ("completed", "failed", "answered", "cancelled")


def _holders(saver: Any, db: str) -> dict[str, str]:
    """The threads a live process runs now (its lease), with the holder; empty when that cannot be read."""
    from planmode.persistence.rows import HELD_LEASES_SQL, lease_holders, sqlite_lease_holders

    if not db.startswith(("postgres://", "postgresql://")):
        from planmode.cli.runlist import connect_read_only

        conn = connect_read_only(db)
        try:
            return sqlite_lease_holders(conn)
        finally:
            conn.close()
    try:
        from psycopg.rows import tuple_row

        from planmode.persistence._savers import pg_connection

        with pg_connection(saver) as conn, conn.cursor(row_factory=tuple_row) as cur:
            cur.execute(HELD_LEASES_SQL)
            return lease_holders(cur.fetchall())
    except Exception:  # no lease table yet, or no access: nobody is known to hold one
        return {}


def _pending_interrupt(pending_writes: Any) -> str | None:
    """The ``type`` of the interrupt pending in a checkpoint's writes (None when none is, or it was answered)."""
    from planmode.cli.runlist import interrupt_type

    writes = list(pending_writes or [])
    if any(w[1] == "__resume__" for w in writes):
        return None
    values: list[Any] = []
    for w in writes:
        if w[1] == "__interrupt__":
            values.extend(w[2] if isinstance(w[2], list | tuple) else [w[2]])
    return interrupt_type(values) if values else None


def _rows_from_saver(path: str, wanted: frozenset[str] | None, limit: int | None) -> list[Any]:
    """The runs through LangGraph's saver (PostgreSQL, or a SQLite file holding checkpoints that only LangGraph's
    serializer reads), each with its state."""
    from planmode.cli.runlist import RunRow, matches, run_state
    from planmode.persistence import open_checkpointer
    from planmode.persistence.runs import list_runs

    saver = open_checkpointer(path)
    try:
        holders = _holders(saver, path)
        out: list[Any] = []
        for r in list_runs(saver, limit=None):
            if limit is not None and len(out) >= limit:
                break
            saved = saver.get_tuple(r.config)
            interrupt = _pending_interrupt(saved.pending_writes if saved is not None else None)
            row = RunRow(
                thread_id=r.thread_id,
                checkpoint_ns=r.checkpoint_ns,
                checkpoint_id=r.checkpoint_id,
                goal=r.goal,
                status=r.status,
                state=run_state(r.status, interrupt, r.thread_id in holders),
                plan_version=r.plan_version,
                steps=dict(r.steps),
                updated_at=r.updated_at,
                title=r.title,
                error=r.error,
            )
            if matches(row, wanted):
                out.append(row)
        return out
    finally:
        saver.conn.close()


def _runs(path: str, wanted: frozenset[str] | None, limit: int | None) -> list[Any]:
    """The runs of the database, newest first: a SQLite file is read without LangGraph when its checkpoints allow
    (`planmode ls` then starts in the time of click + rich)."""
    from planmode.cli.runlist import sqlite_runs

    if not path.startswith(("postgres://", "postgresql://")):
        try:
            return sqlite_runs(path, wanted=wanted, limit=limit)
        except LookupError:  # checkpoints only LangGraph's serializer reads
            pass
    return _rows_from_saver(path, wanted, limit)


def _print_json(data: Any) -> None:
    """``--json`` output: one JSON document on stdout (text from a model or a person is data in it)."""
    import json

    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")
    sys.stdout.flush()


# -- the commands ---------------------------------------------------------------------------------------------

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts (keys: docs/cli.md).")]


@friendly
def show(
    thread: ThreadArg,
    db: DbOpt = None,
    mermaid: Annotated[bool, typer.Option("--mermaid", help="Print the plan as a Mermaid diagram only.")] = False,
    png: Annotated[
        Path | None, typer.Option(help="Draw the plan into this PNG file, offline (pip install 'planmode[png]').")
    ] = None,
    as_json: JsonOpt = False,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-f",
            help="Follow the run as it goes (as `planmode watch`): each new snapshot, until it finishes or waits for "
            "a human; read-only.",
        ),
    ] = False,
) -> None:
    """Show a run: what it is and what to do next, its goal, plan, each step's result or error, and its answer."""
    from planmode.cli.drive import require_thread, show_result
    from planmode.cli.gates import print_approvals, show_picture
    from planmode.cli.runlist import STATE_LABELS, interrupt_type, iso, run_state, when
    from planmode.persistence.rows import parse_ts

    path = database_of(db, thread)
    graph = graph_on(path)
    if follow:
        from planmode.cli.follow import follow_run

        raise typer.Exit(follow_run(graph, path, thread))
    state = require_thread(graph, cfg_of(thread))
    if mermaid or png is not None:
        show_picture(state.values.get("plan"), mermaid=mermaid, png=png)
        return
    values = state.values
    status = str(values.get("status"))
    holders = _holders(graph.checkpointer, path)
    interrupt = interrupt_type(state.interrupts) if state.interrupts else None
    what = run_state(status, interrupt, thread in holders)
    from planmode.context import settings_dict

    settings = settings_dict(values.get("settings"))
    plan = values.get("plan")
    steps = list(getattr(plan, "steps", []) or []) if getattr(plan, "version", 0) else []
    updated = parse_ts(state.created_at)
    follows = _follows(graph, thread)
    if as_json:
        messages = values.get("messages") or []
        answer = messages[-1].content if messages and status in _FINISHED else None
        _print_json(
            {
                "thread_id": thread,
                "state": what,
                "status": status,
                "goal": values.get("goal") or getattr(plan, "goal", "") or "",
                "title": getattr(plan, "title", "") if steps else "",
                "plan_version": getattr(plan, "version", None) if steps else None,
                "workspace": settings.get("workspace"),
                "updated_at": iso(updated),
                "next": next_command(what, thread, path),
                "error": values.get("error"),
                "answer": answer if isinstance(answer, str) or answer is None else str(answer),
                "follows": follows,
                "steps": [
                    {
                        "id": s.id,
                        "description": s.description,
                        "status": s.status.value,
                        "attempts": s.attempts,
                        "result": s.result,
                        "error": s.error,
                    }
                    for s in steps
                ],
            }
        )
        return
    console.print(
        Text.assemble(("state: ", ""), (STATE_LABELS.get(what, what), "bold"), (f"  (status {status})", "dim"))
    )
    console.print(Text("next: " + _what_next(what, thread, path, holders.get(thread))), soft_wrap=True)
    goal = values.get("goal") or getattr(plan, "goal", "")
    if goal:
        console.print(Text(f"goal: {goal}"), soft_wrap=True)
    if follows:
        console.print(Text(f"follows: thread {follows['thread_id']} (its conversation carried over)"), soft_wrap=True)
    if settings.get("workspace"):
        console.print(Text(f"workspace: {settings['workspace']}"), soft_wrap=True)
    if updated is not None:
        console.print(Text(f"updated: {when(updated)}"))
    show_result(graph, cfg_of(thread))
    if steps:
        console.print(Text("\nSteps", style="bold"))
        for s in steps:
            line = Text(f"- {s.id} ({_step_word(s.status.value, what)}")
            line.append(f", {s.attempts} attempts)" if s.attempts > 1 else ")")
            if s.error:
                line.append(" error: ", style="red")
                line.append(s.error)
            elif s.result:
                line.append(" result: ")
                line.append(s.result)
            console.print(line, soft_wrap=True)
    print_approvals(values.get("approvals"))


def _follows(graph: Any, thread: str) -> dict[str, str] | None:
    """The run a follow-up thread continues from (``run --follow-up``: the fork record of its first checkpoint)."""
    from planmode.persistence.snapshots import FORK_METADATA_KEY

    ids = _checkpoint_ids(graph, thread)
    if not ids:
        return None
    saved = graph.checkpointer.get_tuple(
        {"configurable": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": ids[-1]}}
    )
    origin = saved.metadata.get(FORK_METADATA_KEY) if saved is not None else None
    if not isinstance(origin, dict) or not origin.get("thread_id"):
        return None
    return {"thread_id": str(origin["thread_id"]), "checkpoint_id": str(origin.get("checkpoint_id") or "")}


_SHOWN_STEPS = ("failed", "running", "blocked")


def _step_word(status: str, state: str) -> str:
    """A step status as `ls` says it: a step left ``running`` by a run that runs no more was interrupted."""
    return "interrupted" if status == "running" and state != "running" else status


_LS_STYLE = {
    "awaiting_approval": "yellow",
    "running": "cyan",
    "interrupted": "yellow",
    "completed": "green",
    "failed": "red",
    "cancelled": "magenta",
    "answered": "green",
    "model_unavailable": "red",
    "over_budget": "yellow",
}


@friendly
def ls(
    db: DbOpt = None,
    status: Annotated[
        str | None,
        typer.Option(
            help="Only runs in this state or with this status: running, interrupted, awaiting_approval, over_budget, "
            "model_unavailable, completed, answered, failed, cancelled (several: comma-separated)."
        ),
    ] = None,
    limit: Annotated[int, typer.Option(help="At most this many runs (0: all).", min=0)] = 50,
    as_json: JsonOpt = False,
) -> None:
    """List the runs in the database, newest first: what each is (running, interrupted, awaiting approval...)."""
    from planmode.cli.runlist import iso, wanted_states

    try:
        wanted = wanted_states(status)
    except ValueError as exc:  # an unknown status: a user error, one line
        raise PlanModeError(str(exc)) from None
    found: list[tuple[str, str, list[Any]]] = []  # (shown, path, runs) of each database
    for candidate in databases(db):
        path = database(candidate, create=False)
        shown = session.get("db", path)  # a PostgreSQL URL is not printed (it may hold a password)
        found.append((shown, path, _runs(path, wanted, limit or None)))
    if as_json:
        _print_json(
            {
                "database": found[0][0],
                "databases": [shown for shown, _, _ in found],
                "runs": [
                    {
                        "database": shown,
                        "thread_id": r.thread_id,
                        "checkpoint_ns": r.checkpoint_ns,
                        "checkpoint_id": r.checkpoint_id,
                        "state": r.state,
                        "status": r.status,
                        "goal": r.goal,
                        "title": r.title,
                        "plan_version": r.plan_version,
                        "steps": dict(r.steps),
                        "total_steps": r.total_steps,
                        "updated_at": iso(r.updated_at),
                        "error": r.error,
                        "next": next_command(r.state, r.thread_id, path, nested=bool(r.checkpoint_ns)),
                    }
                    for shown, path, runs in found
                    for r in runs
                ],
            }
        )
        return
    for shown, _, runs in found:
        _print_runs(shown, runs, status)


def _print_runs(shown: str, runs: list[Any], status: str | None) -> None:
    """One database's runs as `ls` prints them: a table titled with the database, or "no runs"."""
    from planmode.cli.runlist import STATE_LABELS, when
    from planmode.text import clip

    table = Table(title=Text(f"Runs in {shown} (newest first; times in UTC)"), title_justify="left")
    for name, style in (
        ("thread", "bold"),
        ("state", ""),
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
            + "".join(f", {r.steps[k]} {_step_word(k, r.state)}" for k in _SHOWN_STEPS if r.steps.get(k))
            if r.total_steps
            else "-"
        )
        goal = clip(r.goal, 70, fold=False)
        table.add_row(
            thread,
            Text(STATE_LABELS.get(r.state, r.state), style=_LS_STYLE.get(r.state, "")),
            Text(goal),
            Text(f"v{r.plan_version}" if r.plan_version else "-"),
            Text(steps),
            Text(when(r.updated_at)),
        )
    console.print(table if runs else Text(f"no runs in {shown}" + (f" with status {status}" if status else "")))


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


def snapshot_numbers(ids: list[str]) -> dict[str, int]:
    """The number `history` shows for each checkpoint of a thread and `rollback` takes: its place in the thread's
    whole lineage, oldest first, from 1. Checkpoints are only ever added (a rollback adds a copy as the new head),
    so a number once shown names the same checkpoint for good."""
    return {cid: n for n, cid in enumerate(sorted(ids), start=1)}


@friendly
def history(
    thread: ThreadArg,
    db: DbOpt = None,
    limit: Annotated[int, typer.Option(help="At most this many snapshots.", min=1)] = 50,
    as_json: JsonOpt = False,
) -> None:
    """List a run's snapshots, newest first (times in UTC). The # column is a number that never changes, and the
    checkpoint column a unique prefix: `rollback` accepts either."""
    from planmode.cli.drive import require_thread
    from planmode.cli.runlist import iso
    from planmode.cli.ui import snapshot_table, table_width, unique_prefixes
    from planmode.persistence.snapshots import list_snapshots

    graph = graph_on(database_of(db, thread))
    require_thread(graph, cfg_of(thread))
    snaps = list_snapshots(graph, thread, limit=limit)
    ids = _checkpoint_ids(graph, thread)
    prefixes = unique_prefixes(ids)
    numbers = snapshot_numbers(ids)
    if as_json:
        _print_json(
            {
                "thread_id": thread,
                "snapshots": [
                    {
                        "number": numbers.get(snap.checkpoint_id),
                        "back": n,
                        "checkpoint_id": snap.checkpoint_id,
                        "prefix": prefixes.get(snap.checkpoint_id, snap.checkpoint_id),
                        "parent_id": snap.parent_id,
                        "created_at": iso(snap.created_at),
                        "step": snap.step,
                        "label": snap.label,
                        "status": snap.status,
                        "plan_version": snap.plan_version,
                        "steps": dict(snap.counts or {}),
                        "next": list(snap.next),
                        "awaiting_approval": snap.awaiting_approval,
                        "source": snap.source,
                    }
                    for n, snap in enumerate(snaps)
                ],
            }
        )
        return
    console.print(snapshot_table(snaps, prefixes, numbers), width=table_width())


def resolve_snapshot(ids: list[str], given: str) -> str:
    """A snapshot argument as a checkpoint id: N (the # `history` shows, `snapshot_numbers`; fewer than 8 digits),
    else a checkpoint id or a unique prefix."""
    if given.isdigit() and len(given) < 8:
        by_number = {n: cid for cid, n in snapshot_numbers(ids).items()}
        if int(given) not in by_number:
            raise PlanModeError(
                f"no snapshot #{int(given)} in this thread: it has #1 to #{len(ids)} (see `planmode history`)"
            )
        return by_number[int(given)]
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
        str,
        typer.Argument(help="A # or a checkpoint id (or unique prefix) from `history`.", metavar="SNAPSHOT"),
    ],
    db: DbOpt = None,
    files: Annotated[bool, typer.Option("--files", help="Also restore the workspace files the run changed.")] = False,
) -> None:
    """Roll a run back to a snapshot (history is kept); `resume` continues from there. With --files, the workspace
    files too (refused, with the list, when one changed outside the run)."""
    from planmode.cli.drive import require_thread, show_result
    from planmode.cli.files import restore_files, restored_note
    from planmode.persistence.lease import thread_lease
    from planmode.persistence.snapshots import rollback as do_rollback

    path = database_of(db, thread)
    graph = graph_on(path)
    require_thread(graph, cfg_of(thread))
    target = resolve_snapshot(_checkpoint_ids(graph, thread), snapshot)
    with thread_lease(graph.checkpointer, thread):  # not under a run: "thread X is already running (...)"
        restored = restore_files(graph, path, thread, target) if files else None
        do_rollback(graph, thread, target)
    console.print(Text(f"Rolled back {thread} to {snapshot}. The history is kept."))
    console.print(restored_note(restored))
    console.print(Text(f"Continue with: {resume_command(thread, path)}"), soft_wrap=True)
    show_result(graph, cfg_of(thread))
