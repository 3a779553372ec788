"""One lenient JSON reader: the plan parser and the tool calls a model wrote as text read a text the same way.

`planmode.state.lenient_json.read_json_value` is the one reading of a JSON value as models write it;
`extract_json` (the plan parser's, `planmode.state.parse`) and `read_text_calls` (the small-model adapter's
`text_calls`) both read through it, so a hostile text gives both the same object.
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from planmode.adapters.small_models import text_calls
from planmode.adapters.small_models.text_calls import read_text_calls
from planmode.errors import PlanParseError
from planmode.state import parse
from planmode.state.lenient_json import read_json_value
from planmode.state.parse import extract_json

#: Tool calls written as text the way models write JSON, each with the object it means.
HOSTILE: dict[str, tuple[str, dict[str, Any]]] = {
    "triple-quoted content": (
        '{"name": "write_file", "arguments": {"path": "a.py", "content": """print("hi")\n"""}}',
        {"name": "write_file", "arguments": {"path": "a.py", "content": 'print("hi")\n'}},
    ),
    "triple-quoted content, fenced, with braces": (
        '```json\n{"name": "write_file", "arguments": {"path": "a.py", "content": """x = {"a": 1}\n"""}}\n```',
        {"name": "write_file", "arguments": {"path": "a.py", "content": 'x = {"a": 1}\n'}},
    ),
    "single-quoted value holding JSON": (
        '{"name": "write_file", "arguments": {"path": "c.json", "content": \'{"port": 8080, "debug": true}\'}}',
        {"name": "write_file", "arguments": {"path": "c.json", "content": '{"port": 8080, "debug": true}'}},
    ),
    "doubled braces": (
        '{{"name": "read_file", "arguments": {"path": "a.txt"}}}',
        {"name": "read_file", "arguments": {"path": "a.txt"}},
    ),
    "raw line break in a string": (
        '{"name": "write_file", "arguments": {"path": "a.py", "content": "x = 1\ny = 2"}}',
        {"name": "write_file", "arguments": {"path": "a.py", "content": "x = 1\ny = 2"}},
    ),
    "nested braces in a string": (
        '{"name": "write_file", "arguments": {"path": "t.py", "content": "d = {\'a\': {\'b\': 1}}  # }}"}}',
        {"name": "write_file", "arguments": {"path": "t.py", "content": "d = {'a': {'b': 1}}  # }}"}},
    ),
    "surrogates, paired and lone": (
        '{"name": "write_file", "arguments": {"path": "e.txt", "content": "\\ud83d\\ude00 and \\udc80"}}',
        {"name": "write_file", "arguments": {"path": "e.txt", "content": "\U0001f600 and \udc80"}},
    ),
    "quotes left unescaped": (
        '{"name": "write_file", "arguments": {"path": "m.py", "content": "if __name__ == "__main__": main()"}}',
        {"name": "write_file", "arguments": {"path": "m.py", "content": 'if __name__ == "__main__": main()'}},
    ),
    "fenced JSON": (
        '```json\n{"name": "read_file", "arguments": {"path": "notes.md"}}\n```',
        {"name": "read_file", "arguments": {"path": "notes.md"}},
    ),
}


@pytest.mark.parametrize(("text", "meant"), HOSTILE.values(), ids=list(HOSTILE))
def test_the_plan_parser_and_the_text_call_reader_read_a_hostile_text_alike(text: str, meant: dict[str, Any]) -> None:
    found = read_text_calls(text)
    assert found is not None and found.problem is None and len(found.calls) == 1, found
    call = found.calls[0]
    assert {"name": call.name, "arguments": call.args} == meant
    assert extract_json(text) == meant


@pytest.mark.parametrize(("text", "meant"), HOSTILE.values(), ids=list(HOSTILE))
def test_the_one_reader_reads_the_whole_value(text: str, meant: dict[str, Any]) -> None:
    body = text.removeprefix("```json\n").removesuffix("\n```")
    assert read_json_value(body) == (meant, True)


def test_a_truncated_object_is_unread_by_the_reader_and_refused_by_both_callers() -> None:
    cut = '{"name": "write_file", "arguments": {"path": "a.py", "content": "print('
    assert read_json_value(cut) == (None, False)
    found = read_text_calls(cut)
    assert found is not None and found.calls == [] and found.problem is not None
    with pytest.raises(PlanParseError):
        extract_json(cut)


def test_trailing_prose_is_an_answer_to_the_call_reader_and_prose_around_an_object_to_the_parser() -> None:
    text = '{"name": "read_file", "arguments": {"path": "a.txt"}}\nThat is the call I would make.'
    assert read_json_value(text) == (None, False)
    assert read_text_calls(text) is None  # a call inside prose is text: the callers' own rule
    assert extract_json(text) == {"name": "read_file", "arguments": {"path": "a.txt"}}


def test_a_value_nested_too_deeply_is_unread_and_never_raises() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert read_json_value(deep) == (None, False)
    with pytest.raises(PlanParseError, match="nested too deeply"):
        extract_json(deep)


@pytest.mark.parametrize("module", [parse, text_calls], ids=lambda m: m.__name__)
def test_the_callers_decode_no_json_of_their_own(module: ModuleType) -> None:
    """Both callers read JSON only through `planmode.state.lenient_json`: neither imports a JSON decoder."""
    path = Path(str(module.__file__))
    imported = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    assert not imported & {"json", "json_repair", "simplejson", "orjson"}, imported
    assert "planmode.state.lenient_json" in imported
