"""``planmode``: run, resume, inspect and roll back plan-mode runs from a terminal.

Exit codes (a script can tell the outcomes apart):

====  ===================================================================
0     completed (or answered directly)
1     failed
2     bad input or set-up error (one line on the terminal, no traceback)
3     awaiting approval: the plan waits for a human (``planmode resume``)
4     cancelled at the approval
5     model unavailable: the run is paused, resumable (``planmode resume``, optionally at another endpoint)
6     over budget: the run is paused at its budget (``planmode resume --max-tokens N`` or ``--stop``)
130   interrupted (Ctrl-C); the run is checkpointed and resumable
====  ===================================================================
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from typer.core import TyperCommand

from planmode.cli import follow as _follow
from planmode.cli import inspect as _inspect
from planmode.cli import run as _run
from planmode.cli.common import EXIT_CODES, find_default_db, friendly
from planmode.cli.files import diff as files_diff
from planmode.cli.inspect import resolve_snapshot

# Start-up: this module and the command modules import click, typer and rich only (`planmode --help`, `--version`,
# `ls` start fast); each command imports the LangGraph stack and the screens it needs (tests/cli/test_cli_startup.py).
# The commands live by what they do: cli/run.py (run, resume), cli/inspect.py (ls, show, history, rollback),
# cli/follow.py (watch, show --follow).

__all__ = ["EXIT_CODES", "app", "find_default_db", "main", "resolve_snapshot"]

# rich_markup_mode=None: usage errors are click's plain "Error: ..." line, and help text is never read as markup.
# add_completion: typer's --install-completion / --show-completion [SHELL] (bash, zsh, fish, powershell); the
# completion script calls `planmode` with _PLANMODE_COMPLETE set, and THREAD arguments complete from the runs
# (planmode.cli.common.complete_thread).
app = typer.Typer(
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Plan Mode for LangGraph.",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from planmode import __version__

        print(f"planmode {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Plan Mode for LangGraph."""


class _Command(TyperCommand):
    """A command whose usage line names a required argument as click and man pages do (``TASK``), not in typer's
    braces (``{task}``); an optional one stays in brackets (``[STEP]``)."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:  # typer's own click Context (typer vendors click)
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in super().collect_usage_pieces(ctx)]


# -- the commands, in the order of `planmode --help` --------------------------------------------------------------
app.command("run", cls=_Command)(_run.run)
app.command("resume", cls=_Command)(_run.resume)
app.command("show", cls=_Command)(_inspect.show)
app.command("watch", cls=_Command)(_follow.watch)
app.command("ls", cls=_Command)(_inspect.ls)
app.command("history", cls=_Command)(_inspect.history)
app.command("rollback", cls=_Command)(_inspect.rollback)
app.command("diff", cls=_Command)(friendly(files_diff))  # planmode.cli.files (imports typer and rich only)


@app.command(cls=_Command)
@friendly
def graph() -> None:
    """Print the graph as Mermaid."""
    from planmode.graph import mermaid

    print(mermaid())


@app.command(cls=_Command)
def completion(
    shell: Annotated[Literal["bash", "zsh", "fish", "powershell"], typer.Argument(help="The shell.", metavar="SHELL")],
) -> None:
    """Print the shell completion script (e.g. `planmode completion bash >> ~/.bashrc`); commands, options and
    thread ids complete. `planmode --install-completion` installs it for the shell you are in."""
    from typer._completion_shared import get_completion_script

    sys.stdout.write(get_completion_script(prog_name="planmode", complete_var="_PLANMODE_COMPLETE", shell=shell))
    sys.stdout.write("\n")


@app.command(cls=_Command)
@friendly
def demo(
    db: Annotated[Path | None, typer.Option("--db", help="Keep the demo database here.")] = None,
) -> None:
    """The offline demo: a scripted model, real file tools, a real SQLite file; no API key."""
    from planmode.cli.demo import run_demo

    raise typer.Exit(run_demo(db))


def _tolerant_output() -> None:
    """Never crash on a terminal that cannot show a character (``PYTHONIOENCODING=ascii``): replace it."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):  # a closed or unusual stream: leave it as it is
                reconfigure(errors="replace")


def main() -> None:
    """Entry point of the ``planmode`` command."""
    _tolerant_output()
    app(prog_name="planmode")  # the same name (and _PLANMODE_COMPLETE) when started as `python -m planmode.cli`
