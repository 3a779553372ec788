"""The files planmode trusts, which the workspace tools and a rollback of files never touch.

- planmode's own data: every path with a ``.planmode`` folder (at any depth below the workspace: the CLI's
  database lives in one, in the folder a run starts in or a parent of it), and the approval key file
  (`planmode.approval_key.key_file`, wherever it is: a run started in the home folder has ``~/.config`` inside its
  workspace). No access at all: an agent that reads the key can seal its own approvals, and one that changes the
  database rewrites the run's history.
- git's own data: every path with a ``.git`` component (compared case-insensitively: one spelling on a file system
  that ignores case). Git runs what its hooks and its config name (``core.fsmonitor``, ``core.hooksPath``), so a
  write there is a command the user's next ``git status`` runs; reads are allowed, writes only where a setting
  says so (``allow_git_writes``).

Every check takes a *resolved* path (every symlink followed), so a symlink into one of them is the same path.
"""

from __future__ import annotations

import os
from pathlib import Path

from planmode.approval_key import key_file

__all__ = ["GIT_DIR", "PLANMODE_DIR", "git_path", "key_path", "planmode_path"]

PLANMODE_DIR = ".planmode"
"""planmode's own folder in a workspace (the CLI's default database lives there): always protected."""
GIT_DIR = ".git"
"""Git's folder (or, in a worktree or a submodule, its ``.git`` file): written only where a setting allows it."""


def key_path() -> Path | None:
    """The approval key file as a real path (whether it exists or not), or None when it has no place (no home)."""
    try:
        return key_file().expanduser().resolve()
    except (OSError, RuntimeError):  # no home folder; a symlink loop
        return None


def _parts(resolved: Path, root: Path) -> list[str]:
    """The parts of ``resolved`` below ``root`` (all of them when it is not below it); by text: it runs for every
    entry a listing or a search looks at."""
    text, top = str(resolved), str(root).rstrip(os.sep)
    if text.startswith(top + os.sep):
        text = text[len(top) + 1 :]
    return text.split(os.sep)


def planmode_path(resolved: Path, root: Path, key: Path | None) -> bool:
    """Whether ``resolved`` is planmode's: the approval key file ``key`` (`key_path`) or a temporary file of its
    making (``.approval.key.<random>.tmp`` beside it), or in a ``.planmode`` folder below ``root``."""
    if key is not None and (
        resolved == key or (resolved.name.startswith(f".{key.name}.") and resolved.parent == key.parent)
    ):
        return True
    return any(p == PLANMODE_DIR for p in _parts(resolved, root))


def git_path(resolved: Path, root: Path) -> bool:
    """Whether ``resolved`` is git's: a ``.git`` folder or file below ``root``, or anything in one."""
    return any(p.casefold() == GIT_DIR for p in _parts(resolved, root))
