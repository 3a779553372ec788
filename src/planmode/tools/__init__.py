"""LangChain tools for planmode agents, and the read-only marking that tool dispatch relies on.

A tool is read-only when ``tool.metadata["planmode_read_only"] is True``. The planner may explore with
read-only tools before a plan is approved; any other tool (including every tool without the marking) is
treated as one that changes the world and is held back until approval.

After approval a step runs with the read-only tools plus the write tools it declares (`bind_step_tools`);
the approval policy and the per-step question judge the same set (`step_writes`).
"""

from __future__ import annotations

from langchain_core.tools import BaseTool

from planmode.tools.binding import StepTools, bind_step_tools, is_read_only, read_only_names, step_writes
from planmode.tools.workspace import (
    READ_ONLY_METADATA_KEY,
    WorkspaceError,
    WorkspaceLimits,
    read_only_workspace_tools,
    workspace_tools,
)

__all__ = [
    "READ_ONLY_METADATA_KEY",
    "StepTools",
    "WorkspaceError",
    "WorkspaceLimits",
    "bind_step_tools",
    "is_read_only",
    "read_only",
    "read_only_names",
    "read_only_workspace_tools",
    "step_writes",
    "workspace_tools",
]


def read_only(tool: BaseTool) -> BaseTool:
    """Mark ``tool`` read-only (in place, keeping its other metadata) and return it.

    Only mark tools that cannot change anything: read-only tools may run before a plan is approved.
    """
    tool.metadata = {**(tool.metadata or {}), READ_ONLY_METADATA_KEY: True}
    return tool
