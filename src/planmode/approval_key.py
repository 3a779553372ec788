"""The approval key: the secret that seals approval records (`planmode.state.approvals`).

A record in the run's ``approvals`` is believed only when its seal (an HMAC of its content) verifies under this
key, so data written through ``update_state`` — which anyone with access to the thread can send — never
approves a step. Every process that runs or resumes a thread must use the same key:

1. ``PLANMODE_APPROVAL_KEY`` (any string of at least 16 characters): set it on every machine of a deployment
   (a LangGraph server, workers sharing a PostgreSQL database);
2. otherwise the key file ``$PLANMODE_APPROVAL_KEY_FILE``, default ``$XDG_CONFIG_HOME/planmode/approval.key``
   (``~/.config/planmode/approval.key``), created on first use with 32 random bytes, mode 0600 in a folder made
   0700 (written to a private temporary file and linked into place: never readable by others, never seen
   half-written): every process of this user on this machine shares it. A key file is used only when it can be
   trusted, else `KeyFileError` (one line naming the path and the fix): it is a regular file, not a symlink, owned
   by this user, that neither group nor others can write, in a folder that is not a symlink and that others cannot
   write (unless it has the sticky bit, as ``/tmp``); it is opened without following a symlink and checked on the
   opened descriptor;
3. when neither can be had (no home, a read-only file system), a key of this process only, with a warning: a
   run resumed in another process is then asked for its approval again (never run unapproved).

Whoever holds the key can approve: keep it as you would keep an SSH key.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import shlex
import stat
import threading
from pathlib import Path

__all__ = ["ENV_KEY", "ENV_KEY_FILE", "KeyFileError", "approval_key", "key_file"]

ENV_KEY = "PLANMODE_APPROVAL_KEY"
ENV_KEY_FILE = "PLANMODE_APPROVAL_KEY_FILE"

log = logging.getLogger(__name__)
_lock = threading.Lock()
_cache: dict[tuple[str | None, str], bytes] = {}
_POSIX = os.name == "posix"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class KeyFileError(ValueError):
    """The approval key file cannot be trusted (others can change it, or a symlink leads to it); the message names
    the path and the fix. A setup error: a ValueError, as the other checks of the key raise (this module is a
    leaf)."""


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
    _check_folder(path.parent, path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        data = _create(path)
    else:
        if stat.S_ISLNK(info.st_mode):
            raise _refused(path, "it is a symlink (whoever can change the link chooses the key)", _fix_link(path))
        data = _read(path)
    data = data.strip()
    if len(data) < 16:
        raise OSError(f"the key file {path} holds fewer than 16 characters")
    return data


def _refused(path: Path, why: str, fix: str) -> KeyFileError:
    return KeyFileError(f"planmode refuses the approval key file {path}: {why}; fix: {fix}")


def _fix_link(path: Path) -> str:
    return f"replace the link with the file itself and run chmod 600 {shlex.quote(str(path))}"


def _check_folder(folder: Path, path: Path) -> None:
    """Refuse a key whose folder is a symlink, or one others can write without the sticky bit; make it (0700) when
    it is missing."""
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        folder.chmod(0o700)  # whatever the umask
        info = os.lstat(folder)
    if not _POSIX:
        return
    quoted = shlex.quote(str(folder))
    if stat.S_ISLNK(info.st_mode):
        raise _refused(path, f"its folder {folder} is a symlink", f"keep the key in a real folder (chmod 700 {quoted})")
    if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
        raise _refused(path, f"others can write its folder {folder} (and replace the key)", f"chmod 700 {quoted}")


def _check_file(path: Path, info: os.stat_result) -> None:
    """Refuse an opened key file that is not a regular file, is another user's, or that group or others can write."""
    if not stat.S_ISREG(info.st_mode):
        raise _refused(path, "it is not a regular file", f"put the key in a regular file with chmod 600 {path}")
    if not _POSIX:
        return
    quoted = shlex.quote(str(path))
    if info.st_uid != os.geteuid():
        raise _refused(path, f"it belongs to another user (uid {info.st_uid})", f"chown $(id -u) {quoted}")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        mode = oct(stat.S_IMODE(info.st_mode))
        raise _refused(path, f"group or others can write it (mode {mode})", f"chmod 600 {quoted}")
    if info.st_mode & (stat.S_IRGRP | stat.S_IROTH):
        log.warning("planmode: others can read the approval key file %s, and so approve: chmod 600 %s", path, quoted)


def _read(path: Path) -> bytes:
    """The key file's content: opened without following a symlink, checked on the descriptor (no race)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):  # a symlink swapped in since the lstat
            raise _refused(path, "it is a symlink", _fix_link(path)) from None
        raise
    with os.fdopen(fd, "rb") as handle:
        _check_file(path, os.fstat(fd))
        return handle.read(4096)


def _create(path: Path) -> bytes:
    """A new key, written to a private temporary file (0600 from its creation) and linked into place, so the key
    file never exists half-written or readable by others; when another process made it first, theirs."""
    data = secrets.token_hex(32).encode()
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            if hasattr(os, "fchmod"):
                os.fchmod(fd, 0o600)  # whatever the umask
            handle.write(data)
            handle.flush()
            os.fsync(fd)
        try:
            os.link(tmp, path)  # never replaces a file: the first process to make the key wins
        except FileExistsError:
            return _read(path)
        except OSError:  # a file system without hard links: create the file itself, exclusively
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return data


_PROCESS_KEY = secrets.token_bytes(32)


def _process_key() -> bytes:
    return _PROCESS_KEY
