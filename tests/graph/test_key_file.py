"""The approval key file is used only when it can be trusted (issue 43, item 5), attacked as another local user
would: a key others can write, a key or a key folder reached through a symlink, a folder anyone can write, another
user's file, and a creation that fails half-way. Each is refused with one line naming the path and the fix; the
key given in ``PLANMODE_APPROVAL_KEY`` is used as before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from planmode import approval_key

pytestmark = pytest.mark.skipif(os.name != "posix", reason="file modes and owners are POSIX")

KEY = b"0123456789abcdef0123456789abcdef\n"


@pytest.fixture(autouse=True)
def no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(approval_key.ENV_KEY, raising=False)
    monkeypatch.setattr(approval_key, "_cache", {})


def key_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, mode: int = 0o600, folder_mode: int = 0o700) -> Path:
    folder = tmp_path / "cfg"
    folder.mkdir(exist_ok=True)
    folder.chmod(folder_mode)
    path = folder / "approval.key"
    path.write_bytes(KEY)
    path.chmod(mode)
    monkeypatch.setenv(approval_key.ENV_KEY_FILE, str(path))
    return path


def refused(match: str) -> pytest.RaisesContext[approval_key.KeyFileError]:
    return pytest.raises(approval_key.KeyFileError, match=match)


@pytest.mark.parametrize("mode", [0o666, 0o622, 0o620, 0o602, 0o660], ids=oct)
def test_a_key_file_others_can_write_is_refused_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: int
) -> None:
    path = key_at(tmp_path, monkeypatch, mode=mode)
    with refused("group or others can write it") as caught:
        approval_key.approval_key()
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and f"chmod 600 {path}" in message
    # the key in the environment is used as before, whatever the file
    monkeypatch.setenv(approval_key.ENV_KEY, "a key of at least sixteen characters")
    assert approval_key.approval_key() == b"a key of at least sixteen characters"


def test_a_key_file_reached_through_a_symlink_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = key_at(tmp_path, monkeypatch)
    link = real.parent / "link.key"
    link.symlink_to(real)
    monkeypatch.setenv(approval_key.ENV_KEY_FILE, str(link))
    with refused("it is a symlink") as caught:
        approval_key.approval_key()
    assert str(link) in str(caught.value) and "chmod 600" in str(caught.value)
    dangling = real.parent / "dangling.key"  # a link to where an attacker will put a key: not followed to create it
    dangling.symlink_to(tmp_path / "attacker" / "key")
    monkeypatch.setenv(approval_key.ENV_KEY_FILE, str(dangling))
    with refused("it is a symlink"):
        approval_key.approval_key()
    assert not (tmp_path / "attacker").exists()


def test_a_key_in_a_symlinked_folder_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = key_at(tmp_path, monkeypatch)
    (tmp_path / "linked").symlink_to(real.parent)
    monkeypatch.setenv(approval_key.ENV_KEY_FILE, str(tmp_path / "linked" / "approval.key"))
    with refused("its folder .* is a symlink"):
        approval_key.approval_key()


def test_a_key_in_a_folder_anyone_can_write_is_refused_unless_sticky(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = key_at(tmp_path, monkeypatch, folder_mode=0o777)
    with refused("others can write its folder") as caught:
        approval_key.approval_key()
    assert f"chmod 700 {path.parent}" in str(caught.value)
    path.parent.chmod(0o1777)  # as /tmp: others cannot replace this user's file
    assert approval_key.approval_key() == KEY.strip()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_another_users_key_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = key_at(tmp_path, monkeypatch)
    os.chown(path, 65534, 65534)
    with refused("belongs to another user"):
        approval_key.approval_key()


def test_a_creation_that_fails_half_way_leaves_no_key_file_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk full while the new key is written: no empty key file is left for every later process to refuse (each
    would fall back to a key of its own, and a resumed run would lose its approvals)."""
    path = tmp_path / "new" / "approval.key"
    monkeypatch.setenv(approval_key.ENV_KEY_FILE, str(path))
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, fd: int, *args: object, **kwargs: object) -> None:
            self.handle = real_fdopen(fd, *args, **kwargs)  # type: ignore[call-overload]

        def __enter__(self) -> Full:
            return self

        def __exit__(self, *exc: object) -> None:
            self.handle.close()

        def write(self, data: bytes) -> int:
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fdopen", Full)
    process_key = approval_key.approval_key()  # this process goes on with a key of its own, with a warning
    monkeypatch.setattr(os, "fdopen", real_fdopen)
    assert not path.exists()
    monkeypatch.setattr(approval_key, "_cache", {})
    made = approval_key.approval_key()
    assert made != process_key and path.read_bytes().strip() == made and len(made) >= 32
    assert (path.stat().st_mode & 0o777) == 0o600 and (path.parent.stat().st_mode & 0o777) == 0o700
    assert sorted(p.name for p in path.parent.iterdir()) == ["approval.key"]  # no temporary file left


def test_a_new_key_is_private_whatever_the_umask(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "deep" / "cfg" / "approval.key"
    monkeypatch.setenv(approval_key.ENV_KEY_FILE, str(path))
    old = os.umask(0o277)  # a umask that would make the key unreadable even by its owner
    try:
        made = approval_key.approval_key()
    finally:
        os.umask(old)
    assert (path.stat().st_mode & 0o777) == 0o600
    monkeypatch.setattr(approval_key, "_cache", {})
    assert approval_key.approval_key() == made  # another process reads the same key
