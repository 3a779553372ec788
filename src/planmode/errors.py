"""planmode's exceptions: one small hierarchy.

Expected failures during a run (a failed tool, a refused patch) are values in state, not exceptions.
These are for setup and programmer errors, and for parse failures that callers turn into values.
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "ModelUnavailableError",
    "PlanModeError",
    "PlanParseError",
    "SnapshotNotFoundError",
    "ThreadNotFoundError",
]


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


class ModelUnavailableError(PlanModeError):
    """The model could not be reached: a refused connection, or a server error (5xx) after the client's
    retries. Not a verdict on the work: the run pauses with status ``model_unavailable`` and resumes, at the
    same or another endpoint, where it stopped."""

    def __init__(self, reason: str, *, base_url: str | None = None, model: str | None = None) -> None:
        self.reason = reason
        self.base_url = base_url
        self.model = model
        where = f" at {base_url}" if base_url else ""
        name = f" ({model})" if model else ""
        super().__init__(f"the model{name} is unavailable{where}: {reason}")
