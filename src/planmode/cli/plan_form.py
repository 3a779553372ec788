"""The plan as a form a person edits in ``$EDITOR``: TOML, one ``[[steps]]`` block a step, with comments.

Only what a person decides is in the form (the title; each step's id, description, ``after``, tools, checks and
acceptance): no status, complexity, attempts or results. Comments are TOML's own (``#``), so they may stand
anywhere and are kept while the file is edited; a parse error names the line and column of the file as the
person sees it (comments counted). `read_form` turns the text back into the full-plan edit the approval takes
(``{"title": ..., "steps": [...]}``), carrying over what the form leaves out (a kept step's complexity and
status) so that an untouched step is not changed. A text that is a JSON object (the earlier form, or a script's
output) is read as JSON, with ``#`` comment lines allowed.

Standard library only (``tomllib``, Python 3.11): no dependency is added.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planmode.state.models import Plan

__all__ = ["FORM_KEYS", "FormError", "form_header", "read_form", "to_form"]

#: The keys of a step in the form; ``dependencies`` is read as ``after``.
FORM_KEYS = ("id", "description", "after", "tools", "checks", "acceptance")

_HELP = [
    "Edit the plan, then save and close the editor to continue. An empty file cancels the edit.",
    "Lines starting with '#' are comments (kept while you edit, ignored when read).",
    "Each [[steps]] block is one step:",
    "  id          a short name (letters, digits, _ and -), unique in the plan",
    "  description what the step does",
    "  after       the ids of the steps that must be done first",
    "  tools       the tools it may use; the ones marked 'changes things' write",
    "  checks      how planmode checks it, one inline table each:",
    '                {kind = "run", command = "python app.py", exit_code = 0, stdout = "ok"}',
    '                {kind = "file", path = "app.py", exists = true, contains = ["def main"]}',
    '              (by = "planmode" marks a check planmode wrote; commands run in the sandbox)',
    "  acceptance  what no check states, for the judge",
    "Add a step with a new [[steps]] block; delete a block to remove its step.",
]


@dataclass(frozen=True)
class FormError:
    """Why the form cannot be read; ``line`` is 1-based in the text that was read (None when no line applies)."""

    message: str
    line: int | None = None
    column: int | None = None

    def shown(self, offset: int = 0) -> str:
        """The message with its position, the line moved by ``offset`` (the lines put above the text)."""
        if self.line is None:
            return self.message
        where = f"line {self.line + offset}" + (f", column {self.column}" if self.column else "")
        return f"{self.message} ({where})"


def _string(value: str) -> str:
    # A JSON string is a TOML basic string: the same escapes (\" \\ \n \t \uXXXX), on one line.
    return json.dumps(value, ensure_ascii=False)


def _strings(values: Iterable[str]) -> str:
    return "[" + ", ".join(_string(v) for v in values) + "]"


def form_header(error: str | None = None) -> list[str]:
    """The comment lines above the form: the error of the last save first (as ``git commit`` does), then help."""
    lines = ([f"ERROR: {' '.join(error.split())}", ""] if error else []) + _HELP
    return [f"# {line}".rstrip() for line in lines]


def to_form(plan: Plan, read_only: Iterable[str]) -> str:
    """The plan's title and steps as the form's text (without the header)."""
    quiet = frozenset(read_only)
    out = [f"title = {_string(plan.title or '')}"]
    for step in plan.steps:
        writes = [t for t in step.tools if t not in quiet]
        tools = f"tools = {_strings(step.tools)}"
        if writes:
            tools += f"  # changes things: {', '.join(writes)}"
        ran = step.status.value != "pending"
        out += [
            "",
            *([f"# {step.status.value}: a step that ran keeps its status (only pending steps change)"] if ran else []),
            "[[steps]]",
            f"id = {_string(step.id)}",
            f"description = {_string(step.description)}",
            f"after = {_strings(step.dependencies)}",
            tools,
            *_checks_lines(step),
            f"acceptance = {_string(step.acceptance)}",
        ]
    return "\n".join(out) + "\n"


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _string(key)


def _toml_value(value: Any) -> str:
    """JSON data as a TOML value on one line (a JSON null, which TOML lacks, is left out by the caller)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value if v is not None) + "]"
    if isinstance(value, dict):
        pairs = [f"{_key(str(k))} = {_toml_value(v)}" for k, v in value.items() if v is not None]
        return "{" + ", ".join(pairs) + "}"
    return _string(str(value))


def _checks_lines(step: Any) -> list[str]:
    """A step's checks as the form's ``checks = [...]`` lines, one inline table a check (defaults left out)."""
    if not step.checks:
        return ["checks = []"]
    rows = []
    for check in step.checks:
        data = check.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        data = {"kind": check.kind, **{k: v for k, v in data.items() if k != "kind"}}
        if check.kind == "run" and check.exit_code == 0:
            data["exit_code"] = 0
        rows.append("  " + _toml_value(data) + ",")
    return ["checks = [", *rows, "]"]


_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")


def _json_body(text: str) -> dict[str, Any] | FormError | None:
    """The text read as JSON when it is a JSON object (comment lines blanked, so line numbers stay); None when
    it is not JSON-shaped."""
    blanked = "\n".join("" if line.lstrip().startswith("#") else line for line in text.splitlines())
    if not blanked.lstrip().startswith("{"):
        return None
    try:
        body = json.loads(blanked)
    except json.JSONDecodeError as exc:
        return FormError(f"not valid JSON: {exc.msg}", exc.lineno, exc.colno)
    except RecursionError:
        return FormError("the JSON is nested too deeply")
    return body if isinstance(body, dict) else FormError("the plan must be a JSON object with title and steps")


def _toml_body(text: str) -> dict[str, Any] | FormError:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = _TOML_POSITION.search(message)
        if found:
            return FormError("not a valid form: " + message[: found.start()], int(found.group(1)), int(found.group(2)))
        return FormError("not a valid form: " + message)


def _step_lines(text: str) -> list[int]:
    """The line (1-based) of each ``[[steps]]`` header, in order."""
    return [n for n, line in enumerate(text.splitlines(), 1) if line.strip().startswith("[[steps]]")]


def read_form(text: str, plan: Plan) -> dict[str, Any] | FormError:
    """The full-plan edit written in ``text`` (``{"title", "steps"}`` as the approval's edit takes it), or why it
    cannot be read (never raises). A kept step (same id) keeps what the form does not show: its complexity and
    status; a new step is pending."""
    body = _json_body(text)
    if body is None:
        body = _toml_body(text)
        if isinstance(body, FormError):
            return body
        starts = _step_lines(text)
        body = _from_form(body, starts)
        if isinstance(body, FormError):
            return body
    elif isinstance(body, FormError):
        return body
    steps = body.get("steps")
    if isinstance(steps, list):
        for step in steps:
            sid = step.get("id") if isinstance(step, dict) else None
            old = plan.get(sid) if isinstance(sid, str) else None
            if old is not None and isinstance(step, dict):
                step.setdefault("complexity", old.complexity.value)
                step.setdefault("status", old.status.value)
    return body


def _from_form(data: dict[str, Any], starts: list[int]) -> dict[str, Any] | FormError:
    unknown = sorted(set(data) - {"title", "steps"})
    if unknown:
        return FormError(f"unknown key {unknown[0]!r} at the top: the form has title and [[steps]] blocks")
    title = data.get("title", "")
    if not isinstance(title, str):
        return FormError("title must be text in quotes")
    raw = data.get("steps", [])
    if not isinstance(raw, list) or not all(isinstance(s, dict) for s in raw):
        return FormError("steps must be [[steps]] blocks")
    steps: list[dict[str, Any]] = []
    for n, block in enumerate(raw):
        line = starts[n] if n < len(starts) else None
        block = dict(block)
        if "dependencies" in block and "after" not in block:
            block["after"] = block.pop("dependencies")
        extra = sorted(set(block) - set(FORM_KEYS))
        if extra:
            return FormError(f"step {n + 1}: unknown key {extra[0]!r} (a step has {', '.join(FORM_KEYS)})", line)
        for key in ("id", "description", "acceptance"):
            if key in block and not isinstance(block[key], str):
                return FormError(f"step {n + 1}: {key} must be text in quotes", line)
        for key in ("after", "tools"):
            value = block.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                return FormError(f'step {n + 1}: {key} must be a list of names, e.g. ["a", "b"]', line)
        checks = block.get("checks", [])
        if not isinstance(checks, list) or not all(isinstance(c, dict) for c in checks):
            return FormError(
                f'step {n + 1}: checks must be a list of tables, e.g. [{{kind = "file", path = "a.py"}}]', line
            )
        step: dict[str, Any] = {
            "id": block.get("id", ""),
            "description": block.get("description", ""),
            "dependencies": list(block.get("after", [])),
            "tools": list(block.get("tools", [])),
            "checks": [dict(c) for c in checks],
            "acceptance": block.get("acceptance", ""),
        }
        steps.append(step)
    return {"title": title, "steps": steps}
