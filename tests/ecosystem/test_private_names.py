"""LangGraph's private names live in `planmode._compat` only (see its docstring; test_compat.py pins each).

Every module of src/planmode is parsed: outside `_compat`, no import of a private LangGraph module or name
(``langgraph._internal``, ``langgraph.checkpoint.postgres._internal`` ...) and no string that is one of
LangGraph's private config keys (``"__pregel_read"``, ``"__pregel_checkpointer"`` ...). The checker is tried on
synthetic violations too, so a rule that stopped matching would show."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "planmode"
SEAM = SRC / "_compat.py"
#: A LangGraph config key of its own (``CONFIG_KEY_*`` of ``langgraph._internal._constants``), as a whole string.
PRIVATE_KEY = re.compile(r"__pregel_\w+")


def private_uses(source: str) -> list[str]:
    """What ``source`` uses of LangGraph's private names: private modules or names imported, private keys."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if _private_module(a.name)]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "langgraph":
            module = node.module or ""
            if _private_module(module):
                found.append(module)
            found += [f"{module}.{a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and PRIVATE_KEY.fullmatch(node.value):
            found.append(repr(node.value))
    return found


def _private_module(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "langgraph" and any(p.startswith("_") for p in parts)


@pytest.mark.parametrize(
    "source",
    [
        'x = conf.get("__pregel_read")',
        "KEY = '__pregel_checkpointer'",
        'f(config["configurable"]["__pregel_runtime"])',
        "from langgraph.checkpoint.postgres import PostgresSaver, _internal",
        "from langgraph.checkpoint.postgres._internal import get_connection",
        "import langgraph.checkpoint.postgres._ainternal",
        "from langgraph._internal._constants import CONFIG_KEY_READ",
    ],
)
def test_the_checker_finds_a_private_name(source: str) -> None:
    assert private_uses(source)


def test_the_checker_lets_public_names_and_prose_pass() -> None:
    source = (
        '"""Channels such as ``__pregel_tasks`` are LangGraph\'s own."""\n'
        "from langgraph.checkpoint.postgres import PostgresSaver\n"
        "from planmode._compat import CONFIG_KEY_READ\n"
        'prefix = "__pregel_" + name\n'
    )
    assert private_uses(source) == []


def test_langgraphs_private_names_are_used_in_compat_only() -> None:
    offenders = {
        str(path.relative_to(SRC)): uses
        for path in sorted(SRC.rglob("*.py"))
        if path != SEAM and (uses := private_uses(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, f"use these through planmode._compat: {offenders}"
    assert private_uses(SEAM.read_text(encoding="utf-8")), "the seam itself holds them"
