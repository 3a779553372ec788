"""A plan as a checkpoint stores it: its JSON data, packed with msgpack and compressed.

Every checkpoint holds the whole state, the plan included (LangGraph's SQLite saver writes each checkpoint's
channel values whole), and a chain step writes two checkpoints: stored as JSON data, a 400-step plan is about a
quarter of a megabyte in each, so the database grew with the square of the plan. Compressed, the same plan is a
tenth of that: the step definitions repeat the same keys and change little from one checkpoint to the next.

The packed form is plain msgpack data, ``{"planmode_plan": FORMAT, "data": <bytes>}``: a stock saver reads it
(with ``LANGGRAPH_STRICT_MSGPACK`` on or off), and `unpack_plan` turns it back into the plan's JSON data.
Checkpoints written before (the plan's JSON data, or the `Plan` object) are read as they are.
"""

from __future__ import annotations

import zlib
from typing import Any

import ormsgpack

__all__ = ["FORMAT", "MAX_PLAN_BYTES", "is_packed", "pack_plan_data", "unpack_plan"]

#: The packed form's name and version, stored beside the data.
FORMAT = "msgpack+zlib/1"
#: The largest plan data a packed plan may unpack to: a checkpoint edited by hand cannot make a reader inflate
#: more than this.
MAX_PLAN_BYTES = 256 * 1024 * 1024
_KEY = "planmode_plan"


def pack_plan_data(data: dict[str, Any]) -> dict[str, Any]:
    """The packed form of a plan's JSON data (zlib level 1: fast, and the keys that repeat compress well)."""
    return {_KEY: FORMAT, "data": zlib.compress(ormsgpack.packb(data), 1)}


def is_packed(value: object) -> bool:
    """Whether ``value`` is a packed plan."""
    return isinstance(value, dict) and value.get(_KEY) == FORMAT and isinstance(value.get("data"), bytes)


def unpack_plan(value: dict[str, Any]) -> object:
    """The plan's JSON data from its packed form; None when the data cannot be read (a thread stays readable:
    the caller treats it as no plan) or would unpack to more than `MAX_PLAN_BYTES`."""
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(value["data"], MAX_PLAN_BYTES)
        if inflate.unconsumed_tail or not inflate.eof:
            return None
        data: object = ormsgpack.unpackb(raw)
    except (zlib.error, ormsgpack.MsgpackDecodeError, ValueError, TypeError):
        return None
    return data if isinstance(data, dict) else None
