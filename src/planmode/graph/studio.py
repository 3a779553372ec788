"""The graphs that ``langgraph.json`` points at (LangGraph Studio, ``langgraph dev``).

`make_graph` is the graph factory the server calls for each request: planmode with the workspace file tools
(`planmode.tools.workspace_tools`) on the run's workspace, which is, as for the run's other settings,

1. the ``workspace`` the run's context gives (``context={"workspace": "/abs/folder"}``);
2. else the ``workspace`` of the settings the thread's run started with (a resume keeps its folder);
3. else the ``PLANMODE_WORKSPACE`` environment variable of the server;

and planmode without tools when none of them names one. The workspace must be an absolute path to a folder; any
other value is a `ConfigurationError` naming it. The server's checkpoint file (``PLANMODE_SERVER_DB``) is protected
from the tools as the command line protects its database.

``graph`` is the same graph, compiled once with the tools of ``PLANMODE_WORKSPACE`` (none when it is not set).
Both are compiled without a checkpointer: the LangGraph server brings its own persistence. The model is made at
run time from the run settings and ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``; loading this module needs no key.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planmode._compat import CONFIG_KEY_CHECKPOINTER
from planmode.errors import ConfigurationError
from planmode.graph.builder import build_graph

if TYPE_CHECKING:  # the server resolves these names itself (it reads the factory's annotations)
    from langchain_core.runnables import RunnableConfig
    from langgraph_sdk.runtime import ServerRuntime

__all__ = ["WORKSPACE_ENV", "graph", "make_graph", "workspace_of"]

#: The environment variable naming the server's default workspace.
WORKSPACE_ENV = "PLANMODE_WORKSPACE"

_GRAPHS: dict[str | None, Any] = {}
_GRAPHS_LOCK = threading.Lock()


def _graph_for(workspace: str | None) -> Any:
    """The planmode graph with the workspace tools on ``workspace`` (none for None), compiled once per folder."""
    with _GRAPHS_LOCK:
        return _GRAPHS.get(workspace) or _GRAPHS.setdefault(workspace, _build(workspace))


def _build(workspace: str | None) -> Any:
    from planmode.persistence.checkpointers import SERVER_DB_ENV
    from planmode.tools import workspace_tools

    db = os.environ.get(SERVER_DB_ENV, "")
    protected = [db] if db and "://" not in db else []  # the server's checkpoints: out of the tools' reach
    tools = workspace_tools(workspace, protected=protected) if workspace is not None else []
    return build_graph(tools=tools)


def workspace_of(value: Any, where: str) -> str | None:
    """The workspace a context or settings value names (a mapping's or an object's ``workspace``), checked: an
    absolute path to a folder; None when it names none."""
    raw = value.get("workspace") if isinstance(value, Mapping) else getattr(value, "workspace", None)
    if raw is None or raw == "":
        return None
    path = Path(str(raw))
    if not path.is_absolute() or not path.is_dir():
        raise ConfigurationError(f"the workspace {str(raw)!r} from {where} is not an absolute path to a folder")
    return str(path.resolve())


async def _stored_settings(config: Mapping[str, Any]) -> Any:
    """The settings the thread's run started with, from the server's checkpointer (None when there are none)."""
    configurable = config.get("configurable") or {}
    saver, thread = configurable.get(CONFIG_KEY_CHECKPOINTER), configurable.get("thread_id")
    if saver is None or not thread:
        return None
    found = await saver.aget_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    return None if found is None else (found.checkpoint.get("channel_values") or {}).get("settings")


def _graph_of(context: Any, stored: Any) -> Any:
    workspace = (
        workspace_of(context, "the run's context")
        or workspace_of(stored, "the thread's settings")
        or workspace_of({"workspace": os.environ.get(WORKSPACE_ENV)}, WORKSPACE_ENV)
    )
    return _graph_for(workspace)


async def make_graph(config: RunnableConfig, runtime: ServerRuntime[Any]) -> Any:
    """The graph for one request of the LangGraph server: planmode with the workspace tools on the run's workspace
    (see the module). The folder checks and the first build of a folder's graph run in a worker thread (the server
    refuses blocking calls on its event loop)."""
    stored = await _stored_settings(config)
    return await asyncio.to_thread(_graph_of, getattr(runtime, "context", None), stored)


graph = _graph_for(workspace_of({"workspace": os.environ.get(WORKSPACE_ENV)}, WORKSPACE_ENV))
