"""Terminal rendering with rich: the plan as a table, progress events as lines, the approval screen.

Every text that comes from a model, a tool, a human or an exception is data: it reaches the terminal as a
rich `Text` (never parsed as markup, emoji codes or highlighting). The console itself has markup, emoji and
highlighting off, so even a plain string printed by mistake is shown literally. And every control character
in what is printed (an escape sequence, a C1 control, a bidi override) is shown as an escape, never sent to the
terminal: a render hook on the console (`_ShowControls`) covers every screen and prompt printed through it.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import (
    Console,
    ConsoleDimensions,
    ConsoleOptions,
    ConsoleRenderable,
    Group,
    RenderableType,
    RenderHook,
    RenderResult,
)
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from planmode.text import visible

if TYPE_CHECKING:  # the plan model imports the LangGraph stack: imported where a plan is read (a fast --help)
    from planmode.state.models import Plan, Step

__all__ = [
    "changes_view",
    "console",
    "err_console",
    "error_text",
    "plan_table",
    "render_event",
    "snapshot_table",
    "table_width",
    "unique_prefixes",
]


class _Visible:
    """A renderable whose text reaches the terminal with every control character shown as an escape
    (`planmode.text.visible`): an escape sequence in a model's, a tool's or a human's text (a conceal, an
    unterminated OSC 52, a cursor move, a C1 CSI, a bidi override) is shown, never acted on. rich's own styling
    is applied after, so it is kept."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.inner, options):
            if segment.control:  # rich's own cursor and screen controls (never built from text)
                yield segment
            else:
                yield Segment(visible(segment.text), segment.style)


class _ShowControls(RenderHook):
    """Every renderable printed on the CLI's console, prompts included, goes through `_Visible`."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Visible(r) for r in renderables]


#: The width of output that is not a terminal (a pipe, a file): lines are not wrapped, so that grep finds them.
UNWRAPPED = 100_000


class _Console(Console):
    """rich's console that does not wrap when its output is not a terminal (a pipe or a file) and no COLUMNS is
    set: rich would wrap at 80 columns, or at the width of a terminal that only stdin or stderr is."""

    @property
    def size(self) -> ConsoleDimensions:
        size = Console.size.fget(self)  # type: ignore[attr-defined]  # rich's property, read through the class
        if self._width is None and not self.is_terminal and not os.environ.get("COLUMNS"):
            return ConsoleDimensions(UNWRAPPED, size.height)
        return size  # type: ignore[no-any-return]  # fget is untyped: it returns ConsoleDimensions

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]  # rich's setter, through the class

    def rule(self, title: Any = "", *, characters: str = "─", style: Any = "rule.line", align: Any = "center") -> None:
        """A horizontal rule: the width of the terminal, or 80 columns in output that is not wrapped (a rule
        fills the whole width: 100,000 characters in a pipe)."""
        from rich.rule import Rule

        width = 80 if self.size.width >= UNWRAPPED else None
        self.print(Rule(title, characters=characters, style=style, align=align), width=width)


def _console(**kwargs: Any) -> Console:
    made = _Console(highlight=False, markup=False, emoji=False, **kwargs)
    made.push_render_hook(_ShowControls())
    return made


#: What planmode prints (stdout) and its own errors (stderr: ``show X --mermaid > plan.mmd`` keeps them out of the
#: file).
console = _console()
err_console = _console(stderr=True)

_STYLE = {
    "pending": "white",
    "running": "yellow",
    "done": "green",
    "failed": "red",
    "blocked": "magenta",
    "skipped": "dim",
}
_ICON = {
    "plan_created": "📝",
    "plan_approved": "✅",
    "plan_rejected": "↩",
    "plan_cancelled": "⏹",
    "step_started": "▶",
    "step_completed": "✔",
    "step_failed": "✖",
    "reflection": "🤔",
    "plan_patched": "🩹",
    "patch_rejected": "⛔",
    "run_finished": "🏁",
    "direct_answer": "💬",
}
_ASCII_ICON = {
    "plan_created": "*",
    "plan_approved": "+",
    "plan_rejected": "<",
    "plan_cancelled": "x",
    "step_started": ">",
    "step_completed": "+",
    "step_failed": "x",
    "reflection": "?",
    "plan_patched": "~",
    "patch_rejected": "!",
    "run_finished": "=",
    "direct_answer": ">",
}


def unicode_ok() -> bool:
    """True when the terminal's encoding can show non-ASCII symbols (icons, arrows)."""
    return console.encoding.lower().replace("-", "").startswith("utf")


def arrow() -> str:
    """The arrow between an old and a new value."""
    return "→" if unicode_ok() else "->"


def error_text(message: object, *, label: str = "error:") -> Text:
    """``error: <message>`` with the message literal."""
    return Text.assemble((label, "bold red"), " ", str(message))


#: Below this many columns the plan is shown stacked (one block per step), not as a table: at 80 columns a table's
#: description column is 12-16 characters wide and its words break mid-word.
STACK_BELOW = 110


@functools.cache
def _default_read_only() -> frozenset[str]:
    """The read-only tools of the CLI's graph (its workspace tools): a tool name in a plan that is not one of them
    changes things, as the approval policies count it (`planmode.tools.binding.step_writes`)."""
    from planmode.tools import workspace_tools
    from planmode.tools.binding import read_only_names

    return read_only_names(workspace_tools("."))


def _tools_cell(tools: Sequence[str], read_only: frozenset[str], star: str) -> Text:
    """A step's declared tools; the ones that change things (not read-only, or unknown) marked and yellow."""
    text = Text()
    for n, name in enumerate(tools):
        if n:
            text.append(", ")
        if name in read_only:
            text.append(name)
        else:
            text.append(name + star, style="bold yellow")
    return text


class PlanView:
    """The plan as a table at a wide terminal; stacked (a block per step, no cut words, the title on top) on a
    narrow one (below `STACK_BELOW` columns). Both show each step's tools, the ones that change things marked."""

    def __init__(
        self, plan: Plan, marks: Mapping[str, str] | None = None, read_only: Iterable[str] | None = None
    ) -> None:
        self.plan = plan
        self.marks = marks
        self.read_only = frozenset(read_only) if read_only is not None else _default_read_only()

    def _title(self) -> Text:
        title = Text(self.plan.title or "Plan", style="bold")
        title.append(f"  (v{self.plan.version}, revision {self.plan.revision})", style="dim")
        return title

    def _writes_note(self) -> Text | None:
        if not any(t not in self.read_only for s in self.plan.steps for t in s.tools):
            return None
        return Text("* changes things (a write)", style="dim")

    def _fixed_width(self) -> int:
        """The columns the table gives the short cells (number, mark, id, status, tools, after) and its borders."""
        steps = self.plan.steps
        widths = [
            len(str(len(steps))),
            max((len(s.id) for s in steps), default=2),
            max((len(s.status.value) for s in steps), default=6),
            min(24, max((len(", ".join(s.tools)) + len(s.tools) for s in steps), default=5)),
            min(20, max((len(", ".join(s.dependencies)) for s in steps), default=5)),
        ] + ([1] if self.marks is not None else [])
        return sum(widths) + 3 * (len(widths) + 2) + 1

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.measure import Measurement

        note = self._writes_note()
        # Stacked when the table would leave the description and the acceptance fewer than 60 columns together
        # (at 80 columns a table gave the description 12-16, breaking words), or below STACK_BELOW columns.
        if options.max_width < STACK_BELOW or options.max_width - self._fixed_width() < 60:
            yield self._stacked()
        else:
            table = self._table()
            if Measurement.get(console, options, table).maximum > options.max_width:
                table.expand = True  # it wraps anyway: the description and acceptance share the room 3:2
            yield table
        if note is not None:
            yield note

    def _table(self) -> Table:
        table = Table(title=self._title(), show_lines=False, title_justify="left")
        table.add_column("#", justify="right", style="dim")
        if self.marks is not None:
            table.add_column(" ", no_wrap=True)
        table.add_column("id", style="bold", overflow="fold")
        table.add_column("status", no_wrap=True)
        table.add_column("description", overflow="fold", ratio=3)
        table.add_column("tools", overflow="fold")
        table.add_column("after", style="cyan", overflow="fold")
        table.add_column("checked by", style="dim", overflow="fold", ratio=2)
        for n, s in enumerate(self.plan.steps, 1):
            st = s.status.value
            cells: list[RenderableType] = [Text(str(n))]
            if self.marks is not None:
                mark = self.marks.get(s.id, "")
                cells.append(Text(mark, style="green" if mark == "+" else "yellow"))
            cells += [
                Text(s.id),
                Text(st, style=_STYLE.get(st, "")),
                Text(s.description),
                _tools_cell(s.tools, self.read_only, "*"),
                Text(", ".join(s.dependencies)),
                Text("\n".join(checked_by(s))),
            ]
            table.add_row(*cells)
        return table

    def _stacked(self) -> Group:
        """Two or three lines a step: ``n. id  status  after: deps  tools: ...``, then the description and the
        acceptance indented (rich wraps them at word boundaries, under the indent)."""
        from rich.padding import Padding

        parts: list[RenderableType] = [self._title()]
        for n, s in enumerate(self.plan.steps, 1):
            st = s.status.value
            head = Text()
            mark = (self.marks or {}).get(s.id, "")
            head.append(f"{mark or ' '} ", style="green" if mark == "+" else "yellow")
            head.append(f"{n}. ", style="dim")
            head.append(s.id, style="bold")
            head.append("  ")
            head.append(st, style=_STYLE.get(st, ""))
            if s.dependencies:
                head.append("  after: ", style="dim")
                head.append(", ".join(s.dependencies), style="cyan")
            if s.tools:
                head.append("  tools: ", style="dim")
                head.append_text(_tools_cell(s.tools, self.read_only, "*"))
            parts.append(head)
            parts.append(Padding(Text(s.description), (0, 0, 0, 5), expand=False))
            for line in checked_by(s):
                parts.append(Padding(Text("checked by: " + line, style="dim"), (0, 0, 0, 5), expand=False))
        return Group(*parts)


def checked_by(step: Step) -> list[str]:
    """How a step is checked, a line each: its declared checks (planmode's marked), then its prose for the judge."""
    from planmode.state.checks import describe_check

    lines = [describe_check(c) for c in step.checks]
    if step.acceptance:
        lines.append(f"judged: {step.acceptance}")
    return lines


def plan_table(
    plan: Plan, *, marks: Mapping[str, str] | None = None, read_only: Iterable[str] | None = None
) -> PlanView:
    """The plan as a rich renderable: id, status, description, tools, dependencies, acceptance (a table on a wide
    terminal, stacked below `STACK_BELOW` columns).

    ``marks`` maps a step id to a one-character change mark (``+`` added, ``~`` updated) shown in a column.
    ``read_only``: the tool names that change nothing (default: the CLI's read-only workspace tools); every other
    tool a step names is marked ``*`` as one that changes things.
    """
    return PlanView(plan, marks, read_only)


def unique_prefixes(ids: Sequence[str], minimum: int = 8) -> dict[str, str]:
    """The shortest prefix (at least ``minimum`` characters) of each id that no other id shares, git-style."""
    out: dict[str, str] = {}
    for cid in ids:
        n = min(minimum, len(cid))
        while n < len(cid) and any(o != cid and o.startswith(cid[:n]) for o in ids):
            n += 1
        out[cid] = cid[:n]
    return out


def table_width() -> int | None:
    """The width to draw a wide table at: the terminal's (None: the console's own) when output is a terminal or
    COLUMNS is set; piped, the width of the terminal the command runs in (stderr or stdin), else 100."""
    if console.is_terminal or os.environ.get("COLUMNS"):
        return None
    for stream in (sys.stderr, sys.stdin):
        try:
            return os.get_terminal_size(stream.fileno()).columns
        except (OSError, ValueError, AttributeError):  # not a terminal, closed, or no descriptor
            continue
    return 100


def _short_times(moments: Sequence[Any]) -> tuple[list[str], str]:
    """Each moment short, in UTC: ``HH:MM:SS`` when all fall on one day (the day said once, in the returned
    title note), else ``MM-DD HH:MM``."""
    from datetime import UTC

    utc = [m.replace(tzinfo=m.tzinfo or UTC).astimezone(UTC) if m is not None else None for m in moments]
    days = sorted({m.date() for m in utc if m is not None})
    if len(days) <= 1:
        note = f"times in UTC, {days[0].isoformat()}" if days else "times in UTC"
        return [m.strftime("%H:%M:%S") if m is not None else "" for m in utc], note
    return [m.strftime("%m-%d %H:%M") if m is not None else "" for m in utc], "times in UTC"


def snapshot_table(
    snapshots: Sequence[Any], prefixes: Mapping[str, str] | None = None, numbers: Mapping[str, int] | None = None
) -> Table:
    """A thread's snapshots (newest first) as a table that reads at 80 columns: short times (the day once in the
    title), the text wrapped at words; each snapshot's number (``numbers``: its place in the thread, which a
    rollback does not change; without them, how many snapshots back it is) and its checkpoint id as a unique
    prefix that is never cut (``rollback`` accepts either)."""
    shown = prefixes or unique_prefixes([s.checkpoint_id for s in snapshots])
    cells = [shown.get(s.checkpoint_id, s.checkpoint_id) for s in snapshots]
    times, note = _short_times([s.created_at for s in snapshots])
    table = Table(title=f"Snapshots (newest first; {note})", title_justify="left")
    table.add_column("#" if numbers is not None else "back", justify="right", style="dim", no_wrap=True)
    table.add_column("checkpoint", style="cyan", no_wrap=True, min_width=max([8, *map(len, cells)]))
    table.add_column("time", style="dim", no_wrap=True)
    table.add_column("plan", justify="right", no_wrap=True)
    table.add_column("steps", overflow="fold", max_width=14)
    table.add_column("what happened", overflow="fold", ratio=1)
    for n, snap in enumerate(snapshots):
        counts = snap.counts or {}
        steps = " ".join(f"{k}:{v}" for k, v in counts.items() if v)
        table.add_row(
            Text(str(numbers.get(snap.checkpoint_id, "")) if numbers is not None else str(n)),
            Text(cells[n]),
            Text(times[n]),
            Text(f"v{snap.plan_version}" if snap.plan_version else "-"),
            Text(steps),
            Text(snap.label),
        )
    return table


def render_event(event: Mapping[str, Any]) -> Text:
    """One progress event as a line (a `Text`: its content is never read as markup)."""
    kind = str(event.get("type", ""))
    icon = (_ICON if unicode_ok() else _ASCII_ICON).get(kind, "*")
    data = event.get("data") or {}
    msg = str(event.get("message") or "")
    if kind == "reflection":
        retried = data.get("retried")  # retry_judged_failed: the run goes on
        again = f" (retrying {', '.join(map(str, retried))} once)" if isinstance(retried, list) and retried else ""
        msg = f"{data.get('assessment')}{again}: {msg}"
    if kind == "plan_patched":
        parts = [f"{k}: {', '.join(map(str, v))}" for k in ("added", "updated", "removed") if (v := data.get(k))]
        msg = f"v{event.get('plan_version')} - {msg} ({'; '.join(parts)})"
    if kind == "step_started" and isinstance(data.get("attempt"), int) and data["attempt"] > 1:
        msg = f"(attempt {data['attempt']}) {msg}"
    if kind == "run_finished":
        msg = f"{data.get('status')}"
    if len(msg) > 160:
        msg = msg[:157] + "..."
    color = "red" if kind in ("step_failed", "patch_rejected") else "green" if kind == "step_completed" else ""
    label = kind.replace("_", " ")
    if kind == "model_unavailable" and isinstance(data, Mapping) and data.get("reason") == "unauthorized":
        label, color = "not authorised", "red"  # the server refused the API key: not an absent model
    text = Text(f"{icon} {label}: ", style=color)
    if event.get("step_id"):
        text.append(str(event["step_id"]), style="bold")
        text.append(" ")
    text.append(msg, style=color)
    return text


# -- what changed between two revisions ----------------------------------------------------------------------


def _value(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(map(str, v)) + "]"
    return "(none)" if v in (None, "") else str(v)


def changes_view(changes: Mapping[str, Any] | None, plan: Plan | None = None) -> Text | None:
    """The changes since the last shown revision, one line each; None when there is nothing to show."""
    if not isinstance(changes, Mapping):
        return None
    added = [str(x) for x in changes.get("added") or []]
    removed = [str(x) for x in changes.get("removed") or []]
    updated = changes.get("updated") or {}
    updated = updated if isinstance(updated, Mapping) else {}
    reordered = bool(changes.get("reordered"))
    title = changes.get("title")
    if not (added or removed or updated or reordered or title):
        return None
    descriptions = {s.id: s.description for s in plan.steps} if plan is not None else {}
    since = changes.get("since_revision")
    text = Text("Changes since revision ", style="bold")
    text.append(str(since) if since else "the last one shown", style="bold")
    text.append(":")
    if isinstance(title, list | tuple) and len(title) == 2:
        text.append("\n  ~ title: ", style="yellow")
        text.append(f"{_value(title[0])} {arrow()} {_value(title[1])}")
    for sid in added:
        text.append("\n  + added ", style="green")
        text.append(sid, style="bold")
        if sid in descriptions:
            text.append(f": {descriptions[sid]}")
    for sid, fields in updated.items():
        text.append("\n  ~ updated ", style="yellow")
        text.append(str(sid), style="bold")
        if not isinstance(fields, Mapping):
            continue
        for name, pair in fields.items():
            text.append(f"\n      {name}: ")
            if isinstance(pair, list | tuple) and len(pair) == 2:
                text.append(_value(pair[0]), style="red")
                text.append(f" {arrow()} ")
                text.append(_value(pair[1]), style="green")
            else:
                text.append(_value(pair))
    for sid in removed:
        text.append("\n  - removed ", style="red")
        text.append(sid, style="bold")
    if reordered:
        text.append("\n  ~ steps reordered", style="yellow")
    return text


def _marks(changes: Mapping[str, Any] | None) -> dict[str, str] | None:
    if not isinstance(changes, Mapping):
        return None
    marks = {str(s): "~" for s in (changes.get("updated") or {})}
    marks.update({str(s): "+" for s in changes.get("added") or []})
    return marks or None


def approval_screen(payload: Mapping[str, Any]) -> Group:
    """What a human reads before answering: the plan, why it is asked (again), what changed, a refusal."""
    from planmode.state.models import Plan

    plan = Plan.model_validate(payload["plan"])
    changes = payload.get("changes")
    read_only = payload.get("read_only_tools")
    read_only = [str(t) for t in read_only] if isinstance(read_only, list) else None
    parts: list[RenderableType] = [plan_table(plan, marks=_marks(changes), read_only=read_only)]
    if payload.get("earlier"):  # a follow-up: the earlier run it builds on (planmode.state.earlier)
        parts.insert(0, Text.assemble(("Follows an earlier run:\n", "bold"), (str(payload["earlier"]), "dim")))
    reason = payload.get("reason")
    if reason and str(reason) != "initial plan":
        parts.append(Text.assemble(("Asked again: ", "bold yellow"), str(reason)))
    view = changes_view(changes, plan)
    if view is not None:
        parts.append(view)
    if isinstance(payload.get("budget"), Mapping):  # the plan's token estimate beside the budget
        from planmode.budget import approval_markdown

        parts.append(Text(approval_markdown(payload["budget"]), style="cyan"))
    checks = payload.get("checks")
    if isinstance(checks, Mapping):  # what will run when the steps are checked, and where
        parts.append(_checks_note(checks))
    if payload.get("error"):
        parts.append(error_text(payload["error"], label="previous answer refused:"))
    return Group(*parts)


def _checks_note(checks: Mapping[str, Any]) -> Text:
    """The approval screen's lines on checks: the commands that will run, the sandbox, and the plan's problems."""
    commands = [str(c) for c in checks.get("commands") or ()]
    note = Text()
    if commands:
        note.append("Commands the checks run: ", style="bold")
        note.append(", ".join(commands))
        note.append("\n")
    note.append(str(checks.get("sandbox") or ""), style="green" if checks.get("sandboxed") else "yellow")
    for problem in checks.get("problems") or ():
        note.append("\nproblem: ", style="bold red")
        note.append(str(problem))
    return note


def lines(items: Iterable[str], *, style: str = "") -> Text:
    """Several literal lines as one `Text`."""
    return Text("\n".join(items), style=style)
