"""Text helpers shared by state-side and model-side code."""

from __future__ import annotations

__all__ = ["clip", "is_control", "markdown_text", "visible"]


def clip(text: str | None, limit: int, *, marker: str = "…", fold: bool = True) -> str:
    """``text`` in at most ``limit`` characters: whitespace folded to single spaces (unless ``fold`` is
    False), and when it is cut, ending with ``marker``. None reads as the empty text."""
    flat = " ".join((text or "").split()) if fold else (text or "")
    if len(flat) <= limit:
        return flat
    return flat[: max(0, limit - len(marker))] + marker


#: Characters that are not text on a terminal or in a rendered document: they can hide or rewrite what is
#: shown. Bidirectional overrides and isolates can reorder text; U+2028/U+2029 break lines.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029")


def is_control(char: str) -> bool:
    """Whether ``char`` is a control character a terminal acts on: C0 (ESC included) but newline and tab, DEL,
    C1 (``\x80``-``\x9f``: ``\x9b`` is a CSI), or a bidirectional control."""
    code = ord(char)
    return (code < 0x20 and char not in "\n\t") or 0x7F <= code <= 0x9F or char in _BIDI


def visible(text: str) -> str:
    """``text`` with every control character (`is_control`) shown as an escape (``\\x1b``, ``\\u202e``): what a
    model, a tool or a human wrote is shown, never acted on by the terminal. Newlines and tabs are kept."""
    if not any(is_control(c) for c in text):
        return text
    return "".join((f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}") if is_control(c) else c for c in text)


#: ASCII punctuation with which inline markdown text could hide, disguise or restructure itself: HTML and
#: comments (``< > &``: an entity can spell a bidi override), links and images (``[ ] !``), code spans, emphasis
#: and strikethrough (`` ` * ~ ``), table pipes, headings, and the backslash itself. Left alone for readability
#: (the CLI shows the markdown as it is): ``_ - + = ( ) . :`` and quotes, which only format what is shown.
_MARKDOWN_SPECIAL = frozenset("\\`*[]<>#!|~&")


def markdown_text(text: str) -> str:
    """``text`` as literal markdown inline text: every ASCII punctuation character backslash-escaped (so no
    ``<!-- comment -->``, HTML tag, link, image, heading, emphasis, code span or table pipe is formed), line
    breaks folded into spaces (no new block can start), and control characters shown as escapes (`visible`)."""
    flat = " ".join(text.replace("\r", " ").split("\n"))
    return "".join("\\" + c if c in _MARKDOWN_SPECIAL else c for c in visible(flat))
