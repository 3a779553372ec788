"""The README's promises: its set-up and test commands, and a current copy of the graph diagram."""

from __future__ import annotations

import re
from pathlib import Path

from planmode.graph import mermaid

README = Path(__file__).resolve().parents[1] / "README.md"


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
    assert "pytest" in tests
