"""``planmode``: run, resume, inspect and roll back plan-mode runs from a terminal.

Exit codes (a script can tell the outcomes apart):

====  ===================================================================
0     completed (or answered directly)
1     failed
2     bad input or set-up error (one line on the terminal, no traceback)
3     awaiting approval: the plan waits for a human (``planmode resume``)
4     cancelled at the approval
5     model unavailable: the run is paused, resumable (``planmode resume``, optionally at another endpoint)
6     over budget: the run is paused at its budget (``planmode resume --max-tokens N`` or ``--stop``)
130   interrupted (Ctrl-C); the run is checkpointed and resumable
====  ===================================================================
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import queue
import re
import shlex
import sqlite3
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import click
import typer
from rich.table import Table
from rich.text import Text

from planmode.cli.files import diff as files_diff
from planmode.cli.ui import console, err_console, error_text
from planmode.errors import PlanModeError

if TYPE_CHECKING:
    from planmode.cli.drive import Watcher

# Start-up: this module imports click, typer and rich only (`planmode --help`, `--version`, `ls` start fast); each
# command imports the LangGraph stack and the screens it needs (tests/cli/test_cli_startup.py).

__all__ = ["EXIT_CODES", "app", "main"]

# rich_markup_mode=None: usage errors are click's plain "Error: ..." line, and help text is never read as markup.
app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Plan Mode for LangGraph.",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from planmode import __version__

        print(f"planmode {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Plan Mode for LangGraph."""


DEFAULT_DB = ".planmode/planmode.sqlite"

#: The process exit code of each final run status (see the module docstring).
EXIT_CODES = {
    "completed": 0,
    "answered": 0,
    "failed": 1,
    "awaiting_approval": 3,
    "cancelled": 4,
    "model_unavailable": 5,
    "over_budget": 6,
}
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

DbOpt = Annotated[
    str | None,
    typer.Option(
        "--db",
        envvar="PLANMODE_DB",
        show_default=False,
        help="SQLite file of the runs, or a postgresql:// URL (default: .planmode/planmode.sqlite in this folder "
        "or the nearest parent folder with a .planmode/ folder, as git finds .git).",
    ),
]
ThreadArg = Annotated[str, typer.Argument(help="Thread id.")]

#: The command that continues the run being driven (for the Ctrl-C message), and the database in use.
_session: dict[str, str] = {}


def _exit_code(status: str) -> int:
    return EXIT_CODES.get(status, 1)


def friendly(fn: Callable[..., None]) -> Callable[..., None]:
    """User errors print one line and exit 2 (not a traceback); Ctrl-C leaves the run resumable (exit 130)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        _session.clear()
        try:
            fn(*args, **kwargs)
        except PlanModeError as exc:
            err_console.print(error_text(exc))
            raise typer.Exit(EXIT_USAGE) from None
        except sqlite3.DatabaseError as exc:
            where = _session.get("db", "the database")
            err_console.print(error_text(f"cannot read {where}: {exc} (a damaged file, or not a planmode database)"))
            raise typer.Exit(EXIT_USAGE) from None
        except KeyboardInterrupt as exc:
            hint = _session.get("resume")
            msg = "Interrupted. The run is checkpointed" + (f"; continue it with: {hint}" if hint else ".")
            console.print(Text("\n" + msg, style="yellow"), soft_wrap=True)  # a command stays on one line
            if getattr(exc, "hard", False):  # planmode.cli.drive.Interrupted
                # A model call is still in flight in a worker thread: do not wait for it (the run is resumable
                # from its last checkpoint), and do not let the interpreter join the thread pool either.
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(EXIT_INTERRUPTED)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except (typer.Exit, click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:  # the last line of defence: one line, not a 40-line traceback
            if os.environ.get("PLANMODE_DEBUG"):
                raise
            err_console.print(error_text(f"{type(exc).__name__}: {exc}"))
            err_console.print(Text("(set PLANMODE_DEBUG=1 to see the traceback)", style="dim"))
            raise typer.Exit(1) from None

    return wrapper


def _cfg(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def find_default_db(start: Path | None = None) -> Path | None:
    """The default database as git finds ``.git``: ``.planmode/planmode.sqlite`` in the nearest folder, from
    ``start`` (the current folder) up to the root, that has a ``.planmode/`` folder; None when none has."""
    here = (start or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        if (folder / ".planmode").is_dir():
            return folder / DEFAULT_DB
    return None


def _planmode_folder(path: Path) -> None:
    """Create the ``.planmode/`` folder of a new database, with a ``.gitignore`` of ``*`` (as a venv has): the
    runs' database is never committed by accident."""
    path.parent.mkdir(parents=True, exist_ok=True)
    ignore = path.parent / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# created by planmode: its runs' database is not for version control\n*\n")


#: The tables of a planmode SQLite database (LangGraph's SQLite checkpointer).
_PLANMODE_TABLES = frozenset({"checkpoints", "writes"})


def _is_planmode_db(path: Path) -> bool:
    """Whether ``path`` is a SQLite file with planmode's tables, read without changing it (opened read-only; a
    file that is not SQLite at all is not opened by SQLite)."""
    with path.open("rb") as f:
        if f.read(16) != b"SQLite format 3\x00":
            return False
    try:
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=30)
        try:
            tables = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise
        return False
    except sqlite3.DatabaseError:
        return False
    return _PLANMODE_TABLES.issubset(tables)


def _database(db: str | None, *, create: bool) -> str:
    """The database to open: a postgresql:// URL as given, or an absolute SQLite path; without ``--db`` (and
    PLANMODE_DB), the nearest ``.planmode/`` upward (`find_default_db`), else ``./.planmode/`` for a new run.
    Read-only commands (``create=False``) refuse a file that does not exist instead of creating an empty one."""
    if db is None:
        found = find_default_db()
        if found is None and not create:
            raise PlanModeError(
                f"no planmode database in this folder or any parent folder ({DEFAULT_DB}): "
                "pass --db FILE, or set PLANMODE_DB"
            )
        db = str(found or Path.cwd().absolute() / DEFAULT_DB)
    if db.startswith(("postgres://", "postgresql://")):
        _session["db"] = "the PostgreSQL database"
        return db
    if _URL.match(db):
        raise PlanModeError(f"unsupported database URL {db!r}: use a SQLite file path or a postgresql:// URL")
    path = Path(db).expanduser().absolute()
    _session["db"] = str(path)
    if path.is_dir():
        raise PlanModeError(f"{db}: is a directory, not a database file")
    if not create and not path.is_file():
        raise PlanModeError(f"{db}: no database at this path (pass --db FILE, or set PLANMODE_DB)")
    if (not create or (path.is_file() and path.stat().st_size)) and not _is_planmode_db(path):
        # Opening it as a checkpointer would add planmode's tables to someone else's file (and switch it to WAL).
        raise PlanModeError(f"{db}: not a planmode database (it was left unchanged; pass the --db of your runs)")
    if create and path.parent.name == ".planmode" and not path.exists():
        _planmode_folder(path)
    return str(path)


def _graph(db: str, workspace: Path | None = None) -> Any:
    from planmode.graph import build_graph
    from planmode.persistence import open_checkpointer
    from planmode.tools import workspace_tools

    db_file = [] if db.startswith(("postgres://", "postgresql://")) else [db]  # the agent cannot touch its history
    tools = workspace_tools(workspace, protected=db_file) if workspace is not None else []
    return build_graph(tools=tools, checkpointer=open_checkpointer(db))


def _resume_command(thread: str, db: str, verb: str = "resume") -> str:
    """The complete command that continues ``thread`` from any folder: with ``--db`` and the database's absolute
    path, unless PLANMODE_DB names that same database absolutely (then it works from anywhere as it is)."""
    cmd = f"planmode {verb} {shlex.quote(thread)}"
    env = os.environ.get("PLANMODE_DB") or ""
    same = env == db or (not _URL.match(env) and Path(env).is_absolute() and Path(env).expanduser() == Path(db))
    return cmd if same else f"{cmd} --db {shlex.quote(db)}"


def _approver(auto: bool, resume_hint: str, budget: dict[str, Any] | None = None) -> Any:
    flags = dict(budget or {"max_tokens": None, "max_cost": None, "stop": False})
    answered = [False]

    def approve(payload: dict[str, Any]) -> dict[str, Any] | None:
        from planmode.budget import INTERRUPT_TYPE as BUDGET_INTERRUPT
        from planmode.cli.budget import budget_answer
        from planmode.cli.gates import GATE_TYPES, answer_gate
        from planmode.cli.ui import approval_screen, ask_approval, interactive

        if payload.get("type") == BUDGET_INTERRUPT:  # a budget pause, not an approval (planmode.budget)
            # The command line's --max-tokens / --max-cost answer one pause: a pause that comes back (the value
            # was refused, or the raise ran out) is left paused with its reason (exit 6), never answered again.
            answer = budget_answer(payload, **flags, repeated=answered[0])
            answered[0] = answered[0] or any(flags.values())
            return answer
        if payload.get("type") in GATE_TYPES:  # planmode.stale, planmode.step_approval (cli/gates.py)
            return answer_gate(payload, auto)
        if auto:
            console.print(approval_screen(payload))
            console.print(
                Text(f"Approved automatically (--auto-approve), revision {payload['revision']}.", style="green")
            )
            return {"action": "approve", "revision": payload["revision"]}
        if not interactive():
            console.print(approval_screen(payload))
            console.print(
                Text(
                    "The plan needs approval and this is not a terminal: approve it from a terminal "
                    "with the command below, or pass --auto-approve.",
                    style="yellow",
                )
            )
            return None
        return ask_approval(payload)

    return approve


def _positive_int(name: str, env: str, help: str) -> Any:
    return typer.Option(name, envvar=env, help=help, min=1)


ModelOpt = Annotated[str | None, typer.Option(envvar="PLANMODE_MODEL", help="Model name (default: gpt-4o-mini).")]
BaseUrlOpt = Annotated[
    str | None, typer.Option(envvar="OPENAI_BASE_URL", help="OpenAI-compatible base URL (Ollama, vLLM, llama.cpp...).")
]


@app.command()
@friendly
def run(
    command: typer.Context,
    task: Annotated[str, typer.Argument(help="What to do; - reads it from stdin.")],
    workspace: Annotated[Path, typer.Option(envvar="PLANMODE_WORKSPACE", help="Folder the file tools work in.")] = Path(
        "."
    ),
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    db: DbOpt = None,
    thread: Annotated[str | None, typer.Option(help="Thread id (default: a new one).")] = None,
    auto_approve: Annotated[
        bool,
        typer.Option(
            "--auto-approve", help="Approve plans without asking (same as --approval auto); the plan is still shown."
        ),
    ] = False,
    approval: Annotated[
        Literal["ask", "auto"],
        typer.Option(envvar="PLANMODE_APPROVAL", help="ask: a human approves the plan; auto: approve it."),
    ] = "ask",
    max_parallel: Annotated[
        int, _positive_int("--max-parallel", "PLANMODE_MAX_PARALLEL", "Steps executed at once.")
    ] = 4,
    plan_mode: Annotated[
        Literal["auto", "plan", "direct"],
        typer.Option(
            "--mode", envvar="PLANMODE_MODE", help="auto: decide whether a plan is needed; plan / direct: force it."
        ),
    ] = "auto",
    structured_output: Annotated[
        Literal["auto", "json_schema", "json_object", "tool_calling"],
        typer.Option(envvar="PLANMODE_STRUCTURED_OUTPUT", help="How structured output is requested."),
    ] = "auto",
    normalize_messages: Annotated[
        bool,
        typer.Option(
            envvar="PLANMODE_NORMALIZE_MESSAGES",
            help="Merge same-role messages, one system message first (strict chat templates).",
        ),
    ] = False,
    max_steps: Annotated[int, _positive_int("--max-steps", "PLANMODE_MAX_STEPS", "Step cap of a plan.")] = 20,
    max_attempts: Annotated[
        int, _positive_int("--max-attempts", "PLANMODE_MAX_ATTEMPTS", "Attempts per step before it fails.")
    ] = 2,
    max_reflect_attempts: Annotated[
        int,
        _positive_int(
            "--max-reflect-attempts", "PLANMODE_MAX_REFLECT_ATTEMPTS", "Reflection retries for an unreadable answer."
        ),
    ] = 3,
    reapprove_patches: Annotated[
        bool,
        typer.Option(envvar="PLANMODE_REAPPROVE_PATCHES", help="Patches made during execution need approval again."),
    ] = False,
    check_staleness: Annotated[
        bool,
        typer.Option(
            envvar="PLANMODE_CHECK_STALENESS",
            help="Fingerprint the workspace at approval; ask again when a resumed run finds it changed.",
        ),
    ] = True,
    step_approval: Annotated[
        Literal["off", "writes"],
        typer.Option(envvar="PLANMODE_STEP_APPROVAL", help="writes: approve each step that uses a write tool."),
    ] = "off",
    request_timeout: Annotated[
        float,
        typer.Option(envvar="PLANMODE_REQUEST_TIMEOUT", min=0.001, help="Seconds before a model request times out."),
    ] = 120.0,
    max_output_tokens: Annotated[
        int,
        typer.Option(
            envvar="PLANMODE_MAX_OUTPUT_TOKENS",
            min=0,
            help="Cap on the tokens one model call may generate (0: no cap).",
        ),
    ] = 2048,
    context_tokens: Annotated[
        int,
        typer.Option(
            envvar="PLANMODE_CONTEXT_TOKENS",
            min=0,
            help="Context budget of one call in tokens (0: what the server reports, else 8192).",
        ),
    ] = 0,
    gguf: Annotated[
        Path | None,
        typer.Option(
            help="Run this GGUF model offline: a llama.cpp server on 127.0.0.1 "
            "for the run (pip install 'planmode[local]')."
        ),
    ] = None,
    max_tokens: Annotated[
        int,
        typer.Option(envvar="PLANMODE_MAX_TOKENS", min=0, help="Token budget of the run (0: none); pauses before."),
    ] = 0,
    max_cost: Annotated[
        float,
        typer.Option(envvar="PLANMODE_MAX_COST", min=0.0, help="Cost budget in dollars at --prices (0: none)."),
    ] = 0.0,
    prices: Annotated[
        str | None,
        typer.Option(
            envvar="PLANMODE_PRICES",
            help='Prices in $ per 1M tokens, JSON: {"gpt-4o-mini": {"input": 0.15, "output": 0.6, "cached": 0.075}}.',
        ),
    ] = None,
) -> None:
    """Plan TASK, ask for approval, execute it with live progress."""
    from planmode.cli.drive import Watcher, drive
    from planmode.context import PlanModeContext

    # Checked before anything is stored: a bad endpoint or an empty task is one line and exit 2, not a run.
    if task == "-":
        task = sys.stdin.read()
    if not task.strip():
        raise PlanModeError("the task is empty: say what to do (or pass - to read it from stdin)")
    if base_url is not None:
        _check_base_url(base_url)

    auto = auto_approve or approval == "auto"
    ws = workspace.expanduser().resolve()
    if not ws.is_dir():
        raise PlanModeError(f"workspace {str(ws)!r} is not a folder")
    ctx = PlanModeContext(
        mode=plan_mode,
        approval="auto" if auto else "ask",
        max_parallel=max_parallel,
        structured_output=structured_output,
        normalize_messages=normalize_messages,
        max_steps=max_steps,
        max_attempts=max_attempts,
        max_reflect_attempts=max_reflect_attempts,
        reapprove_patches=reapprove_patches,
        check_staleness=check_staleness,
        step_approval=step_approval,
        request_timeout=request_timeout,
        workspace=str(ws),
        max_output_tokens=max_output_tokens,
        context_tokens=context_tokens,
        max_tokens=max_tokens,
        max_cost=max_cost,
        prices=_prices(prices),
    )
    if max_cost and not ctx.prices:
        raise PlanModeError('--max-cost needs --prices (e.g. --prices \'{"*": {"input": 0.15, "output": 0.6}}\')')
    if model:
        ctx = dataclasses.replace(ctx, model=model)
    if base_url:
        ctx = dataclasses.replace(ctx, base_url=base_url)
    if gguf is not None:  # a local llama.cpp server for this run, stopped when the command ends (click closes it)
        from planmode.local_server import check_gguf, llama_server, settings_for

        check_gguf(gguf)  # a missing or non-GGUF file: one line and exit 2, before "starting" or the extra's check
        console.print(Text(f"starting a llama.cpp server for {gguf} ..."))
        ctx = settings_for(command.with_resource(llama_server(gguf)), ctx)
    if not ctx.base_url and not os.environ.get("OPENAI_API_KEY"):
        raise PlanModeError(
            "OPENAI_API_KEY is not set: export it, or pass --base-url for a local "
            "OpenAI-compatible server (try `planmode demo` to see planmode without a key)"
        )
    path = _database(db, create=True)
    graph = _graph(path, ws)
    tid = thread or uuid.uuid4().hex[:12]
    hint = _session["resume"] = _resume_command(tid, path)
    console.print(Text(f"thread {tid} · database {path} · workspace {ws}"), soft_wrap=True)
    watcher = Watcher(queue.Queue())
    status = drive(
        graph,
        {"messages": [("user", task)]},
        _cfg(tid),
        context=ctx,
        approver=_approver(auto, hint),
        resume_hint=hint,
        watcher=watcher,
    )
    _finish(graph, tid, status, watcher, path)


def _check_base_url(url: str) -> None:
    """An OpenAI-compatible endpoint is an http(s) URL with a host; anything else is refused before a run starts."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        ok = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:  # an unclosed [IPv6 bracket, a bad port
        ok = False
    if not ok:
        raise PlanModeError(
            f"--base-url {url!r} is not an http(s) URL (e.g. http://127.0.0.1:11434/v1); "
            "it comes from --base-url or OPENAI_BASE_URL"
        )


def _prices(raw: str | None) -> dict[str, Any]:
    from planmode.cli.budget import parse_prices

    try:
        return parse_prices(raw)
    except ValueError as exc:
        raise PlanModeError(str(exc)) from None


def _finish(graph: Any, tid: str, status: str, watcher: Watcher, db: str) -> None:
    from planmode.cli.drive import show_result

    values = graph.get_state(_cfg(tid)).values
    if status not in ("awaiting_approval", "over_budget"):
        show_result(graph, _cfg(tid), changed=watcher.changed)
    from planmode.context import settings_dict

    settings = settings_dict(values.get("settings"))
    if values.get("route") == "direct" and settings.get("mode") == "auto" and status == "answered":
        console.print(
            Text(
                "Answered directly: the task looked simple enough to need no plan. To plan it "
                "instead, run it again with --mode plan.",
                style="yellow",
            )
        )
    if status == "failed":
        console.print(
            Text(f"The run failed. Inspect it with: {_resume_command(tid, db, 'show')}", style="red"), soft_wrap=True
        )
    raise typer.Exit(_exit_code(status))


@app.command()
@friendly
def resume(
    command: typer.Context,
    thread: ThreadArg,
    db: DbOpt = None,
    workspace: Annotated[
        Path | None, typer.Option(help="Folder the file tools work in (default: the run's own workspace).")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Another model for this resume (default: the run's).")] = None,
    base_url: Annotated[
        str | None,
        typer.Option(help="Another OpenAI-compatible base URL for this resume, e.g. a local server on a new port."),
    ] = None,
    auto_approve: Annotated[bool, typer.Option("--auto-approve", help="Approve plans without asking.")] = False,
    gguf: Annotated[
        Path | None, typer.Option(help="Serve this GGUF model for the resume, as `run --gguf` does.")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option(min=1, help="At a budget pause: raise the token budget to N.")
    ] = None,
    max_cost: Annotated[
        float | None, typer.Option(min=0.000001, help="At a budget pause: raise the cost budget to X dollars.")
    ] = None,
    prices: Annotated[
        str | None,
        typer.Option(
            help='Prices for a run without any (--max-cost needs them): {"model": {"input": $/1M, "output": $/1M}}.'
        ),
    ] = None,
    stop: Annotated[bool, typer.Option("--stop", help="At a budget pause: stop the run (status cancelled).")] = False,
) -> None:
    """Continue a run from its last checkpoint (after Ctrl-C, a crash, or a pending approval), in the run's own
    workspace and with its own model unless told otherwise."""
    from planmode.cli.drive import Watcher, drive, require_thread

    if base_url is not None:
        _check_base_url(base_url)
    path = _database(db, create=False)
    graph = _graph(path, None)
    state = require_thread(graph, _cfg(thread))
    # The endpoint a run uses: its settings (an earlier `resume --model/--base-url/--workspace` wrote its choice
    # there), then this resume's options.
    from planmode.context import settings_dict

    settings = settings_dict(state.values.get("settings"))
    overrides: dict[str, Any] = {}
    if gguf is not None:  # a local llama.cpp server for this resume, stopped when the command ends
        from planmode.local_server import llama_server

        server = command.with_resource(llama_server(gguf))
        base_url, model = server.base_url, server.model
    if model:
        overrides["model"] = model
    if base_url:
        overrides["base_url"] = base_url
    if workspace is not None:
        overrides["workspace"] = str(workspace.expanduser().resolve())
    if prices:
        if settings.get("prices"):  # the run's prices stay (a resume may not loosen the budget)
            raise PlanModeError("--prices: this run has prices already; they cannot change on a resume")
        overrides["prices"] = _prices(prices)
    stored_ws = overrides.get("workspace") or settings.get("workspace")
    ws = Path(stored_ws) if stored_ws else Path(".").resolve()
    if not ws.is_dir():
        raise PlanModeError(f"workspace {str(ws)!r} is not a folder (pass --workspace)")
    graph = _graph(path, ws)
    hint = _session["resume"] = _resume_command(thread, path)
    shown_model = overrides.get("model") or settings.get("model")
    shown_url = overrides.get("base_url") or settings.get("base_url")
    console.print(
        Text(
            f"thread {thread} · database {path} · workspace {ws}"
            + (f" · model {shown_model}" if shown_model else "")
            + (f" at {shown_url}" if shown_url else "")
        ),
        soft_wrap=True,
    )
    watcher = Watcher(queue.Queue())
    auto = auto_approve or settings.get("approval") == "auto"
    status = drive(
        graph,
        None,
        _cfg(thread),
        context=overrides or None,
        approver=_approver(auto, hint, {"max_tokens": max_tokens, "max_cost": max_cost, "stop": stop}),
        resume_hint=hint,
        watcher=watcher,
    )
    _finish(graph, thread, status, watcher, path)


@app.command()
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

    graph = _graph(_database(db, create=False))
    state = require_thread(graph, _cfg(thread))
    if mermaid or png is not None:
        show_picture(state.values.get("plan"), mermaid=mermaid, png=png)
        return
    from planmode.context import settings_dict

    settings = settings_dict(state.values.get("settings"))
    console.print(Text.assemble("status: ", (str(state.values.get("status")), "bold")))
    if settings.get("workspace"):
        console.print(Text(f"workspace: {settings['workspace']}"))
    show_result(graph, _cfg(thread))
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


@app.command("ls")
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

    path = _database(db, create=False)
    saver = open_checkpointer(path)
    try:
        runs = list_runs(saver, status=status, limit=limit or None)
    except ValueError as exc:  # an unknown status: a user error, one line
        raise PlanModeError(str(exc)) from None
    finally:
        saver.conn.close()
    shown = _session.get("db", path)  # a PostgreSQL URL is not printed (it may hold a password)
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


@app.command()
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

    graph = _graph(_database(db, create=False))
    require_thread(graph, _cfg(thread))
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


@app.command()
@friendly
def rollback(
    thread: ThreadArg,
    snapshot: Annotated[
        str, typer.Argument(help="A checkpoint id or unique prefix from `history`, or N (N snapshots back).")
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

    path = _database(db, create=False)
    graph = _graph(path)
    require_thread(graph, _cfg(thread))
    target = resolve_snapshot(_checkpoint_ids(graph, thread), snapshot)
    with thread_lease(graph.checkpointer, thread):  # not under a run: "thread X is already running (...)"
        restored = restore_files(graph, path, thread, target) if files else None
        do_rollback(graph, thread, target)
    console.print(Text(f"Rolled back {thread} to {snapshot}. The history is kept."))
    console.print(restored_note(restored))
    console.print(Text(f"Continue with: {_resume_command(thread, path)}"), soft_wrap=True)
    show_result(graph, _cfg(thread))


app.command("diff")(friendly(files_diff))  # planmode.cli.files (imports typer and rich only)


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
    from planmode.cli.demo import run_demo

    raise typer.Exit(run_demo(db))


def _tolerant_output() -> None:
    """Never crash on a terminal that cannot show a character (``PYTHONIOENCODING=ascii``): replace it."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):  # a closed or unusual stream: leave it as it is
                reconfigure(errors="replace")


def main() -> None:
    """Entry point of the ``planmode`` command."""
    _tolerant_output()
    app()
