"""The old module paths (the shims of docs/architecture.md) warn when imported, naming the new path, and still
reach the moved module; planmode's own modules import no shim, so importing planmode warns about nothing.

Each import runs in a fresh interpreter: a shim replaces itself in ``sys.modules`` by the moved module, so only
its first import in a process runs (and warns)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
#: Each shim and the module it now is.
SHIMS = {
    "planmode.lease": "planmode.persistence.lease",
    "planmode.alease": "planmode.persistence.lease",
    "planmode.usage": "planmode.observability.usage",
    "planmode.runs": "planmode.persistence.runs",
    "planmode.edit": "planmode.persistence.edit",
    "planmode.policy": "planmode.approval.policy",
    "planmode.events": "planmode.observability.events",
    "planmode.snapshots": "planmode.persistence.snapshots",
}


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("PYTHONWARNINGS", None)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=300, check=False)


def test_every_top_level_module_that_only_re_exports_is_a_known_shim() -> None:
    """A new shim gets its warning (and a row in SHIMS) too."""
    import ast

    found = set()
    for path in sorted((SRC / "planmode").glob("*.py")):
        body = [n for n in ast.parse(path.read_text(encoding="utf-8")).body if not isinstance(n, ast.Expr)]
        if path.name != "__init__.py" and any(
            isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in body
        ):
            found.add(f"planmode.{path.stem}")
    assert found == set(SHIMS)


@pytest.mark.parametrize(("old", "new"), sorted(SHIMS.items()))
def test_a_shim_warns_naming_the_new_path_and_is_the_moved_module(old: str, new: str) -> None:
    refused = _python("-W", "error::DeprecationWarning", "-c", f"import {old}")
    assert refused.returncode != 0
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("DeprecationWarning: ") and f"import {new} instead" in last and old in last, last

    code = f"import {old}, {new}; assert {old} is {new}; print('same')"
    kept = _python("-W", "ignore::DeprecationWarning", "-c", code)
    assert kept.returncode == 0 and kept.stdout.strip() == "same", kept.stderr


def test_the_warning_points_at_the_line_that_imports_the_old_path(tmp_path: Path) -> None:
    user = tmp_path / "user_code.py"
    user.write_text("import sys\nimport planmode.usage\n", encoding="utf-8")
    shown = _python("-W", "always::DeprecationWarning", str(user))
    assert shown.returncode == 0, shown.stderr
    assert f"{user}:2: DeprecationWarning: planmode.usage is deprecated" in shown.stderr, shown.stderr


IMPORT_ALL = """
import importlib, pathlib, sys
root = pathlib.Path(sys.argv[1])
shims = set(sys.argv[2].split(","))
for path in sorted(root.rglob("*.py")):
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    name = ".".join(parts)
    if name in shims or parts[-1] == "__main__":
        continue
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:  # an optional extra (llama_cpp...) that is not installed
        if (exc.name or "").split(".")[0] == "planmode":
            raise
print("imported")
"""


def test_planmodes_own_modules_import_no_shim() -> None:
    """Every module but the shims, imported with DeprecationWarning an error: none imports an old path."""
    done = _python("-W", "error::DeprecationWarning", "-c", IMPORT_ALL, str(SRC / "planmode"), ",".join(SHIMS))
    assert done.returncode == 0 and done.stdout.strip() == "imported", done.stderr[-3000:]
