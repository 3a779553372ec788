"""The plan approval at a terminal: approve / edit / reject / cancel / quit (`ask_approval`), and the edit of the
plan in ``$VISUAL`` / ``$EDITOR`` as a form (`edit_plan`).

The editor runs once per ``edit`` answer, as ``git commit``'s does: an editor that cannot start, that exits
non-zero, or that is left without a change goes back to the approval question with one line saying so; it is
relaunched only for a form the human changed and that could not be read (with the error on top).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from rich.text import Text

from planmode.cli.ask import YES, ask_text, choose
from planmode.cli.ui import _default_read_only, _marks, approval_screen, changes_view, console, plan_table

if TYPE_CHECKING:
    from planmode.state.models import Plan

__all__ = ["EditorFailed", "NoEdit", "ask_approval", "edit_plan", "run_editor"]


@dataclass(frozen=True)
class EditorFailed:
    """Why the editor gave no text: it could not start, or it exited with a non-zero status (an aborted edit)."""

    message: str


def _editor_command() -> tuple[list[str], str] | EditorFailed:
    """The editor's command line and where it came from: ``$VISUAL``, else ``$EDITOR``, else ``vi``."""
    for var in ("VISUAL", "EDITOR"):
        value = os.environ.get(var, "")
        if value.strip():
            try:
                argv = shlex.split(value)
            except ValueError as exc:
                return EditorFailed(f"${var} ({value!r}) cannot be read as a command: {exc}; set $VISUAL or $EDITOR")
            return argv, f"${var}"
    return ["vi"], "the default (neither $VISUAL nor $EDITOR is set)"


def run_editor(text: str) -> str | EditorFailed:
    """Open the editor on ``text`` in a temporary ``.toml`` file; the saved text, or why there is none (an editor
    that cannot start, or that exits non-zero: the edit is aborted, as ``git commit`` takes it)."""
    found = _editor_command()
    if isinstance(found, EditorFailed):
        return found
    argv, source = found
    with tempfile.NamedTemporaryFile("w+", suffix=".toml", delete=False, encoding="utf-8") as fh:
        fh.write(text)
        path = fh.name
    try:
        try:
            done = subprocess.run([*argv, path], check=False)
        except OSError as exc:  # not found, not executable
            why = exc.strerror or type(exc).__name__
            return EditorFailed(f"cannot start the editor {argv[0]!r} from {source}: {why}; set $VISUAL or $EDITOR")
        if done.returncode != 0:
            return EditorFailed(f"the editor exited with status {done.returncode}: the edit is aborted")
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    finally:
        os.unlink(path)


def _workspace_tool_names() -> frozenset[str]:
    """The names of the tools of the CLI's graph (its workspace tools, `planmode.cli.common.graph_on`)."""
    from planmode.tools import workspace_tools

    return frozenset(t.name for t in workspace_tools("."))


def _leading_comments(lines: Sequence[str]) -> int:
    """How many lines at the top are comments or blank (the header planmode wrote, and whatever joins it)."""
    n = 0
    while n < len(lines) and (not lines[n].strip() or lines[n].lstrip().startswith("#")):
        n += 1
    return n


def _back(message: str) -> None:
    """The one line said when an edit goes back to the approval question."""
    console.print(Text(message + "; back to the approval question.", style="yellow"), soft_wrap=True)


#: What `edit_plan` gives instead of an edit answer: ``back`` (no edit: back to the approval question), ``discarded``
#: (the human saw the edited plan and discarded it: the plan is shown again as it was), ``quit`` (Ctrl-D).
NoEdit = Literal["back", "discarded", "quit"]


def edit_plan(
    plan: Plan, revision: str, read_only: Iterable[str] | None = None, tools: Iterable[str] | None = None
) -> dict[str, Any] | NoEdit:
    """Open the editor on the plan as a form (`planmode.cli.plan_form`: TOML with comments, no internal fields),
    then show the edited plan with its diff and ask for approval. The edit answer to send, or `NoEdit`: ``back``
    when there is no edit (an editor that cannot start or exits non-zero, a form left unchanged or emptied: said
    in one line), ``discarded``, or ``quit``. A changed form that cannot be read reopens the editor with the error
    on top (its line number that of the reopened file), every problem of it at once (`form_problems`: ``tools``
    are the names of the tools that exist, by default the CLI's workspace tools); nothing else relaunches it."""
    from planmode.approval import Edit, parse_resume
    from planmode.cli.form_check import form_problems
    from planmode.cli.plan_form import FormError, form_header, read_form, to_form
    from planmode.state.diff import plan_changes

    quiet = frozenset(read_only) if read_only is not None else _default_read_only()
    exist = frozenset(tools) if tools is not None else _workspace_tool_names()
    body = to_form(plan, quiet)
    error: FormError | None = None
    while True:
        header = form_header(error.shown() if error is not None else None)
        if error is not None and error.line is not None:  # the line as the reopened file numbers it
            header = form_header(error.shown(offset=len(header)))
        written = "\n".join(header) + "\n" + body
        saved = run_editor(written)
        if isinstance(saved, EditorFailed):
            _back(saved.message)
            return "back"
        if saved == written:
            _back("The plan was not changed (the editor was left without a change)")
            return "back"
        lines = saved.splitlines()
        top = _leading_comments(lines)
        if top == len(lines) or not "".join(line for line in lines if not line.lstrip().startswith("#")).strip():
            _back("Edit cancelled (the file was empty)")
            return "back"
        body = "\n".join(lines[top:]) + "\n"  # the person's text, their own comments kept; planmode's header goes
        read = read_form(saved, plan)
        if isinstance(read, FormError):
            line = read.line - top if read.line is not None and read.line > top else read.line
            error = FormError(read.message, line, read.column)
            continue
        problems = form_problems(read.get("steps") or [], exist) if isinstance(read.get("steps"), list) else []
        if problems:
            error = FormError("; ".join(problems))
            continue
        answer = {"action": "edit", "plan": read, "revision": revision}
        checked = parse_resume(answer, plan)
        if read == read_form(written, plan):  # changed only in comments or spacing: the form says the plan
            _back("The plan was not changed")
            return "back"
        if not isinstance(checked, Edit):
            error = FormError(str(checked))
            continue
        changes = plan_changes(plan, checked.plan)
        if plan.title != checked.plan.title:
            changes["title"] = [plan.title, checked.plan.title]
        console.print(plan_table(checked.plan, marks=_marks(changes), read_only=quiet))
        view = changes_view(changes, checked.plan)
        if view is not None:
            console.print(view)
        choice = choose("Approve the edited plan?", ["approve", "edit again", "discard the edit"], synonyms=YES)
        if choice == "approve":
            return answer
        if choice is None:
            return "quit"
        if choice == "discard the edit":
            return "discarded"
        error = None


def ask_approval(payload: dict[str, Any]) -> dict[str, Any] | None:
    """Show the plan and ask approve / edit / reject / cancel / quit. None means quit (the run stays resumable);
    cancel ends the run without executing anything. Ctrl-D at any question is quit. Only a typed ``approve``
    (or ``a``, ``y``, ``yes``) approves: an empty answer asks again."""
    from planmode.state.models import Plan

    plan = Plan.model_validate(payload["plan"])
    console.print(approval_screen(payload))
    while True:
        choice = choose("Approve this plan?", ["approve", "edit", "reject", "cancel", "quit"], synonyms=YES)
        if choice == "approve":
            return {"action": "approve", "revision": payload["revision"]}
        if choice in ("quit", None):
            return None
        if choice == "cancel":
            why = ask_text("Why (optional)?", default="")
            return None if why is None else {"action": "cancel", "feedback": why}
        if choice == "reject":
            answer = ask_text("What should change?")
            if answer is None:
                return None
            feedback = answer.strip()
            if feedback:
                return {"action": "reject", "feedback": feedback}
            console.print(Text("Feedback is needed to reject a plan.", style="yellow"))
            continue
        read_only = payload.get("read_only_tools")
        tools = payload.get("tools")
        edited = edit_plan(
            plan,
            str(payload["revision"]),
            [str(t) for t in read_only] if isinstance(read_only, list) else None,
            [str(t) for t in tools] if isinstance(tools, list) else None,
        )
        if edited == "quit":
            return None
        if edited == "discarded":
            console.print(approval_screen(payload))
        elif isinstance(edited, dict):
            return edited
