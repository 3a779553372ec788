"""Who may approve: LangGraph custom auth for a planmode server (``langgraph.json``'s ``auth`` entry).

    cd examples/auth && langgraph dev      # the server resolves the auth path from where it runs

Every request carries ``Authorization: Bearer <token>``; `authenticate` maps the token to a user and the
permissions it grants. Any authenticated user may start runs and read threads. Answering planmode's approval
interrupt needs the ``planmode:approve`` permission, and is refused (HTTP 403) before the graph sees the
answer:

- a run that carries a ``command`` (``Command(resume=...)``: the answer to the interrupt; ``goto``/``update``
  could jump past it just as well);
- an update of a thread's state (``threads.update_state``, Studio's state editor): writing the state
  ``as_node="approve"`` would approve by the back door. Thread metadata updates go through the same check;
- a run whose context (or ``config.configurable``, which the server turns into the context) loosens approval:
  ``approval: "auto"`` approves plans with nobody asked, ``check_staleness: false`` skips a question. (The
  graph itself ignores such a value on a run that resumes a waiting thread: a resume may tighten its settings,
  never loosen them. This refusal comes before any run is made, and covers a new run too.)

The approve node records the identity of the user whose run resumed it in the plan's history and the run
report (`planmode.approval.approver`).

The tokens here are demo values: replace `USERS` with a lookup in your identity provider (verify a JWT, ask
your OAuth server). ``PLANMODE_EXAMPLE_USERS`` (JSON: ``{"token": {"identity": ..., "permissions": [...]}}``)
replaces them without editing this file.
"""

from __future__ import annotations

import json
import os
from typing import Any

from langgraph_sdk import Auth

__all__ = ["APPROVE", "LOOSENING", "USERS", "auth"]

#: The permission needed to answer the approval interrupt.
APPROVE = "planmode:approve"

#: Demo users by bearer token: replace with your identity provider.
USERS: dict[str, dict[str, Any]] = json.loads(os.environ.get("PLANMODE_EXAMPLE_USERS") or "null") or {
    "alice-token": {"identity": "alice", "permissions": [APPROVE]},
    "bob-token": {"identity": "bob", "permissions": []},
}

auth = Auth()


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    """The user of a ``Bearer`` token; anything else is HTTP 401."""
    scheme, _, token = (authorization or "").partition(" ")
    user = USERS.get(token.strip()) if scheme.lower() == "bearer" else None
    if user is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="missing or unknown bearer token")
    return {"identity": str(user["identity"]), "permissions": list(user.get("permissions") or [])}


def _refuse(ctx: Auth.types.AuthContext, what: str) -> None:
    if APPROVE not in ctx.permissions:
        raise Auth.exceptions.HTTPException(
            status_code=403,
            detail=f"user {ctx.user.identity!r} may not {what}: it needs the {APPROVE!r} permission",
        )


#: Run settings that loosen approval, with the values that do.
LOOSENING: dict[str, tuple[Any, ...]] = {"approval": ("auto",), "check_staleness": (False,)}


@auth.on.threads.create_run
async def on_run(ctx: Auth.types.AuthContext, value: Auth.types.RunsCreate) -> None:
    """A run that answers an interrupt (carries a command), or whose settings loosen approval, needs the approve
    permission."""
    kwargs = value.get("kwargs") or {}
    if kwargs.get("command") is not None:
        _refuse(ctx, "answer the approval (resume with a command)")
    config = kwargs.get("config") or {}
    for settings in (kwargs.get("context"), config.get("configurable") if isinstance(config, dict) else None):
        if not isinstance(settings, dict):
            continue
        for name, values in LOOSENING.items():
            if name in settings and any(settings[name] == v and type(settings[name]) is type(v) for v in values):
                _refuse(ctx, f"start a run with {name}={settings[name]!r} (it loosens approval)")


@auth.on.threads.update
async def on_thread_update(ctx: Auth.types.AuthContext, value: Auth.types.ThreadsUpdate) -> None:
    """Editing a thread's state could approve by the back door: it needs the approve permission too."""
    _refuse(ctx, "edit a thread's state")
