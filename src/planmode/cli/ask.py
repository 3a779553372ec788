"""The questions planmode asks at a terminal: where they are asked (`prompt_console`), whether a human can answer
(`interactive`), and the answer read (`choose`, `ask_text`).

Only an answer typed after a question shows answers it: what was typed before (a key pressed while the plan was
still being written) is discarded first (`discard_typeahead`), at every question. No question has a default that
approves: an empty answer takes a question's default only where the caller names one, and an approval is a word
typed (``approve``, ``a``, or a `YES` synonym). The end of input (Ctrl-D) is never an answer but "later" (None).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Mapping, Sequence

from rich.console import Console
from rich.text import Text

from planmode.cli.ui import _console, console

__all__ = ["YES", "ask_text", "choose", "discard_typeahead", "interactive", "prompt_console"]

#: Words that approve at every question planmode asks (as in git's and apt's y/yes), in any case.
YES = {"y": "approve", "yes": "approve"}


def discard_typeahead() -> None:
    """Discard what was typed at the terminal and not read yet, when stdin is a terminal (``tcflush``): a key
    pressed before a question shows never answers it."""
    if not sys.stdin.isatty():
        return
    if sys.platform == "win32":
        import msvcrt

        while msvcrt.kbhit():
            msvcrt.getwch()
        return
    import termios

    # A terminal that refuses the flush (a closed or unusual descriptor): the question is still asked, and still
    # has no default that approves.
    with contextlib.suppress(termios.error, OSError, ValueError):
        termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)


def _read(where: Console, prompt: Text) -> str | None:
    """One line typed after ``prompt`` shows (typeahead discarded first); None at the end of input (Ctrl-D)."""
    discard_typeahead()
    try:
        return where.input(prompt)
    except EOFError:  # Ctrl-D
        where.print()
        return None


def choose(
    question: str,
    options: Sequence[str],
    *,
    synonyms: Mapping[str, str] | None = None,
    default: str | None = None,
) -> str | None:
    """Ask ``question``; the answer is one of ``options``, given as the whole word or its first letter, or a
    synonym (`YES`), in any case. An empty answer is ``default`` when one is named (never an approving one, by
    the callers' contract), else it asks again; so does an answer that is none of them, saying what is accepted.
    None at the end of input (Ctrl-D): the caller leaves for later."""
    accepted = (
        {o[0]: o for o in options} | {o: o for o in options} | {k.lower(): v for k, v in (synonyms or {}).items()}
    )
    prompt = Text.assemble(
        (question, "bold"),
        " " + " / ".join(options) + " ",
        ("[" + "/".join(o[0] for o in options) + "]", "bold magenta"),
        (f" ({default[0]})", "bold cyan") if default else "",
        ": ",
    )
    where = prompt_console()
    while True:
        raw = _read(where, prompt)
        if raw is None:
            return None
        word = raw.strip().lower()
        if not word and default is not None:
            return default
        if word in accepted:
            return accepted[word]
        where.print(Text(f"Please answer {', '.join(options)} (or the first letter).", style="red"))


def ask_text(question: str, *, default: str | None = None) -> str | None:
    """A line of free text (feedback); an empty answer is ``default`` when one is given; None at the end of input
    (Ctrl-D)."""
    shown = f" ({default})" if default else ""
    raw = _read(prompt_console(), Text.assemble(question, (shown, "bold cyan"), ": "))
    if raw is None:
        return None
    return raw.strip() if raw.strip() or default is None else default


_tty: list[Console] = []


def prompt_console() -> Console:
    """Where a question is asked: the console when stdout is a terminal; else the terminal itself (``/dev/tty``)
    when stdin is one (``planmode run ... | tee log``), as git and ssh ask for a password."""
    if sys.stdout.isatty() or not sys.stdin.isatty():
        return console
    if not _tty:
        try:
            tty = open("/dev/tty", "w", encoding=console.encoding, errors="replace")  # noqa: SIM115 (kept open)
        except OSError:
            return console
        _tty.append(_console(file=tty, force_terminal=True))
    return _tty[0]


def interactive() -> bool:
    """True when a human can answer: stdin is a terminal, and stdout or the process's terminal can show the
    question (`prompt_console`)."""
    return sys.stdin.isatty() and (sys.stdout.isatty() or prompt_console() is not console)
