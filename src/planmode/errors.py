"""planmode's exceptions: one small hierarchy.

Expected failures during a run (a failed tool, a refused patch) are values in state, not exceptions.
These are for setup and programmer errors, and for parse failures that callers turn into values.
"""

from __future__ import annotations

__all__ = ["ConfigurationError", "PlanModeError", "PlanParseError", "SnapshotNotFoundError", "ThreadNotFoundError"]


class PlanModeError(Exception):
    """Base class of every planmode error."""


class ConfigurationError(PlanModeError):
    """The run cannot start as configured (a missing API key, an unknown model, ...). The message names the fix."""


class PlanParseError(PlanModeError, ValueError):
    """Model output could not be read as a plan or a patch."""


class ThreadNotFoundError(PlanModeError, LookupError):
    """No checkpoint exists for the given thread id."""


class SnapshotNotFoundError(PlanModeError, LookupError):
    """No snapshot with the given id (or offset) exists in the thread."""
