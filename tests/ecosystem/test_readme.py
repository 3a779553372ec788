"""The README's promises and the user docs it links to: its set-up and test commands, a current copy of the graph
diagram (docs/architecture.md), Python blocks that run (the README and docs/python-api.md), the complete list of
progress events (docs/python-api.md), the way to try `planmode run` without an API key, and links that resolve."""

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

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
API_DOC = ROOT / "docs" / "python-api.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
#: The pages whose Python blocks must run.
RUNNABLE_PAGES = (README, API_DOC)


def _block(name: str, page: Path = README) -> str:
    text = page.read_text(encoding="utf-8")
    m = re.search(rf"<!-- {name} -->\s*```\w*\n(.*?)```\s*<!-- /{name} -->", text, re.S)
    assert m, f"{page.name} has no {name} block"
    return m.group(1).strip()


def test_the_architecture_docs_mermaid_is_current() -> None:
    assert _block("mermaid", ARCHITECTURE) == mermaid().strip(), "regenerate the diagram with `planmode graph`"


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
    """(page: heading, line, code, not-run reason) of every ```python block of the runnable pages."""
    return [block for page in RUNNABLE_PAGES for block in _page_blocks(page)]


def _page_blocks(page: Path) -> list[tuple[str, int, str, str | None]]:
    lines = page.read_text(encoding="utf-8").splitlines()
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
            out.append((f"{page.name}: {heading}", i + 1, "\n".join(lines[i + 1 : end]), reason))
            i = end
        i += 1
    return out


def test_the_readme_and_the_api_doc_have_python_blocks() -> None:
    assert len(_page_blocks(README)) >= 1 and len(_page_blocks(API_DOC)) >= 3


@pytest.mark.parametrize(
    ("heading", "line", "code", "reason"), _python_blocks(), ids=[f"{h}:{n}" for h, n, _, _ in _python_blocks()]
)
def test_every_python_block_of_the_readme_runs(
    heading: str, line: int, code: str, reason: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if reason is not None:
        pytest.skip(f"{heading} line {line} is marked not runnable: {reason}")
    if heading.endswith("Plan mode as a tool") and importlib.util.find_spec("langchain") is None:
        pytest.skip("langchain is not installed: the 'Plan mode as a tool' block uses langchain.agents.create_agent")
    monkeypatch.chdir(tmp_path)  # blocks that write files (runs.sqlite) write them here
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(key, raising=False)  # offline: a block must not need a key
    exec(compile(code, f"{heading} line {line}", "exec"), {"__name__": "__readme__"})


def test_the_api_doc_lists_every_progress_event() -> None:
    text = API_DOC.read_text(encoding="utf-8")
    missing = [e for e in EVENT_TYPES if f"`{e}`" not in text]
    assert missing == []


# -- every command block of the README runs as written ---------------------------------------------------------

#: The command blocks .ci/run extracts by their markers and runs verbatim (the set-up, then the tests).
_RUN_BY_CI = ("setup-command", "test-command")
#: The command blocks the tests below run as written.
_RUN_HERE = ("plain-install", "try-without-a-key")
_MARKER = re.compile(r"^<!--\s*([\w-]+)\s*-->$")


def _command_blocks() -> list[tuple[int, str, str]]:
    """(line, what runs it, code) of every ```bash / ```sh block of the README: the marker right above it (a
    ``<!-- name -->`` block marker, or ``not-run: reason``), "" when it has none."""
    lines = README.read_text(encoding="utf-8").splitlines()
    out = []
    for i, line in enumerate(lines):
        if line.strip() in ("```bash", "```sh", "```shell", "```console"):
            above = lines[i - 1].strip() if i else ""
            end = lines.index("```", i + 1)
            if m := _NOT_RUN.search(above):
                what = f"not-run: {m.group(1)}"
            else:
                what = m.group(1) if (m := _MARKER.match(above)) else ""
            out.append((i + 1, what, "\n".join(lines[i + 1 : end])))
    return out


def test_every_command_block_of_the_readme_is_run_or_says_why_not() -> None:
    """Each command block is run as written, by .ci/run or by a test here; the few that cannot run offline say why.
    After an install, a block that calls ``planmode`` activates the venv first (the install's own shell aside)."""
    blocks = _command_blocks()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    unmarked = [(line, code.splitlines()[0]) for line, what, code in blocks if not what]
    assert unmarked == [], "mark each command block with what runs it, or <!-- not-run: why -->"
    names = [what for _, what, _ in blocks if not what.startswith("not-run:")]
    assert sorted(names) == sorted(_RUN_BY_CI + _RUN_HERE), names
    for name in _RUN_BY_CI:
        assert f"<!-- {name} -->" in ci, f".ci/run does not run the {name} block"
    assert sum(what.startswith("not-run:") for _, what, _ in blocks) <= 2, "keep the blocks that are not run few"
    for line, what, code in blocks:
        first = code.strip().splitlines()[0]
        if what not in ("plain-install", "setup-command") and re.search(r"^planmode |\s planmode ", code, re.M):
            assert first.startswith(". .venv/bin/activate"), f"line {line}: planmode is not on PATH after the set-up"


def _venv_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PLANMODE_", "VIRTUAL_ENV"))}
    env.update(LANGSMITH_TRACING="false", COLUMNS="120")
    return env


@pytest.mark.integration
def test_the_plain_install_block_runs_as_written(tmp_path: Path) -> None:
    """``pip install . && planmode demo`` in a fresh venv, from a copy of the repository's files."""
    import shutil

    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the repository's files are not known")
    clone = tmp_path / "clone"
    for name in listed.stdout.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    env = _venv_env()
    env.pop("PYTHONPATH", None)  # the installed package, not a source folder
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", _block("plain-install")],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "run finished: completed" in out, out[-3000:]
    assert (clone / ".venv" / "bin" / "planmode").is_file()


@pytest.mark.integration
def test_the_try_without_a_key_block_runs_as_written(tmp_path: Path) -> None:
    script = _block("try-without-a-key")
    port = _free_port()
    script = script.replace("8765", str(port))
    # The block starts by activating the venv of the set-up: here, the venv running these tests.
    venv = Path(sys.prefix)
    if (venv / "bin" / "activate").is_file():
        (tmp_path / ".venv").symlink_to(venv, target_is_directory=True)
    else:  # not a venv: an activate that puts this interpreter's folder on PATH
        (tmp_path / ".venv" / "bin").mkdir(parents=True)
        (tmp_path / ".venv" / "bin" / "activate").write_text(f'PATH="{Path(sys.executable).parent}:$PATH"\n')
    env = _venv_env()
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
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


def test_every_relative_link_of_the_readme_and_the_docs_resolves() -> None:
    """The README moved its details to docs/: a link to a page or an anchor that is not there is a broken promise."""
    import re as _re

    broken = []
    for page in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        for target in _re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and file.suffix == ".md":
                slugs = {
                    _re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                    for h in _re.findall(r"^#+ (.+)$", file.read_text(encoding="utf-8"), _re.M)
                }
                if anchor not in slugs:
                    broken.append(f"{page.name}: {target}")
    assert broken == []


def test_the_readme_is_user_first_and_its_synopsis_lists_every_command() -> None:
    """A user reads what it is, how to install and try it, and the command line before anything about the
    project's own development; the synopsis names every command the CLI has (it went out of date before)."""
    import typer.main

    from planmode.cli.app import app

    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    headings = [line for line in lines if line.startswith("## ")]
    assert len(lines) <= 250, "keep the README short: details go to docs/"
    assert headings.index("## The command line") < headings.index("## From Python") < headings.index("## Development")
    assert next(i for i, line in enumerate(lines) if line.startswith("planmode run ")) < 100
    synopsis = text.split("## The command line", 1)[1].split("```", 2)[1]
    group = typer.main.get_command(app)
    commands = getattr(group, "commands", {})
    assert "run" in commands
    missing = [name for name in commands if f"planmode {name}" not in synopsis and f"| {name}" not in synopsis]
    assert missing == []
