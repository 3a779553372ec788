"""The notebooks in ``notebooks/`` run top to bottom on a real Jupyter kernel, and are stored without outputs.

Each notebook runs offline (scripted model, a SQLite file in a temporary folder) and checks its own results
with ``assert`` in its cells, so a wrong result fails a cell and a failing cell fails the test. The kernel is
``python3``: with ipykernel installed in this environment, jupyter_client starts it with this interpreter
(``test_the_kernel_runs_this_environments_python`` checks that).
"""

from __future__ import annotations

import asyncio
import copy
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nbclient
import nbformat
import pytest
from nbclient.exceptions import CellExecutionError, DeadKernelError

pytestmark = pytest.mark.integration

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
EXPECTED = [
    "01_quickstart.ipynb",
    "02_human_in_the_loop.ipynb",
    "03_time_travel.ipynb",
    "04_subgraph.ipynb",
    "05_plan_mode_tool.ipynb",
]
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the kernel colours its tracebacks
CELL_TIMEOUT = 120  # seconds per cell; a whole notebook takes a few seconds


def _jupyter_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernels' environment (they inherit this process's): platformdirs paths (jupyter_core 5 may warn
    with a DeprecationWarning without it), no credentials and no LangSmith tracing (the notebooks are offline;
    the module-scoped run starts before conftest's per-test guard unsets them), no debugger notice about
    frozen modules."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGCHAIN_TRACING_V2"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")


@dataclass
class Executed:
    """One notebook after execution."""

    notebook: nbformat.NotebookNode
    seconds: float
    error: BaseException | None


KERNEL_STARTS = 3
"""Kernels started for a notebook whose kernel dies before it runs a cell: five start at once, and
jupyter_client picks each kernel's free TCP ports before binding them, so two can race ("Address already in
use", then "Kernel died before replying to kernel_info": seen once in a CI run)."""


async def _execute(nb: nbformat.NotebookNode, cwd: Path) -> Executed:
    """Execute a copy of ``nb`` on a fresh python3 kernel (started again when it dies before running a cell)."""
    start = time.perf_counter()
    for started in range(1, KERNEL_STARTS + 1):
        run = copy.deepcopy(nb)
        client = nbclient.NotebookClient(
            run, timeout=CELL_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
        )
        try:
            await client.async_execute()
        except CellExecutionError as exc:
            return Executed(run, time.perf_counter() - start, exc)
        except (DeadKernelError, RuntimeError):
            ran = any(c.get("execution_count") for c in run.cells if c.cell_type == "code")
            if ran or started == KERNEL_STARTS:
                raise
            continue
        return Executed(run, time.perf_counter() - start, None)
    raise AssertionError("unreachable: the last start returns or raises")


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Executed]:
    """Every notebook, executed — concurrently, each on its own kernel (most of a notebook's time is the kernel
    starting and importing LangGraph, so this takes about as long as the slowest one)."""

    async def run_all() -> list[Executed]:
        return await asyncio.gather(
            *(_execute(nbformat.read(p, as_version=4), tmp_path_factory.mktemp(p.stem)) for p in NOTEBOOKS)
        )

    with pytest.MonkeyPatch.context() as mp:
        _jupyter_env(mp)
        results = asyncio.run(run_all())
    return {p.name: r for p, r in zip(NOTEBOOKS, results, strict=True)}


def test_the_notebooks_are_all_there() -> None:
    assert [p.name for p in NOTEBOOKS] == EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_without_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "a notebook without code"
    for cell in code:
        assert cell.outputs == [], f"{path.name}: cell {cell.id} is stored with outputs"
        assert cell.execution_count is None, f"{path.name}: cell {cell.id} is stored with an execution count"
        assert "execution" not in cell.metadata, f"{path.name}: cell {cell.id} is stored with execution timings"
    # Readable: prose between the code, and assertions that make a wrong result fail a cell.
    assert sum(c.cell_type == "markdown" for c in nb.cells) >= len(code) // 2
    assert any("assert " in c.source for c in code)


def test_the_kernel_runs_this_environments_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _jupyter_env(monkeypatch)
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("import sys, planmode\nprint(sys.prefix)"))
    result = asyncio.run(_execute(nb, tmp_path))
    assert result.error is None, result.error
    (output,) = result.notebook.cells[0].outputs
    assert Path(output["text"].strip()).resolve() == Path(sys.prefix).resolve()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path, executed: dict[str, Executed]) -> None:
    result = executed[path.name]
    print(f"{path.name}: {result.seconds:.1f} s")  # the timings, shown with -rA
    if result.error is not None:
        pytest.fail(f"{path.name}: a cell failed\n{_ANSI.sub('', str(result.error))}", pytrace=False)
    code = [c for c in result.notebook.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code), "a cell did not run"
    assert not any(o.get("output_type") == "error" for c in code for o in c.outputs)
