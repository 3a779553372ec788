"""planmode's exceptions: one small hierarchy.

Expected failures during a run (a failed tool, a refused patch) are values in state, not exceptions.
These are for setup and programmer errors, and for parse failures that callers turn into values.
"""

from __future__ import annotations

from datetime import datetime

__all__ = [
    "CommandError",
    "ConfigurationError",
    "LeaseLostError",
    "ModelUnauthorizedError",
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


class CommandError(PlanModeError, ValueError):
    """A command line could not be split into arguments (an unclosed quote, nothing to run); the message quotes
    the command and says what is wrong (`planmode.sandbox.split_command`)."""


class ThreadNotFoundError(PlanModeError, LookupError):
    """No checkpoint exists for the given thread id."""


class SnapshotNotFoundError(PlanModeError, LookupError):
    """No snapshot with the given id (or offset) exists in the thread."""


class ThreadBusyError(PlanModeError):
    """Another process is running the thread (it holds the thread's lease; see `planmode.persistence.lease`)."""

    def __init__(self, thread_id: str, holder: str, since: datetime) -> None:
        self.thread_id = thread_id
        self.holder = holder
        self.since = since
        super().__init__(
            f"thread {thread_id!r} is already running ({holder}, since "
            f"{since:%Y-%m-%d %H:%M:%S} UTC); wait for it to finish, or stop that process"
        )


class LeaseLostError(PlanModeError):
    """This process held the thread's lease, and another holder took it over (this one was stopped, or could
    not renew it, past its expiry). Its writes are refused and it starts no more steps: the thread belongs to
    the new holder (see `planmode.persistence.lease`)."""

    def __init__(self, thread_id: str, epoch: int, *, holder: str | None = None) -> None:
        self.thread_id = thread_id
        self.epoch = epoch
        self.holder = holder
        now = f" (now held by {holder})" if holder else ""
        super().__init__(
            f"lost the lease of thread {thread_id!r} (epoch {epoch}): another process took it over{now}; "
            "this process writes no more checkpoints and starts no more steps"
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


class ModelUnauthorizedError(ModelUnavailableError):
    """The model server refused the request's credentials (HTTP 401 or 403: a missing, wrong or expired API key,
    or a key without access to the model). Not a verdict on the plan or the step: the run pauses as for an
    unavailable model (status ``model_unavailable``, ``reason`` ``"unauthorized"`` in the pause), and resumes
    once the key is fixed."""

    def __init__(
        self, reason: str, *, base_url: str | None = None, model: str | None = None, status: int | None = None
    ) -> None:
        self.reason = reason
        self.base_url = base_url
        self.model = model
        self.status = status
        where = base_url or "https://api.openai.com/v1 (the default)"
        code = f"HTTP {status}" if status else "not authorised"
        name = f" for model {model}" if model else ""
        PlanModeError.__init__(
            self,
            f"the model server at {where} refused the credentials{name} ({code}): {reason.rstrip('. ')}. "
            "Check the API key (OPENAI_API_KEY) and that it may use this model",
        )
