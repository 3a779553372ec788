"""``python -m bench.imports_count [COMMIT ...]``: modules and import arrows of src/planmode at some commits.

Issue 22's measure of the package's shape: a folder counts as one module (``planmode.persistence.lease`` is
``planmode.persistence``; a top-level file is a module of its own; the package ``planmode`` is one), and an
import arrow is an ordered pair of distinct such modules where some file of the first imports some file of the
second. The imports are read by the parser of tests/ecosystem/test_architecture.py (``import_graph``: every
import of a planmode module, at the top, inside a function, under TYPE_CHECKING), on a ``git archive`` of each
commit. It prints, per commit: files, modules, arrows, cycles between modules, lines of src (every ``.py`` file
under src/) and the ``-> Any`` signatures in src/planmode.

Default commits: ``8398fc2`` (the parent of the regrouping into rooms, 93ae964) and ``HEAD``.
"""

from __future__ import annotations

import argparse
import io
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.ecosystem.test_architecture import import_graph  # noqa: E402  (the same parser as the layer rules)

BEFORE_ROOMS = "8398fc2"
_ANY = re.compile(r"-> Any")
_SHIM = "This shim keeps the old import path"


def _source(src: Path, module: str) -> str:
    path = src.joinpath(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return path.read_text(encoding="utf-8")


def folder_module(module: str, root: Path) -> str:
    """``planmode.a.b.c`` -> ``planmode.a`` when ``planmode/a`` is a folder; a top-level file stays itself."""
    parts = module.split(".")
    if len(parts) >= 2 and (root / "planmode" / parts[1]).is_dir():
        return ".".join(parts[:2])
    return module


def cyclic_groups(arrows: set[tuple[str, str]]) -> list[list[str]]:
    """The groups of modules that reach each other through the arrows (strongly connected, more than one)."""
    succ: dict[str, set[str]] = {}
    for a, b in arrows:
        succ.setdefault(a, set()).add(b)

    def reach(start: str) -> set[str]:
        seen, todo = {start}, [start]
        while todo:
            for nxt in succ.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    reaches = {m: reach(m) for m in {x for pair in arrows for x in pair}}
    groups = {tuple(sorted(m2 for m2 in r if m in reaches[m2])) for m, r in reaches.items()}
    return sorted(list(g) for g in groups if len(g) > 1)


def measure_tree(src: Path) -> dict[str, object]:
    """The counts for one checkout's ``src`` folder."""
    graph = import_graph(src)
    arrows = {(folder_module(a, src), folder_module(b, src)) for a, targets in graph.items() for b in targets}
    arrows = {(a, b) for a, b in arrows if a != b}
    modules = {folder_module(m, src) for m in graph}
    files = sorted(src.rglob("*.py"))
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    any_returns = sum(len(_ANY.findall(p.read_text(encoding="utf-8"))) for p in (src / "planmode").rglob("*.py"))
    cycles = cyclic_groups(arrows)
    shims = {m for m in graph if _SHIM in _source(src, m)}  # old import paths kept as aliases of moved modules
    return {
        "files": len(graph),
        "modules": len(modules),
        "arrows": len(arrows),
        "shims": len(shims),
        "modules_without_shims": len(modules - shims),
        "arrows_without_shims": len({(a, b) for a, b in arrows if a not in shims and b not in shims}),
        "cycles": [" <-> ".join(group) for group in cycles],
        "src_lines": lines,
        "any_returns": any_returns,
    }


def measure_commit(commit: str) -> dict[str, object]:
    """``git archive`` of ``commit``'s src/ into a temporary folder, measured."""
    blob = subprocess.run(["git", "archive", commit, "src"], cwd=ROOT, capture_output=True, check=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
            tar.extractall(tmp, filter="data")
        sha = subprocess.run(
            ["git", "rev-parse", "--short", commit], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        return {"commit": sha, **measure_tree(Path(tmp) / "src")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.imports_count", description=__doc__)
    parser.add_argument("commits", nargs="*", default=[BEFORE_ROOMS, "HEAD"])
    args = parser.parse_args(argv)
    rows = [measure_commit(c) for c in args.commits]
    print(
        "| commit | files | modules (a folder = 1) | import arrows | without the old-path shims "
        "| import cycles | src lines | `-> Any` |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        pairs = r["cycles"]
        assert isinstance(pairs, list)
        print(
            f"| {r['commit']} | {r['files']} | {r['modules']} | {r['arrows']} "
            f"| {r['modules_without_shims']} modules, {r['arrows_without_shims']} arrows ({r['shims']} shims) "
            f"| {len(pairs)} | {r['src_lines']} "
            f"| {r['any_returns']} |"
        )
    for r in rows:
        for p in r["cycles"]:  # type: ignore[attr-defined]
            print(f"  {r['commit']}: {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
