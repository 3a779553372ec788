"""Message helpers: a message's text, and transcripts normalised for strict chat templates."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

__all__ = ["normalize_messages", "text_of"]


def normalize_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """One system message first, then same-role neighbours merged (strict chat templates need this)."""
    system = [m for m in messages if isinstance(m, SystemMessage)]
    rest = [m for m in messages if not isinstance(m, SystemMessage)]
    out: list[BaseMessage] = []
    if system:
        out.append(SystemMessage(content="\n\n".join(text_of(m) for m in system)))
    for m in rest:
        prev = out[-1] if out else None
        mergeable = (
            prev is not None
            and type(prev) is type(m)
            and isinstance(m, HumanMessage | AIMessage)
            and not getattr(m, "tool_calls", None)
            and not getattr(prev, "tool_calls", None)
        )
        if mergeable and prev is not None:
            out[-1] = type(m)(content=text_of(prev) + "\n\n" + text_of(m))
        else:
            out.append(m)
    return out


def text_of(message: BaseMessage) -> str:
    """A message's text content (list contents joined)."""
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for item in content:
        if isinstance(item, str):
            parts.append(item)
        elif isinstance(item, dict) and item.get("type") == "text":
            parts.append(str(item.get("text", "")))
    return "".join(parts)
