"""``python -m bench --reliability``: run the reliability suite (slow tests included) and record its figures.

Runs ``tests/test_reliability_*.py`` with pytest (``-m "slow or not slow"``: everything), reads the JUnit
report and writes ``reliability.json``; `bench.report` turns it into the README's reliability table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

__all__ = ["run_reliability"]

ROOT = Path(__file__).resolve().parent.parent

#: The figures, by test function: what it shows and how many things it tried ({n}: its parametrized cases).
GROUPS: dict[str, tuple[str, str]] = {
    "test_mutated_patches_apply_whole_or_not_at_all_long": (
        "Fuzzing apply_patch and the reducer with mutated patches",
        "5000 examples",
    ),
    "test_write_sequences_through_the_channel_keep_the_thread_readable_long": (
        "Fuzzing write sequences through the plan channel, checkpoint round trip after each",
        "5000 examples",
    ),
    "test_persistent_bad_output_ends_cleanly": (
        "Malformed model output at detect/plan/verify/reflect/patch, every answer bad: clean end",
        "{n} cases",
    ),
    "test_one_bad_output_is_recovered": (
        "Malformed model output at detect/plan/verify/reflect/patch, first answer bad: recovered",
        "{n} cases",
    ),
    "test_a_bad_resume_value_is_answered_by_asking_again": (
        "Bad resume values at the approval interrupt: asked again with an error",
        "{n} values",
    ),
    "test_eight_workers_times_twenty_five_runs_share_one_sqlite_file": (
        "8 threads x 25 runs on one SQLite file: no lock error, no lost checkpoint",
        "200 runs",
    ),
    "test_thirty_killed_runs_resume_to_completion": (
        "SIGKILL crash-resume: every run completes, no done step runs again",
        "30 trials",
    ),
    "test_two_threads_editing_at_once_never_lose_an_edit": (
        "Concurrent plan edits (edit_plan), 2 threads x 20 rounds, SQLite and PostgreSQL: none lost",
        "{n} databases",
    ),
    "test_two_processes_editing_at_once_never_lose_an_edit": (
        "Concurrent plan edits (edit_plan), 2 processes x 20 edits on one SQLite file: none lost",
        "40 edits",
    ),
    "test_durability_kills_just_after_a_dependent_started": (
        "Durability: SIGKILL 0-100 ms after a dependent step began (default async durability), SQLite and "
        "PostgreSQL: no done step runs again",
        "30 trials x {n} databases",
    ),
    "test_concurrent_resumes_of_one_thread_run_it_once": (
        "Concurrent resumes: 3 processes start one thread at once, SQLite and PostgreSQL: one runs it, the "
        "others are refused",
        "10 rounds x {n} databases",
    ),
    "test_an_edit_at_every_node_boundary_leaves_the_run_resumable": (
        "Plan edits (valid and rejected) at every execution-node boundary: the run resumes, done steps run once",
        "{n} cases",
    ),
    "test_full_outputs_stay_in_the_store_and_out_of_the_checkpoints": (
        "Full step outputs kept in the store only",
        "1 run",
    ),
}


def run_reliability(out: Path) -> dict[str, Any]:
    """Run the suite and write ``out / "reliability.json"``."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "reliability").glob("test_reliability_*.py"))
        started = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-m",
                "slow or not slow",
                f"--junitxml={report}",
                *files,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, "HYPOTHESIS_PROFILE": "default"},
            timeout=1800,
            check=False,
        )
        seconds = time.perf_counter() - started
        cases = ET.parse(report).getroot().iter("testcase")
        results = [
            {
                "name": c.get("name", ""),
                "seconds": float(c.get("time", 0)),
                "passed": not any(x.tag in ("failure", "error") for x in c),
                "skipped": any(x.tag == "skipped" for x in c),
            }
            for c in cases
        ]
    rows = []
    for name, (figure, how_many) in GROUPS.items():
        mine = [r for r in results if r["name"].split("[")[0] == name]
        if not mine:
            continue
        ran = [r for r in mine if not r["skipped"]]
        rows.append(
            {
                "figure": figure,
                "how_many": how_many.format(n=len(ran)),
                "tests": len(ran),
                "passed": sum(r["passed"] for r in ran),
                "failed": sum(not r["passed"] for r in ran),
                "skipped": len(mine) - len(ran),
                "seconds": round(sum(r["seconds"] for r in mine), 1),
            }
        )
    data = {
        "returncode": proc.returncode,
        "seconds": round(seconds, 1),
        "tests": len(results),
        "passed": sum(r["passed"] and not r["skipped"] for r in results),
        "failed": sum(not r["passed"] for r in results),
        "skipped": sum(r["skipped"] for r in results),
        "rows": rows,
        "tail": proc.stdout.strip().splitlines()[-1:] if proc.stdout else [],
    }
    (out / "reliability.json").write_text(json.dumps(data, indent=2) + "\n")
    return data
