"""How long the ``planmode`` command takes to start: ``--help``, ``--version`` and ``ls`` against ``python -c pass``.

    python -m bench.startup_bench [--repeat 7] [--out bench/results/startup.json]

Each command runs in a fresh interpreter, as a user's shell starts it (the console script's own code:
``from planmode.cli import main; main()``), ``--repeat`` times; the median and the minimum are kept, and each
median is given as a ratio to the median of ``python -c pass`` (the interpreter's own start). The floor planmode
aims at is the import of click, typer and rich (``import typer, rich.console``): ``--help`` should cost about
that; ``ls`` reads a SQLite database with sqlite3 and ormsgpack, without LangGraph, on an empty planmode database
and on one holding the demo's finished run (``planmode ls (a run)``).
No timing is asserted anywhere: the machine is shared and timings move; the ratios are what to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "measure"]

RESULTS = Path(__file__).resolve().parent / "results"

#: The console script ``planmode``, as pip writes it.
_CLI = "from planmode.cli import main; main()"


def _commands(db: Path, with_run: Path) -> dict[str, list[str]]:
    py = sys.executable
    return {
        "python -c pass": [py, "-c", "pass"],
        "import typer, rich (the floor)": [py, "-c", "import typer, rich.console, rich.table"],
        "planmode --help": [py, "-c", _CLI, "--help"],
        "planmode --version": [py, "-c", _CLI, "--version"],
        "planmode ls": [py, "-c", _CLI, "ls", "--db", str(db)],
        "planmode ls (a run)": [py, "-c", _CLI, "ls", "--db", str(with_run)],
    }


def _seconds(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def measure(repeat: int = 7) -> dict[str, Any]:
    """The start-up figure: one row per command (median, min in ms; ratio of the medians to ``python -c pass``)."""
    env = {k: v for k, v in os.environ.items() if k != "PLANMODE_DB"}
    env["LANGSMITH_TRACING"] = "false"
    with tempfile.TemporaryDirectory(prefix="planmode-startup-") as tmp:
        db = Path(tmp) / "runs.sqlite"
        from planmode.persistence import sqlite_checkpointer

        sqlite_checkpointer(db).conn.close()  # an empty planmode database: its tables, no run
        with_run = Path(tmp) / "demo.sqlite"  # the offline demo's finished run (no API key)
        subprocess.run(
            [sys.executable, "-c", _CLI, "demo", "--db", str(with_run)],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        cmds = _commands(db, with_run)
        times: dict[str, list[float]] = {name: [] for name in cmds}
        for _ in range(repeat):  # interleaved: a burst of load on the shared machine hits every command alike
            for name, cmd in cmds.items():
                times[name].append(_seconds(cmd, env))
    base = statistics.median(times["python -c pass"])
    rows = [
        {
            "command": name,
            "median_ms": round(statistics.median(ts) * 1000, 1),
            "min_ms": round(min(ts) * 1000, 1),
            "ratio_to_python": round(statistics.median(ts) / base, 2),
        }
        for name, ts in times.items()
    ]
    return {
        "repeat": repeat,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--out", type=Path, default=RESULTS / "startup.json")
    args = parser.parse_args(argv)
    result = measure(args.repeat)
    for row in result["rows"]:
        print(
            f"  {row['command']:32s} {row['median_ms']:8.1f} ms (min {row['min_ms']:.1f})"
            f"  x{row['ratio_to_python']} python -c pass",
            flush=True,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
