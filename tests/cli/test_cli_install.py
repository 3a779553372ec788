"""A plain ``pip install .`` (no extras) gives a working ``planmode``: every package the code imports is declared.

The dev venv hides an undeclared import (another package pulls it in); these tests read the imports of src/planmode
and the declarations of pyproject.toml instead. `.ci/run` also installs the package plain into its own venv and runs
``planmode --help`` and ``planmode demo`` there.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "planmode"

#: Imports that belong to an extra (each imported only on the path that needs it): the extra, and the requirement
#: there that provides the module (psycopg_pool comes with ``psycopg[pool]``).
EXTRA_IMPORTS = {"psycopg": ("postgres", "psycopg"), "psycopg_pool": ("postgres", "psycopg"), "PIL": ("png", "pillow")}


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = {k: {_name(r) for r in v} for k, v in project.get("optional-dependencies", {}).items()}
    return {_name(r) for r in project["dependencies"]}, extras


def _imported() -> dict[str, set[str]]:
    """Top-level module name -> the files of src/planmode importing it (absolute imports only)."""
    found: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top != "planmode" and top not in sys.stdlib_module_names and top != "__future__":
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_imported_package_is_declared() -> None:
    core, extras = _declared()
    dists = packages_distributions()
    undeclared = {}
    for module, files in sorted(_imported().items()):
        owners = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
        if module in EXTRA_IMPORTS:
            extra, requirement = EXTRA_IMPORTS[module]
            if requirement in extras.get(extra, set()):
                continue
        if not owners & core:
            undeclared[module] = sorted(files)
    assert not undeclared, f"imported but not declared in pyproject.toml's dependencies: {undeclared}"


def test_click_is_a_core_dependency() -> None:
    # The CLI imports click directly; typer >= 0.2x no longer depends on it.
    core, _ = _declared()
    assert "click" in core
