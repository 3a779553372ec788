"""The one lenient reader of JSON that a model wrote.

`read_json_value` reads a whole text as one JSON value, as models write JSON (raw newlines in strings, Python's
triple-quoted and single-quoted strings, doubled braces, quotes left unescaped, a bracket left out); `extract_json`
finds the JSON object of a reply (the whole text, a fenced block, or the largest object in prose) and reads whole
texts with `read_json_value`; `leading_json_value` reads the value a text starts with. The plan parser
(`planmode.state.parse`) and the tool calls a model wrote as text (`planmode.tools.text_calls`) read JSON only
through these, so a text reads the same in both.
"""

from __future__ import annotations

import json
import re
from typing import Any

import json_repair

from planmode.errors import PlanParseError

__all__ = ["extract_json", "leading_json_value", "read_json_value", "repaired_json"]

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def _objects_in(text: str) -> list[Any]:
    """Every top-level JSON object decodable in ``text``, in order."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    i = 0
    while True:
        i = text.find("{", i)
        if i < 0:
            return found
        try:
            obj, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i += 1
            continue
        except RecursionError as exc:  # every later "{" is inside the same deep nest: stop here
            raise PlanParseError("the JSON in the model output is nested too deeply") from exc
        found.append(obj)
        i = end


_CLOSERS = {"{": "}", "[": "]"}
#: At most this many closing brackets are added to an object a model left open (`_closed_object`).
_MAX_MISSING_CLOSERS = 3


def _closed_object(text: str) -> dict[str, Any] | None:
    """The object that starts at the first ``{`` of ``text`` and runs to its end with only its last closing
    brackets missing (a reply's ``{"steps": [{...}]``, where the ``}`` after the ``]`` never came), closed;
    None when it is anything else: complete, mismatched, cut inside a string or after a comma or colon, or
    missing more than `_MAX_MISSING_CLOSERS` brackets."""
    start = text.find("{")
    if start < 0:
        return None
    stack: list[str] = []
    in_string = escaped = False
    for ch in text[start:]:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in _CLOSERS:
            stack.append(_CLOSERS[ch])
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return None
            if not stack:
                return None  # a complete object: not this function's case
    body = text[start:].rstrip()
    if in_string and body.endswith((".", "!", "?", "```")) and not escaped:
        # a string that ends a sentence, then nothing ('..."reasoning": "... in app.py.'): closed and read; a
        # string cut mid-word stays unread
        body += '"'
        in_string = False
    if in_string or not stack or len(stack) > _MAX_MISSING_CLOSERS or body.endswith((",", ":")):
        return None
    try:
        value = json.loads(body + "".join(reversed(stack)))
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _repaired_object(text: str) -> dict[str, Any] | None:
    """The object that starts at the first ``{`` of ``text``, when it does not parse but ends as an object or a
    list ends, read by ``json_repair`` (a quote left unescaped inside a string, a list closed by the brace around
    it, a bracket left out before the last one); None when that object parses as written (the
    largest object is read then, as before), when the text stops before its end (cut by the output limit: left
    unread, as a reply cut mid-word), or when the repair gives no object."""
    start = text.find("{")
    if start < 0:
        return None
    body = text[start:].rstrip()
    if not body.endswith(("}", "]")):
        return None
    try:
        json.JSONDecoder().raw_decode(body)
        return None  # it parses: the object in prose is read as before
    except json.JSONDecodeError:
        pass
    except RecursionError:
        return None
    value = repaired_json(body)
    return value if isinstance(value, dict) and value else None


def repaired_json(body: str) -> Any:
    """``body``, JSON that does not parse, as the value a model meant, or None: first with the quotes it left
    unescaped inside its strings escaped (`_inner_quotes_escaped`), then as ``json_repair`` reads it (single
    quotes, a bracket left out or closed by the wrong one), as long as every key of the result is written in
    ``body`` as a JSON key (text whose keys a model never quoted, ``{not: valid}``, is garbage, not JSON)."""
    escaped = _inner_quotes_escaped(body)
    try:
        return json.loads(escaped, strict=False)  # the quotes a model left unescaped, and nothing else
    except (json.JSONDecodeError, RecursionError):
        pass
    for text in (body, escaped):
        try:
            value = json_repair.loads(text)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict | list) and value and _keys_written(value, body):
            return value
    return None


def _inner_quotes_escaped(body: str) -> str:
    """``body`` with each quote inside a string that does not end it escaped: a quote ends a string only when a
    comma, a colon, a closing bracket or the end follows it: in ``"guidance": "change `print("Total:")` to ..."``
    the quotes around ``Total:`` stay inside the string."""
    out: list[str] = []
    in_string = escaped = False
    for i, ch in enumerate(body):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                if not _ends_string(body, i + 1):
                    out.append('\\"')
                    continue
                in_string = False
            elif ch == "\n" and _closed_at_line_end(out, body, i + 1):
                in_string = False
        elif ch == '"':
            in_string = True
        out.append(ch)
    return "".join(out)


#: What starts the line after a string that was never closed: a key.
_NEXT_MEMBER = re.compile(r'[ \t]*"[\w -]{1,64}"\s*:')


def _closed_at_line_end(out: list[str], body: str, at: int) -> bool:
    """Whether a string, never closed, ends at this line break: its line ends with a comma, and a key starts the
    next line; then its closing quote is put back into ``out`` (the text so far) before the comma. So
    ``"acceptance": "... for input `'abc'"`,`` (its last quote left out) ends at its line, and the next line's
    ``"dependencies"`` stays a key of the same object. Otherwise a raw line break inside a string is kept as text
    (code in a reflection's guidance)."""
    if _NEXT_MEMBER.match(body, at) is None:
        return False
    end = len(out)
    while end and out[end - 1] in " \t\r":
        end -= 1
    if not end or out[end - 1] != ",":
        return False
    del out[end - 1 :]  # the line's trailing blanks go with it (only these are touched: linear over the text)
    out += ['"', ","]
    return True


_STRING_END = re.compile(r'\s*(?:$|[}\]]|[,:]\s*(?:$|[}\]"{\[\-0-9]|true\b|false\b|null\b))')


def _ends_string(body: str, at: int) -> bool:
    """Whether a quote followed by ``body[at:]`` ends a string: the text ends there, or a closing bracket follows,
    or a comma or a colon followed by a JSON value (a key, a string, a number, an object, a list, a literal).
    ``if __name__ == "__main__": block`` and ``"x", he said`` inside a string do not end it (neither ``__main__``
    nor ``x`` becomes a key). Matched in place: no copy of the rest per quote."""
    return _STRING_END.match(body, at) is not None


def _keys_written(value: Any, body: str) -> bool:
    """Whether every key of ``value`` (nested ones too) is written as a JSON key in ``body``: a repair may put in
    brackets and escape quotes, but text with keys a model never quoted (``{not: valid}``) is garbage, not JSON."""
    if isinstance(value, dict):
        return all(json.dumps(k, ensure_ascii=False) in body and _keys_written(v, body) for k, v in value.items())
    if isinstance(value, list):
        return all(_keys_written(v, body) for v in value)
    return True


def extract_json(text: str) -> dict[str, Any]:
    """The JSON object in ``text``: the whole text (read by `read_json_value`, unrepaired), a fenced block, or the
    largest object in prose; an object whose last closing brackets are missing is closed (`_closed_object`), and one
    that ends but does not parse is repaired (`_repaired_object`), rather than read as its inner parts."""
    if not isinstance(text, str):
        raise TypeError(f"extract_json expects str, got {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise PlanParseError("the model returned no text; expected a JSON object")
    whole = _whole_value(stripped)
    if isinstance(whole, dict):
        return whole
    found = _reply_object(whole, text, stripped)
    if found is None:
        found = _mended_object(text, stripped)
    return found if found is not None else _largest_object(text)


def _whole_value(stripped: str) -> Any:
    """The whole (stripped) reply as one JSON value (`read_json_value`, unrepaired: a repair comes after closing an
    object left open), or None; a value nested too deeply is a `PlanParseError`."""
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        value, _ = read_json_value(stripped, repair=False)
        return value
    except RecursionError as exc:  # e.g. "[[[[...]]]]": json raises this, not JSONDecodeError
        raise PlanParseError("the JSON in the model output is nested too deeply") from exc


def _reply_object(whole: Any, text: str, stripped: str) -> dict[str, Any] | None:
    """The object the reply is as a whole: one fenced block, a bare list of steps, or an object with fenced
    examples in its strings; None when it is none of these."""
    if (fenced := _one_fenced_object(stripped)) is not None:
        return fenced
    listed = _steps_listed(whole, text)
    if listed is not None:
        return listed
    if stripped.startswith("{") and "```" in stripped:
        return _fenced_in_strings(stripped)
    return None


def _mended_object(text: str, stripped: str) -> dict[str, Any] | None:
    """The object of a fenced block, or of the whole reply, closed (`_closed_object`) or else repaired
    (`_repaired_object`); None when neither gives one."""
    sources = [*(b.strip() for b in _FENCE.findall(text)), stripped]
    for source in sources:
        closed = _closed_object(source)
        if closed is not None:
            return closed
    for source in sources:
        repaired = _repaired_object(source)
        if repaired is not None:
            return repaired
    return None


def _largest_object(text: str) -> dict[str, Any]:
    """The largest JSON object decodable in the fenced blocks of ``text`` (in ``text`` itself when they hold none);
    a `PlanParseError` when there is none."""
    candidates: list[Any] = []
    for block in _FENCE.findall(text):
        candidates.extend(_objects_in(block))
    if not candidates:
        candidates = _objects_in(text)
    dicts = [c for c in candidates if isinstance(c, dict)]
    if not dicts:
        raise PlanParseError("no JSON object found in the model output; answer with one JSON object")
    return max(dicts, key=lambda d: len(json.dumps(d)))


_FENCE_SPAN = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)


def _fenced_in_strings(text: str) -> dict[str, Any] | None:
    """The object a text that opens with ``{`` is, read with each fenced block in it (```` ```json ... ``` ````, to
    the end when left open) taken as the text of the string it stands in: its quotes and line breaks escaped. A
    ```` ```json ```` example inside a "guidance" string is thus part of that string, never taken for the reply's
    object, even when the outer object is left unclosed. None when that reading gives no object."""
    escaped = _FENCE_SPAN.sub(lambda m: json.dumps(m.group(0), ensure_ascii=False)[1:-1], text)
    if escaped == text:
        return None
    for read in (lambda t: json.loads(t, strict=False), _closed_object, _repaired_object):
        try:
            value = read(escaped)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(value, dict) and value:
            return value
    return None


def _one_fenced_object(text: str) -> dict[str, Any] | None:
    """The object of a text that is one fenced block (```json, then the object, then ```), read whole: a fence
    inside one of its strings does not end it (a ```python example in a "guidance" string stays in that string, and
    the reply is never read as one of its inner objects). None when the text is not one fenced block holding an
    object."""
    if not (text.startswith("```") and text.endswith("```")) or "\n" not in text:
        return None
    inner = text[text.index("\n") + 1 : -3].strip()
    # line breaks left raw inside a string (a ```python example in a "guidance") are read as written, and quotes
    # left unescaped in it (``if __name__ == "__main__":``) repaired
    value, read = read_json_value(inner, repair=False)
    if not read:
        value = repaired_json(inner)
    return value if isinstance(value, dict) else None


def _steps_listed(whole: Any, text: str) -> dict[str, Any] | None:
    """A reply that is a bare list of steps (objects with an ``id`` or a ``description``), whole or in a fence,
    as the plan object it stands for (``{"steps": [...]}``): small models answer a plan that way. None otherwise."""
    values = [whole]
    for block in _FENCE.findall(text):
        try:
            values.append(json.loads(block.strip()))
        except (json.JSONDecodeError, RecursionError):
            continue
    for value in values:
        if (
            isinstance(value, list)
            and value
            and all(isinstance(i, dict) and ("id" in i or "description" in i) for i in value)
        ):
            return {"steps": value}
    return None


def read_json_value(s: str, *, repair: bool = True) -> tuple[Any, bool]:
    """``s``, the whole of it, as one JSON value read as models write it, and whether it was read: as written, with
    raw newlines and tabs inside strings (``strict=False``); Python's triple-quoted strings (three double quotes
    around a file's text) read as the string they hold; an object in doubled braces (``{{"name": ...}}``, a format
    string's escape, or only its opening one doubled) read as the object; values in single quotes
    (``"content": '{"port": 8080}'``) read as JSON strings; and (``repair``) a whole object or list that still does
    not parse repaired (`repaired_json`). ``(None, False)`` when none of these reads it. Never raises.

    This is the one lenient reading of a JSON value: `extract_json` reads a whole reply and a fenced block with it,
    and `planmode.tools.text_calls` reads the calls a model wrote as text with it."""
    t = s.strip()
    doubled = t[1:-1] if t.startswith("{{") and t.endswith("}}") else None
    opened = t[1:] if t.startswith("{{") else None  # only the opening brace doubled: "{{...}" is the object
    for text in (s, _triple_quoted(s), doubled, opened, _single_quoted(s)):
        if text is None:
            continue
        try:
            return json.loads(text, strict=False), True
        except (ValueError, RecursionError):  # invalid JSON; nesting deeper than the interpreter's stack
            continue
    if repair and t.startswith(("{", "[")) and t.endswith(("}", "]")):  # whole, not JSON as written: repaired
        value = repaired_json(t)
        if isinstance(value, dict | list):
            return value, True
    return None, False


def leading_json_value(s: str) -> tuple[Any, int] | None:
    """The JSON value that starts ``s`` (raw newlines and tabs inside its strings read as written) and the index
    where it ends, or None when no complete value starts it (cut short, or not JSON as written). Never raises."""
    try:
        return json.JSONDecoder(strict=False).raw_decode(s)
    except (ValueError, RecursionError):  # invalid JSON; nesting deeper than the interpreter's stack
        return None


#: What may follow a single-quoted string's closing quote: a comma, a colon (a key's), or a closing bracket.
_AFTER_VALUE = re.compile(r"\s*[,:}\]]")


def _single_quoted(s: str) -> str | None:
    r"""``s`` with each value written in single quotes (``"content": '{"name": "Ada", "age": 36}'``;
    ``{'path': 'a.py'}``) written as a JSON string, or None when it has none. A single-quoted string opens after a
    colon, a comma or an opening bracket, and closes at the first single quote followed by a comma, a colon or a
    closing bracket; ``\'`` inside is a quote. So a quoted value that holds JSON stays one whole string (never
    cut at its first comma into a shorter value and a stray argument)."""
    if "'" not in s:
        return None
    out: list[str] = []
    at = i = 0
    in_string = changed = False
    last = ""  # the last character outside a string that is not white space
    while i < len(s):
        ch = s[i]
        if in_string:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_string, last = False, ch
        elif ch == '"':
            in_string = True
        elif ch == "'" and last in (":", ",", "[", "{"):
            end = i + 1
            while (end := s.find("'", end)) >= 0 and (s[end - 1] == "\\" or not _AFTER_VALUE.match(s, end + 1)):
                end += 1
            if end < 0:
                return None
            out += [s[at:i], json.dumps(_unquoted(s[i + 1 : end]), ensure_ascii=False)]
            at = i = end + 1
            changed, last = True, '"'
            continue
        elif not ch.isspace():
            last = ch
        i += 1
    return "".join(out) + s[at:] if changed else None


def _unquoted(raw: str) -> str:
    r"""The text of a single-quoted value: ``\'`` is a quote, and the escapes JSON shares with Python (``\n``,
    ``\t``, ``\\``, ``\"``) are read as such; anything else is kept as written."""
    body = raw.replace("\\'", "'")
    escaped = re.sub(r'(?<!\\)((?:\\\\)*)"', r'\1\\"', body)  # a bare double quote inside: escaped for JSON
    try:
        value = json.loads(f'"{escaped}"', strict=False)
    except ValueError:
        return body
    return value if isinstance(value, str) else body


def _triple_quoted(s: str) -> str | None:
    """``s`` with each triple-quoted string written as a JSON string, or None when it has none (or one is not
    closed)."""
    if '"""' not in s:
        return None
    out: list[str] = []
    at = 0
    while (start := s.find('"""', at)) >= 0:
        end = s.find('"""', start + 3)
        if end < 0:
            return None
        out += [s[at:start], json.dumps(s[start + 3 : end])]
        at = end + 3
    out.append(s[at:])
    return "".join(out)
