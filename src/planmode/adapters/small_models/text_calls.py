"""Tool calls a model wrote as text instead of calling the tool.

Small open models, on servers that do not parse their output into tool calls, answer with the call as text:
a JSON object with ``name`` and ``arguments`` (or ``parameters``), fenced (```` ```json ````) or not, a list of
them, or each one inside ``<tool_call>...</tool_call>`` tags (Qwen/Hermes style). `read_text_calls` recognises
these, with one rule that never mistakes an answer, or text an answer quotes, for a call:

- a reply is calls only when the *whole* reply, stripped, is calls: one call, a list of calls, or a sequence of
  them (``<tool_call>`` blocks, fences, JSON values) with nothing but white space between. A call inside prose,
  before it or after it, is text: an answer that quotes a file holding a ``<tool_call>`` tag is an answer;
- a JSON value is a call when it is an object with a string ``name`` and ``arguments``/``parameters`` (an object,
  or a string holding one), also inside ``{"function": {...}}``; a list is calls when all its items are. JSON is
  read as small models write it, by the reader the plan parser uses too (`planmode.state.lenient_json.read_json_value`:
  raw newlines inside strings, Python's triple-quoted and single-quoted strings, doubled braces, a repair);
- a reply made only of ``<tool_call>`` blocks, or only of JSON that names a call, that cannot be read is reported
  as such (``problem``); it is never an answer.

Only a caller that has the small-model adapter on reads text calls (`planmode.tools.loop`'s ``text_calls``); the
caller reads a model's own reply, never what a tool returned.

The parser is pure: it never raises, never evaluates anything (``json.loads`` only), and reads at most
`MAX_TEXT_CALL_CHARS` characters.

`whole_file_content` reads the other answer a small model gives instead of a write: the file's whole content in
a fenced code block (Aider's "whole" edit format). The executor offers that format only when a write step's model
answered without writing, for the one file the step produces, and the content then goes to the step's own write
tool through the same gate (`planmode.tools.loop.WholeFile`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from planmode.state.lenient_json import leading_json_value, read_json_value

__all__ = ["MAX_TEXT_CALL_CHARS", "TextCall", "TextCalls", "read_text_calls", "whole_file_content"]

MAX_TEXT_CALL_CHARS = 100_000
"""Replies longer than this are not parsed (one that looks like a call is reported as unreadable)."""

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_ARGS = ("arguments", "parameters", "args")


@dataclass(frozen=True)
class TextCall:
    """One call read from text."""

    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class TextCalls:
    """What a reply's text holds when it looks like tool calls: the calls read, or why it could not be read."""

    calls: list[TextCall] = field(default_factory=list)
    problem: str | None = None
    """Why the text looks like a tool call but could not be read as one (None: ``calls`` are all of it)."""


def read_text_calls(text: object) -> TextCalls | None:
    """The tool calls ``text`` is written as, or None when it is not a tool call written as text (an answer).

    Never raises."""
    try:
        return _read(text)
    except Exception as exc:  # a parser bug must not end a run: report the text as unreadable
        return TextCalls(problem=f"the text could not be read ({type(exc).__name__})")


def _read(text: object) -> TextCalls | None:
    if not isinstance(text, str):
        return None
    stripped = text.strip()
    if len(stripped) > MAX_TEXT_CALL_CHARS:
        head = stripped[:MAX_TEXT_CALL_CHARS]
        if head.startswith(_OPEN) or (_json_shaped(head, whole=False) and _mentions_call(head)):
            return TextCalls(problem=f"the text is longer than {MAX_TEXT_CALL_CHARS} characters")
        return None
    if _json_shaped(stripped):  # one JSON value, or one fence around it: read as small models write JSON
        body = _unfenced(stripped)
        value, ok = read_json_value(body)
        if ok:
            calls = _calls_of(value)
            if calls is not None:
                return TextCalls(calls=calls)
            if _looks_like_call(value):
                return TextCalls(problem='it is not an object with a string "name" and an object of "arguments"')
            return None
        found = _sequence(stripped)
        if found is None and _one_unit(stripped) and _mentions_call(body):
            return TextCalls(problem="its JSON does not parse")
        return found
    if stripped.startswith(_OPEN):
        return _sequence(stripped)
    return None


def _sequence(s: str) -> TextCalls | None:
    """The calls of a reply that is a sequence of units (``<tool_call>`` blocks, fences, JSON values) with only
    white space between; None when anything else is in it (prose: an answer), or when a fence or JSON unit is not
    a call (an answer that shows JSON). A ``<tool_call>`` block that holds no call is a problem: the tag is
    tool-call syntax. A last ``<tool_call>`` block left open runs to the end."""
    calls: list[TextCall] = []
    rest = s
    while rest:
        if rest.startswith(_OPEN):
            end = rest.find(_CLOSE, len(_OPEN))
            body = rest[len(_OPEN) :] if end < 0 else rest[len(_OPEN) : end]
            rest = "" if end < 0 else rest[end + len(_CLOSE) :].lstrip()
            value, ok = read_json_value(_unfenced(body.strip()))
            found = _calls_of(value) if ok else None
            if found is None:
                return TextCalls(problem="a <tool_call> tag does not hold a JSON object with a name and arguments")
        elif rest.startswith("```"):
            close = rest.find("```", 3)
            if close < 0:
                return None
            unit, rest = rest[: close + 3], rest[close + 3 :].lstrip()
            value, ok = read_json_value(_unfenced(unit))
            found = _calls_of(value) if ok else None
            if found is None:
                return (
                    TextCalls(problem="a fence in it does not hold a readable call") if _mentions_call(unit) else None
                )
        elif rest.startswith(("{", "[")):
            leading = leading_json_value(rest)
            found = _calls_of(leading[0]) if leading is not None else None
            if leading is None or found is None:
                return None
            rest = rest[leading[1] :].lstrip()
        else:
            return None  # prose
        calls.extend(found)
    return TextCalls(calls=calls) if calls else None


def _one_unit(s: str) -> bool:
    """Whether ``s`` (JSON-shaped, not readable as JSON) is one unit: one fence with no other fence in it, or JSON
    text with no complete value at its start (cut short, or not JSON as written), rather than a unit and more."""
    if s.startswith("```"):
        return "```" not in s[3:-3]
    return leading_json_value(s) is None


def _json_shaped(s: str, *, whole: bool = True) -> bool:
    """Whether ``s`` is one JSON value or one fence (``whole``: it also ends as one), by its first characters."""
    if s.startswith(("{", "[")):
        return True
    return s.startswith("```") and (not whole or (s.endswith("```") and len(s) >= 6))


def _unfenced(s: str) -> str:
    """The inside of one fence (```` ```json ... ``` ````), or ``s`` itself."""
    if not (s.startswith("```") and s.endswith("```") and len(s) >= 6):
        return s
    inner = s[3:-3]
    newline = inner.find("\n")
    head = inner if newline < 0 else inner[:newline]
    if head.strip().lower() in ("", "json", "tool_call", "tool_code"):
        inner = "" if newline < 0 else inner[newline + 1 :]
    elif newline < 0:  # one line: ```json {...}```
        tag, _, after = inner.partition(" ")
        if tag.lower() in ("json", "tool_call", "tool_code"):
            inner = after
    return inner.strip()


def _calls_of(value: Any) -> list[TextCall] | None:
    """The calls ``value`` is (an object, or a non-empty list of them), or None when it is not calls."""
    items = value if isinstance(value, list) else [value]
    if not items:
        return None
    calls = [_call_of(item) for item in items]
    return None if any(c is None for c in calls) else [c for c in calls if c is not None]


def _call_of(item: Any) -> TextCall | None:
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("function"), dict) and "name" not in item:
        item = item["function"]
    name = item.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    keys = [k for k in _ARGS if k in item]
    if not keys:
        return None
    args = item[keys[0]]
    if isinstance(args, str):  # OpenAI-style: the arguments as a JSON string
        args, ok = read_json_value(args) if args.strip() else ({}, True)
        if not ok:
            return None
    if not isinstance(args, dict):
        return None
    return TextCall(name=name.strip(), args=args)


def _looks_like_call(value: Any) -> bool:
    items = value if isinstance(value, list) else [value]
    return any(isinstance(i, dict) and ("name" in i or "function" in i) and any(k in i for k in _ARGS) for i in items)


def _mentions_call(s: str) -> bool:
    return '"name"' in s and any(f'"{k}"' in s for k in _ARGS)


#: The info strings of a fence that holds a file with one of these extensions (any other fence is ambiguous).
_LANGUAGES = {
    "py": ("python", "py", "python3"),
    "sh": ("sh", "bash", "shell"),
    "js": ("js", "javascript"),
    "ts": ("ts", "typescript"),
    "md": ("md", "markdown"),
    "yml": ("yaml", "yml"),
}


def whole_file_content(text: object, path: str) -> str | None:
    """The whole content of ``path`` written in ``text`` as one fenced code block, or None.

    The reply must hold exactly one complete fence (the same text fenced twice is one); or, when it holds several,
    exactly one whose info string names the file's language (```` ```python ```` for ``x.py``), so that a usage
    example beside the file (```` ```bash python x.py``` ````) is not taken for it. A fence that holds a tool call
    is not a file. The content ends with one newline. Never raises."""
    try:
        if not isinstance(text, str) or len(text) > MAX_TEXT_CALL_CHARS:
            return None
        blocks = list({body.strip(): (info, body) for info, body in _fences(text)}.values())  # a fence repeated
        if not blocks and (left_open := _left_open(text, path)) is not None:
            blocks = [left_open]
        if len(blocks) > 1:
            ext = path.rsplit(".", 1)[-1].lower() if "." in path else ""
            names = _LANGUAGES.get(ext, (ext,))
            blocks = [b for b in blocks if b[0].lower() in names]
        if len(blocks) != 1:
            return None
        body = blocks[0][1]
        if not body.strip() or read_text_calls(body) is not None:
            return None
        return body.rstrip("\n") + "\n"
    except Exception:  # a reader bug must not end a run: no content read
        return None


def _left_open(text: str, path: str) -> tuple[str, str] | None:
    """A Python file's one fence that the reply opened and never closed, when the reply ends after a whole line
    and what follows the fence compiles, so a whole Python file whose closing fence is missing is still written;
    None otherwise (another file: a reply cut short cannot be told from a whole one)."""
    if not path.lower().endswith(".py") or not text.endswith("\n"):
        return None
    lines = text.split("\n")
    opened = [i for i, line in enumerate(lines) if line.strip().startswith("```")]
    if len(opened) != 1 or (lines[opened[0]].strip().endswith("```") and len(lines[opened[0]].strip()) > 3):
        return None
    body = "\n".join(lines[opened[0] + 1 :])
    try:
        compile(body, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # too deep to compile: not code to run
        return None
    return lines[opened[0]].strip()[3:].strip(), body


def _fences(text: str) -> list[tuple[str, str]]:
    """Each complete fenced block of ``text``, as (info string, body): a line that starts with three backticks
    opens one, and the next line that is three backticks alone closes it."""
    blocks: list[tuple[str, str]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("```") and len(line) > 3 and line.endswith("```"):
            i += 1  # a one-line fence (```json {...}```): not a file
            continue
        if line.startswith("```"):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
            if end is None:
                break
            blocks.append((line[3:].strip(), "\n".join(lines[i + 1 : end])))
            i = end + 1
            continue
        i += 1
    return blocks
