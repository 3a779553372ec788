"""The state update of a node whose model could not be reached (shared by the nodes and ``pausable``)."""

from __future__ import annotations

from typing import Any

from planmode.context import settings_dict
from planmode.errors import ModelUnauthorizedError, ModelUnavailableError
from planmode.observability.events import emit
from planmode.state.graph_state import PlanModeUpdate

__all__ = ["unavailable_update"]


def _info(node: str, state: Any, exc: ModelUnavailableError) -> dict[str, Any]:
    stored = settings_dict(state.get("settings") if isinstance(state, dict) else None)
    is_step = node == "execute_step"
    return {
        "node": "dispatch" if is_step else node,
        "failed_node": node,
        "status": "running" if is_step else (state.get("status") or "running"),
        "error": str(exc),
        "base_url": stored.get("base_url"),
        "model": stored.get("model"),
        "step_id": state["step"].id if is_step and "step" in state else None,
        # why: "unauthorized" when the server refused the credentials (a bad API key), else "unavailable"
        "reason": "unauthorized" if isinstance(exc, ModelUnauthorizedError) else "unavailable",
    }


def unavailable_update(node: str, state: Any, exc: ModelUnavailableError) -> PlanModeUpdate:
    """The state update of a node whose model could not be reached (execute_step leaves the status to
    verify, which runs next: parallel tasks cannot all write it)."""
    info = _info(node, state, exc)
    emit("model_unavailable", str(exc), step_id=info["step_id"], node=node, reason=info["reason"])
    if node == "execute_step":
        return {"unavailable": info}
    return {"unavailable": info, "status": "model_unavailable", "error": str(exc)}
