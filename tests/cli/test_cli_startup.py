"""`planmode --help`, `--version` and the module of the commands start without the LangGraph stack (issue 23 item 2).

Timings are not asserted (the machine is shared): what is imported is. bench/startup_bench.py measures the time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from bench.startup_bench import main as startup_bench
from typer.testing import CliRunner

import planmode
from planmode.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("langgraph", "langchain_core", "langsmith", "openai")  # (typer itself imports pydantic for some options)


def _heavy_after(code: str) -> list[str]:
    """The heavy packages in sys.modules after running ``code`` in a fresh interpreter."""
    probe = code + f"\nimport sys, json\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    return list(json.loads(out.strip().splitlines()[-1]))


def test_importing_the_cli_imports_no_langgraph() -> None:
    assert _heavy_after("import planmode.cli.app") == []


def test_importing_planmode_imports_no_langgraph() -> None:
    assert _heavy_after("import planmode") == []


def test_help_and_version_import_no_langgraph() -> None:
    for argv in (["--help"], ["-h"], ["--version"], ["ls", "--help"], ["run", "--help"]):
        code = (
            f"import sys\nsys.argv = ['planmode', *{argv!r}]\nfrom planmode.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass"
        )
        assert _heavy_after(code) == [], argv


def test_ls_imports_no_langgraph_and_lists_the_run(tmp_path: Path) -> None:
    """`planmode ls` on a database with a run reads it without the LangGraph stack (issue 23 item 2)."""
    db = tmp_path / "runs.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "LANGSMITH_TRACING": "false", "COLUMNS": "200"}
    demo = [sys.executable, "-m", "planmode.cli", "demo", "--db", str(db)]
    subprocess.run(demo, env=env, capture_output=True, text=True, check=True, timeout=600)
    for argv in (["ls"], ["ls", "--json"], ["ls", "--status", "completed"]):
        code = (
            f"import sys\nsys.argv = ['planmode', *{[*argv, '--db', str(db)]!r}]\nfrom planmode.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            f"print('HEAVY', sorted(m for m in {HEAVY!r} if m in sys.modules))"
        )
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
        assert "HEAVY []" in out, (argv, out)
        assert "demo-" in out and "completed" in out, (argv, out)  # the run was read, not skipped


def test_version_and_short_help() -> None:
    runner = CliRunner()
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0
    assert version.output.strip() == f"planmode {planmode.__version__}"
    short = runner.invoke(app, ["-h"])
    assert short.exit_code == 0 and "Usage:" in short.output and "ls" in short.output
    sub = runner.invoke(app, ["show", "-h"])
    assert sub.exit_code == 0 and "--mermaid" in sub.output


def test_the_public_api_is_still_there_lazily() -> None:
    from planmode import _public

    assert set(_public()) == set(planmode.__all__)  # the lazy import list and the declared API agree
    for name in planmode.__all__:
        assert getattr(planmode, name) is not None
    assert planmode.graph.build_graph is planmode.build_graph  # a submodule as an attribute, as before
    namespace: dict[str, object] = {}
    exec("from planmode import *", namespace)
    assert set(planmode.__all__) <= set(namespace)


def test_startup_bench_writes_its_ratios(tmp_path: Path) -> None:
    out = tmp_path / "startup.json"
    assert startup_bench(["--repeat", "1", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    commands = {row["command"]: row for row in data["rows"]}
    assert {"python -c pass", "planmode --help", "planmode --version", "planmode ls", "planmode ls (a run)"} <= set(
        commands
    )
    assert commands["python -c pass"]["ratio_to_python"] == 1.0
    assert all(row["median_ms"] > 0 for row in data["rows"])


def test_importing_persistence_imports_no_langgraph_until_a_name_is_used() -> None:
    """`planmode.persistence` re-exports its checkpointers lazily, so `planmode.persistence.rows` (which `planmode ls`
    reads a SQLite database with) is reachable without the LangGraph stack (issue 22)."""
    assert _heavy_after("import planmode.persistence") == []
    assert _heavy_after("import planmode.persistence.rows") == []
    used = _heavy_after("import planmode.persistence as p\nassert callable(p.sqlite_checkpointer)")
    assert "langgraph" in used  # the first use of a re-exported name imports its module
    from planmode import persistence
    from planmode.persistence.checkpointers import sqlite_checkpointer

    assert persistence.sqlite_checkpointer is sqlite_checkpointer
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        persistence.nothing_here  # noqa: B018


def test_the_lazy_persistence_names_are_the_checkpointers_names_and_each_resolves() -> None:
    """`planmode.persistence` restates its re-exported names (it may not import `checkpointers` to read them): the
    list cannot drift from `checkpointers.__all__`, and every name resolves to the object of its home module."""
    import importlib

    from planmode import persistence
    from planmode.persistence import checkpointers

    assert set(persistence.__all__) == {*checkpointers.__all__, *persistence._HOMES}
    for name in persistence.__all__:
        home = importlib.import_module(persistence._HOMES.get(name, "planmode.persistence.checkpointers"))
        assert getattr(persistence, name) is getattr(home, name), name
