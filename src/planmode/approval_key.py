"""The approval key: the secret that seals approval records (`planmode.state.approvals`).

A record in the run's ``approvals`` is believed only when its seal (an HMAC of its content) verifies under this
key, so data written through ``update_state`` — which anyone with access to the thread can send — never
approves a step. Every process that runs or resumes a thread must use the same key:

1. ``PLANMODE_APPROVAL_KEY`` (any string of at least 16 characters): set it on every machine of a deployment
   (a LangGraph server, workers sharing a PostgreSQL database);
2. otherwise the key file ``$PLANMODE_APPROVAL_KEY_FILE``, default ``$XDG_CONFIG_HOME/planmode/approval.key``
   (``~/.config/planmode/approval.key``), created on first use with 32 random bytes, readable by its owner
   only: every process of this user on this machine shares it;
3. when neither can be had (no home, a read-only file system), a key of this process only, with a warning: a
   run resumed in another process is then asked for its approval again (never run unapproved).

Whoever holds the key can approve: keep it as you would keep an SSH key.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from pathlib import Path

__all__ = ["ENV_KEY", "ENV_KEY_FILE", "approval_key", "key_file"]

ENV_KEY = "PLANMODE_APPROVAL_KEY"
ENV_KEY_FILE = "PLANMODE_APPROVAL_KEY_FILE"

log = logging.getLogger(__name__)
_lock = threading.Lock()
_cache: dict[tuple[str | None, str], bytes] = {}


def key_file() -> Path:
    """Where the key file is (whether it exists or not)."""
    given = os.environ.get(ENV_KEY_FILE)
    if given:
        return Path(given)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "planmode" / "approval.key"


def approval_key() -> bytes:
    """The key (see the module docstring for where it comes from); read once per source and cached."""
    env = os.environ.get(ENV_KEY)
    try:
        path = str(key_file())
    except RuntimeError:  # no home directory
        path = ""
    source = (env, path)
    key = _cache.get(source)
    if key is not None:
        return key
    with _lock:
        key = _cache.get(source)
        if key is None:
            key = _load(env, path)
            _cache[source] = key
    return key


def _load(env: str | None, path: str) -> bytes:
    if env is not None:
        if len(env) < 16:  # a setup error: ValueError, as the settings' own checks raise (this module is a leaf)
            raise ValueError(f"{ENV_KEY} must be at least 16 characters long (it seals approvals)")
        return env.encode("utf-8", "surrogatepass")
    if path:
        try:
            return _read_or_create(Path(path))
        except OSError as exc:
            log.warning(
                "planmode: cannot read or create the approval key file %s (%s); using a key of this process only: "
                "set %s so that a run resumed elsewhere keeps its approvals",
                path,
                exc,
                ENV_KEY,
            )
    return _process_key()


def _read_or_create(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process created it meanwhile: read theirs
            data = path.read_bytes()
        else:
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_hex(32).encode())
            data = path.read_bytes()
    data = data.strip()
    if len(data) < 16:
        raise OSError(f"the key file {path} holds fewer than 16 characters")
    return data


_PROCESS_KEY = secrets.token_bytes(32)


def _process_key() -> bytes:
    return _PROCESS_KEY
