"""``planmode``: run, resume, inspect and roll back plan-mode runs from a terminal."""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from planmode.cli.drive import drive, require_thread, show_result
from planmode.cli.ui import ask_approval, console, interactive
from planmode.errors import PlanModeError

__all__ = ["app", "main"]

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Plan Mode for LangGraph.")

DEFAULT_DB = os.environ.get("PLANMODE_DB", ".planmode/planmode.sqlite")
DbOpt = Annotated[str, typer.Option("--db", help="SQLite file of the runs, or a postgresql:// URL.")]


def friendly(fn: Callable[..., None]) -> Callable[..., None]:
    """User errors print one line and exit 2 (not a traceback); Ctrl-C leaves the run resumable (exit 130)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except PlanModeError as exc:
            console.print(f"[red]error:[/] {exc}")
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            console.print("\n[yellow]Interrupted. The run is checkpointed; continue it with "
                          "`planmode resume THREAD`.[/]")
            raise typer.Exit(130) from None

    return wrapper


def _cfg(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def _graph(db: str, workspace: Path | None = None) -> Any:
    from planmode.graph import build_graph
    from planmode.persistence import open_checkpointer
    from planmode.tools import workspace_tools

    db_file = [] if db.startswith(("postgres://", "postgresql://")) else [db]  # the agent cannot touch its history
    tools = workspace_tools(workspace, protected=db_file) if workspace is not None else []
    return build_graph(tools=tools, checkpointer=open_checkpointer(db))


def _approver(auto: bool) -> Any:
    def approve(payload: dict[str, Any]) -> dict[str, Any] | None:
        if auto:
            return {"action": "approve", "revision": payload["revision"]}
        if not interactive():
            console.print("[red]error:[/] the plan needs approval and this is not a terminal; "
                          "pass --auto-approve or resume from a terminal")
            return None
        return ask_approval(payload)

    return approve


@app.command()
@friendly
def run(
    task: Annotated[str, typer.Argument(help="What to do.")],
    workspace: Annotated[Path, typer.Option(help="Folder the file tools work in.")] = Path("."),
    model: Annotated[str | None, typer.Option(help="Model name (default: $PLANMODE_MODEL or gpt-4o-mini).")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible base URL (Ollama, vLLM, ...).")] = None,
    db: DbOpt = DEFAULT_DB,
    thread: Annotated[str | None, typer.Option(help="Thread id (default: a new one).")] = None,
    auto_approve: Annotated[bool, typer.Option("--auto-approve", help="Approve plans without asking.")] = False,
    max_parallel: Annotated[int, typer.Option(help="Steps executed at once.")] = 4,
    plan_mode: Annotated[str, typer.Option("--mode", help="auto, plan or direct.")] = "auto",
) -> None:
    """Plan TASK, ask for approval, execute it with live progress."""
    from planmode.context import PlanModeContext

    ctx = PlanModeContext(mode=plan_mode, approval="auto" if auto_approve else "ask",  # type: ignore[arg-type]
                          max_parallel=max_parallel)
    if model:
        ctx.model = model
    if base_url:
        ctx.base_url = base_url
    if not ctx.base_url and not os.environ.get("OPENAI_API_KEY"):
        raise PlanModeError("OPENAI_API_KEY is not set: export it, or pass --base-url for a local "
                            "OpenAI-compatible server (try `planmode demo` to see planmode without a key)")
    ws = workspace.resolve()
    if not ws.is_dir():
        raise PlanModeError(f"workspace {str(ws)!r} is not a folder")
    graph = _graph(db, ws)
    tid = thread or uuid.uuid4().hex[:12]
    console.print(f"thread [bold]{tid}[/] · database {db} · workspace {ws}")
    status = drive(graph, {"messages": [("user", task)]}, _cfg(tid), context=ctx, approver=_approver(auto_approve))
    show_result(graph, _cfg(tid))
    raise typer.Exit(0 if status in ("completed", "answered", "awaiting_approval") else 1)


@app.command()
@friendly
def resume(
    thread: Annotated[str, typer.Argument(help="Thread id.")],
    db: DbOpt = DEFAULT_DB,
    workspace: Annotated[Path, typer.Option(help="Folder the file tools work in.")] = Path("."),
    auto_approve: Annotated[bool, typer.Option("--auto-approve")] = False,
) -> None:
    """Continue a run from its last checkpoint (after Ctrl-C, a crash, or a pending approval)."""
    graph = _graph(db, workspace.resolve())
    require_thread(graph, _cfg(thread))
    status = drive(graph, None, _cfg(thread), context=None, approver=_approver(auto_approve))
    show_result(graph, _cfg(thread))
    raise typer.Exit(0 if status in ("completed", "answered", "awaiting_approval") else 1)


@app.command()
@friendly
def show(thread: Annotated[str, typer.Argument(help="Thread id.")], db: DbOpt = DEFAULT_DB) -> None:
    """Show a run's plan, statuses and result."""
    graph = _graph(db)
    state = require_thread(graph, _cfg(thread))
    console.print(f"status: [bold]{state.values.get('status')}[/]")
    show_result(graph, _cfg(thread))


_LS_STYLE = {"awaiting_approval": "yellow", "running": "cyan", "completed": "green", "failed": "red",
             "cancelled": "magenta", "answered": "green", "planning": "cyan"}


@app.command("ls")
@friendly
def ls(
    db: DbOpt = DEFAULT_DB,
    status: Annotated[str | None, typer.Option(
        help="Only runs with this status: awaiting_approval, running, completed, failed, cancelled, ...")] = None,
    limit: Annotated[int, typer.Option(help="At most this many runs (0: all).")] = 50,
) -> None:
    """List the runs in the database, newest first."""
    from rich.table import Table

    from planmode.persistence import open_checkpointer
    from planmode.runs import list_runs

    if not db.startswith(("postgres://", "postgresql://")) and not Path(db).expanduser().is_file():
        raise PlanModeError(f"no database at {db!r} (pass --db FILE, or set PLANMODE_DB)")
    saver = open_checkpointer(db)
    try:
        runs = list_runs(saver, status=status, limit=limit or None)
    except ValueError as exc:  # an unknown status: a user error, one line
        raise PlanModeError(str(exc)) from None
    finally:
        saver.conn.close()
    table = Table(title=f"Runs in {db} (newest first)", title_justify="left")
    for name, style in (("thread", "bold"), ("status", ""), ("goal", ""), ("plan", "dim"), ("steps", ""),
                        ("updated", "dim")):
        table.add_column(name, style=style, justify="right" if name == "plan" else "left")
    for r in runs:
        thread = r.thread_id + (f"\n[dim]↳ {r.checkpoint_ns.split(':')[0]} (nested)[/]" if r.checkpoint_ns else "")
        colour = _LS_STYLE.get(r.status, "")
        shown = r.status.replace("_", " ")
        steps = (f"{r.steps.get('done', 0)}/{r.total_steps} done"
                 + "".join(f", {r.steps[k]} {k}" for k in ("failed", "running", "blocked") if r.steps.get(k))
                 if r.total_steps else "-")
        goal = r.goal if len(r.goal) <= 70 else r.goal[:69] + "…"
        updated = r.updated_at.astimezone().strftime("%Y-%m-%d %H:%M:%S") if r.updated_at else ""
        table.add_row(thread, f"[{colour}]{shown}[/]" if colour else shown, goal,
                      f"v{r.plan_version}" if r.plan_version else "-", steps, updated)
    console.print(table if runs else "no runs" + (f" with status {status}" if status else ""))


@app.command()
@friendly
def history(thread: Annotated[str, typer.Argument(help="Thread id.")], db: DbOpt = DEFAULT_DB,
            limit: Annotated[int, typer.Option(help="At most this many snapshots.")] = 50) -> None:
    """List a run's snapshots, newest first."""
    from planmode.cli.ui import snapshot_table
    from planmode.snapshots import list_snapshots

    graph = _graph(db)
    require_thread(graph, _cfg(thread))
    console.print(snapshot_table(list_snapshots(graph, thread, limit=limit)))


@app.command()
@friendly
def rollback(
    thread: Annotated[str, typer.Argument(help="Thread id.")],
    snapshot: Annotated[str, typer.Argument(help="A checkpoint id from `history`, or N (N snapshots back).")],
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Roll a run back to a snapshot (history is kept); `resume` continues from there."""
    from planmode.snapshots import rollback as do_rollback

    graph = _graph(db)
    require_thread(graph, _cfg(thread))
    target: str | int = int(snapshot) if snapshot.isdigit() else snapshot
    do_rollback(graph, thread, target)
    console.print(f"rolled back [bold]{thread}[/] to {snapshot}; continue with: planmode resume {thread}")
    show_result(graph, _cfg(thread))


@app.command()
@friendly
def graph() -> None:
    """Print the graph as Mermaid."""
    from planmode.graph import mermaid

    print(mermaid())


@app.command()
@friendly
def demo(
    db: Annotated[Path | None, typer.Option("--db", help="Keep the demo database here.")] = None,
) -> None:
    """The offline demo: a scripted model, real file tools, a real SQLite file; no API key."""
    from planmode.demo import run_demo

    raise typer.Exit(run_demo(db))


def main() -> None:
    """Entry point of the ``planmode`` command."""
    app()
