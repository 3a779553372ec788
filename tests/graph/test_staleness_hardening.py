"""Issue 21 §7, staleness: git runs nothing the workspace configures, large files are fingerprinted by all of
their content, and the run's own writes and database are not outside changes."""

from __future__ import annotations

import subprocess
from pathlib import Path

from planmode.staleness import fingerprint


def git(ws: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(ws), *args], check=True, timeout=30, capture_output=True)


def git_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "config.txt").write_text("value = 1\n")
    git(ws, "init", "-q")
    git(ws, "add", ".")
    git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    return ws


def hook_script(tmp_path: Path, marker: Path) -> Path:
    script = tmp_path / "hook.sh"
    script.write_text(f"#!/bin/sh\ntouch '{marker}'\ncat\n")
    script.chmod(0o755)
    return script


def test_a_workspace_fsmonitor_hook_is_not_run_by_the_fingerprint(tmp_path: Path) -> None:
    ws = git_workspace(tmp_path)
    marker = tmp_path / "fsmonitor-ran"
    git(ws, "config", "core.fsmonitor", str(hook_script(tmp_path, marker)))  # what a step could write
    (ws / "config.txt").write_text("value = 2\n")
    fp = fingerprint(str(ws))
    assert fp is not None and fp["kind"] == "git" and "config.txt" in fp["files"]
    assert not marker.exists()


def test_a_workspace_filter_driver_is_not_run_by_the_fingerprint(tmp_path: Path) -> None:
    ws = git_workspace(tmp_path)
    marker = tmp_path / "filter-ran"
    (ws / ".gitattributes").write_text("*.txt filter=evil diff=evil\n")
    git(ws, "add", ".gitattributes")
    git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "attrs")
    script = hook_script(tmp_path, marker)
    for key in ("filter.evil.clean", "filter.evil.process", "diff.evil.textconv", "diff.external"):
        git(ws, "config", key, str(script))
    git(ws, "config", "filter.evil.required", "true")
    (ws / "config.txt").write_text("value = 9\n")  # same size: git compares the content, through the filter
    fp = fingerprint(str(ws))
    assert fp is not None and fp["kind"] == "git" and "config.txt" in fp["files"]
    assert not marker.exists()


BIG = 16 * 1024 * 1024


def test_files_past_16_mib_differing_after_16_mib_or_in_length_fingerprint_differently(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    big = ws / "big.bin"

    def digest(data: bytes) -> str:
        big.write_bytes(data)
        fp = fingerprint(str(ws), ["big.bin"])
        assert fp is not None and fp["kind"] == "files"
        return str(fp["digest"])

    base = b"a" * BIG + b"tail one" + b"b" * 1000
    first = digest(base)
    assert digest(b"a" * BIG + b"tail two" + b"b" * 1000) != first  # differs only after 16 MiB
    assert digest(base + b"longer") != first  # differs in length only
    assert digest(base) == first  # the same content: the same fingerprint
