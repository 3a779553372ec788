"""The README's promises: its set-up and test commands, a current copy of the graph diagram, Python blocks that
run, the complete list of progress events, and the way to try `planmode run` without an API key."""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from planmode.graph import mermaid
from planmode.observability.events import EVENT_TYPES

README = Path(__file__).resolve().parents[2] / "README.md"


def _block(name: str) -> str:
    text = README.read_text(encoding="utf-8")
    m = re.search(rf"<!-- {name} -->\s*```\w*\n(.*?)```\s*<!-- /{name} -->", text, re.S)
    assert m, f"README.md has no {name} block"
    return m.group(1).strip()


def test_readme_mermaid_is_current() -> None:
    assert _block("mermaid") == mermaid().strip(), "regenerate the README diagram with `planmode graph`"


def test_readme_commands_install_then_run_demo_and_tests() -> None:
    setup, tests = _block("setup-command"), _block("test-command")
    assert "pip install" in setup and "'.[dev]'" in setup
    assert setup.rstrip().endswith("planmode demo")
    assert tests == "make test"
    makefile = (README.parent / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe and "-m pytest" in recipe.group(1), "the Makefile's test target runs pytest"


# -- every Python block of the README runs -------------------------------------------------------------------

#: A block may be marked as not runnable with a visible reason, right above it: ``<!-- not-run: why -->``.
_NOT_RUN = re.compile(r"<!--\s*not-run:\s*(.+?)\s*-->\s*$")


def _python_blocks() -> list[tuple[str, int, str, str | None]]:
    """(heading, line, code, not-run reason) of every ```python block."""
    lines = README.read_text(encoding="utf-8").splitlines()
    heading, out, i = "", [], 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#") and not line.startswith("#!"):
            heading = line.lstrip("#").strip()
        if line.strip() == "```python":
            reason = None
            if i > 0 and (m := _NOT_RUN.search(lines[i - 1])):
                reason = m.group(1)
            end = lines.index("```", i + 1)
            out.append((heading, i + 1, "\n".join(lines[i + 1 : end]), reason))
            i = end
        i += 1
    return out


def test_the_readme_has_python_blocks() -> None:
    assert len(_python_blocks()) >= 2


@pytest.mark.parametrize(
    ("heading", "line", "code", "reason"), _python_blocks(), ids=[f"{h}:{n}" for h, n, _, _ in _python_blocks()]
)
def test_every_python_block_of_the_readme_runs(
    heading: str, line: int, code: str, reason: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if reason is not None:
        pytest.skip(f"README.md line {line} is marked not runnable: {reason}")
    if heading == "Plan mode as a tool" and importlib.util.find_spec("langchain") is None:
        pytest.skip("langchain is not installed: the 'Plan mode as a tool' block uses langchain.agents.create_agent")
    monkeypatch.chdir(tmp_path)  # blocks that write files (runs.sqlite) write them here
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(key, raising=False)  # offline: a block must not need a key
    exec(compile(code, f"README.md:{line} ({heading})", "exec"), {"__name__": "__readme__"})


def test_the_readme_lists_every_progress_event() -> None:
    text = README.read_text(encoding="utf-8")
    missing = [e for e in EVENT_TYPES if f"`{e}`" not in text]
    assert missing == []


@pytest.mark.integration
def test_the_try_without_a_key_block_runs_as_written(tmp_path: Path) -> None:
    script = _block("try-without-a-key")
    port = _free_port()
    script = script.replace("8765", str(port))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PLANMODE_"))}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", LANGSMITH_TRACING="false", COLUMNS="120"
    )
    # the server needs a moment to listen before `planmode run` connects: the block's `&` then a retrying client
    proc = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert (tmp_path / "hello.py").read_text() == "print('hello')\n"
    assert "run finished: completed" in out and "hello.py prints hello." in out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
