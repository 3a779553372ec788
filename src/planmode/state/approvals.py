"""The ``approvals`` state key: the log of approval decisions (policy and human), and its never-raising reducer."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MAX_RECORDS", "add_approval_records"]

#: How many approval records a run keeps (oldest dropped first).
MAX_RECORDS = 200


def add_approval_records(current: Any, update: Any) -> list[dict[str, Any]]:
    """Reducer of the ``approvals`` log: appends records (dicts), keeps the last `MAX_RECORDS`. Never raises:
    anything that is not a list of dicts is dropped."""
    out = [dict(r) for r in _records(current)]
    out.extend(dict(r) for r in _records(update))
    return out[-MAX_RECORDS:]


def _records(value: Any) -> Iterable[Mapping[str, Any]]:
    if isinstance(value, Mapping):
        return [value]
    if isinstance(value, list):
        return [r for r in value if isinstance(r, Mapping)]
    return []
