"""What a real task is: its prompt, the workspace it starts from, and the checks that decide whether it is done.

A check is a command run in the workspace after the run (the task's oracle): ``python`` in its argv is this
interpreter, and a shell script or a Makefile that calls ``python`` gets it too (the interpreter's folder comes
first on ``PATH``). The checks are the ground truth; what a system says about its own run is not consulted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Check", "Task", "cmd", "has_file", "py", "pytest_passes"]


@dataclass(frozen=True)
class Check:
    """A command run in the workspace (``python`` means this interpreter): it must exit 0, and its output,
    stripped, must equal ``expect`` (when given) or contain ``contains`` (when given)."""

    argv: tuple[str, ...]
    expect: str | None = None
    contains: str | None = None


def py(*args: str, expect: str | None = None, contains: str | None = None) -> Check:
    return Check(("python", *args), expect=expect, contains=contains)


def cmd(*argv: str, expect: str | None = None, contains: str | None = None) -> Check:
    """A command that is not Python (``sh script.sh``, ``make target``)."""
    return Check(tuple(argv), expect=expect, contains=contains)


def pytest_passes(path: str) -> Check:
    return Check(("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", path), contains="passed")


def has_file(path: str) -> Check:
    return py("-c", f"import pathlib, sys; sys.exit(0 if pathlib.Path({path!r}).is_file() else 1)")


@dataclass(frozen=True)
class Task:
    id: str
    prompt: str
    steps: int  # how many things the task asks for (files to write or change)
    checks: tuple[Check, ...]
    files: dict[str, str] = field(default_factory=dict)  # the workspace before the run
