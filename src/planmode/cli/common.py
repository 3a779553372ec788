"""What every ``planmode`` command shares: the exit codes, the error handling (`friendly`), finding and checking
the database (`database`), the graph on it, and the complete resume command of a thread.

Start-up: this module imports click, typer and rich only; a command imports the LangGraph stack when it needs it.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import click
import typer
from rich.text import Text

from planmode.cli.ui import console, err_console, error_text
from planmode.errors import PlanModeError

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.graph.state import CompiledStateGraph

    from planmode.context import PlanModeContext
    from planmode.state.graph_state import InputState, OutputState, PlanModeState

__all__ = [
    "DEFAULT_DB",
    "EXIT_CODES",
    "EXIT_USAGE",
    "DbOpt",
    "ThreadArg",
    "cfg_of",
    "complete_thread",
    "database",
    "database_of",
    "databases",
    "exit_code",
    "find_default_db",
    "friendly",
    "graph_on",
    "remember_start",
    "resume_command",
    "session",
    "started_here",
]

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
        help="SQLite file of the runs, or a postgresql:// URL (default: a run is stored in its workspace's "
        ".planmode/planmode.sqlite, or the nearest parent folder's .planmode/, as git finds .git; the other commands "
        "read the nearest .planmode/ from this folder, and the databases runs started in this folder went to).",
    ),
]


def complete_thread(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion of a THREAD argument: the threads of the database the command would read (``--db`` when
    already typed, else PLANMODE_DB, else `databases`), newest first, read-only. Completion prints nothing else: a
    folder without a database, or a file that is not one, completes nothing."""
    given = ctx.params.get("db") or os.environ.get("PLANMODE_DB") or None
    try:
        candidates = databases(given)
    except PlanModeError:
        return []
    out: list[str] = []
    for candidate in candidates:
        path = Path(candidate).expanduser()
        if str(candidate).startswith(("postgres://", "postgresql://")) or not path.is_file():
            continue
        try:
            if not _is_planmode_db(path):
                continue
            conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=5)
            try:
                rows = conn.execute(
                    "SELECT thread_id FROM checkpoints WHERE checkpoint_ns = '' GROUP BY thread_id "
                    "ORDER BY MAX(checkpoint_id) DESC"
                ).fetchall()
            finally:
                conn.close()
        except (sqlite3.Error, OSError):  # locked, damaged or unreadable: nothing to offer from it
            continue
        out += [str(r[0]) for r in rows if str(r[0]).startswith(incomplete) and str(r[0]) not in out]
    return out


ThreadArg = Annotated[str, typer.Argument(help="Thread id.", metavar="THREAD", autocompletion=complete_thread)]

#: The command that continues the run being driven (for the Ctrl-C message), and the database in use.
session: dict[str, str] = {}


def exit_code(status: str) -> int:
    return EXIT_CODES.get(status, 1)


def friendly(fn: Callable[..., None]) -> Callable[..., None]:
    """User errors print one line and exit 2 (not a traceback); Ctrl-C leaves the run resumable (exit 130)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        session.clear()
        try:
            fn(*args, **kwargs)
        except PlanModeError as exc:
            err_console.print(error_text(exc))
            _resume_line()
            raise typer.Exit(EXIT_USAGE) from None
        except sqlite3.DatabaseError as exc:
            where = session.get("db", "the database")
            err_console.print(error_text(f"cannot read {where}: {exc} (a damaged file, or not a planmode database)"))
            raise typer.Exit(EXIT_USAGE) from None
        except KeyboardInterrupt as exc:
            hint = session.get("resume")
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
            _resume_line()
            raise typer.Exit(1) from None

    return wrapper


def _resume_line() -> None:
    """After an error while a run was being driven: the command that continues it (the run is checkpointed)."""
    hint = session.get("resume")
    if hint:
        err_console.print(Text(f"The run is checkpointed; continue it with: {hint}", style="yellow"), soft_wrap=True)


def cfg_of(thread: str) -> RunnableConfig:
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


def database(db: str | None, *, create: bool, workspace: Path | None = None) -> str:
    """The database to open: a postgresql:// URL as given, or an absolute SQLite path. Without ``--db`` (and
    PLANMODE_DB): for a new run (``create=True``) the workspace's database, the nearest ``.planmode/`` from
    ``workspace`` upward, else ``workspace/.planmode/`` (``workspace`` defaults to the current folder); for the
    other commands the nearest ``.planmode/`` from the current folder upward, else the most recent database a run
    started in this folder went to (`started_here`). Read-only commands (``create=False``) refuse a file that
    does not exist instead of creating an empty one."""
    if db is None:
        if create:
            base = (workspace or Path.cwd()).absolute()
            db = str(find_default_db(base) or base / DEFAULT_DB)
        else:
            found = databases(None)
            db = found[0]
    if db.startswith(("postgres://", "postgresql://")):
        session["db"] = "the PostgreSQL database"
        return db
    if _URL.match(db):
        raise PlanModeError(f"unsupported database URL {db!r}: use a SQLite file path or a postgresql:// URL")
    path = Path(db).expanduser().absolute()
    session["db"] = str(path)
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


def databases(db: str | None) -> list[str]:
    """The databases a read-only command looks in, as given to `database`: ``--db`` alone when given (or
    PLANMODE_DB, or the configuration file's ``db``); else the nearest ``.planmode/`` from the current folder
    upward, then the databases runs started in this folder went to (`started_here`, newest first), each once.
    Raises `PlanModeError` naming the rule when there is none."""
    if db is None:
        from planmode.cli.config import load_config

        db = load_config().db  # a `db` in the nearest planmode.toml or [tool.planmode] (planmode.cli.config)
    if db is not None:
        return [db]
    found = find_default_db()
    out = [str(found)] if found is not None and found.is_file() else []
    out += [d for d in started_here() if d not in out]
    if not out:
        raise PlanModeError(
            f"no planmode database in this folder or any parent folder ({DEFAULT_DB}), and no run was started "
            "from this folder: a run is stored in its workspace's .planmode/; run this in the workspace, "
            "or pass --db FILE (or set PLANMODE_DB)"
        )
    return out


def database_of(db: str | None, thread: str | None) -> str:
    """The database of ``thread`` for `database` (``create=False``): the first of `databases` that holds the
    thread; the first of them when none does (the command then says the thread is not there), or when no thread
    is named (``resume`` with no thread looks for the latest unfinished run there)."""
    candidates = databases(db)
    if db is None and thread is not None and len(candidates) > 1:
        for candidate in candidates:
            if _holds_thread(Path(candidate), thread):
                return database(candidate, create=False)
    return database(candidates[0], create=False)


def _holds_thread(path: Path, thread: str) -> bool:
    """Whether the planmode SQLite database at ``path`` has a checkpoint of ``thread`` (read-only)."""
    if not path.is_file() or not _is_planmode_db(path):
        return False
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        row = conn.execute("SELECT 1 FROM checkpoints WHERE thread_id = ? LIMIT 1", (thread,)).fetchone()
    finally:
        conn.close()
    return row is not None


# -- where runs started in a folder went ------------------------------------------------------------------------

#: How many (folder, database) records `remember_start` keeps.
_STARTED_KEEP = 500


def _started_file() -> Path:
    """The per-user record of which database runs started in each folder went to: ``planmode/started.jsonl``
    under ``$XDG_STATE_HOME`` (default ``~/.local/state``)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser() / "planmode" / "started.jsonl"


def _started_records() -> list[tuple[str, str]]:
    """The records of `_started_file`, oldest first; a line that is not a record is skipped."""
    import json

    path = _started_file()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        err_console.print(Text(f"planmode: cannot read {path}: {exc}", style="dim"))
        return []
    out: list[tuple[str, str]] = []
    for line in lines:
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("folder"), str) and isinstance(rec.get("db"), str):
            out.append((rec["folder"], rec["db"]))
    return out


def started_here(folder: Path | None = None) -> list[str]:
    """The SQLite databases that runs started in ``folder`` (the current folder) went to when it is not their
    workspace, newest first: those that are still planmode databases (a record never makes a command open
    another file)."""
    here = str((folder or Path.cwd()).absolute())
    out: list[str] = []
    for started_in, db in reversed(_started_records()):
        if started_in == here and db not in out and Path(db).is_file() and _is_planmode_db(Path(db)):
            out.append(db)
    return out


def remember_start(db: str) -> None:
    """Record that a run started in the current folder is stored in ``db``, when the current folder's own
    lookup (`find_default_db`) would not find it: read-only commands there then find it (`databases`)."""
    import json

    if db.startswith(("postgres://", "postgresql://")):
        return
    here = Path.cwd().absolute()
    found = find_default_db(here)
    if found is not None and str(found) == db:
        return
    records = [r for r in _started_records() if r != (str(here), db)][-(_STARTED_KEEP - 1) :]
    records.append((str(here), db))
    path = _started_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text("".join(json.dumps({"folder": f, "db": d}) + "\n" for f, d in records), encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:  # the run goes on: only the lookup from this folder is lost, and said so
        err_console.print(Text(f"planmode: cannot record where this run is stored ({path}: {exc})", style="dim"))


def graph_on(
    db: str, workspace: Path | None = None
) -> CompiledStateGraph[PlanModeState, PlanModeContext, InputState, OutputState]:
    from planmode.graph import build_graph
    from planmode.persistence import open_checkpointer
    from planmode.tools import workspace_tools

    db_file = [] if db.startswith(("postgres://", "postgresql://")) else [db]  # the agent cannot touch its history
    tools = workspace_tools(workspace, protected=db_file) if workspace is not None else []
    return build_graph(tools=tools, checkpointer=open_checkpointer(db))


def resume_command(thread: str, db: str, verb: str = "resume") -> str:
    """The complete command that continues ``thread`` from any folder: with ``--db`` and the database's absolute
    path, unless PLANMODE_DB names that same database absolutely (then it works from anywhere as it is)."""
    cmd = f"planmode {verb} {shlex.quote(thread)}"
    env = os.environ.get("PLANMODE_DB") or ""
    same = env == db or (not _URL.match(env) and Path(env).is_absolute() and Path(env).expanduser() == Path(db))
    return cmd if same else f"{cmd} --db {shlex.quote(db)}"
