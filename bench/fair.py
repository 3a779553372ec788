"""The fair comparison of the real-task benchmark (issue 44): one budget for every system, repeated runs, and a
summary with 95% intervals and the cost of a done task.

- `Budget`: the same caps for every system and task: wall time (the run is killed), tokens (input plus output as
  the server reports them) and model calls. The counting proxy in front of the server refuses a call (HTTP 403,
  `BUDGET_REFUSAL`) once the run has made ``calls`` calls or spent ``tokens`` tokens, whatever the system; a call
  that starts under the cap may end over it (the server's count is known only after it). planmode also gets the
  token cap as its own ``max_tokens`` setting (it pauses before a call it expects to overspend); it has no setting
  for a call cap, so the proxy's is the only one it meets.
- The plain loops are prompted again when they stop (`REPROMPT`) until they answer with the word DONE or the
  budget is spent; a loop's *claim* is that DONE, planmode's is ending ``completed``. A false claim is a claim on
  a run whose checks fail.
- `summary`: per model, server and system, the share of runs done with a 95% **Wilson score interval** (runs
  counted as independent trials; runs of one task are alike, so the interval is narrower than a bootstrap over
  tasks would be), the tasks done that share implies (share x tasks, interval likewise), tokens, seconds and calls
  per done run (all runs' totals over the runs done), the share of tokens and of time that runs not done spent,
  claims and false claims.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "BUDGET_REFUSAL",
    "INTERVAL_METHOD",
    "REPROMPT",
    "Budget",
    "said_done",
    "summary",
    "summary_table",
    "wilson",
]

REPROMPT = "If a file the task asks for is missing, make it; otherwise say DONE."
"""What a plain loop is told each time it stops without saying DONE."""

BUDGET_REFUSAL = "bench budget spent"
"""The error message of a call the counting proxy refuses because the run's budget is spent."""

INTERVAL_METHOD = (
    "Wilson score interval (95%, z = 1.96) on the share of runs done, runs counted as independent trials; tasks "
    "done = share x tasks"
)

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Budget:
    """The caps of one run, the same for every system: seconds of wall time, tokens, model calls."""

    time_s: float = 600.0
    tokens: int = 30_000
    calls: int = 24

    def __post_init__(self) -> None:
        if not (self.time_s > 0 and self.tokens > 0 and self.calls > 0):
            raise ValueError(f"a budget's time, tokens and calls must be positive, got {self}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def spent(self, calls: int, tokens: int) -> bool:
        """Whether a run that made ``calls`` calls and spent ``tokens`` tokens may start no other call."""
        return calls >= self.calls or tokens >= self.tokens


def said_done(text: str) -> bool:
    """Whether a loop's answer says DONE: the word in capitals, alone (punctuation and markup around it aside)."""
    return any(word.strip(".,;:!?*`'\"()[]") == "DONE" for word in text.split())


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``successes / n`` (``(0.0, 1.0)`` when ``n`` is 0)."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"{successes} successes out of {n}")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _per_done(total: float, done: int, digits: int) -> float | None:
    if not done:
        return None
    return round(total / done, digits) if digits else round(total / done)


def _share(part: float, whole: float) -> float | None:
    return round(part / whole, 3) if whole else None


def summary(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model, server and system (in the order first seen): the figures of the fair comparison (module doc)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["model"], r["server"], r["system"]), []).append(r)
    rows = []
    for (model, server, system), rs in groups.items():
        n, done = len(rs), sum(bool(r["done"]) for r in rs)
        tasks = len({r["task"] for r in rs})
        low, high = wilson(done, n)
        tokens = [r["prompt_tokens"] + r["completion_tokens"] for r in rs]
        failed_tokens = sum(t for t, r in zip(tokens, rs, strict=True) if not r["done"])
        seconds = sum(r["seconds"] for r in rs)
        failed_seconds = sum(r["seconds"] for r in rs if not r["done"])
        rows.append(
            {
                "model": model,
                "server": server,
                "system": system,
                "tasks": tasks,
                "runs": n,
                "runs_per_task": round(n / tasks, 2) if tasks else 0,
                "done_runs": done,
                "done_share": round(done / n, 3) if n else 0.0,
                "done_share_95": [round(low, 3), round(high, 3)],
                "tasks_done": round(tasks * done / n, 2) if n else 0.0,
                "tasks_done_95": [round(tasks * low, 2), round(tasks * high, 2)],
                "tasks_done_every_run": sum(
                    all(r["done"] for r in rs if r["task"] == t) for t in {r["task"] for r in rs}
                ),
                "claimed": sum(bool(r["claimed"]) for r in rs),
                "false_claims": sum(bool(r["claimed"]) and not r["done"] for r in rs),
                "tokens": sum(tokens),
                "seconds": round(seconds, 1),
                "calls": sum(r["calls"] for r in rs),
                "tokens_per_done": _per_done(sum(tokens), done, 0),
                "seconds_per_done": _per_done(seconds, done, 1),
                "calls_per_done": _per_done(sum(r["calls"] for r in rs), done, 1),
                "failed_token_share": _share(failed_tokens, sum(tokens)),
                "failed_time_share": _share(failed_seconds, seconds),
                "budget_stops": sum(bool(r.get("budget_stop")) for r in rs),
                "timeouts": sum(r["status"] == "timeout" for r in rs),
            }
        )
    return rows


def summary_table(records: Sequence[dict[str, Any]]) -> str:
    """The fair comparison as a markdown table."""
    lines = [
        "| model | system | tasks x runs | tasks done (95%) | runs done | claimed | false claims | tokens / done "
        "| s / done | calls / done | failed runs' tokens | failed runs' time | budget stops |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in summary(records):
        low, high = row["tasks_done_95"]
        lines.append(
            f"| {row['model']} | {row['system']} | {row['tasks']} x {row['runs_per_task']} | {row['tasks_done']} "
            f"({low}-{high}) | {row['done_runs']} / {row['runs']} | {row['claimed']} | {row['false_claims']} "
            f"| {_na(row['tokens_per_done'])} | {_na(row['seconds_per_done'])} | {_na(row['calls_per_done'])} "
            f"| {_pct(row['failed_token_share'])} | {_pct(row['failed_time_share'])} | {row['budget_stops']} |"
        )
    return "\n".join(lines)


def _na(value: float | None) -> str:
    return "n/a" if value is None else str(value)


def _pct(share: float | None) -> str:
    return "n/a" if share is None else f"{100 * share:.0f}%"
