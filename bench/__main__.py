"""``python -m bench [--quick] [--only NAME ...] [--out DIR]``: run the figures, write JSON, RESULTS.md, plots.

Without ``--only`` every figure runs (about 5 minutes on 2 idle cores: the timed figures repeat 5 times).
``--only reliability`` runs the reliability suite (slow tests included) for its table. The report is rendered
from every figure's JSON in the output folder, so a partial run updates its figures and keeps the others; a
full-size run into bench/results also rewrites docs/benchmarks.md and the headline table of README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from bench.figures import FIGURES
from bench.reliability import run_reliability
from bench.report import provenance, sync_docs, write_report

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (seconds): keeps the harness working")
    parser.add_argument("--only", nargs="*", choices=[*sorted(FIGURES), "reliability"], help="run only these")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where results go (default bench/results)")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="measure nothing: render RESULTS.md (and, for bench/results, the docs) again from the JSON there",
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        return _report_only(args.out)
    names = args.only or list(FIGURES)
    results = {}
    started = time.perf_counter()
    if "reliability" in names:
        print("[bench] reliability suite (pytest, slow tests included) ...", flush=True)
        data = run_reliability(args.out)
        print(f"[bench] reliability: {data['passed']} passed, {data['failed']} failed in {data['seconds']} s")
        names = [n for n in names if n != "reliability"]
    with tempfile.TemporaryDirectory(prefix="planmode-bench-") as tmp:
        for name in names:
            t = time.perf_counter()
            print(f"[bench] {name} ...", flush=True)
            work = Path(tmp) / name
            work.mkdir()
            fig = FIGURES[name](work, args.quick)
            fig["seconds"] = round(time.perf_counter() - t, 2)
            fig["load_average"] = [round(x, 2) for x in os.getloadavg()]  # other work on the machine skews timings
            fig["reproduced"] = provenance()
            results[name] = fig
            (args.out / f"{name}.json").write_text(json.dumps(fig, indent=2) + "\n")
            met = {True: "met", False: "MISSED", None: "reported"}[fig.get("met")]
            print(f"[bench] {name}: {fig.get('measured')} ({met}, {fig['seconds']} s)", flush=True)
    for name in FIGURES:  # figures not run this time: their last results
        if name not in results and (args.out / f"{name}.json").exists():
            results[name] = json.loads((args.out / f"{name}.json").read_text())
    meta = {
        "quick": args.quick,
        "seconds": round(sum(f.get("seconds", 0) for f in results.values()), 1),
        "this_run_seconds": round(time.perf_counter() - started, 1),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cores": os.cpu_count(),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "figures": names,
    }
    (args.out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    write_report(results, meta, args.out)
    if args.out.resolve() == RESULTS.resolve() and not args.quick:  # the published figures: docs and README too
        sync_docs(results, meta, RESULTS.parent.parent)
        print("[bench] docs/benchmarks.md and the README's headline table updated", flush=True)
    print(f"[bench] done in {meta['seconds']} s: {args.out / 'RESULTS.md'}", flush=True)
    return 0


def _report_only(out: Path) -> int:
    """Render the report from the figures' JSON in ``out`` as they are (each keeps when it was reproduced)."""
    results = {
        name: json.loads((out / f"{name}.json").read_text()) for name in FIGURES if (out / f"{name}.json").exists()
    }
    meta_file = out / "meta.json"
    meta = json.loads(meta_file.read_text()) if meta_file.exists() else {}
    write_report(results, meta, out)
    if out.resolve() == RESULTS.resolve() and not meta.get("quick"):
        sync_docs(results, meta, RESULTS.parent.parent)
    print(f"[bench] report rendered from {len(results)} figures: {out / 'RESULTS.md'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
