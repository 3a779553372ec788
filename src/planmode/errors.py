"""planmode's exceptions: one small hierarchy.

Expected failures during a run (a failed tool, a refused patch) are values in state, not exceptions.
These are for setup and programmer errors, and for parse failures that callers turn into values.
"""

from __future__ import annotations

from datetime import datetime

__all__ = [
    "ConfigurationError",
    "ModelUnavailableError",
    "PlanModeError",
    "PlanParseError",
    "SnapshotNotFoundError",
    "ThreadBusyError",
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


class ThreadBusyError(PlanModeError):
    """Another process is running the thread (it holds the thread's lease; see `planmode.lease`)."""

    def __init__(self, thread_id: str, holder: str, since: datetime) -> None:
        self.thread_id = thread_id
        self.holder = holder
        self.since = since
        super().__init__(
            f"thread {thread_id!r} is already running ({holder}, since "
            f"{since:%Y-%m-%d %H:%M:%S} UTC); wait for it to finish, or stop that process"
        )


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
