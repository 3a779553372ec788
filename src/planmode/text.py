"""Text helpers shared by state-side and model-side code."""

from __future__ import annotations

__all__ = ["clip"]


def clip(text: str | None, limit: int, *, marker: str = "…", fold: bool = True) -> str:
    """``text`` in at most ``limit`` characters: whitespace folded to single spaces (unless ``fold`` is
    False), and when it is cut, ending with ``marker``. None reads as the empty text."""
    flat = " ".join((text or "").split()) if fold else (text or "")
    if len(flat) <= limit:
        return flat
    return flat[: max(0, limit - len(marker))] + marker
