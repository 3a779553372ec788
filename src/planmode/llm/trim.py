"""Keeping a tool loop's messages within a context budget.

A tool-calling conversation grows with every tool result; a small local model has a context of a few thousand
tokens, and a prompt that does not fit fails the call (or, worse, leaves the answer no room). `fit_messages`
returns the messages to send so that they fit in ``budget - reserve`` tokens, trimming in this order:

1. old tool results (oldest first; the newest one stays whole as long as possible), each cut to a short head
   and a note saying how much was left out;
2. then the newest tool results the same way;
3. then the longest remaining messages, cut in the middle (a head and a tail survive).

Tokens are counted approximately, a token per three characters (code and non-English text tokenize denser
than the usual four), so that no tokenizer has to be downloaded. The messages themselves are not changed: the
caller keeps the full history and trims a copy before each call, so nothing is lost from the record.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

__all__ = ["CHARS_PER_TOKEN", "approx_tokens", "fit_messages"]

#: Characters counted as one token.
CHARS_PER_TOKEN = 3
_PER_MESSAGE = 8  # role markers and separators of a chat template
_KEEP_HEAD = 400  # characters a trimmed tool result keeps
_SLACK = 0.9  # the count is approximate: fill at most this share of the room


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(
        item if isinstance(item, str) else str(item.get("text", "")) if isinstance(item, dict) else ""
        for item in content
    )


def approx_tokens(message: BaseMessage) -> int:
    """An upper-leaning estimate of the tokens a message takes in a prompt."""
    chars = len(_text(message))
    if isinstance(message, AIMessage) and message.tool_calls:
        chars += len(json.dumps([[c["name"], c["args"]] for c in message.tool_calls], default=str))
    return chars // CHARS_PER_TOKEN + _PER_MESSAGE


def _total(messages: Sequence[BaseMessage]) -> int:
    return sum(approx_tokens(m) for m in messages)


def _cut(message: BaseMessage, keep: int, what: str) -> BaseMessage:
    text = _text(message)
    if len(text) <= keep + 80:
        return message
    head = text[: keep // 2 if what == "message" else keep]
    tail = text[-(keep // 2) :] if what == "message" and keep >= 2 else ""
    note = (
        f"\n[... {len(text) - len(head) - len(tail)} characters of this {what} left out to fit the "
        "context budget (the context_tokens setting) ...]\n"
    )
    return message.model_copy(update={"content": head + note + tail})


def fit_messages(messages: Sequence[BaseMessage], budget: int, *, reserve: int = 0) -> list[BaseMessage]:
    """The messages trimmed to fit ``budget - reserve`` approximate tokens (``reserve``: room for the answer).

    Message order, roles, ids and tool-call ids are kept, so the conversation stays valid for the model; only
    contents are shortened. Messages that fit are returned as they are (a new list)."""
    out = list(messages)
    room = int(max(256, budget - max(0, reserve)) * _SLACK)
    if budget <= 0 or _total(out) <= room:
        return out
    tools = [i for i, m in enumerate(out) if isinstance(m, ToolMessage)]
    for i in tools[:-1] + tools[-1:]:  # oldest first, the newest last
        out[i] = _cut(out[i], _KEEP_HEAD, "tool result")
        if _total(out) <= room:
            return out
    for i in tools:
        out[i] = _cut(out[i], 0, "tool result")
        if _total(out) <= room:
            return out
    # Still too long: cut the longest messages in the middle, longest first, to what the room allows.
    while _total(out) > room:
        longest = max(range(len(out)), key=lambda k: len(_text(out[k])))
        size = len(_text(out[longest]))
        excess_chars = (_total(out) - room) * CHARS_PER_TOKEN
        keep = max(0, size - excess_chars - 200)
        cut = _cut(out[longest], keep, "message")
        if cut is out[longest]:  # nothing left to cut
            break
        out[longest] = cut
    return out
