"""The small-model adapter's call repair: tool calls as small models write them, read as meant.

The tool loop (`planmode.tools.loop`) asks this module only when the run's settings switch the small-model adapter
on (``model_profile="small"``, ``--gguf``); the core never imports it otherwise. Every repaired call goes through
the same `ToolNode` and `ToolGate` as any call, on the file of the approved step:

- a reply that is wholly a tool call written as text (`text_calls.read_text_calls`) gets real tool calls with
  fresh ids (`from_text`);
- a call named after the step with a ``content`` is a call of the step's write tool (`aliased`), on the step's
  declared file; an unknown tool named after the file it writes is a call of the write tool;
- once the model has been told it may (``WholeFile.fenced``), a reply whose text is the file's whole content in
  one fenced block is a call of the write tool (`as_write`).
"""

from __future__ import annotations

import posixpath
import re
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

from langchain_core.messages import AIMessage, ToolCall

from planmode.adapters.small_models.files import file_names
from planmode.adapters.small_models.text_calls import TextCall, TextCalls, read_text_calls, whole_file_content
from planmode.llm import text_of
from planmode.tools.loop import WholeFile

__all__ = ["aliased", "aliased_text", "as_write", "from_text", "read_text_calls"]


def _excerpt(text: str, limit: int = 200) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def from_text(reply: AIMessage, read: TextCalls, known: frozenset[str]) -> tuple[AIMessage, str | None]:
    """``reply`` with the calls its text holds as real tool calls (fresh ids), or, when they cannot run, the
    reason (the reply is returned as is)."""
    problem = read.problem
    unknown = [c.name for c in read.calls if c.name not in known]
    if problem is None and unknown:
        names = ", ".join(_excerpt(n, 60) for n in dict.fromkeys(unknown))
        problem = f"no tool is named {names}"
    if problem is None and not read.calls:
        problem = "it holds no call"
    if problem is not None:
        return reply, problem
    calls = [
        {"name": c.name, "args": c.args, "id": f"planmode_text_{uuid.uuid4().hex}", "type": "tool_call"}
        for c in read.calls
    ]
    return reply.model_copy(update={"tool_calls": calls, "invalid_tool_calls": []}), None


def _step_write(args: Any, whole_file: WholeFile) -> dict[str, Any] | None:
    """The write tool's arguments for a call named after the step, or None when it carries no content. The call
    is the step's write, so its path is the step's file, whatever path the call names (a call named after the
    step with path ``src/app.py`` writes ``app.py`` when the approved step writes ``app.py``). A step that names no
    one file writes where the call says. A path that is a done step's file is kept as said, so the gate refuses
    it."""
    content = _text_content(args.get("content")) if isinstance(args, dict) else None
    if content is None and isinstance(args, dict) and "content" not in args and whole_file.empty:
        content = ""  # a step that writes an empty file (an empty __init__.py): the path alone is the whole write
    if content is None:
        return None
    path = whole_file.path or args.get("path")
    said = args.get("path")
    if isinstance(said, str) and said.strip() and posixpath.normpath(said.replace("\\", "/")) in whole_file.kept:
        path = said  # a done step's file, not this step's: the gate refuses it
    if not isinstance(path, str) or not path.strip():
        return None
    return {"path": path, "content": content}


def _text_content(value: Any) -> str | None:
    """A call's ``content`` as text: a string, or a list of strings as its lines (``["import pytest", "from util
    import area", ...]``, joined with newlines and ending in one); else None."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(line, str) for line in value):
        return "\n".join(line.removesuffix("\n") for line in value) + "\n"
    return None


def _misplaced(args: Any, whole_file: WholeFile) -> dict[str, Any] | None:
    """The write tool's arguments with the step's file as the path, when ``args`` put that file under a folder of
    the model's own (not in the workspace, not named by the step or the goal), else None: a step that writes
    app.py writes app.py, where its checks look, not src/app.py."""
    if whole_file.path is None or whole_file.root is None or not isinstance(args, dict):
        return None
    path = args.get("path")
    if not isinstance(path, str) or "/" in whole_file.path or "\\" in path:
        return None
    where = PurePosixPath(path)
    if where.is_absolute() or where.name != whole_file.path or where == PurePosixPath(whole_file.path):
        return None
    folders = [f for f in where.parent.parts if f not in ("", ".")]
    if not folders or ".." in folders or any(re.search(rf"\b{re.escape(f)}\b", whole_file.named) for f in folders):
        return None
    if Path(whole_file.root, *folders[:1]).exists():
        return None
    return {**args, "path": whole_file.path}


def aliased(call: ToolCall, whole_file: WholeFile, known: frozenset[str] = frozenset()) -> ToolCall:
    """``call``, or, when it is named after the step and carries a content, a call of the step's write tool (or,
    with the arguments of exactly one other declared write tool, a call of that one: `_shaped`); a call of that
    tool that puts the step's file under a folder of its own writes the step's file (`_misplaced`); an unknown
    tool named after the file it writes is a call of the write tool (`_file_named_write`)."""
    aliased = _alias_args(call["name"], call.get("args"), whole_file, known)
    return call if aliased is None else {**call, "name": aliased[0], "args": aliased[1]}


def aliased_text(call: TextCall, whole_file: WholeFile, known: frozenset[str] = frozenset()) -> TextCall:
    aliased = _alias_args(call.name, call.args, whole_file, known)
    return call if aliased is None else TextCall(name=aliased[0], args=aliased[1])


def _alias_args(
    name: str, args: Any, whole_file: WholeFile, known: frozenset[str]
) -> tuple[str, dict[str, Any]] | None:
    """The tool and arguments ``name(args)`` stands for, or None when it is itself."""
    aliased = _aliased_args(name, args, whole_file, known)
    tool, given = aliased if aliased is not None else (name, args)
    if whole_file.whole and tool == whole_file.tool and isinstance(given, dict):
        closed = _closed_code(given)
        if closed is not None:
            return tool, closed
    return aliased


def _aliased_args(
    name: str, args: Any, whole_file: WholeFile, known: frozenset[str]
) -> tuple[str, dict[str, Any]] | None:
    nested = _nested_call(name, args, known)
    if nested is not None:
        again = _aliased_args(*nested, whole_file, known)
        return again if again is not None else nested
    if name == whole_file.alias:
        written = _step_write(args, whole_file) if whole_file.whole else None
        return (whole_file.tool, written) if written is not None else _shaped(args, whole_file)
    found = _own_alias_args(name, args, whole_file, known)
    return (whole_file.tool, found) if found is not None else None


def _nested_call(name: str, args: Any, known: frozenset[str]) -> tuple[str, dict[str, Any]] | None:
    """The call an unknown tool's arguments hold: a known tool's name as their one key, with its arguments (a
    call of "Create app.py" with ``{"write_file": {"path": "app.py", "content": ...}}``), or as the value of
    ``function`` (or ``tool``, ``name``) beside its arguments. The inner call is that tool's: the gate and the
    step's declared tools decide as for any call of it."""
    if name in known or not isinstance(args, dict):
        return None
    for key in _NAMING_KEYS:  # {"function": "read_file", "path": "app.py"}: read_file with path app.py
        named = args.get(key)
        if isinstance(named, str) and named in known:
            return named, {k: v for k, v in args.items() if k != key}
    if len(args) != 1:
        return None
    ((inner, given),) = args.items()
    return (inner, dict(given)) if inner in known and isinstance(given, dict) else None


#: The argument an unknown tool's call names the tool it means by.
_NAMING_KEYS = ("function", "tool", "tool_name", "name")


_CLOSERS = {"(": ")", "[": "]", "{": "}"}
_NEVER_CLOSED = re.compile(r"'(?P<b>[(\[{])' was never closed")


def _closed_code(args: dict[str, Any]) -> dict[str, Any] | None:
    """The write's arguments with the brackets its Python file's last line leaves open closed, when that is the
    file's only syntax error (``print(area(4)``: "'(' was never closed" on the last line); else None."""
    path, content = args.get("path"), args.get("content")
    if not isinstance(path, str) or not path.endswith(".py") or not isinstance(content, str) or not content.strip():
        return None
    body = content.rstrip()
    last = len(body.splitlines())
    for _ in range(3):  # at most three brackets
        try:
            compile(body, path, "exec", dont_inherit=True)
        except SyntaxError as exc:
            m = _NEVER_CLOSED.search(str(exc.msg))
            if m is None or exc.lineno != last:
                return None
            body += _CLOSERS[m.group("b")]
            continue
        except (ValueError, MemoryError, RecursionError):
            return None
        return None if body == content.rstrip() else {**args, "content": body + "\n"}
    return None


def _shaped(args: Any, whole_file: WholeFile) -> tuple[str, dict[str, Any]] | None:
    """The one declared tool whose arguments ``args`` are (every required one given, none it does not take), with
    ``args``; None when none or several fit (a call of ``update_function`` with ``path``, ``old_string`` and
    ``new_string``, in a step that declares edit_file, is edit_file's). The call is then that tool's: the gate
    and the step's declared tools decide as for any call of it."""
    if not isinstance(args, dict) or not args:
        return None
    given = set(args)
    fits = [name for name, required, accepted in whole_file.shapes if required <= given <= accepted]
    return (fits[0], dict(args)) if len(fits) == 1 else None


def _own_alias_args(name: str, args: Any, whole_file: WholeFile, known: frozenset[str]) -> dict[str, Any] | None:
    if not whole_file.whole:
        return None
    if name == whole_file.tool:
        lines = args.get("content") if isinstance(args, dict) else None
        text = _text_content(lines) if isinstance(lines, list) else None
        fixed = args if text is None else {**args, "content": text}
        moved = _misplaced(fixed, whole_file)
        return moved if moved is not None else (fixed if text is not None else None)
    if name not in known:
        return _file_named_write(name, args) or _said_write(name, args, whole_file)
    return None


#: A file a tool's name names, its dot written as an underscore or not: "write_data_txt", "create_app.py".
_NAMED_FILE = re.compile(r"([A-Za-z0-9]+)[_.](py|txt|json|csv|md|cfg|toml|yaml|yml|ini)(?![A-Za-z0-9])")
#: An unknown tool's name that says it writes: "write_app_function", "create_report", "save-file".
_WRITES = re.compile(r"^(?:write|create|save|make)(?:[_\-\s]|$)", re.IGNORECASE)


def _said_write(name: str, args: Any, whole_file: WholeFile) -> dict[str, Any] | None:
    """The write tool's arguments of a call to an unknown tool whose name says it writes ("write_app_function")
    and no other change, with exactly a ``path`` that is the step's one file and a string ``content``, else None.
    The step's own file and its declared write tool: the write tool's gate applies as to any call of it. A name
    that names another file (``write_data_txt`` in a step that writes app.py) is a confused call, and stays
    unknown."""
    if whole_file.path is None or not isinstance(args, dict) or set(args) != {"path", "content"}:
        return None
    if _WRITES.match(name.strip()) is None or _NOT_WHOLE.search(name) is not None:
        return None
    named = {f"{stem}.{ext}" for stem, ext in _NAMED_FILE.findall(name)}  # write_data_txt: another step's file
    if named - {PurePosixPath(whole_file.path).name}:
        return None
    path, content = args.get("path"), _text_content(args.get("content"))
    if not isinstance(path, str) or content is None:
        return None
    if posixpath.normpath(path.strip().replace("\\", "/")).removeprefix("./") != whole_file.path:
        return None
    return {"path": path, "content": content}


def _file_named_write(name: str, args: Any) -> dict[str, Any] | None:
    """The write tool's arguments of a call to an unknown tool named after the file its ``path`` names (its file
    name or stem, or a name that mentions it, as ``main.py``, ``main`` or "Create main.py") with a string
    ``content``, else None. The path is the call's own: the write tool's gate and the step's declared tools apply
    as to any call of it."""
    content = _text_content(args.get("content")) if isinstance(args, dict) else None
    if content is None:
        return None
    path = args.get("path")
    if not isinstance(path, str) or not path.strip():
        return None
    where = PurePosixPath(path.replace("\\", "/"))
    if not where.suffix:
        return None
    if name.strip() not in (where.name, where.stem) and not _names_its_write(name, where.name):
        return None
    return {"path": path, "content": content}


#: In a call's name, a word that says it changes a file otherwise than writing it whole.
_NOT_WHOLE = re.compile(r"append|insert|delete|remove|rename|replace|edit|patch|move|copy|update", re.IGNORECASE)


def _names_its_write(name: str, file: str) -> bool:
    """Whether an unknown tool's name mentions the file its call writes, and no other change ("Create util.py
    and its test", "pytest test_util.py", with that file's path and content). "append data.txt" is not a
    whole-file write, and stays an unknown tool."""
    return file in file_names(name) and _NOT_WHOLE.search(name) is None


def as_write(reply: AIMessage, whole_file: WholeFile) -> AIMessage:
    """``reply`` with a call of the write tool when its text is the file's whole content in one fence (a fresh
    id), else ``reply`` as it is."""
    content = whole_file_content(text_of(reply), whole_file.path) if whole_file.path is not None else None
    if content is None:
        return reply
    call = {
        "name": whole_file.tool,
        "args": {"path": whole_file.path, "content": content},
        "id": f"planmode_file_{uuid.uuid4().hex}",
        "type": "tool_call",
    }
    return reply.model_copy(update={"tool_calls": [call], "invalid_tool_calls": []})
