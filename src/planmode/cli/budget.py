"""The budget pause on the terminal: show what was spent and what comes next, raise the budget or stop.

`budget_answer` answers a ``planmode.budget`` interrupt: with the values given on the command line
(``planmode resume --max-tokens N`` / ``--max-cost X`` / ``--stop``), else by asking on a terminal, else
(no terminal) by leaving the run paused: the CLI then exits with code 6.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rich.text import Text

from planmode.budget import parse_budget_answer
from planmode.cli.ask import ask_text, choose, interactive
from planmode.cli.ui import console
from planmode.context import settings_dict
from planmode.observability.usage import format_usage, total_tokens

__all__ = ["budget_answer", "budget_screen", "parse_prices"]


def parse_prices(raw: str | None) -> dict[str, Any]:
    """The ``--prices`` option: a JSON object ``{model: {"input": $/1M, "output": $/1M, "cached": $/1M}}``."""
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--prices is not JSON: {exc.msg}") from None
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise ValueError('--prices must be a JSON object such as {"gpt-4o-mini": {"input": 0.15, "output": 0.6}}')
    return value


def budget_screen(payload: Mapping[str, Any]) -> Text:
    """The pause as plain text (model text is data: never markup)."""
    spent = payload.get("spent") or {}
    nxt = payload.get("next") or {}
    budget = payload.get("budget") or {}
    out = Text("Budget reached", style="bold yellow")
    out.append(f" before {nxt.get('what')}: {payload.get('reason')}\n")
    out.append(f"spent {spent.get('tokens')} tokens")
    if spent.get("cost") is not None:
        out.append(f" (${spent['cost']:.4f})")
    out.append(f"; next ~{nxt.get('tokens')}; budget: ")
    named = [f"{budget['max_tokens']} tokens" if budget.get("max_tokens") else ""]
    named.append(f"${budget['max_cost']:.4f}" if budget.get("max_cost") else "")
    out.append(" / ".join(x for x in named if x) or "none")
    estimate = payload.get("estimate")
    if isinstance(estimate, Mapping):
        out.append(f"\nto finish the plan: ~{estimate.get('remaining')} more tokens ({estimate.get('basis')})")
    if payload.get("answer_error"):
        out.append(f"\n{payload['answer_error']}", style="red")
    return out


def budget_answer(
    payload: Mapping[str, Any],
    *,
    max_tokens: int | None,
    max_cost: float | None,
    stop: bool,
    repeated: bool = False,
    ask: bool = True,
) -> dict[str, Any] | None:
    """The resume value for a budget pause, or None to leave the run paused.

    ``repeated``: the command line's values answered a pause already; this one is left paused (the values
    were refused, or the raise ran out), so a too-small raise never loops. ``ask`` False (``--json``): no question,
    even at a terminal."""
    console.print(budget_screen(payload))
    if stop:
        return {"action": "stop"}
    given: dict[str, Any] = {}
    if max_tokens:
        given["max_tokens"] = max_tokens
    if max_cost:
        given["max_cost"] = max_cost
    if given and repeated:
        console.print(
            Text(
                f"The budget given on the command line ({json.dumps(given)}) does not get past this pause: "
                "resume with a larger --max-tokens / --max-cost, or --stop.",
                style="red",
            )
        )
        return None
    if given:
        try:
            parse_budget_answer(given)
        except ValueError as exc:
            console.print(Text(f"Not a budget: {exc}", style="red"))
            return None
        console.print(Text(f"Raising the budget: {json.dumps(given)}", style="green"))
        return given
    if not ask or not interactive():
        console.print(
            Text(
                "The run is paused at its budget and this is not a terminal: resume with --max-tokens N "
                "(or --max-cost X) to raise it, or --stop.",
                style="yellow",
            )
        )
        return None
    suggested = (payload.get("suggested") or {}).get("max_tokens")
    while True:
        choice = choose("Raise the budget?", ["raise", "stop", "quit"])
        if choice in ("quit", None):  # Ctrl-D too: the run stays paused, resumable
            return None
        if choice == "stop":
            return {"action": "stop"}
        key = "max_cost" if (payload.get("budget") or {}).get("max_cost") else "max_tokens"
        answer = ask_text(f"New {key}", default=str(suggested or ""))
        if answer is None:
            return None
        raw = answer.strip()
        try:
            number: Any = float(raw) if key == "max_cost" else int(raw)
            parse_budget_answer({key: number})
        except ValueError as exc:
            console.print(Text(f"Not a budget: {exc}", style="red"))
            continue
        return {key: number}


def usage_line(values: Mapping[str, Any]) -> Text:
    """The run's token usage (and its budget) for ``planmode show`` and the end of a run."""
    report = values.get("report") or {}
    cost = report.get("cost") if isinstance(report, Mapping) else None
    text = Text(format_usage(values.get("usage"), cost))
    budget = values.get("budget")
    settings = settings_dict(values.get("settings"))
    tokens = (budget or {}).get("max_tokens") or settings.get("max_tokens")
    if tokens:
        text.append(f"; budget {tokens} tokens")
    if isinstance(budget, Mapping) and budget.get("stopped"):
        text.append(f" (stopped before {budget.get('stopped_at')})")
    usage = values.get("usage")
    for label, section in (("by model", "models"), ("by node", "nodes"), ("by step", "steps")):
        buckets = usage.get(section) if isinstance(usage, Mapping) else None
        if isinstance(buckets, Mapping) and buckets:
            shown = [f"{key} {total_tokens(usage, section, key)}" for key in list(buckets)[:12]]
            more = f", … {len(buckets) - 12} more" if len(buckets) > 12 else ""
            text.append(f"\n  {label}: " + ", ".join(shown) + more, style="dim")
    return text
