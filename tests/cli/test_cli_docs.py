"""The docs stay true (issue 45 item 6): every signature documented as a ``- `name(...)` `` line of
docs/python-api.md is the function's real signature (names, order, kinds, defaults), and every ``--option`` that
docs/cli.md and the README name is an option of the CLI, of the command its synopsis line names."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import Any

import click
import pytest
import typer.main

import planmode
from planmode.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
API_DOC = ROOT / "docs" / "python-api.md"
CLI_DOC = ROOT / "docs" / "cli.md"
README = ROOT / "README.md"

#: A documented signature: a list item that is one code span ``name(parameters)``.
_SIGNATURE = re.compile(r"^- `(\w+)\((.*)\)`", re.M)
_OPTION = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*[a-z0-9])(?![\w-])")


def _documented_signatures() -> list[tuple[str, str]]:
    return _SIGNATURE.findall(API_DOC.read_text(encoding="utf-8"))


def test_the_api_doc_documents_build_graph_s_signature() -> None:
    assert "build_graph" in [name for name, _ in _documented_signatures()]


@pytest.mark.parametrize(("name", "params"), _documented_signatures())
def test_a_documented_signature_is_the_real_one(name: str, params: str) -> None:
    documented = ast.parse(f"def {name}({params}): pass").body[0].args  # type: ignore[attr-defined]
    real = inspect.signature(getattr(planmode, name))

    def described(args: ast.arguments) -> list[tuple[str, str, Any]]:
        positional = [*args.posonlyargs, *args.args]
        defaults = [inspect.Parameter.empty] * (len(positional) - len(args.defaults)) + [
            ast.literal_eval(d) for d in args.defaults
        ]
        out = [(a.arg, "positional", d) for a, d in zip(positional, defaults, strict=True)]
        out += [
            (a.arg, "keyword", inspect.Parameter.empty if d is None else ast.literal_eval(d))
            for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
        ]
        return out

    kinds = {inspect.Parameter.KEYWORD_ONLY: "keyword"}
    actual = [(p.name, kinds.get(p.kind, "positional"), p.default) for p in real.parameters.values()]
    assert described(documented) == actual, f"docs/python-api.md's {name}(...) is not {name}{real}"


def test_the_api_doc_does_not_suggest_deprecated_apis() -> None:
    text = API_DOC.read_text(encoding="utf-8")
    for line in text.splitlines():
        if "create_react_agent" in line:
            assert "deprecated" in line, line  # only named as what not to use


def _commands() -> dict[str, click.Command]:
    group = typer.main.get_command(app)
    return dict(getattr(group, "commands", {}))


def _options(command: click.Command) -> set[str]:
    names: set[str] = {"help"}
    for param in command.params:
        for opt in [*getattr(param, "opts", []), *getattr(param, "secondary_opts", [])]:
            if opt.startswith("--"):
                names.add(opt[2:])
    return names


def _synopsis_lines(text: str) -> list[tuple[str, str]]:
    """(command, text) of each ``planmode COMMAND ...`` line of a code block, continuation lines included."""
    out: list[tuple[str, str]] = []
    in_block = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_block = not in_block
            continue
        if not in_block:
            continue
        if m := re.match(r"^planmode (\w[\w-]*)", line):
            out.append((m.group(1), line.split("#", 1)[0]))
        elif out and line.startswith(" ") and not line.strip().startswith("#"):
            out[-1] = (out[-1][0], out[-1][1] + " " + line.split("#", 1)[0])
        elif not line.startswith(" "):
            out.append(("", ""))  # a line of another kind ends the previous one
    return [(c, t) for c, t in out if c]


@pytest.mark.parametrize("page", [CLI_DOC, README], ids=lambda p: p.name)
def test_every_documented_option_is_an_option_of_its_command(page: Path) -> None:
    commands = _commands()
    everything = set().union(*map(_options, commands.values()), _options(typer.main.get_command(app)))
    text = page.read_text(encoding="utf-8")
    wrong = []
    for command, line in _synopsis_lines(text):
        if command not in commands:
            continue  # "planmode graph | demo" and the like: the command list is checked by test_readme
        wrong += [f"planmode {command} --{o}" for o in _OPTION.findall(line) if o not in _options(commands[command])]
    if page == CLI_DOC:  # every option the page names anywhere is one the CLI has
        wrong += [f"--{o}" for o in sorted(set(_OPTION.findall(text))) if o not in everything]
    assert wrong == [], f"{page.name} names options the CLI does not have"
