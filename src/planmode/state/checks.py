"""Declared checks: how a step is checked, as data in the plan that the human approves.

A check is part of a step's definition (`planmode.state.models.StepDefinition.checks`): it is hashed into the
approval grants, shown on every approval screen, and verify runs the approved checks and nothing else
(`planmode.checks`). Two kinds:

- ``{"kind": "run", "command": "python hello.py", "exit_code": 0, "stdout": "hello"}``: a command, split like
  argv (no shell), run in planmode's sandbox in the workspace; its exit code and what it prints are compared.
- ``{"kind": "file", "path": "hello.py", "exists": true, "contains": ["def main"]}``: a file of the workspace.

``by`` tells who wrote a check: the plan (its planner, or a human at approval) or planmode itself (the small-model
adapter's checks made from a step's prose, shown marked as planmode's).
"""

from __future__ import annotations

import json
import posixpath
import shlex
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, GetJsonSchemaHandler, field_validator, model_validator
from pydantic.json_schema import JsonSchemaValue, SkipJsonSchema

if TYPE_CHECKING:
    from planmode.state.models import Plan, StepDefinition

__all__ = [
    "Check",
    "CheckBy",
    "FileCheck",
    "RunCheck",
    "check_commands",
    "declared_files",
    "describe_check",
    "done_files",
    "empty_file",
]

#: Who wrote a check: ``plan`` (the planner or a human; what the plan says) or ``planmode`` (made by planmode's
#: small-model adapter from the step's prose, and shown as planmode's).
CheckBy = Literal["plan", "planmode"]

#: The longest command, path or expected text a check holds (a plan is shown whole on the approval screen).
_MAX_TEXT = 4000


class _CheckModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    by: SkipJsonSchema[CheckBy] = Field(default="plan", description="Who wrote it: plan, or planmode (its adapter).")

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        """The schema a planner is sent: no titles (the field names say it), short descriptions. Every plan call
        carries it, twice in a patch's (added and updated steps)."""
        schema = handler.resolve_ref_schema(handler(core_schema))
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return schema

    @model_validator(mode="before")
    @classmethod
    def _clean_text(cls, data: Any) -> object:
        """Text with a lone surrogate is made encodable (`planmode.state.models.clean_text`), as in every step."""
        from planmode.state.models import clean_text  # the step models import this module

        def clean(value: object) -> object:
            if isinstance(value, str):
                return clean_text(value)
            if isinstance(value, list):
                return [clean(v) for v in value]
            return value

        if isinstance(data, dict):
            return {k: clean(v) if k != "json_value" and k != "json" else v for k, v in data.items()}
        return data


class RunCheck(_CheckModel):
    """A command run in the sandbox, in the workspace: its exit code and output are compared."""

    kind: Literal["run"] = "run"
    command: str = Field(min_length=1, max_length=_MAX_TEXT, description="Split like argv, no shell.")
    exit_code: int | None = Field(default=0, description="null: any.")
    stdout: str | None = Field(
        default=None,
        max_length=_MAX_TEXT,
        description="Its whole output.",
    )
    stdout_contains: list[Annotated[str, Field(min_length=1, max_length=_MAX_TEXT)]] = Field(default_factory=list)

    @field_validator("command")
    @classmethod
    def _splits(cls, command: str) -> str:
        """A command that cannot be split like argv (an unclosed quote) is refused with the reason."""
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ValueError(f"the command {command!r} cannot be split into arguments: {exc}") from None
        if not argv:
            raise ValueError("the command is empty")
        return command

    def argv(self) -> list[str]:
        """The command split like a POSIX shell would split it, without running one."""
        return shlex.split(self.command)


class FileCheck(_CheckModel):
    """A file of the workspace: whether it exists, and what it holds."""

    kind: Literal["file"] = "file"
    path: str = Field(min_length=1, max_length=1000, description="Relative to the workspace.")
    exists: bool = Field(default=True, description="false: must not exist.")
    contains: list[Annotated[str, Field(min_length=1, max_length=_MAX_TEXT)]] = Field(default_factory=list)
    equals: str | None = Field(default=None, max_length=_MAX_TEXT, description="Its whole text.")
    json_value: Any = Field(
        default=None,
        validation_alias=AliasChoices("json", "json_value"),
        serialization_alias="json",
        description="The value it parses to as JSON.",
    )

    @field_validator("path")
    @classmethod
    def _relative(cls, path: str) -> str:
        """The path is relative to the workspace: an absolute path or one that climbs out of it is refused."""
        parts = path.replace("\\", "/").split("/")
        if path.startswith(("/", "\\")) or ".." in parts or (len(path) > 1 and path[1] == ":"):
            raise ValueError(f"the path {path!r} must be relative to the workspace, without '..'")
        return path


#: A declared check (its ``kind`` tells which; a check without one is read by its fields: a command runs). A plain
#: union, not a discriminated one: a JSON schema with ``oneOf`` and a discriminator is refused by some
#: structured-output servers, ``anyOf`` is not.
Check: TypeAlias = RunCheck | FileCheck


def check_commands(checks: list[RunCheck | FileCheck]) -> list[str]:
    """The commands ``checks`` run, in order (each once)."""
    return list(dict.fromkeys(c.command for c in checks if isinstance(c, RunCheck)))


def _file_key(path: str) -> str:
    """A declared path as the workspace tools compare it: forward slashes, no ``.`` parts."""
    return posixpath.normpath(path.replace("\\", "/")).removeprefix("./")


def declared_files(step: StepDefinition) -> list[str]:
    """The files ``step`` declares it leaves in the workspace: the paths of its file checks that say the file
    exists, in order, each once. This is what the plan says a step produces; nothing is read from its prose."""
    return list(dict.fromkeys(_file_key(c.path) for c in step.checks if isinstance(c, FileCheck) and c.exists))


def done_files(plan: Plan, step: StepDefinition) -> frozenset[str]:
    """The files that the plan's done steps (other than ``step``) declare they produced (`declared_files`) and
    ``step`` does not declare as its own: a write to one of them from ``step`` is refused where the write happens
    (`planmode.tools.loop.ToolGate`, the workspace tools). One pass over the plan's checks, no text read."""
    done: set[str] = set()
    for other in plan.steps:  # most steps declare no file check: they cost one test each
        if other.checks and other.status == "done" and other.id != step.id:
            done.update(declared_files(other))
    return frozenset(done - set(declared_files(step))) if done else frozenset()


def empty_file(step: StepDefinition, path: str) -> bool:
    """Whether ``step`` declares ``path`` empty: a file check on it whose whole text (``equals``) is ``""``."""
    key = _file_key(path)
    return any(
        isinstance(c, FileCheck) and c.exists and c.equals == "" and _file_key(c.path) == key for c in step.checks
    )


def describe_check(check: RunCheck | FileCheck) -> str:
    """One line a human reads: what the check runs or looks at, and what it expects."""
    mark = " (planmode's)" if check.by == "planmode" else ""
    if isinstance(check, RunCheck):
        parts = [f"run `{check.command}`"]
        if check.exit_code is not None:
            parts.append(f"exits {check.exit_code}")
        if check.stdout is not None:
            parts.append(f"prints {json.dumps(check.stdout, ensure_ascii=False)}")
        if check.stdout_contains:
            parts.append(
                "output contains " + ", ".join(json.dumps(t, ensure_ascii=False) for t in check.stdout_contains)
            )
        return ", ".join(parts) + mark
    if not check.exists:
        return f"file {check.path} does not exist{mark}"
    parts = [f"file {check.path} exists"]
    if check.contains:
        parts.append("contains " + ", ".join(json.dumps(t, ensure_ascii=False) for t in check.contains))
    if check.equals is not None:
        parts.append(f"equals {json.dumps(check.equals, ensure_ascii=False)}")
    if check.json_value is not None:
        parts.append(f"parses as JSON {json.dumps(check.json_value, ensure_ascii=False)}")
    return ", ".join(parts) + mark
