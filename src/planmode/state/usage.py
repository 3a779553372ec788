"""The ``usage`` state key: token counters per run, node, step and model, and their never-raising reducer.

Capture (the callback handler that fills these counters) is `planmode.observability.usage`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["COUNTERS", "add_counters", "merge_usage", "total_tokens"]

#: The counters of one bucket.
COUNTERS = ("calls", "input", "output", "cached", "estimated")
_SECTIONS = ("nodes", "steps", "models")


def _count(value: Any) -> int:
    """A counter value as a non-negative int (anything else counts 0): the reducer never raises."""
    if type(value) is int:  # the common case, first (the reducer reads every counter of every update)
        return value if value > 0 else 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if value != value or value in (float("inf"), float("-inf")):  # NaN, infinities
        return 0
    return max(0, int(value))


def add_counters(current: Any, update: Any) -> dict[str, int]:
    """Two buckets of counters added (either may be junk: it counts as zero)."""
    cur = current if isinstance(current, Mapping) else {}
    upd = update if isinstance(update, Mapping) else {}
    return {k: _count(cur.get(k)) + _count(upd.get(k)) for k in COUNTERS}


def merge_usage(current: Mapping[str, Any] | None, update: Mapping[str, Any] | None) -> dict[str, Any]:
    """The usage reducer: adds a delta's counters to the run's, bucket by bucket.

    Pure and total: never raises, whatever ``current`` and ``update`` are (a reducer runs on replay too, and a
    raising one leaves the thread unreadable). An update that is not a mapping changes nothing; one with
    ``"reset": True`` starts from zero (detect, for a new run on the thread) and adds the rest of itself;
    a counter that is not a non-negative number counts zero; a section that is not a mapping is ignored.
    """
    base: Any = current if isinstance(current, Mapping) else {}
    if isinstance(update, Mapping) and update.get("reset") is True:
        base = {}
    upd: Any = update if isinstance(update, Mapping) else {}
    out: dict[str, Any] = {"total": add_counters(base.get("total"), upd.get("total"))}
    for section in _SECTIONS:
        old = base.get(section)
        new = upd.get(section)
        old = old if isinstance(old, Mapping) else {}
        new = new if isinstance(new, Mapping) else {}
        # Entries the update does not touch are kept as they are (the counters of each are read through
        # `_count` wherever they are used); only the updated ones are added and cleaned: an update costs
        # O(its own size), not O(the run's steps).
        merged = dict(old)
        if not set(map(type, merged)) <= {str}:  # junk keys (C-speed check: the section has one key per step)
            merged = {k if isinstance(k, str) else str(k): v for k, v in old.items()}
        for key, value in new.items():
            merged[str(key)] = add_counters(merged.get(str(key)), value)
        out[section] = merged
    return out


def total_tokens(usage: Any, bucket: str | None = None, key: str | None = None) -> int:
    """Input plus output tokens of the whole run (or of ``usage[bucket][key]``); junk counts zero."""
    if not isinstance(usage, Mapping):
        return 0
    counters: Any = usage.get("total")
    if bucket is not None:
        section = usage.get(bucket)
        counters = section.get(key) if isinstance(section, Mapping) else None
    if not isinstance(counters, Mapping):
        return 0
    return _count(counters.get("input")) + _count(counters.get("output"))
