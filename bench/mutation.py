"""``python -m bench.mutation [--max-children N] [--timeout S]``: mutation testing of the plan invariants
and the approval protocol.

Runs mutmut (the ``mutation`` extra: ``pip install -e '.[mutation]'``) with the configuration in
pyproject.toml's ``[tool.mutmut]`` — the files it mutates (state/patch.py, state/reducer.py and approval.py) and the
tests it runs against each mutant (the state and approval tests only, so a run takes minutes, not hours) — then
prints the score per file and the surviving mutants, and writes them to ``mutants/score.json``. mutmut keeps its
results in ``mutants/``: a second run only re-tests what changed. See docs/mutation.md for the last score and why each
surviving mutant survives.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_LINE = re.compile(r"^\s*([\w.]+)__mutmut_(\d+):\s*(.+?)\s*$")


def _mutmut(*args: str, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("mutmut")
    cmd = [str(exe) if exe.exists() else "mutmut", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)


def _module(name: str) -> str:
    """``planmode.state.patch.x_apply_patch`` -> ``planmode.state.patch``."""
    parts = name.split(".")
    while parts and (parts[-1].startswith("x_") or parts[-1].startswith("xǁ")):
        parts.pop()
    return ".".join(parts)


def score() -> dict[str, object]:
    """Per-module counts of the last run's mutants by status, the score, and the survivors."""
    out = _mutmut("results", "--all", "true").stdout
    counts: dict[str, Counter[str]] = {}
    survivors: list[str] = []
    for line in out.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        name, num, status = m.groups()
        mod = _module(name)
        counts.setdefault(mod, Counter())[status] += 1
        if status != "killed":
            survivors.append(f"{name}__mutmut_{num}: {status}")
    modules = {}
    for mod, c in sorted(counts.items()):
        total = sum(c.values())
        modules[mod] = {**dict(c), "total": total, "score": round(c["killed"] / total, 4) if total else None}
    return {"modules": modules, "not_killed": survivors}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mutation", description=__doc__)
    parser.add_argument("--max-children", type=int, default=2, help="parallel mutant workers (default 2)")
    parser.add_argument("--timeout", type=float, default=1800, help="bound on the whole run, seconds")
    parser.add_argument("--report-only", action="store_true", help="only summarise the last run's results")
    args = parser.parse_args(argv)
    if not args.report_only:
        run = _mutmut("run", "--max-children", str(args.max_children), timeout=args.timeout)
        if run.returncode not in (0, 1):  # mutmut exits non-zero when mutants survive
            print(run.stdout[-2000:], run.stderr[-2000:], sep="\n", file=sys.stderr)
            return run.returncode
    data = score()
    (ROOT / "mutants").mkdir(exist_ok=True)
    (ROOT / "mutants" / "score.json").write_text(json.dumps(data, indent=2) + "\n")
    for mod, c in data["modules"].items():  # type: ignore[union-attr]
        print(f"{mod}: {c['score']:.1%} killed ({c.get('killed', 0)} of {c['total']}) {c}")
    for s in data["not_killed"]:  # type: ignore[union-attr]
        print("  not killed:", s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
