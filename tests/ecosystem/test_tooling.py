"""Strict, boring tooling: ruff and mypy --strict stay clean (the configuration is in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_is_clean() -> None:
    proc = _run("ruff", "check", "src", "tests", "bench")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_is_clean() -> None:
    proc = _run("ruff", "format", "--check", "src", "tests", "bench")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_type_ignore_says_why() -> None:
    import re

    bare = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "src").rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "type: ignore" in line and not re.search(r"type: ignore\[[^\]]+\]\s+#\s*\S", line)
    ]
    assert not bare, "a type: ignore without an error code and a reason: " + ", ".join(bare)


def test_mypy_strict_is_clean_on_src() -> None:
    proc = _run("mypy", "src")
    assert proc.returncode == 0, proc.stdout + proc.stderr
