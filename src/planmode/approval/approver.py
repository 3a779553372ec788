"""Who answered the approval: the LangGraph server's authenticated user, or the local user.

On a LangGraph server (``langgraph dev``, LangGraph Platform) with custom auth, the server puts the
authenticated user of the request that started the run in ``config["configurable"]["langgraph_auth_user"]``
(a reserved key: clients cannot set it); its ``identity`` is the approver. A server without custom auth knows
no user: the approver is recorded as ``"anonymous"``. In-process (the CLI, the Python API) the approver is the
operating-system user running the process.
"""

from __future__ import annotations

import functools
import getpass
from collections.abc import Mapping
from typing import Any

from planmode.state.models import clean_text

__all__ = ["ANONYMOUS", "approver"]

#: The approver recorded when a LangGraph server runs without custom auth (it knows no user).
ANONYMOUS = "anonymous"
#: Keys the LangGraph server sets in every run's ``configurable`` (and clients cannot).
_SERVER_KEYS = ("langgraph_request_id", "langgraph_auth_user_id")
_MAX_LEN = 200


def approver(config: Mapping[str, Any] | None = None) -> str:
    """The identity of whoever answers in the run of ``config`` (default: the current run's config)."""
    if config is None:
        from langgraph.config import get_config

        try:
            config = get_config()
        except RuntimeError:  # outside a run: the local user
            config = {}
    conf = config.get("configurable") or {}
    identity = _identity(conf.get("langgraph_auth_user"))
    if identity:
        return identity
    if any(conf.get(k) is not None for k in _SERVER_KEYS):
        return ANONYMOUS
    return _local_user()


def _identity(user: Any) -> str | None:
    """The ``identity`` of a server user (a ``BaseUser``, a proxy of one, or its dict), if it has one."""
    if user is None:
        return None
    value = user.get("identity") if isinstance(user, Mapping) else getattr(user, "identity", None)
    if not isinstance(value, str) or not value.strip():
        return None
    return clean_text(value.strip())[:_MAX_LEN]


@functools.cache
def _local_user() -> str:
    try:
        return clean_text(getpass.getuser())[:_MAX_LEN]
    except (OSError, KeyError):  # no login name and no passwd entry (e.g. a container with an unknown uid)
        return "unknown local user"
