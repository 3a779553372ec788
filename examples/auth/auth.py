"""Who may approve: LangGraph custom auth for a planmode server (``langgraph.json``'s ``auth`` entry).

    cd examples/auth && langgraph dev      # the server resolves the auth path from where it runs

Every request carries ``Authorization: Bearer <token>``; `authenticate` maps the token to a user and the
permissions it grants. Any authenticated user may start runs and read threads. Answering planmode's approval
interrupt needs the ``planmode:approve`` permission, and is refused (HTTP 403) before the graph sees the
answer:

- a run that carries a ``command`` (``Command(resume=...)``: the answer to the interrupt; ``goto``/``update``
  could jump past it just as well);
- an update of a thread's state (``threads.update_state``, Studio's state editor): writing the state
  ``as_node="approve"`` would approve by the back door. Thread metadata updates go through the same check.

The approve node records the identity of the user whose run resumed it in the plan's history and the run
report (`planmode.approver`).

The tokens here are demo values: replace `USERS` with a lookup in your identity provider (verify a JWT, ask
your OAuth server). ``PLANMODE_EXAMPLE_USERS`` (JSON: ``{"token": {"identity": ..., "permissions": [...]}}``)
replaces them without editing this file.
"""

from __future__ import annotations

import json
import os
from typing import Any

from langgraph_sdk import Auth

__all__ = ["APPROVE", "USERS", "auth"]

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


@auth.on.threads.create_run
async def on_run(ctx: Auth.types.AuthContext, value: Auth.types.RunsCreate) -> None:
    """A run that answers an interrupt (carries a command) needs the approve permission."""
    if (value.get("kwargs") or {}).get("command") is not None:
        _refuse(ctx, "answer the approval (resume with a command)")


@auth.on.threads.update
async def on_thread_update(ctx: Auth.types.AuthContext, value: Auth.types.ThreadsUpdate) -> None:
    """Editing a thread's state could approve by the back door: it needs the approve permission too."""
    _refuse(ctx, "edit a thread's state")
