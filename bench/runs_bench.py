"""How fast `planmode.list_runs` is on a database of thousands of threads (SQLite, and PostgreSQL when a server
is at hand).

    python -m bench.runs_bench [--threads 5000] [--postgres URL | --no-postgres]

The database is made realistic cheaply: the real graph (scripted model) makes seven runs, one in each status
(completed, awaiting approval twice, cancelled, failed, answered, running after a crash), about ten
checkpoints each; then every row of those threads is copied under new thread ids until there are
``--threads`` threads. Each measurement is the best of three. Without ``--postgres`` and without
``PLANMODE_POSTGRES_URL``, a throwaway server is started with ``planmode.testing.postgres`` when PostgreSQL's
binaries are installed. Results: ``bench/results/runs_list.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from langgraph.types import Command

import planmode.persistence.runs
from planmode.context import PlanModeContext
from planmode.graph import build_graph
from planmode.persistence import postgres_checkpointer, sqlite_checkpointer
from planmode.persistence.runs import list_runs
from planmode.testing.postgres import postgres_server
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
PLAN = {
    "title": "Release",
    "steps": [
        {"id": "changelog", "description": "Collect the changelog"},
        {"id": "notes", "description": "Write the notes", "dependencies": ["changelog"]},
        {"id": "docs", "description": "Update the docs", "dependencies": ["changelog"]},
    ],
}
SEED_THREADS = 7
AUTO = PlanModeContext(mode="plan", approval="auto")
ASK = PlanModeContext(mode="plan")


class _Crash(BaseException):
    """The process dying in the middle of a step."""


def _executor(step: Any, ctx: Any) -> str:
    if "crash" in ctx.goal and step.id == "notes":
        raise _Crash
    if "broken" in ctx.goal and step.id == "notes":
        raise RuntimeError("the notes could not be written")
    return f"{step.id} finished"


def seed(checkpointer: Any) -> None:
    """Seven real runs, one per status (two awaiting approval)."""
    script = PurposeScript(plan=PLAN, reflect={"assessment": "failed", "reasoning": "cannot write the notes"})
    graph = build_graph(ScriptedChatModel(responder=script), executor=_executor, checkpointer=checkpointer)

    def cfg(t: str) -> Any:
        return {"configurable": {"thread_id": t}}

    graph.invoke({"task": "Ship the release"}, cfg("s-completed"), context=AUTO)
    graph.invoke({"task": "Plan the next release"}, cfg("s-awaiting"), context=ASK)
    graph.invoke({"task": "Plan the cancelled release"}, cfg("s-cancelled"), context=ASK)
    graph.invoke(Command(resume={"action": "cancel", "feedback": "not now"}), cfg("s-cancelled"))
    graph.invoke(
        {"task": "Ship the broken release"},
        cfg("s-failed"),
        context=PlanModeContext(mode="plan", approval="auto", max_attempts=1),
    )
    graph.invoke({"task": "What is a release?"}, cfg("s-answered"), context=PlanModeContext(mode="direct"))
    with suppress(_Crash):
        graph.invoke({"task": "Ship the crash release"}, cfg("s-running"), context=AUTO)
    graph.invoke({"task": "Plan the release after next"}, cfg("s-awaiting-2"), context=ASK)


def _copies(threads: int) -> int:
    return max(1, -(-threads // SEED_THREADS))


def fill_sqlite(db: Path, threads: int) -> int:
    """Copy the seed threads until there are about ``threads``; the number of checkpoint rows."""
    with sqlite3.connect(db) as conn:
        for k in range(1, _copies(threads)):
            for table in ("checkpoints", "writes"):
                cols = [c[1] for c in conn.execute(f"PRAGMA table_info({table})")]
                select = ", ".join(f"thread_id || '~{k}'" if c == "thread_id" else c for c in cols)
                conn.execute(
                    f"INSERT INTO {table} ({', '.join(cols)}) SELECT {select} FROM {table} "
                    "WHERE thread_id NOT LIKE '%~%'"
                )
        return int(conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0])


def fill_postgres(url: str, threads: int) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            cols = [
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns"
                    " WHERE table_name = %s ORDER BY ordinal_position",
                    (table,),
                )
            ]
            select = ", ".join("thread_id || '~' || k" if c == "thread_id" else c for c in cols)
            conn.execute(
                f"INSERT INTO {table} ({', '.join(cols)}) SELECT {select} FROM {table}, "
                f"generate_series(1, {_copies(threads) - 1}) AS k WHERE thread_id NOT LIKE '%~%'"
            )
        conn.execute("ANALYZE")  # fresh planner statistics, as autovacuum keeps them on a live database
        row = conn.execute("SELECT count(*) FROM checkpoints").fetchone()
        return int(row[0]) if row else 0


def best_of(fn: Callable[[], list[Any]], repeat: int = 3) -> tuple[float, int]:
    times, n = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        n = len(fn())
        times.append(time.perf_counter() - start)
    return min(times), n


def measure(saver: Any, generic_patch: tuple[str, Any], generic: bool) -> list[dict[str, Any]]:
    cases: list[tuple[str, Callable[[], list[Any]]]] = [
        ("newest 50 (the default)", lambda: list_runs(saver)),
        ("all runs", lambda: list_runs(saver, limit=None)),
        ("status=awaiting_approval, all", lambda: list_runs(saver, status="awaiting_approval", limit=None)),
        ("status=cancelled, newest 50", lambda: list_runs(saver, status="cancelled")),
    ]
    rows = []
    for name, fn in cases:
        seconds, n = best_of(fn)
        rows.append({"query": name, "path": "fast", "runs": n, "ms": round(seconds * 1000, 1)})
        print(f"  {name:34s} fast     {seconds * 1000:8.1f} ms  ({n} runs)", flush=True)
    if generic:
        attr, value = generic_patch
        saved = getattr(planmode.persistence.runs, attr)
        setattr(planmode.persistence.runs, attr, value)
        try:
            seconds, n = best_of(lambda: list_runs(saver), repeat=1)
        finally:
            setattr(planmode.persistence.runs, attr, saved)
        rows.append(
            {
                "query": "newest 50 (the default)",
                "path": "generic checkpointer.list(None)",
                "runs": n,
                "ms": round(seconds * 1000, 1),
            }
        )
        print(f"  {'newest 50 (the default)':34s} generic  {seconds * 1000:8.1f} ms  ({n} runs)", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.runs_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=5000)
    parser.add_argument("--postgres", default=os.environ.get("PLANMODE_POSTGRES_URL"), help="a postgresql:// URL")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-generic", action="store_true", help="skip the slow generic-path measurement")
    parser.add_argument("--out", type=Path, default=RESULTS / "runs_list.json")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {
        "threads": args.threads,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "backends": {},
    }
    with tempfile.TemporaryDirectory(prefix="planmode-runs-bench-") as tmp:
        db = Path(tmp) / "runs.sqlite"
        saver = sqlite_checkpointer(db)
        seed(saver)
        rows = fill_sqlite(db, args.threads)
        print(f"SQLite: {args.threads} threads, {rows} checkpoints", flush=True)
        result["backends"]["sqlite"] = {
            "checkpoints": rows,
            "rows": measure(saver, ("SqliteSaver", type("NotSqlite", (), {})), not args.no_generic),
        }
        saver.conn.close()
    if not args.no_postgres:
        with postgres_server(args.postgres) as url:
            if url is None:
                print("PostgreSQL: no server and no binaries; skipped", flush=True)
            else:
                import psycopg

                name = f"runs_bench_{uuid.uuid4().hex[:8]}"
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute(f"CREATE DATABASE {name}")
                db_url = url.rsplit("/", 1)[0] + "/" + name
                try:
                    saver = postgres_checkpointer(db_url)
                    seed(saver)
                    rows = fill_postgres(db_url, args.threads)
                    print(f"PostgreSQL: {args.threads} threads, {rows} checkpoints", flush=True)
                    result["backends"]["postgres"] = {
                        "checkpoints": rows,
                        "rows": measure(saver, ("_is_postgres", lambda s: False), not args.no_generic),
                    }
                    saver.conn.close()
                finally:
                    with psycopg.connect(url, autocommit=True) as conn:
                        conn.execute(f"DROP DATABASE IF EXISTS {name}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
