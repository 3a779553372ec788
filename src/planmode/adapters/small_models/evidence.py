"""Evidence for verify and finalize: what a step's attempt actually did, and the checks made without a model.

A step is judged on evidence — the tool calls that ran (`StepOutcome.tool_runs`), the files it wrote
(`StepOutcome.writes`) and their content, and checks that need no model — never on the executor's own words.
`gather` collects it for one attempt:

- **an effect**: a step that declares a write tool of the graph must have made a write (a file recorded by the
  workspace tools, or a successful call of a write tool); a reply that only *says* it wrote fails;
- **files named in the acceptance** exist (in the workspace, or among the files the step wrote);
- **a script the step says uses a data file** of the workspace ("prints the number of lines in notes.txt") names
  that file, itself or in a workspace module it imports (it is run with no input: one that reads standard input
  prints something beside the point);
- **Python files** the step wrote, or its acceptance names, compile (``compile()``: nothing is executed or written);
- **commands** the acceptance names in backticks (`` `python app.py` ``, `` `pytest test_util.py` ``) run in the
  workspace with a timeout and must exit 0 — only when the approved acceptance says so, only inside a known
  workspace, and only a Python file of the workspace or pytest (no ``python -c``, no paths out of it);
- **calls** the acceptance says return a value ("double(21) returns 42", "is_prime(8) is False"): the function
  of the one workspace module that defines it, called with the literal arguments in a child process in the
  workspace, with the same timeout, returns that literal value.

What no check covers is left to the judge (`planmode.executors.llm_verifier`), which is shown the evidence
(`Evidence.to_prompt`), with the executor's report marked as a claim. finalize uses the same file look-ups:
`missing_deliverables` (the files a task and its plan promised) and `unsupported_files` (files an answer names
that do not exist)."""

from __future__ import annotations

import ast
import builtins
import contextlib
import csv
import importlib.util
import io
import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool

from planmode.adapters.small_models.files import deliverables, file_mentions, file_names, produced_file, says_file_empty
from planmode.sandbox import SandboxPolicy, run_command, run_python_probe
from planmode.state.graph_state import StepOutcome, ToolRun
from planmode.state.models import Plan, Step, StepStatus
from planmode.text import clip
from planmode.tools.binding import read_only_names
from planmode.tools.workspace import workspace_root

__all__ = [
    "COMMAND_TIMEOUT",
    "Check",
    "Evidence",
    "broken_runs",
    "changed_files",
    "commands",
    "gather",
    "missing_deliverables",
    "preferred_write",
    "says_prints",
    "unsupported_files",
    "workspace_root",
    "write_tool_names",
]

#: Seconds a command named in an acceptance may run before it counts as failed.
COMMAND_TIMEOUT = 30.0
#: Characters of a written file shown to the judge.
FILE_CHARS = 1500
_CHANGED = "the step changed something"

_GONE = re.compile(r"\b(delete[sd]?|remove[sd]?|no longer|not exist|does not exist|renamed?)\b", re.IGNORECASE)
_COMMAND = re.compile(r"`((?:python3?|pytest)\b[^`\n]*)`")
#: "X.py exists and" before the verb ("app.py exists and runs with expected output"): a clause that runs the file
#: without naming a command still runs it.
#: "X.py exists and, when run, prints": the condition of running between the file and the verb.
_AND = (
    r"(?:\s+(?:exists|is created|is written)\s+and)?"
    r"(?:[\s,]+(?:when|if|once)\s+(?:it\s+is\s+|it's\s+)?(?:run|executed)\b,?)?"
)
_RUNS = re.compile(
    rf"(?<![\w/.\-])((?:[\w\-]+/)*[\w\-]+\.py)`?{_AND}\s+(?:runs|executes|can be run|prints|outputs|displays)\b",
    re.IGNORECASE,
)
_PRINTS = re.compile(
    r"(?:running\s+)?`((?:python3?|pytest)\b[^`\n]*)`\s+(?:prints|outputs|shows|displays)\b", re.IGNORECASE
)
_FILE_PRINTS = re.compile(
    rf"(?<![\w/.\-])((?:[\w\-]+/)*[\w\-]+\.py)`?{_AND}\s+(?:prints|outputs|displays)\b", re.IGNORECASE
)


def write_tool_names(tools: Sequence[BaseTool]) -> frozenset[str]:
    """The names of the graph's tools that change things (not read-only)."""
    return frozenset(t.name for t in tools) - read_only_names(tools)


def preferred_write(writes: frozenset[str]) -> str:
    """The write tool to name in an example or a fix: ``write_file`` when the graph has it."""
    return "write_file" if "write_file" in writes else sorted(writes)[0]


def declared_writes(step: Step, writes: frozenset[str]) -> list[str]:
    """The write tools of the graph that ``step`` declares."""
    return [t for t in dict.fromkeys(step.tools) if t in writes]


@dataclass
class Check:
    """One check made without a model: passed, failed, or could not be made (``passed`` None)."""

    what: str
    passed: bool | None
    detail: str = ""

    def line(self) -> str:
        mark = {True: "passed", False: "FAILED", None: "not checked"}[self.passed]
        if "\n" in self.detail:  # a command's output of several lines, shown as lines
            return f"- {self.what}: {mark}, printing:\n" + "\n".join(f"    {row}" for row in self.detail.split("\n"))
        if self.passed and self.detail and self.what.endswith("` runs"):  # "passed (3)" was read as exit code 3
            return f"- {self.what}: {mark}, printing: {self.detail}"
        return f"- {self.what}: {mark}" + (f" ({self.detail})" if self.detail else "")


@dataclass
class Evidence:
    """What one attempt of a step did, as far as planmode saw it, and the checks made on it."""

    runs: list[ToolRun] | None
    files: dict[str, str] = field(default_factory=dict)
    """Files the attempt wrote, shown name -> the beginning of their content (or a note that they are gone)."""
    checks: list[Check] = field(default_factory=list)

    @property
    def wrote(self) -> bool:
        """Whether the step declares a write tool and changed something (its check passed)."""
        return any(c.what == _CHANGED and c.passed is True for c in self.checks)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.passed is False]

    def settles(self, acceptance: str, description: str = "") -> bool:
        """Whether the checks already decide ``acceptance``: every one of its clauses (split at commas,
        semicolons and "and" outside quotes) is a file that exists, a command that runs, or a command that prints
        a quoted text, its check passed, and at least one clause ran something (a file that merely exists is
        left to the judge, who reads it against the step). Then no judge is asked; a clause no check covers
        ("returns 5", "has a docstring") leaves the step to the judge. A write step without acceptance is settled
        by its write (the check that it changed something passed): its report, often empty from a small model, is
        not the evidence. A step whose ``description`` says it prints something is settled only by a clause that
        matched a quoted output: that a script runs does not say that it prints what the step asks (a script that
        reads standard input instead of its data file runs, prints nothing, and is not done)."""
        if self.failed:
            return False
        if not acceptance.strip():
            return self.wrote and not says_prints(description)
        kinds = self._kinds(acceptance)
        if says_prints(description) and "printed" not in kinds and not self._prints_as_described(description):
            return False
        decisive = {"runs", "printed", "content", "returns", "described"}
        return bool(kinds) and None not in kinds and bool(decisive & set(kinds))

    def _prints_as_described(self, description: str) -> bool:
        """Whether a command printed exactly the text the step's description gives as the whole output: a Python
        ``print('...')`` literal or "prints exactly ...": such a step is decided by its output, not by a judge."""
        if any(c.passed is True and c.what.startswith(_AS_CALLED) for c in self.checks):
            return True  # it printed exactly what the call it names gives (`_printed_call`)
        said = exact_outputs(description)
        printed = {c.detail.strip() for c in self.checks if c.passed is True and c.what.endswith(" runs")}
        return bool(said) and bool(said & printed)

    def covers(self, acceptance: str) -> bool:
        """Whether every clause of ``acceptance`` is decided by a passed check ("exists" included): what is left
        to the judge is only whether the content does what the step describes."""
        if self.failed or not acceptance.strip():
            return False
        kinds = self._kinds(acceptance)
        return bool(kinds) and None not in kinds

    def _kinds(self, acceptance: str) -> list[str | None]:
        """How the passed checks decide each clause of ``acceptance`` (`_settled`); a clause that only says the
        content is right ("with the correct content"), when the checks of what the step's description gives its
        data file (`_described_content`) all passed, is "described"."""
        passed = {c.what: c.detail for c in self.checks if c.passed is True}
        default = _only_file(acceptance)
        clauses = _with_subjects(_with_commands(_clauses(acceptance)), default)
        kinds = [
            ("content" if _content_what(*asked) in passed else None)
            if (asked := _content_check(clause, default)) is not None
            else _settled(clause, passed)
            for clause in clauses
        ]
        described = [c for c in self.checks if c.what.startswith(_AS_DESCRIBED)]
        if described and all(c.passed is True for c in described):
            lines = any("\\n" in c.what for c in described)  # the whole file was held to lines: its layout is seen

            def decided(clause: str) -> bool:
                return _vague(clause) or (lines and _layout(clause))

            kinds = [k if k is not None or not decided(c) else "described" for c, k in zip(clauses, kinds, strict=True)]
        return kinds

    def refutes(self, reason: str, report_shown: bool) -> str:
        """How the evidence contradicts a judge's reason for failing the step ("" when it does not): the reason
        says a file does not exist that a passed check found, or rests on the executor's report when none was
        shown, or says nothing was written when the step wrote ("data.txt does not exist" beside a passed check
        that found it, "the executor did not provide a report" when none was shown)."""
        found = {c.what.removesuffix(" exists") for c in self.checks if c.passed is True and c.what.endswith(" exists")}
        named = file_names(reason)
        denied = [n for n in named if _denied(reason, n)]
        if denied and all(n in found or n in self.files for n in denied):
            return f"the checks found {', '.join(denied)}: {'they exist' if len(denied) > 1 else 'it exists'}"
        printed = [c for c in self.checks if c.passed is True and c.what.endswith(" runs") and c.detail.strip()]
        if printed and _NO_OUTPUT.search(reason):
            shown = "; ".join(
                f"{c.what.removesuffix(' runs')} printed {clip(c.detail, 80, fold=False)!r}" for c in printed
            )
            return f"the checks show output: {shown}"
        if (same := _same_both_ways(reason)) is not None:
            return f"the reason gives {same!r} as both what is expected and what is there"
        if (misread := self._misread_output(reason)) is not None:
            return misread
        ran = [c.what for c in self.checks if c.passed is True and c.what.endswith(" runs")]
        if ran and _NOT_RUN.search(reason):
            return f"the checks ran it: {'; '.join(f'{w}: passed' for w in ran)}"
        if not report_shown and _ON_REPORT.search(reason):
            return "no report was shown: the step is judged on the evidence, not on a report"
        if self.wrote and self.files and not named and _NOTHING_WRITTEN.search(reason):
            return f"the step wrote {', '.join(self.files)}"
        if (there := self._contains(_expected_texts(reason))) is not None:
            return there
        if (defined := self._defines(reason)) is not None:
            return defined
        if (quoted := self._quotes_a_file(reason)) is not None:
            return quoted
        if (stated := self._states_a_passed_check(reason)) is not None:
            return stated
        return ""

    def _states_a_passed_check(self, reason: str) -> str | None:
        """The passed content check whose statement a failing reason makes as its ground ("The first line of
        README.md is '# Counter', which does not match the acceptance criteria", beside the passed check that says
        so), or None."""
        said = " ".join(reason.lower().split())
        for check in self.checks:
            if check.passed is not True:
                continue
            what = check.what.removeprefix("as the task says: ").removeprefix(_AS_DESCRIBED)
            content = what.startswith("the first line of ") or " holds " in what or " reads " in what
            if content and " ".join(what.lower().split()) in said:
                return f"the check {what!r} passed: that is what the step was to do"
        return None

    def _quotes_a_file(self, reason: str) -> str | None:
        """Which file's whole content a reason quotes while saying the file does not match or holds less (None when
        it does not): "does not match the expected content: '<app.py, as written>'", or "the step wrote '<it>', but
        the file only contains '<its first lines>'"."""
        if not _MISMATCH.search(reason):
            return None
        said = _bare_text(reason)
        for name, body in self.files.items():
            held = _bare_text(body)
            if len(held) >= 20 and held in said:
                return f"the reason quotes {name} as it is: that is the file's whole content"
        return None

    def _misread_output(self, reason: str) -> str | None:
        """How a reason misreads what a command printed: the output it says is expected is what the command printed
        (whole), or the output it says the command gave is not; None when it says neither. A reason that swaps the
        two ("the expected output should be: <what it printed>. Instead, the actual output is: <something else>")
        is contradicted by the check's output."""
        outputs = {
            c.what.removesuffix(" runs"): _flat(c.detail)
            for c in self.checks
            if c.passed is True and c.what.endswith(" runs") and c.detail.strip() and not c.detail.endswith("…")
        }
        if not outputs:
            return None
        if (m := _EXPECTED_OUTPUT.search(reason)) is not None:
            said = _flat(m.group("text"))
            for command, printed in outputs.items():
                if said == printed:
                    return f"the output the reason expects is what {command} printed"
        if len(outputs) == 1 and (m := _ACTUAL_OUTPUT.search(reason)) is not None:
            said, ((command, printed),) = _flat(m.group("text")), outputs.items()
            number = re.fullmatch(r"-?\d+(?:\.\d+)?", said) is not None  # "the actual output was 64" (it printed 16)
            if said and said != printed and (len(said.split()) > 1 or number):
                return f"{command} printed {clip(printed, 80)!r}, not {clip(said, 80)!r}"
        return None

    def _defines(self, reason: str) -> str | None:
        """Where a file the step wrote defines every function or class the reason says it lacks ("does not contain
        the `shout` function", "shout is not defined in util/strings.py"); None when one is defined nowhere."""
        names = list(dict.fromkeys(m.group("n") for p in _LACKS for m in p.finditer(reason)))
        if not names:
            return None
        where = []
        for name in names:
            pattern = re.compile(rf"^\s*(?:async\s+)?(?:def|class)\s+{re.escape(name)}\b", re.MULTILINE)
            found = [path for path, body in self.files.items() if pattern.search(body)]
            if not found:
                return None
            where.append(f"{found[0]} defines {name}")
        return "; ".join(where)

    def _contains(self, texts: list[tuple[bool, str]]) -> str | None:
        """Where the files the step wrote, or the output of its checks, hold every one of ``texts`` (None when one
        is in neither); a text said to be printed is looked for in the output first."""
        if not texts:
            return None
        outputs = {c.what.removesuffix(" runs"): c.detail for c in self.checks if c.passed and c.what.endswith(" runs")}
        files = [(f"{name} contains", body) for name, body in self.files.items()]
        printed = [(f"{command} printed", out) for command, out in outputs.items()]
        found = []
        for said_printed, text in texts:
            places = printed + files if said_printed else files + printed
            where = next((label for label, body in places if text in body), None)
            if where is None:
                return None
            found.append(f"{where} {clip(text, 80, fold=False)!r}")
        return "; ".join(found)

    def reason(self) -> str:
        """Why the attempt fails on the evidence (the failed checks, each naming the fix)."""
        return "; ".join(f"{c.what}: {c.detail}" if c.detail else c.what for c in self.failed)

    def to_prompt(self, report: str, limit: int = 4000) -> str:
        """The evidence as the judge reads it; the executor's report last, marked as a claim (nothing is said of a
        report when there is none)."""
        lines = ["Tool calls that ran:"]
        if self.runs is None:
            lines.append("(not reported by this executor)")
        elif not self.runs:
            lines.append("(none: no tool ran)")
        for r in self.runs or ():
            lines.append(f"- {r.name} {r.args} -> {'ok' if r.ok else 'error'}: {clip(r.result, 200)}")
        lines.append("Files the step wrote:" if self.files else "Files the step wrote: (none)")
        for name, content in self.files.items():
            lines += [f"--- {name}", content]
        if self.checks:
            lines.append("Checks run without a model:")
            lines += [c.line() for c in self.checks]
        if report.strip():
            lines += ["The executor's own report (a claim, not evidence):", clip(report, 1500, fold=False)]
        # No report, no word of one: any mention of a missing report ("the report is empty", even "that is not a
        # failure") gives a judge a reason to fail a step on it
        return clip("\n".join(lines), limit, marker="\n…[truncated]", fold=False)


_CLAUSES = re.compile(r"[,;]|\band\b", re.IGNORECASE)  # no white space around: the clauses are stripped (linear)
_EXISTS_CLAUSE = re.compile(
    r"(?:the file\s+)?`?(?P<f>[\w/.\-]+)`?\s+(?:exists|is created|was created|is written|was written|has been created)",
    re.IGNORECASE,
)
#: "The `python demo.py` command should run without errors": an article, "command" and a modal around.
_MODAL = r"(?:\s+command)?\s+(?:(?:should|must|will)\s+)?"
#: "with the correct output": what a run gives, said of no output in particular (`_settled`: decided by a run that
#: printed nothing, where nothing says the script prints).
_VAGUE_OUTPUT = (
    r"(?P<vague>\s+(?:and\s+)?(?:with|giving|producing|printing)\s+(?:the\s+)?"
    r"(?:correct|expected|right|desired|proper)\s+(?:output|result)s?)?"
)
_RUNS_CLAUSE = re.compile(
    r"(?:the\s+)?(?:running\s+)?`(?P<c>[^`]+)`" + _MODAL + r"(?:runs?|pass(?:es)?|succeeds?|works?|exits? 0|executes?)"
    r"(?:\s+(?:without errors?|successfully|with exit code 0))?" + _VAGUE_OUTPUT,
    re.IGNORECASE,
)
_FILE_RUNS_CLAUSE = re.compile(
    r"`?(?P<f>[\w/.\-]+\.py)`?\s+(?:runs|executes|can be run)(?:\s+(?:without errors?|successfully))?" + _VAGUE_OUTPUT,
    re.IGNORECASE,
)


#: "`pytest test_area.py` passes with `s = 3` returning `9`": a test run passes, whatever the clause says it
#: checks (that is the tests' to check, not the judge's).
_PYTEST_PASSES = re.compile(
    r"(?:running\s+)?`(?P<c>(?:python3?\s+-m\s+)?pytest\b[^`]*)`\s+(?:passes|succeeds)\b.*", re.IGNORECASE | re.DOTALL
)
_WHEN_RUN = r"(?:\s+when\s+(?:it\s+is\s+)?(?:executed|run))?"
_PRINTS_CLAUSE = re.compile(
    r"(?:the\s+)?(?:running\s+)?`(?P<c>[^`]+)`"
    + _MODAL
    + r"(?:prints?|outputs?|shows?)\s+(?:exactly\s*:?\s*)?(?:(?P<q>['\"`])(?P<out>.*)(?P=q)|(?P<num>-?\d+(?:\.\d+)?))"
    + _WHEN_RUN,
    re.IGNORECASE | re.DOTALL,
)
#: "run.py prints '16' when executed", "`run.py` outputs "16"": a script of the workspace, run as it is.
_FILE_PRINTS_CLAUSE = re.compile(
    rf"(?:running\s+)?`?(?P<f>[\w/.\-]+\.py)`?{_AND}\s+(?:prints|outputs|shows|displays)\s+(?:exactly\s*:?\s*)?"
    r"(?:(?P<q>['\"`])(?P<out>.*)(?P=q)|(?P<num>-?\d+(?:\.\d+)?))" + _WHEN_RUN,
    re.IGNORECASE | re.DOTALL,
)


#: "`python count.py` outputs the number of lines in notes.txt", "words.py prints how many words poem.txt has": a
#: count of a data file the checks can make themselves, so no judge has to count.
_COUNTED = r"(?P<what>lines|words|characters|chars)"
_DATA = r"`?(?P<{g}>[\w/.\-]+\.(?!py\b)\w+)`?"
_COUNT_CLAUSE = re.compile(
    r"(?:(?:running\s+)?(?:`(?P<c>[^`]+)`|`?(?<![\w/.\-])(?P<f>[\w/.\-]+\.py)`?)"
    + _AND
    + _WHEN_RUN
    + r"(?:\s+(?:that|which))?\s+|it\s+)?(?:correctly\s+|accurately\s+)?(?:"
    r"(?:prints|outputs|shows|displays|returns)\s+(?:out\s+)?(?:the\s+)?(?:"
    rf"(?:total\s+)?(?:number|count)\s+of\s+{_COUNTED}\s+(?:in|of)\s+(?:the\s+file\s+)?{_DATA.format(g='d')}"
    rf"|how\s+many\s+{_COUNTED.replace('what', 'what2')}\s+"
    rf"(?:{_DATA.format(g='d2')}\s+(?:has|contains)|(?:are\s+)?in\s+{_DATA.format(g='d3')})"
    rf")|counts\s+(?:the\s+)?(?:number\s+of\s+)?{_COUNTED.replace('what', 'what3')}\s+(?:in|of)\s+"
    rf"(?:the\s+file\s+)?{_DATA.format(g='d4')})",
    re.IGNORECASE,
)


#: "`python count.py` prints the correct number of lines": a count said right, of no file in particular.
_RIGHT_COUNT = re.compile(
    r"(?:(?:running\s+)?(?:`(?P<c>[^`]+)`|`?(?<![\w/.\-])(?P<f>[\w/.\-]+\.py)`?)" + _MODAL + r")?"
    r"(?:prints|outputs|shows|displays|returns)\s+(?:out\s+)?the\s+(?:correct|right|expected|accurate)\s+"
    rf"(?:total\s+)?(?:number|count)\s+of\s+{_COUNTED}",
    re.IGNORECASE,
)


def _right_count(clause: str, passed: dict[str, str]) -> bool:
    """Whether ``clause`` says a command prints "the correct number of" lines, words or characters, naming no
    file, and a passed check found that command printing that count of a data file (`_count_checks`: the one the step's
    description or the task names). Then the clause is decided by that check, not by a judge."""
    m = _RIGHT_COUNT.fullmatch(clause)
    if m is None:
        return False
    what = m.group("what").lower().replace("chars", "characters")
    command = m.group("c").strip() if m.group("c") else (f"python {m.group('f')}" if m.group("f") else None)
    count = f" prints the number of {what} in "
    return any(
        count in w and (command is None or w.startswith(f"`{command}`{count}")) for w in passed if w.startswith("`")
    )


def _count_clause(clause: str, script: str | None = None, *, within: bool = False) -> tuple[str, str, str] | None:
    """The command, what it counts ("lines", "words", "characters") and the data file, of a clause that says a
    command prints a count of a file ("`python count.py` outputs the number of lines in notes.txt",
    "correctly counts the lines in notes.txt", said of ``script`` when it names no command); None when it is not
    one. ``within``: looked for inside a longer text (a step's description, the task), not as the whole clause."""
    m = _COUNT_CLAUSE.search(clause) if within else _COUNT_CLAUSE.fullmatch(clause)
    if m is None:
        return None
    command = m.group("c").strip() if m.group("c") else f"python {m.group('f') or script}"
    if not (m.group("c") or m.group("f") or script):
        return None
    what = (m.group("what") or m.group("what2") or m.group("what3")).lower().replace("chars", "characters")
    return command, what, m.group("d") or m.group("d2") or m.group("d3") or m.group("d4")


def _counted(body: str, what: str) -> int:
    """How many lines (as Python splits them), words (split at white space) or characters (the text as written,
    without a last line break) ``body`` has."""
    if what == "lines":
        return len(body.splitlines())
    if what == "words":
        return len(body.split())
    return len(body.removesuffix("\n"))


def _count_checks(
    acceptance: str, said: Sequence[str], script: str | None, checks: list[Check], root: Path, wrote: Iterable[str]
) -> list[Check]:
    """For each count of a data file that a clause of ``acceptance``, or the texts ``said`` of the step's
    ``script`` (its description, the task), says a command prints, whether the command's run (passed, its whole
    output one number) printed the count the file has. An output that is not one number is left to the other
    checks and the judge."""
    outputs = {c.what: c.detail.strip() for c in checks if c.passed is True and c.what.endswith(" runs")}
    asked = [_count_clause(clause, script) for clause in _clauses(acceptance)]
    asked += [_count_clause(text, script, within=True) for text in said]
    out = []
    for command, what, name in dict.fromkeys(a for a in asked if a is not None):
        printed = outputs.get(f"`{command}` runs")
        if printed is None or re.fullmatch(r"-?\d{1,18}", printed) is None:
            continue
        where = _locate(name, root, wrote)
        if not isinstance(where, Path):
            continue
        try:
            n = _counted(where.read_text(errors="replace"), what)
        except OSError:
            continue
        detail = "" if int(printed) == n else f"{name} has {n} {what}; it printed {printed}"
        out.append(Check(f"`{command}` prints the number of {what} in {name}", int(printed) == n, detail))
    return out


def _printed_clause(clause: str) -> tuple[str, str] | None:
    """The command a clause says prints a quoted text (or a number, quoted or not: "`python run.py` prints 16"),
    and that text; None when the clause is not one."""
    if (m := _PRINTS_CLAUSE.fullmatch(clause)) is not None:
        return m.group("c").strip(), m.group("out") if m.group("q") else m.group("num")
    if (m := _FILE_PRINTS_CLAUSE.fullmatch(clause)) is not None:
        return f"python {m.group('f')}", m.group("out") if m.group("q") else m.group("num")
    return None


_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|`[^`]*`")
_BRACKETED = re.compile(r"\[[^\[\]\n]*\]|\{[^{}\n]*\}|\([^()\n]*\)")

_DENIAL = (
    r"{f}\s+(?:does|did|do)\s*n[o']?t\s+exist",
    r"{f}\s+(?:is|was|has)\s*(?:not|n't)\s+(?:been\s+)?(?:created|written|found|present|there)",
    r"{f}\s+(?:is|was)\s+missing(?:\s+from|\s*[.,;:]|\s*$)",
    r"\b(?:not|no evidence)\b[^.]*?\bthat\s+{f}\s+(?:exists|was created|was written)",
    r"\b(?:not|no evidence)\b[^.]*?\b(?:wrote|write|written|created?)\s+{f}",
    r"\b(?:missing|no such file)\s*:?\s*(?:the\s+)?(?:file\s*:?\s*)?{f}",
)
_NO_OUTPUT = re.compile(
    r"\b(?:output (?:is|was) (?:missing|empty|blank)|empty (?:string|output)|no output|(?:printed|prints?) nothing|"
    r"did(?: not|n't) print|does(?: not|n't) print anything|nothing (?:was |is )?printed|returned an empty|"
    r"actual output is (?:missing|empty))",
    re.IGNORECASE,
)
#: "The step did not execute the `python total.py` command" (contradicted by a check that ran it).
_NOT_RUN = re.compile(
    r"\b(?:did not|didn't|does not|doesn't|was not|wasn't|never|not)\s+(?:(?:been|get)\s+)?"
    r"(?:execute[ds]?|run|ran|runs)\b(?!\s+(?:correctly|properly|as expected|successfully|without))",
    re.IGNORECASE,
)
#: "the output was `16` instead of `16`", "expected 'cba' but got 'cba'", "should be 8080, not 8080".
_SAID = r"(?P<{q}>['\"`]?)(?P<{t}>[^'\"`\n]{{1,80}}?)(?P={q})"
_END = r"(?=[\s.,;:!?)]|$)"
_BOTH_WAYS = (
    re.compile(
        _SAID.format(q="q", t="a")
        + r",?\s{1,8}(?:instead of|rather than|not)\s{1,8}"  # bounded: a run of spaces is read once, not per start
        + _SAID.format(q="r", t="b")
        + _END
    ),
    re.compile(
        r"expected\s{1,8}"
        + _SAID.format(q="q", t="a")
        + r",?\s{1,8}but\s{1,8}(?:got|it (?:is|was|printed)|the output (?:is|was))\s{1,8}"
        + _SAID.format(q="r", t="b")
        + _END,
        re.IGNORECASE,
    ),
)


#: "the expected output should be: a b c …" up to where the reason turns to what it found.
_EXPECTED_OUTPUT = re.compile(
    r"\bexpected output (?:should be|is|would be|must be)\s{0,8}:?\s{0,8}(?P<text>.+?)"
    r"(?=\s{0,8}(?:\binstead\b|\bbut\b|\bhowever\b|\bwhile\b|\bthe actual\b|\bactual output\b)|$)",
    re.IGNORECASE | re.DOTALL,
)
#: "the actual output is: 1 2 3 …" to the reason's end or its next sentence that is not output.
_ACTUAL_OUTPUT = re.compile(
    r"\b(?:the\s+)?actual output (?:is|was)\s{0,8}:?\s{0,8}(?P<text>.+?)"
    r"(?=\s{0,8}(?:\.\s{1,8}[A-Z]|\bwhich\b|,?\s{0,8}\b(?:but|while|whereas|however|instead)\b|$))",
    re.IGNORECASE | re.DOTALL,
)


def _flat(text: str) -> str:
    """An output as words: escaped and real line breaks, quotes and a closing full stop aside."""
    return " ".join(text.replace("\\n", "\n").split()).strip(" .,:;\"'`")


def _same_both_ways(reason: str) -> str | None:
    """A text a judge's reason gives as both what is expected and what is there ("the output was `16` instead of
    `16`"), or None."""
    for pattern in _BOTH_WAYS:
        for m in pattern.finditer(reason):
            a, b = m.group("a").strip(), m.group("b").strip()
            if a and a == b and (m.group("q") or m.group("r") or not a.isalpha()):
                return a
    return None


_ON_REPORT = re.compile(r"\b(?:executor|report(?!\.\w)|claim(?:ed|s)?)\b", re.IGNORECASE)
_NOTHING_WRITTEN = re.compile(
    r"\bno (?:direct )?(?:output|files?|changes?)\b|\bdid not (?:write|create|change)\b|"
    r"\bdid not produce (?:any(?:thing)?|a file|files?)\b|not specify any",
    re.IGNORECASE,
)


#: A judge's reason that says a function or class is missing: "does not contain the `shout` function", "does not
#: define shout()", "the function `shout` is not defined".
_LACKS = (
    re.compile(
        r"\b(?:does not|doesn't|did not|didn't|do not)\s+(?:contain|define|include|have)\s+(?:the\s+|a\s+|an\s+)?"
        r"(?:expected\s+|required\s+|correct\s+|right\s+|specified\s+)?"
        r"(?:function\s+|class\s+)?`?(?P<n>[A-Za-z_]\w*)`?(?:\(\))?\s*(?:function|class|method)?\b",
        re.IGNORECASE,
    ),
    re.compile(r"\b(?:function|class)\s+`?(?P<n>[A-Za-z_]\w*)`?\s+(?:is|was)\s+not\s+defined\b", re.IGNORECASE),
    # "The shout function is not defined in util/strings.py"
    re.compile(
        r"\b`?(?P<n>[A-Za-z_]\w*)`?(?:\(\))?\s+(?:function|class)\s+(?:is|was)\s+not\s+defined\b", re.IGNORECASE
    ),
)
#: A judge's reason that says what a file or output should hold: "should contain 'X'", "expected to print "X"".
_SHOULD_HOLD = re.compile(
    r"\b(?:should|must|needs? to|is expected to|expected to|does\s+not|doesn't|did\s+not|do\s+not)\s+"
    r"(?P<verb>contain|include|have|read|print|output|show)"
    r"\s*:?\s*(?P<q>['\"`])",
    re.IGNORECASE,
)
#: A description that gives the whole output: a ``print('...')`` literal, or "prints exactly 'X'" / "exactly: X".
_PRINT_LITERAL = re.compile(r"\bprint\(\s*(?P<q>['\"])(?P<out>[^'\"\n]*)(?P=q)\s*\)")
_PRINTS_EXACTLY = re.compile(
    r"\b(?:prints?|outputs?)\s+exactly\s*:?\s*(?:(?P<q>['\"`])(?P<quoted>[^'\"`\n]+)(?P=q)|(?P<rest>[^'\"`\n]+?)\s*$)",
    re.IGNORECASE,
)

#: "Write app.py to print 'Hello, world!'": a quoted text printed that ends the description is its whole output,
#: so the run that printed it decides the step.
_PRINTS_QUOTED_END = re.compile(
    r"\b(?:to\s+print|prints?|outputs?)\s+(?P<q>['\"`])(?P<out>[^'\"`\n]{1,500})(?P=q)[.!]?\s*\Z", re.IGNORECASE
)


#: A judge's reason that says a file is not what it should be: "does not match", "only contains", "differs".
_MISMATCH = re.compile(
    r"\b(?:does\s+not|doesn't|do\s+not|did\s+not)\s+match|\bnot\s+match|\bmismatch|\bonly\s+contains?\b|\bdiffers?\b",
    re.IGNORECASE,
)


def _bare_text(text: str) -> str:
    """``text`` without white space, quote marks and backslashes (a file's content, as a reason quotes it)."""
    return re.sub(r"[\s'\"`\\]+", "", re.sub(r"\\[ntr]", "", text))  # "\n" as a reason writes a line break


def _expected_texts(reason: str) -> list[tuple[bool, str]]:
    """The quoted texts a judge's reason says a file or output should hold, each with whether it is said to be
    printed. A quote ends at the same quote mark followed by a space, punctuation or the end, so quotes inside it
    stay ("should contain 'print('hi')', not ...")."""
    found = []
    for m in _SHOULD_HOLD.finditer(reason):
        q, start = m.group("q"), m.end()
        end = next(
            (
                i
                for i in range(start + 1, len(reason))
                if reason[i] == q and (i + 1 == len(reason) or reason[i + 1] in " \t\n,.;:!?")
            ),
            None,
        )
        if end is not None and len(text := reason[start:end].strip()) >= 2:
            found.append((m.group("verb").lower() in ("print", "output", "show"), text))
    return found


def exact_outputs(description: str) -> set[str]:
    """The whole output a step's description gives (`_PRINT_LITERAL`, `_PRINTS_EXACTLY`, `_PRINTS_QUOTED_END`),
    stripped."""
    said = {m.group("out").strip() for m in _PRINT_LITERAL.finditer(description or "")}
    if (end := _PRINTS_QUOTED_END.search(description or "")) is not None:
        said.add(end.group("out").strip())
    for m in _PRINTS_EXACTLY.finditer(description or ""):
        said.add((m.group("quoted") or m.group("rest") or "").strip())
    return {s for s in said if s}


def _denied(reason: str, name: str) -> bool:
    """Whether ``reason`` says that file ``name`` does not exist ("data.txt does not exist", "`x.py` was not
    created", "the file 'x.py' is missing from ..."), not merely that something is missing from it."""
    f = r"(?:the\s+(?:file\s+)?)?['\"`]?" + re.escape(name) + r"['\"`]?(?:\s+file)?"  # "the `x.py` file"
    return any(re.search(p.format(f=f), reason, re.IGNORECASE) for p in _DENIAL)


def _clauses(acceptance: str) -> list[str]:
    """An acceptance split at commas, semicolons and "and" that are not inside quotes or backticks."""
    text = acceptance.strip().rstrip(".")
    parts = (text[start:end] for start, end in _clause_spans(text))
    return [c for c in (_RUN_CONDITION.sub("", part.strip()).strip() for part in parts) if c]


def _clause_spans(text: str) -> list[tuple[int, int]]:
    """Where the clauses of ``text`` (`_clauses`) start and end in it, separators left out."""
    masked = _QUOTED.sub(lambda m: "\x00" * len(m.group(0)), text)
    masked = _BRACKETED.sub(lambda m: "\x00" * len(m.group(0)), masked)  # "[3, 5, 7]", "add(2, 3)": one value
    out, start = [], 0
    for sep in _CLAUSES.finditer(masked):
        out.append((start, sep.start()))
        start = sep.end()
    out.append((start, len(text)))
    return out


def own_acceptance(step: Step, elsewhere: frozenset[str], wrote: Iterable[str]) -> tuple[str, list[str]]:
    """``step``'s acceptance without the clauses another open step is to meet, and those clauses: a clause that
    runs a file another open step of the plan writes (``elsewhere``, `others_write`), or names only such files,
    where the step did not write them itself (``wrote``) and none is its own file. A clause with no file and no
    command goes with the one before it ("`python app.py` prints 4, 9 and 2" is split at its commas). A step that
    writes data.txt is thus not held to "the largest number is printed by `python app.py`" when app.py is the next
    step's file. The clause is not lost: the next step checks its file, and `broken_runs` runs every done step's
    commands at the end of the run."""
    acceptance = step.acceptance or ""
    if not elsewhere or not acceptance.strip():
        return acceptance, []
    paths, own = list(wrote), produced_file(step.description, acceptance)
    later = {n for n in elsewhere if n != own and not any(p == n or p.endswith("/" + n) for p in paths)}
    if not later:
        return acceptance, []
    text = acceptance.strip().rstrip(".")
    spans = _clause_spans(text)
    theirs: list[bool] = []
    for start, end in spans:
        clause = text[start:end]
        ran = [n for c in commands(clause) for n in file_names(c)]
        named = file_names(clause)
        if ran or named:
            theirs.append(any(n in later for n in ran) or (bool(named) and all(n in later for n in named)))
        else:
            theirs.append(bool(theirs) and theirs[-1])
    if not any(theirs):
        return acceptance, []
    kept: list[str] = []
    dropped: list[str] = []
    run_start: int | None = None  # consecutive clauses of one side are kept as they were written
    for i, (start, end) in enumerate(spans):
        if run_start is None:
            run_start = start
        if i + 1 == len(spans) or theirs[i + 1] != theirs[i]:
            piece = text[run_start:end].strip()
            if piece:
                (dropped if theirs[i] else kept).append(piece)
            run_start = None
    return "; ".join(kept), dropped


#: "when run", "when it is run", "if executed": a clause's condition of running, which says nothing a check could
#: decide; the clause is what follows it ("app.py exists and when run, prints the number of lines in notes.txt"
#: leaves no "when run" clause of its own, undecided, after every check passed).
_RUN_CONDITION = re.compile(
    r"^(?:when|if|once)\s+(?:it\s+is\s+|it's\s+)?(?:run|executed|launched)\b[,:]?", re.IGNORECASE
)


_BARE_PRINTS = re.compile(
    r"(?:it\s+)?(?:(?:should|must|will)\s+)?(?:prints?|outputs?|shows?)\s+(?:exactly\s*:?\s*)?(['\"`]).*\1", re.DOTALL
)


def _with_commands(clauses: list[str]) -> list[str]:
    """``clauses`` with a clause that says what is printed without saying by what ("prints 'Hello, world!'")
    given the command of the clause before it: "`python app.py` runs and prints 'Hello, world!'" is a clause that
    runs and one that prints. Before any command, the one Python file the clauses name runs: "app.py exists and
    when executed, prints 'Hello, world!'" gives `` `python app.py` prints 'Hello, world!'``."""
    scripts = {n for n in file_names(" ".join(clauses)) if n.endswith(".py")}
    out, last = [], (f"python {scripts.pop()}" if len(scripts) == 1 else None)
    for clause in clauses:
        if (m := _RUNS_CLAUSE.fullmatch(clause) or _PRINTS_CLAUSE.fullmatch(clause)) is not None:
            last = m.group("c").strip()
        elif (m := _FILE_PRINTS_CLAUSE.fullmatch(clause) or _FILE_RUNS_CLAUSE.fullmatch(clause)) is not None:
            last = f"python {m.group('f')}"
        elif last is not None and _BARE_PRINTS.fullmatch(clause):
            clause = f"`{last}` {clause}"
        out.append(clause)
    return out


#: The file a content clause is about, or "it" (the acceptance's only file): "data.csv ", "the file `x.txt` ", "it ".
_SUBJECT = r"(?:(?:the file\s+)?`?(?P<f>[\w/.\-]+\.\w+)`?\s+|it\s+)?"
#: "'cat sat on the mat' is in it", "'x' is in notes.txt": the same, said the other way round.
_IN_FILE_CLAUSE = re.compile(
    r"(?P<q>['\"`])(?P<text>(?=[^'\"`]*[^'\"`\s])[^'\"`]+)(?P=q)\s+(?:is|appears)\s+(?:written\s+|present\s+|found\s+)?"
    r"(?:in|inside)\s+(?:it|the\s+file|(?:the\s+file\s+)?`?(?P<f>[\w/.\-]+\.\w+)`?)",
    re.IGNORECASE,
)
#: "data.csv contains 'name,score'", "`notes.txt` has the line "x"": a file's content holds a quoted text.
_CONTAINS_CLAUSE = re.compile(
    _SUBJECT + r"(?:contains|has|includes|holds)\s+"
    r"(?:the\s+(?:text|line|header|row|word|number)s?\s+)?"
    r"(?:(?P<q>['\"`])(?P<text>(?=[^'\"`]*[^'\"`\s])[^'\"`]+)(?P=q)|(?P<number>-?\d+(?:\.\d+)?))",
    re.IGNORECASE,
)
#: "the first line of data.csv is 'name,score'", "'name,score' is the first row", "its first line is "# Counter"".
_FIRST_LINE_CLAUSE = re.compile(
    r"(?:(?:the|its)\s+first\s+(?:line|row)(?:\s+of\s+`?(?P<f>[\w/.\-]+\.\w+)`?)?\s+is\s+"
    r"(?P<q>['\"`])(?P<text>[^'\"`\n]+)(?P=q))"
    r"|(?:(?P<q2>['\"`])(?P<text2>[^'\"`\n]+)(?P=q2)\s+is\s+the\s+first\s+(?:line|row)"
    r"(?:\s+of\s+`?(?P<f2>[\w/.\-]+\.\w+)`?)?)"
    # "README.md has '# Counter' as the first line"
    r"|(?:(?:(?:the file\s+)?`?(?P<f3>[\w/.\-]+\.\w+)`?\s+|it\s+)?(?:has|with|contains)\s+"
    r"(?P<q3>['\"`])(?P<text3>[^'\"`\n]+)(?P=q3)\s+as\s+(?:the|its)\s+first\s+(?:line|row))",
    re.IGNORECASE,
)


#: "config.json contains {"port": 8080}", "its content is {'port': 8080}", "scores.json has the list [3, 5, 7]",
#: "its contents match {'port': 8080}", "config.json's content is [1, 2]".
_LITERAL_CLAUSE = re.compile(
    r"(?:(?:(?:the file\s+)?`?(?P<f>[\w/.\-]+\.\w+)`?\s+|it\s+)?(?:contains|holds|has)"
    r"|(?:(?:its|the)\s+|(?:the file\s+)?`?(?P<f2>[\w/.\-]+\.\w+)`?(?:'s)?\s+)contents?"
    r"\s+(?:is|are|match(?:es)?|equals?))\s+"
    r"(?:the\s+(?:list|dict|dictionary|object|array|json|data)\s+)?`?(?P<lit>\[.*\]|\{.*\})`?",
    re.IGNORECASE | re.DOTALL,
)


#: "`cat data.txt` outputs `0\n100`", "running `cat notes.txt` prints 'a\nb'", "`cat words.txt` outputs:" and the
#: lines after the colon: what a file reads, given as what ``cat`` prints. No command runs: the file's text is
#: compared.
_CAT_CLAUSE = re.compile(
    r"(?:running\s+)?`cat\s+(?P<f>[\w/.\-]+\.\w+)`\s+(?:prints|outputs|shows|displays|gives|returns)"
    r"(?:\s+(?:exactly\s*:?\s*)?(?P<q>['\"`])(?P<text>.*)(?P=q)|(?:\s+exactly)?\s*:\s*(?P<bare>\S.*)"
    r"|\s+(?P<words>[^'\"`:\s][^'\"`:]*))",
    re.IGNORECASE | re.DOTALL,
)


#: "its contents are 4\n9\n2" (the line breaks real, or written out): a file's whole text, given unquoted.
_WHOLE_CLAUSE = re.compile(
    r"(?:(?:its|the)\s+)?(?:contents?|text)(?:\s+of\s+`?(?P<f>[\w/.\-]+\.\w+)`?)?\s+"
    r"(?:are|is|reads|should\s+be|must\s+be|equals?)\s*:?\s*(?P<bare>[^'\"`\s].*)",
    re.IGNORECASE | re.DOTALL,
)


def _whole_text(bare: str) -> bool:
    """Whether ``bare`` reads as a file's lines, not words about them: several short lines ("4\\n9\\n2")."""
    lines = bare.replace("\\n", "\n").strip().splitlines()
    return 2 <= len(lines) <= 200 and all(len(line) <= 60 for line in lines)


_JSON_VALUE = r"(?P<{g}>-?\d+(?:\.\d+)?|'[^'\n]*'|\"[^\"\n]*\"|true|false|null)"
_JSON_FILE = r"`?(?P<{g}>[\w/.\-]+\.json)`?"
_KEY = r"['\"`]?(?P<{g}>[A-Za-z_]\w*)['\"`]?"
#: "its port is 8080", "config.json's port is 8080", "the port in config.json is set to 8080", "config.json has
#: the key port set to 8080", "config.json contains "port": 8080": one key of a JSON file's data and its value.
_KEY_CLAUSE = re.compile(
    rf"(?:(?:its|the)\s+|{_JSON_FILE.format(g='f')}(?:'s)?\s+)(?:value\s+of\s+)?{_KEY.format(g='k')}"
    rf"(?:\s+(?:key|field|value|setting))?(?:\s+(?:in|of)\s+{_JSON_FILE.format(g='f2')})?"
    rf"\s+(?:is(?:\s+set\s+to)?|equals|=|has\s+the\s+value|has\s+value)\s+{_JSON_VALUE.format(g='v')}"
    rf"|(?:the\s+file\s+)?{_JSON_FILE.format(g='f3')}\s+(?:has|contains|sets|holds)\s+(?:the\s+|a\s+)?(?:key\s+)?"
    rf"{_KEY.format(g='k2')}(?:\s*(?:(?:is\s+)?set\s+to|=|:|of|with\s+(?:the\s+)?value|equal\s+to)\s*|\s+)"
    rf"{_JSON_VALUE.format(g='v2')}",
    re.IGNORECASE,
)
#: Words that name a file's whole content or form, not a key: "its content is ...", "the format is ...".
_NOT_KEYS = frozenset({"content", "contents", "text", "data", "output", "file", "format", "structure", "line", "lines"})


def _key_value(body: str, key: str, said: str) -> tuple[bool, str]:
    """Whether the JSON data ``body`` has ``key`` (in any object of it; exactly, else ignoring case) with the value
    ``said`` (a JSON number, ``true``/``false``/``null``, or a quoted text, which a number written so also
    matches): (True, "") or (False, what it holds instead)."""
    data = _literal(body.strip())
    if data is _NO_VALUE:
        return False, "it is not JSON data"
    pairs: list[tuple[str, Any]] = []  # every key of every object in the data, with its value
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            pairs += [(k, v) for k, v in node.items() if isinstance(k, str)]
            stack += list(node.values())
        elif isinstance(node, list):
            stack += node
    found = [v for k, v in pairs if k == key] or [v for k, v in pairs if k.lower() == key.lower()]
    if not found:
        return False, f"it has no key {key!r}"
    quoted = said[:1] in "'\"" and len(said) >= 2
    want = said[1:-1] if quoted else _literal(said)
    for value in found:
        same_type = isinstance(value, bool) is isinstance(want, bool)
        if (same_type and value == want) or (quoted and not isinstance(value, (dict, list)) and str(value) == want):
            return True, ""
    return False, f"its {key} is {clip(json.dumps(found[0]), 80, fold=False)}"


def _literal(text: str) -> Any:
    """A JSON or Python literal's value, or ``_NO_VALUE``."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # "[" * 5000 from a model: too deep for either parser, not a value
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _NO_VALUE


_NO_VALUE = object()


#: "contains `def shout(s): return s.upper() + '!'`": a file holds a piece of Python code, compared as code.
_CODE_CLAUSE = re.compile(
    r"(?:(?:the file\s+)?`?(?P<f>[\w/.\-]+\.py)`?\s+|it\s+)?(?:contains|has|includes|defines)\s+"
    r"(?:the\s+(?:code|function|line|definition|statement)\s+)?`(?P<code>[^`\n]*[(=:][^`\n]*)`",
    re.IGNORECASE,
)
#: "util/__init__.py exists and is empty", "it is empty".
_EMPTY_CLAUSE = re.compile(
    _SUBJECT + r"(?:is|stays|remains)\s+(?:an?\s+)?empty(?:\s+file)?",
    re.IGNORECASE,
)


_NUMBERS = {
    w: i for i, w in enumerate(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"])
}
_COUNT = r"(?P<n>\d+|" + "|".join(_NUMBERS) + ")"
#: "notes.txt contains exactly three lines", "it has 3 lines of text", "notes.txt exists with three lines of text":
#: how many lines a file has.
_LINES_CLAUSE = re.compile(
    _SUBJECT + r"(?:contains|has|holds|consists of|is|(?:exists|is created|is written|was written)\s+with|with)\s+"
    rf"(?:exactly\s+|only\s+)?{_COUNT}\s+(?:non-empty\s+)?lines?(?:\s+(?:of\s+text|long))?",
    re.IGNORECASE,
)


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[word.lower()]


#: A clause that only says a file's content is right, and not what it is: "data.txt exists with the correct
#: content", "has the specified content".
_VAGUE = re.compile(
    r"\b(?:correct|expected|specified|right|proper|required|desired|described|appropriate|requested|intended)\b",
    re.IGNORECASE,
)
#: The checks of what a step's description gives its data file are named so (`_described_content`).
_AS_DESCRIBED = "as the step describes: "


def _vague(clause: str) -> bool:
    return bool(_VAGUE.search(clause)) and not re.search(r"['\"`\d\[\]{}]", clause)


#: "separated by newlines", "newline-separated", "on their own lines": items laid out in lines, said otherwise
#: than `_EACH_ON_A_LINE` says it.
_BY_NEWLINES = re.compile(
    r"\bseparated by (?:new ?lines|line breaks|newline characters)\b|\bnewline[- ]separated\b"
    r"|\bon (?:their own|new) lines\b",
    re.IGNORECASE,
)


def _layout(clause: str) -> bool:
    """Whether ``clause`` only says how items are laid out in lines: decided by a passed check that held the
    whole file to the lines the step describes ("contains the numbers 4, 9, and 2, separated by newlines": its last
    clause names nothing a check could name, and the whole-file check already decides it)."""
    laid_out = _EACH_ON_A_LINE.search(clause) or _BY_NEWLINES.search(clause)
    return laid_out is not None and not re.search(r"['\"`\d\[\]{}]", clause)


_ONE_PER_LINE = re.compile(r"\bone per line\b|\beach on (?:its own|a) line\b|\bone on each line\b", re.IGNORECASE)
_ITEMS = re.compile(
    r"\b(?:numbers|words|names|values|items|lines|entries)\s+(?P<items>[^.;:\n]+?),?\s+"
    r"(?:one per line|each on (?:its own|a) line|one on each line)",
    re.IGNORECASE,
)
_FIRST = re.compile(
    r"\b(?:(?:whose|its|the|with\s+the|with\s+a)\s+)?(?:first line|header(?:\s+line|\s+row)?)\s+(?:is\s+|reads\s+)?"
    r"(?P<q>['\"`]?)(?P<text>[^'\"`\n]+?)(?P=q)(?=\s*(?:,\s|;|\.\s|\.?$|\s+(?:and|then|with|followed)\b))",
    re.IGNORECASE,
)
_DESCRIBED_LINES = re.compile(rf"\b(?:exactly\s+)?{_COUNT}\s+(?:non-empty\s+)?lines?\b", re.IGNORECASE)
_DESCRIBED_LITERAL = re.compile(r"\[[^\[\]\n]*\]|\{[^{}\n]*\}")


def _described_content(description: str, name: str) -> list[tuple[str, str, str]]:
    """The content checks (as `_content_check` gives them) of what a step's description says its data file
    ``name`` holds: a literal ("containing the list [3, 5, 7]"), its first line or header ("whose first line is #
    Counter", "with the header line name,score"), how many lines ("exactly three lines"), or the items it holds
    one per line ("the numbers 0 and 100, one per line"). These decide an acceptance that says only "with the
    correct content"."""
    out: list[tuple[str, str, str]] = []
    literal = next(
        (m.group(0) for m in _DESCRIBED_LITERAL.finditer(description) if _literal(m.group(0)) is not _NO_VALUE), None
    )
    if literal is not None:
        out.append((name, "value", literal))
    if (first := _FIRST.search(description)) is not None:
        out.append((name, "first line", first.group("text").strip()))
    if (lines := _DESCRIBED_LINES.search(description)) is not None:
        out.append((name, "lines", str(_count(lines.group("n")))))
    if _ONE_PER_LINE.search(description) and (listed := _ITEMS.search(description)) is not None:
        items = [i.strip().strip("'\"`") for i in re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+", listed.group("items"))]
        if items and all(items):
            out.append((name, "text", "\n".join(items)))
    return out


#: "The `add` function is defined in util.py", "util.py defines add(a, b)", "shout is defined in util/strings.py".
_DEFINES_CLAUSE = re.compile(
    r"(?:the\s+)?(?:(?:function|class)\s+)?`?(?P<n>[A-Za-z_]\w*)`?(?:\([^()`]*\))?`?(?:\s+(?:function|class))?\s+"
    r"(?:is|was)\s+defined\s+in\s+`?(?P<f>[\w/.\-]+\.py)`?"
    r"|`?(?P<f2>[\w/.\-]+\.py)`?\s+(?:defines|has|contains)\s+(?:the\s+|a\s+)?(?:function|class)\s+"
    r"`?(?P<n2>[A-Za-z_]\w*)`?(?:\([^()`]*\))?`?"
    r"|`?(?P<f3>[\w/.\-]+\.py)`?\s+defines\s+`?(?P<n3>[A-Za-z_]\w*)`?(?:\([^()`]*\))?`?"
    # "the shout function is defined" (no file: the acceptance's one file)
    r"|(?:the\s+)?(?:(?:function|class)\s+`?(?P<n4>[A-Za-z_]\w*)`?(?:\([^()`]*\))?`?"
    r"|`?(?P<n5>[A-Za-z_]\w*)`?(?:\([^()`]*\))?`?\s+(?:function|class))\s+(?:is|was)\s+defined",
    re.IGNORECASE,
)


def _code_of(text: str) -> ast.Module | None:
    """``text`` parsed as Python (None when it is not Python)."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


#: "the score column sums to 60", "the sum of the score column in data.csv is 60": a CSV column's total, summed by
#: the check, not by a judge.
_SUM_CLAUSE = re.compile(
    r"(?:(?:`?(?P<f>[\w/.\-]+\.csv)`?(?:'s)?\s+|its\s+)?(?:the\s+)?['\"`]?(?P<col>\w+)['\"`]?\s+column"
    r"(?:\s+(?:of|in)\s+`?(?P<f2>[\w/.\-]+\.csv)`?)?\s+(?:sums|adds\s+up|totals)\s+to"
    r"|(?:the\s+)?(?:sum|total)\s+of\s+(?:the\s+)?['\"`]?(?P<col2>\w+)['\"`]?\s+column"
    r"(?:\s+(?:of|in)\s+`?(?P<f3>[\w/.\-]+\.csv)`?)?\s+is)"
    r"\s+(?P<n>-?\d{1,15}(?:\.\d{1,6})?)",
    re.IGNORECASE,
)


def _content_check(clause: str, default: str | None) -> tuple[str, str, str] | None:
    """What a content clause asks: (file, "contains", "first line" or "value", the text), the file the
    acceptance's only file when the clause names none; None when the clause is not one."""
    if (m := _CAT_CLAUSE.fullmatch(clause)) is not None:
        if m.group("words"):  # "`cat words.txt` shows apple banana kiwi": the words, not quoted
            return (m.group("f"), "words", m.group("words").strip())
        return (m.group("f"), "text", m.group("text") if m.group("q") else m.group("bare"))
    if (m := _DEFINES_CLAUSE.fullmatch(clause)) is not None:
        name = m.group("f") or m.group("f2") or m.group("f3") or default
        defined = m.group("n") or m.group("n2") or m.group("n3") or m.group("n4") or m.group("n5")
        return (name, "defines", defined) if name else None
    if (m := _LINES_CLAUSE.fullmatch(clause)) is not None:
        name = m.group("f") or default
        return (name, "lines", str(_count(m.group("n")))) if name else None
    if (m := _EMPTY_CLAUSE.fullmatch(clause)) is not None:
        name = m.group("f") or default
        return (name, "empty", "") if name else None
    if (m := _CODE_CLAUSE.fullmatch(clause)) is not None and _code_of(m.group("code")) is not None:
        name = m.group("f") or default
        return (name, "code", m.group("code")) if name and name.endswith(".py") else None
    if (m := _LITERAL_CLAUSE.fullmatch(clause)) is not None and _literal(m.group("lit")) is not _NO_VALUE:
        name = m.group("f") or m.group("f2") or default
        return (name, "value", m.group("lit")) if name else None
    if (m := _KEY_CLAUSE.fullmatch(clause)) is not None and (m.group("k") or m.group("k2")).lower() not in _NOT_KEYS:
        name = m.group("f") or m.group("f2") or m.group("f3") or default
        key, value = m.group("k") or m.group("k2"), m.group("v") or m.group("v2")
        return (name, "key", f"{key} = {value}") if name and name.endswith(".json") else None
    if (m := _CONTAINS_CLAUSE.fullmatch(clause)) is not None:
        name = m.group("f") or default
        return (name, "contains", m.group("text") or m.group("number")) if name else None
    if (m := _IN_FILE_CLAUSE.fullmatch(clause)) is not None:
        name = m.group("f") or default
        return (name, "contains", m.group("text")) if name else None
    if (m := _FIRST_LINE_CLAUSE.fullmatch(clause)) is not None:
        name = m.group("f") or m.group("f2") or m.group("f3") or default
        return (name, "first line", m.group("text") or m.group("text2") or m.group("text3")) if name else None
    if (m := _SUM_CLAUSE.fullmatch(clause)) is not None:
        name = m.group("f") or m.group("f2") or m.group("f3") or default
        column = m.group("col") or m.group("col2")
        return (name, "sum", f"{column} = {m.group('n')}") if name and name.lower().endswith(".csv") else None
    if (m := _WHOLE_CLAUSE.fullmatch(clause)) is not None and _whole_text(m.group("bare")):
        # "its contents are 4\n9\n2": the file's whole text, compared as such
        name = m.group("f") or default
        return (name, "text", m.group("bare")) if name else None
    return None


_BARE_QUOTED = re.compile(
    r"(?:the\s+(?:text|line|word|number)s?\s+)?(?:(?P<q>['\"`])(?P<text>[^'\"`\n]+)(?P=q)|(?P<number>-?\d+(?:\.\d+)?))"
)


def _quoted_as_written(m: re.Match[str]) -> str:
    """A quoted text as quoted, or a number as written."""
    return f"{m.group('q')}{m.group('text')}{m.group('q')}" if m.group("text") else m.group("number")


def _with_subjects(clauses: list[str], default: str | None) -> list[str]:
    """``clauses`` with a clause that is only a quoted text, after one that says a file contains a text, said of
    that file too: "words.txt has the lines 'apple', 'banana', 'kiwi'" is three."""
    out, last = [], None
    for clause in clauses:
        asked = _content_check(clause, default)
        if asked is not None:
            last = asked[0] if asked[1] == "contains" else None
        elif last is not None and (m := _BARE_QUOTED.fullmatch(clause)) is not None:
            clause = f"{last} contains {_quoted_as_written(m)}"
        out.append(clause)
    return out


def _only_file(acceptance: str) -> str | None:
    named = file_names(acceptance)
    return named[0] if len(named) == 1 else None


def _content_what(name: str, kind: str, text: str) -> str:
    if kind == "value":
        return f"{name} holds {text}"
    if kind == "text":
        return f"{name} reads {text!r}"
    if kind == "empty":
        return f"{name} is empty"
    if kind == "lines":
        return f"{name} has {text} lines"
    if kind == "defines":
        return f"{name} defines {text}"
    if kind == "key":
        key, value = text.split(" = ", 1)
        return f"the {key} of {name} is {value}"
    if kind == "sum":
        column, total = text.split(" = ", 1)
        return f"the {column} column of {name} sums to {total}"
    if kind == "code":
        return f"{name} has the code {text!r}"
    if kind == "words":
        return f"{name} holds the words {text!r}"
    return f"{name} contains {text!r}" if kind == "contains" else f"the first line of {name} is {text!r}"


def _settled(clause: str, passed: dict[str, str]) -> str | None:
    """How a passed check decides this one clause of an acceptance (`Evidence.settles`): "exists", "runs",
    "printed" (the command printed the quoted text) or "content" (a file holds the quoted text), or None when no
    check decides it."""
    if (m := _EXISTS_CLAUSE.fullmatch(clause)) is not None:
        return "exists" if f"{m.group('f')} exists" in passed else None
    if (m := _RUNS_CLAUSE.fullmatch(clause) or _PYTEST_PASSES.fullmatch(clause)) is not None:
        return _runs_if_passed(f"`{m.group('c').strip()}` runs", m, passed)
    if (m := _FILE_RUNS_CLAUSE.fullmatch(clause)) is not None:
        return _runs_if_passed(f"`python {m.group('f')}` runs", m, passed)
    if (asked := _returns_clause(clause)) is not None:
        return "returns" if _returned(asked[0], asked[4]) in passed else None
    if (said := _printed_clause(clause)) is not None:
        printed = passed.get(f"`{said[0]}` runs")
        return "printed" if printed is not None and printed.strip() == said[1].strip() else None
    if _behaves_as_said(clause, passed):
        return "returns"
    if _right_count(clause, passed):
        return "printed"
    if (counted := _count_clause(clause, "*")) is not None:  # no command named: the check of any script counts
        command, what, name = counted
        count = f" prints the number of {what} in {name}"
        found = any(w.endswith(count) and command in ("python *", w.removesuffix(count).strip("`")) for w in passed)
        return "printed" if found else None
    return None


def _runs_if_passed(what: str, m: re.Match[str], passed: dict[str, str]) -> str | None:
    """ "runs" when the check ``what`` passed; a clause that also says "with the correct output" only when the run
    printed nothing: a script that prints is held to printing where its step or the task says so (`gather`: a
    silent run fails), and a module that only defines a function has no output to be right about ("`python
    util.py` runs with the correct output" of such a module is decided by its silent run)."""
    if what not in passed:
        return None
    vague = "vague" in m.re.groupindex and m.group("vague")
    return None if vague and passed[what].strip() else "runs"


#: "double(x) returns x * 2 in calc.py": the file a clause names after what it says of a function.
_IN_FILE_END = re.compile(r"\s(?:in|of|from)\s+(?:the\s+(?:file\s+)?)?`?[\w/.\-]+\.py`?(?:\s+file)?\s*$")
_BEHAVED = re.compile(r"as the task says: (?P<n>\w+)\((?P<p>[^()]*)\) returns (?P<e>.+)")


def _behaves_as_said(clause: str, passed: dict[str, str]) -> bool:
    """Whether ``clause`` says a function returns an expression of its parameters ("double(x) returns x * 2 in
    calc.py") that a passed `_behaves` check called it on and found (the same expression, by its parse): what the
    function returns decides the clause, not how its source reads."""
    if "return" not in clause or len(clause) > 500:  # a function's clause is short: long text is not read twice
        return False
    said = _task_functions(_IN_FILE_END.sub("", clause.strip().rstrip(".")).strip())
    if len(said) != 1:
        return False
    ((name, (params, expr)),) = said.items()
    for what in passed:
        m = _BEHAVED.fullmatch(what)
        if m is None or m.group("n") != name or [p.strip() for p in m.group("p").split(",")] != params:
            continue
        ours, theirs = _expression(expr), _expression(m.group("e"))
        if ours is not None and theirs is not None and ast.dump(ours) == ast.dump(theirs):
            return True
    return False


#: A description's words that ask for no content: the verbs that create a file, where it goes, that it is empty.
_CREATION_WORDS = re.compile(
    r"\b(?:in|inside|under|within)\s+(?:the\s+|a\s+)?`?[\w/.\-]+`?\s+(?:directory|folder|package|dir)\b"
    r"|\((?:it\s+)?(?:may|can|should|will)\s+be\s+empty\)"
    r"|\b(?:create|creates|make|makes|add|adds|write|writes|touch|an?|the|empty|blank|new|file|files|folder|"
    r"directory|dir|package|module|it|its|as|with|no|content|contents|named|called|and|init)\b",
    re.IGNORECASE,
)


def only_creates(description: str) -> bool:
    """Whether ``description`` asks only that files exist ("Create strings.py file in the util directory",
    "Create util/__init__.py (it may be empty)"): with its file names and the words of creating gone, nothing is
    left, and it does not say to write one ("Write app.py" asks for its content)."""
    names = file_names(description)
    if not names or len(description) > 300 or re.search(r"\bwrites?\b", description, re.IGNORECASE):
        return False
    rest = description
    for name in sorted(names, key=len, reverse=True):
        rest = rest.replace(f"`{name}`", " ").replace(name, " ")
    rest = _CREATION_WORDS.sub(" ", rest)
    return not re.sub(r"[\s.,;:()`'\"]+", "", rest)


def _shown(path: str, root: Path | None) -> str:
    if root is not None:
        try:
            return Path(path).relative_to(root).as_posix()
        except ValueError:
            pass
    return path


def _locate(name: str, root: Path | None, written: Iterable[str]) -> Path | bool | None:
    """Where file ``name`` is: its path, False when it is known to be missing, None when it cannot be told (no
    workspace is known and the run wrote no file of that name)."""
    for path in written:
        if (path == name or path.endswith("/" + name)) and Path(path).is_file():
            return Path(path)
    if root is not None:
        candidate = root / name
        return candidate if candidate.is_file() else False
    return None


def _parses(path: Path) -> Check:
    """Whether a JSON file the step wrote is JSON: a file cut short (``{"name": "Ada"``) fails here, on the step
    that wrote it, not later in the script of a step that reads it."""
    what = f"{path.name} is valid JSON"
    try:
        json.loads(path.read_bytes())
    except json.JSONDecodeError as exc:
        detail = f"line {exc.lineno} column {exc.colno}: {exc.msg}"
        hint = "it is empty" if not exc.doc.strip() else detail
        return Check(what, False, f"{hint}; write the whole JSON value, every bracket closed, in double quotes")
    except (OSError, ValueError) as exc:  # not UTF-8 text
        return Check(what, False, f"{type(exc).__name__}: {clip(str(exc), 200)}")
    except RecursionError:
        return Check(what, False, "it is nested too deeply to read; write it plainly")
    return Check(what, True)


def _compiles(path: Path) -> Check:
    """Whether a Python file compiles (``compile()``: nothing runs, no ``.pyc`` is written)."""
    try:
        source = path.read_bytes()
        compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        said = f"line {exc.lineno}: {exc.msg}; fix the syntax"
        text = source.decode("utf-8", "replace").strip()
        if text and not _CODE_MARKS.search(text):  # a script written as the text it was to print
            lines = text.splitlines()
            shown = lines[0][:80]
            # "write the Python code" alone does not say what that code is: the reason shows the code that prints
            # it, as Python's own "Did you mean print(...)?" does
            example = f"print({shown!r})" + (", one print() for each line" if len(lines) > 1 else "")
            # not of a test file: a test file holding "pytest test_util.py" is not meant to print that text
            shows = "" if _TEST_FILE.fullmatch(path.name) else f" (a script that prints that text holds {example})"
            said = (
                f"line {exc.lineno}: {exc.msg}: {path.name} holds plain text ({shown!r}), not Python code; write "
                f"the Python code the step asks for{shows}"
            )
        return Check(f"{path.name} compiles", False, said)
    except (OSError, ValueError) as exc:
        return Check(f"{path.name} compiles", False, f"{type(exc).__name__}: {exc}")
    except (RecursionError, MemoryError):  # "x = " + "-" * 100_000 + "1": the compiler gives up on it
        return Check(f"{path.name} compiles", False, "it is nested too deeply for Python to compile; write it plainly")
    return Check(f"{path.name} compiles", True)


#: A file pytest collects: test_x.py, x_test.py.
_TEST_FILE = re.compile(r"test_\w+\.py|\w+_test\.py")

#: What Python code has and a line of prose does not: a bracket, an assignment or a block's colon at a line's end.
_CODE_MARKS = re.compile(r"[()\[\]{}=]|:\s*$|^\s*(?:(?:import|from|def|class|return)\b|#)", re.MULTILINE)


def commands(acceptance: str) -> list[str]:
    """The commands an acceptance asks to run: backticked ``python ...``/``pytest ...``, or ``X.py runs``."""
    found = [m.group(1).strip() for m in _COMMAND.finditer(acceptance)]
    found += [f"python {m.group(1)}" for m in _RUNS.finditer(acceptance)]
    return list(dict.fromkeys(found))


#: "double(21) returns 42", "`is_prime(7)` returns True", "add(2, 3) == 5": a call of a workspace function with
#: literal arguments, and the literal value it returns.
_RETURNS_CLAUSE = re.compile(
    r"(?:calling\s+)?`?(?P<call>(?P<fn>[A-Za-z_]\w*)\((?P<args>[^()`\n]*)\))`?\s+"
    r"(?:returns|should return|must return|gives|evaluates to|equals|==|is)\s+`?(?P<value>[^`\n]+?)`?",
    re.IGNORECASE,
)
#: The child that makes the call: the module imported from the workspace, the arguments read as literals.
_CALL = (
    "import ast, importlib, sys\n"
    "fn = getattr(importlib.import_module(sys.argv[1]), sys.argv[2])\n"
    "print('\\x00' + repr(fn(*ast.literal_eval(sys.argv[3]))))\n"
)


def _returns_clause(clause: str) -> tuple[str, str, tuple[Any, ...], Any, str] | None:
    """(the call as written, the function, its arguments, the value, the value as written) of a clause that says
    what a call with literal arguments returns; None when it is not one."""
    m = _RETURNS_CLAUSE.fullmatch(clause.strip())
    if m is None:
        return None
    args = _literal(f"({m.group('args')},)") if m.group("args").strip() else ()
    value = _literal(m.group("value").strip().rstrip("."))
    if not isinstance(args, tuple) or value is _NO_VALUE:
        return None
    return m.group("call"), m.group("fn"), args, value, m.group("value").strip().rstrip(".")


def _returned(call: str, text: str) -> str:
    return f"{call} returns {text}"


def _return_check(clause: tuple[str, str, tuple[Any, ...], Any, str], root: Path) -> Check:
    """Call the workspace function a "returns" clause names (the one module that defines it, imported in a child
    process in the workspace, bounded in time) and compare what it returns."""
    call, fn, args, value, text = clause
    what = _returned(call, text)
    module = _defined_in(fn, root)
    if module is None:
        return Check(what, None, f"no one module of the workspace defines {fn}")
    done = _in_workspace(what, ["-c", _CALL, module, fn, repr(args)], root)
    if isinstance(done, Check):
        return done
    if done.returncode != 0:
        output = _relative((done.stderr or "") + (done.stdout or ""), root)
        return Check(what, False, f"it raised: {clip(output[-400:], 400)}{_hint(output, root)}")
    said = (done.stdout or "").rpartition("\x00")[2].strip()
    got = _literal(said)
    if got is not _NO_VALUE and type(got) is not bool and type(value) is not bool and got == value:
        return Check(what, True, said)
    if got is not _NO_VALUE and got is value:  # True, False: as themselves (1 == True in Python)
        return Check(what, True, said)
    return Check(what, False, f"{call} returned {clip(said, 120, fold=False)}, not {text}")


#: "a function add(a, b) that returns a + b", "double(x) should return x * 2": a function the task defines by an
#: expression of its parameters (the expression is taken up to the first point where it parses, `_task_functions`).
_DEFINED_BY = re.compile(
    r"\b(?P<n>[A-Za-z_]\w*)\((?P<p>\s*[A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*\s*)\)\s+"
    r"(?:that\s+|which\s+|should\s+|must\s+|to\s+)?returns?\s+(?P<rest>[^\n]+)",
)
_EXPR_END = re.compile(r",\s|\.\s|\.$|;|$")
#: The builtins an expression of the task may call (`_task_functions`); its names are these and its parameters.
_EXPR_BUILTINS = ("abs", "len", "max", "min", "round", "sorted", "str", "sum", "int", "float", "reversed")
#: The child that checks a function against the task's expression: the module imported from the workspace, the
#: function called on two samples of the first kind of arguments (numbers, else texts) the expression takes.
_BEHAVES = (
    "import builtins, importlib, json, math, sys\n"
    "module, name, params, expr, names = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4], "
    "json.loads(sys.argv[5])\n"
    "fn = getattr(importlib.import_module(module), name)\n"
    "safe = {k: getattr(builtins, k) for k in names}\n"
    "code = compile(expr, '<the task>', 'eval')\n"
    "kinds = (([3, 4, 5, 6], [7, 2, 9, 1]), (['abc', 'Ada', 'xyz', 'q'], ['hi', 'Bo', 'k', 'mn']))\n"
    "def value(sample):\n"
    "    return eval(code, {'__builtins__': safe}, dict(zip(params, sample[: len(params)])))\n"
    "def fits(kind):\n"
    "    try:\n"
    "        return [value(sample) for sample in kind]\n"
    "    except Exception:\n"
    "        return None\n"
    "kind = next(((k, w) for k in kinds if (w := fits(k)) is not None), ((), []))\n"
    "for sample, want in zip(*kind):\n"
    "    args = sample[: len(params)]\n"
    "    call = f\"{name}({', '.join(map(repr, args))})\"\n"
    "    try:\n"
    "        got = fn(*args)\n"
    "    except Exception as exc:\n"
    "        print('\\x00' + json.dumps({'call': call, 'raised': f'{type(exc).__name__}: {exc}'}))\n"
    "        break\n"
    "    if isinstance(got, float) and isinstance(want, (int, float)) and not isinstance(want, bool):\n"
    "        same = math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)\n"
    "    else:\n"
    "        same = type(got) is type(want) and got == want or (type(got) in (int, float) and "
    "type(want) in (int, float) and got == want)\n"
    "    if not same:\n"
    "        print('\\x00' + json.dumps({'call': call, 'want': repr(want), 'got': repr(got)}))\n"
    "        break\n"
    "else:\n"
    "    print('\\x00' + json.dumps({'same': bool(kind[0])}))\n"
)


def _task_functions(text: str) -> dict[str, tuple[list[str], str]]:
    """The functions ``text`` defines by an expression of their parameters: name -> (parameters, expression).
    The expression is the shortest run after "returns" that ends at a comma, a full stop or a semicolon and parses
    as a Python expression of only those parameters and a few builtins (`_EXPR_BUILTINS`), with no private
    attribute and no lambda; "returns the string s reversed" gives none. The first one given for a name wins."""
    out: dict[str, tuple[list[str], str]] = {}
    for m in _DEFINED_BY.finditer(text):
        name, params = m.group("n"), [p.strip() for p in m.group("p").split(",")]
        if name in out or len(set(params)) != len(params):
            continue
        rest = m.group("rest")[:300]  # an expression of a task is short: a long line is not parsed at each comma
        for end in _EXPR_END.finditer(rest):
            expr = rest[: end.start()].strip().strip("`")
            if expr and (tree := _expression(expr)) is not None and _only_names(tree, {*params, *_EXPR_BUILTINS}):
                out[name] = (params, expr)
                break
    return out


def _expression(text: str) -> ast.Expression | None:
    try:
        return ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def _only_names(tree: ast.Expression, allowed: set[str]) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in allowed:
            return False
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            return False
        if isinstance(node, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
            return False
    return True


def _behaves(name: str, params: list[str], expr: str, module: str, root: Path) -> Check:
    """Call workspace function ``name`` (of ``module``, imported in a child process in the workspace, bounded in
    time) on sample arguments and compare it with the expression the task defines it by."""
    what = f"as the task says: {name}({', '.join(params)}) returns {expr}"
    args = ["-c", _BEHAVES, module, name, json.dumps(params), expr, json.dumps(_EXPR_BUILTINS)]
    done = _in_workspace(what, args, root)
    if isinstance(done, Check):
        return done
    said = (done.stdout or "").rpartition("\x00")[2].strip()
    if done.returncode != 0 or not said:
        output = _relative((done.stderr or "") + (done.stdout or ""), root)
        return Check(what, False, f"importing {module} failed: {clip(output[-400:], 400)}{_hint(output, root)}")
    try:
        result = json.loads(said)
    except ValueError:
        return Check(what, None, "the check gave no answer")
    if result.get("same"):
        return Check(what, True)
    if "raised" in result:
        return Check(what, False, f"{result['call']} raised {clip(str(result['raised']), 200)}")
    if "call" in result:
        got, want = clip(str(result.get("got")), 80, fold=False), clip(str(result.get("want")), 80, fold=False)
        return Check(what, False, f"{result['call']} returned {got}; {expr} gives {want}: make it return {expr}")
    return Check(what, None, "no sample arguments fit the expression")


def _functions_checked(step: Step, goal: str, root: Path, wrote: Iterable[str]) -> list[Check]:
    """For each function the task (``goal``), or else the step's description, defines by an expression of its
    parameters ("add(a, b) that returns a + b") and that a Python file the step wrote defines at its top level,
    whether it returns what the expression gives on sample arguments: the task says what the function returns, so
    a call decides it, not a judge reading the source."""
    wanted = {**_task_functions(step.description), **_task_functions(goal)}
    if not wanted:
        return []
    checks = []
    for path in dict.fromkeys(Path(p) for p in wrote):
        if path.suffix != ".py" or not path.is_file():
            continue
        try:
            rel = path.resolve().relative_to(root.resolve()).with_suffix("")
            tree = _code_of(path.read_text(errors="replace"))
        except (ValueError, OSError):
            continue
        module = _module_of(rel)
        if tree is None or module is None:
            continue
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        for name, (params, expr) in wanted.items():
            if name in defined:
                checks.append(_behaves(name, params, expr, module, root))
    return checks


def _in_workspace(what: str, args: list[str], root: Path) -> subprocess.CompletedProcess[str] | Check:
    """Python run with ``args`` in the workspace, in planmode's sandbox (`planmode.sandbox`), no input, bounded by
    `COMMAND_TIMEOUT`; or the check ``what`` failed (still running) or undecided (it could not start). Probe code
    of the adapter's own (``-c CODE ARGS...``) runs as planmode's probe: ``python -I``, the workspace after the
    standard library on ``sys.path`` (a workspace module cannot shadow one the probe imports)."""
    policy = SandboxPolicy(timeout=COMMAND_TIMEOUT)
    if args[:1] == ["-c"] and len(args) >= 2:
        code = f"import sys\nsys.argv = {['-c', *args[2:]]!r}\n{args[1]}"
        done = run_python_probe(code, root, policy)
    else:
        done = run_command(["python", *args], root, policy)
    if done.timed_out:
        return Check(what, False, f"still running after {COMMAND_TIMEOUT:.0f} s")
    if done.error is not None or done.exit_code is None:
        return Check(what, None, f"could not start: {done.error}")
    return subprocess.CompletedProcess(list(done.argv), done.exit_code, done.stdout, done.stderr)


def _command_run_check(command: str, root: Path) -> Check:
    """Run an acceptance's command in the workspace (``python`` is this interpreter), bounded in time."""
    what = f"`{command}` runs"
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        return Check(what, None, f"cannot read the command: {exc}")
    if any(a.startswith("/") or ".." in Path(a).parts for a in argv[1:]):
        return Check(what, None, "only paths inside the workspace are run")
    if argv[0] == "pytest":
        argv = ["python", "-m", "pytest", *argv[1:]]
    args = argv[1:]
    if args[:2] == ["-m", "pytest"]:
        args = [*args, "-q", "-p", "no:cacheprovider"]
    elif not args or args[0].startswith("-") or not args[0].endswith(".py"):  # no `-c code`, no other module
        return Check(what, None, "only `python <file>.py` and pytest are run")
    done = _in_workspace(what, args, root)
    if isinstance(done, Check):
        return done
    # paths as the model knows them: an absolute path in an error ("can't open file '/tmp/…/ws/app.py'") invites
    # a next write to that path under the workspace ("tmp/…/ws/app.py")
    output = _relative((done.stdout or "") + (done.stderr or ""), root)
    if "No module named pytest" in output:
        return Check(what, None, "pytest is not installed here")
    if done.returncode != 0:
        hint = _NO_TESTS if args[:2] == ["-m", "pytest"] and done.returncode == 5 else _hint(output, root)
        return Check(what, False, f"exit code {done.returncode}: {clip(output[-600:], 600)}{hint}")
    # what it printed, its lines kept: folded to one line, one number a line read as "2 3 5" to a judge asked
    # whether a script prints them on one line
    return Check(what, True, clip((done.stdout or "").rstrip("\n"), 200, fold=False))


#: pytest's exit code 5, no test collected (a bare ``assert add(2, 3) == 5`` at the top of a test file): the fix is
#: said, since "no tests ran" alone does not say what a test is.
_NO_TESTS = (
    ". Fix: pytest runs only functions whose names start with test_, in files named test_*.py: write the test as "
    "`def test_<what it checks>():` with an assert in its body"
)

#: A script that opened a path that is not there ('names' for names.txt): the hint lists what the workspace holds.
_NOT_FOUND = re.compile(r"FileNotFoundError: \[Errno 2\] No such file or directory: '([^'\n\x00]{1,200})'")

#: A script that listed a file as a folder: ``os.listdir('data.txt')``.
_NOT_A_FOLDER = re.compile(r"NotADirectoryError: \[Errno 20\] Not a directory: '([^'\n\x00]{1,200})'")

#: "module 'util' has no attribute 'shout'", "name 'shout' is not defined", "cannot import name 'shout'".
_MISSING_NAME = re.compile(
    r"AttributeError: module '[\w.]+' has no attribute '(?P<a>\w+)'|NameError: name '(?P<n>\w+)' is not defined"
    r"|ImportError: cannot import name '(?P<i>\w+)'"
)


def _defined_in(name: str, root: Path, skip: str | None = None) -> str | None:
    """The module path (``util.strings``) of the one workspace file that defines ``name`` at its top level (a file
    ``skip``, relative to the workspace, aside)."""
    found = []
    pattern = re.compile(rf"^(?:async\s+)?(?:def|class)\s+{re.escape(name)}\b|^{re.escape(name)}\s*=", re.MULTILINE)
    for path in sorted(root.rglob("*.py"))[:200]:
        if any(part.startswith(".") for part in path.relative_to(root).parts) or path == root / (skip or "."):
            continue
        try:
            if pattern.search(path.read_text(errors="replace")):
                found.append(path.relative_to(root).with_suffix(""))
        except OSError:
            continue
    return _module_of(found[0]) if len(found) == 1 else None


def _importable(name: str) -> bool:
    """Whether ``name`` is a module this interpreter can import by that name (the standard library's, or an
    installed one such as pytest), found without importing it."""
    if name in sys.stdlib_module_names:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _module_of(rel: Path) -> str | None:
    """The module path (``util.strings``, ``util`` for util/__init__) of a workspace file's path without its suffix,
    relative to the workspace; None when it is not importable by that name."""
    parts = list(rel.parts[:-1]) if rel.parts and rel.parts[-1] == "__init__" else list(rel.parts)
    return ".".join(parts) if parts and all(p.isidentifier() for p in parts) else None


def _hint(output: str, root: Path | None = None) -> str:
    """The fix for an error a model tends to repeat, or "": a module called as its function (`import greet`, then
    `greet('Ada')`: "'module' object is not callable"), a name looked up in the wrong module (`util.shout` for a
    shout defined in util/strings.py), a module used without its import, a missing file, a file listed as a
    folder."""
    if root is not None and "ModuleNotFoundError" in output:
        # "from your_module import is_prime": the module the name is defined in
        for imported in re.finditer(r"from\s+[\w.]+\s+import\s+(?P<names>[\w, ]+)", output):
            for name in (n.strip() for n in imported.group("names").split(",")):
                module = _defined_in(name, root) if name.isidentifier() else None
                if module is not None:
                    return f". Fix: {name} is defined in the module {module}: write `from {module} import {name}`"
    if root is not None and (m := _MISSING_NAME.search(output)) is not None:
        name = m.group("a") or m.group("n") or m.group("i")
        module = _defined_in(name, root)
        if module is not None:
            return f". Fix: {name} is defined in the module {module}: write `from {module} import {name}`"
        used = m.group("n") and re.search(rf"\b{re.escape(name)}\.[A-Za-z_]", output)  # used as a module: name.attr
        if used and _importable(name):  # pytest.approx called without importing pytest
            return f". Fix: {name} is a module: write `import {name}` at the top of the file"
    if root is not None and (m := _NOT_FOUND.search(output)) is not None:
        missing = m.group(1)
        held = sorted(p.name + ("/" if p.is_dir() else "") for p in itertools.islice(root.iterdir(), 200))
        near = [h for h in held if h.split(".")[0] == missing.rsplit("/", 1)[-1].split(".")[0]]
        if held and not (root / missing).exists():
            shown = ", ".join(clip(h, 60) for h in (near or held)[:10])
            return f". Fix: there is no {clip(missing, 80)!r} in the workspace; it holds {shown}"
    if root is not None and (m := _NOT_A_FOLDER.search(output)) is not None and (root / m.group(1)).is_file():
        name = clip(m.group(1), 80)
        return f". Fix: {name!r} is a file, not a folder: read it with `open({name!r})`, not os.listdir or a glob"
    lines = output.splitlines()
    at = next((i for i, line in enumerate(lines) if "TypeError: 'module' object is not callable" in line), None)
    if at is None:
        return ""
    code = next((line for line in reversed(lines[:at]) if line.strip() and set(line.strip()) - set("^~")), "")
    called = [n for n in re.findall(r"\b([A-Za-z_]\w*)\s*\(", code) if not hasattr(builtins, n)]
    name = called[0] if called else "name"
    return (
        f". Fix: `import {name}` binds the module {name}, not its function: write `from {name} import {name}` "
        f"(or call `{name}.{name}(...)`)"
    )


def _relative(text: str, root: Path) -> str:
    """``text`` with the workspace's absolute path and this interpreter's path written as a user would type them."""
    for base in dict.fromkeys((str(root), str(root.resolve()))):
        text = text.replace(base + os.sep, "").replace(base, ".")
    return text.replace(sys.executable, "python")


#: A command's complaint that a file it was given is missing: python's, open()'s, pytest's.
_MISSING_FILE = re.compile(
    r"can't open file '([^']+)'|No such file or directory: '([^']+)'|file or directory not found: (\S+)"
)


def _with_missing_file_hint(check: Check, root: Path, wrote: Iterable[str]) -> Check:
    """A command that failed on a missing file the step wrote under another folder, told where it went
    (src/app.py written for "`python app.py` runs": commands run in the workspace's top folder)."""
    m = _MISSING_FILE.search(check.detail)
    name = next((g for g in m.groups() if g), None) if m else None
    if check.passed is not False or not name:
        return check
    went = [_shown(p, root) for p in wrote if p.endswith("/" + Path(name).name) and _shown(p, root) != name]
    if not went:
        return check
    hint = f"; the step wrote {went[0]}, but commands run in the workspace's top folder: write {name} there"
    return Check(check.what, False, check.detail + hint)


def others_write(plan: Plan, step: Step) -> frozenset[str]:
    """The files the plan's other open steps write (each its one file, `produced_file`) that ``step``'s acceptance
    names; empty, without a walk over the plan, when it names none (a 400-step chain judges 400 steps)."""
    if not file_names(step.acceptance or ""):
        return frozenset()
    return frozenset(
        f
        for s in plan.steps
        if s.id != step.id and s.status != StepStatus.DONE and (f := produced_file(s.description, s.acceptance))
    )


def gather(
    step: Step,
    outcome: StepOutcome,
    tools: Sequence[BaseTool],
    elsewhere: frozenset[str] = frozenset(),
    goal: str = "",
) -> Evidence:
    """The evidence of one successful attempt of ``step`` and the checks made on it (see the module). A file its
    acceptance names that another open step writes (``elsewhere``, `others_write`) is not looked for: it need not
    exist yet, and that step checks it. The first line the task (``goal``) gives the step's data file is checked too,
    and wins over an acceptance that gives another (`_task_first_line`)."""
    root = workspace_root(tools)
    writes = write_tool_names(tools)
    evidence = Evidence(runs=outcome.tool_runs)
    declared = declared_writes(step, writes)
    wrote = [p for p in outcome.writes]
    if declared and outcome.tool_runs is not None:
        evidence.checks.append(_changed_check(declared, outcome, writes))
    compiled = _read_written(evidence, wrote, root)
    acceptance = step.acceptance or ""
    writer = bool(declared or outcome.writes)
    if writer and not _GONE.search(acceptance):
        evidence.checks += _named_files_checks(step, elsewhere, root, wrote, compiled)
        _content_checks(evidence, step, goal, root, wrote)
    if root is not None and writer:
        evidence.checks.extend(_inputs_named(step, root, wrote))
    if root is not None and not evidence.failed:
        produced = produced_file(step.description, acceptance)
        evidence.checks += _command_checks(step, goal, produced, root, wrote)
        evidence.checks.extend(_other_outputs(acceptance, evidence.checks))
        texts = [step.description, goal] if produced else []  # whole: "in notes.txt" is cut off by said_of
        evidence.checks.extend(_count_checks(acceptance, texts, produced, evidence.checks, root, wrote))
        for clause in _clauses(acceptance):
            if (call := _returns_clause(clause)) is not None:
                evidence.checks.append(_return_check(call, root))
    if root is not None and writer:
        evidence.checks.extend(_functions_checked(step, goal, root, wrote))
    if root is not None:
        evidence.checks = [_printed_on_import(c, root) for c in evidence.checks]
    return evidence


def _changed_check(declared: list[str], outcome: StepOutcome, writes: frozenset[str]) -> Check:
    """Whether an attempt of a step that declares the write tools ``declared`` changed something: it wrote a file,
    or one of its write calls ran."""
    effect = bool(outcome.writes) or any(r.ok and r.name in writes for r in outcome.tool_runs or ())
    detail = (
        ""
        if effect
        else f"no {' or '.join(declared)} call ran, so nothing changed; the reply alone is not evidence: "
        f"call {declared[0]} to make the change"
    )
    return Check(_CHANGED, effect, detail)


def _read_written(evidence: Evidence, wrote: list[str], root: Path | None) -> set[Path]:
    """The Python files among ``wrote`` that were compiled: each written file's beginning goes into
    ``evidence.files`` (or a note that it is gone or unreadable), and a check that it compiles (``.py``) or parses
    (``.json``) into ``evidence.checks``."""
    compiled: set[Path] = set()
    for path in wrote:
        p = Path(path)
        name = _shown(path, root)
        if not p.is_file():
            evidence.files[name] = "(the file no longer exists)"
            continue
        try:
            evidence.files[name] = clip(p.read_text(errors="replace"), FILE_CHARS, marker="\n…", fold=False)
        except OSError as exc:
            evidence.files[name] = f"(cannot be read: {exc})"
        if p.suffix == ".py":
            compiled.add(p)
            evidence.checks.append(_compiles(p))
        elif p.suffix == ".json":
            evidence.checks.append(_parses(p))
    return compiled


def _named_files_checks(
    step: Step, elsewhere: frozenset[str], root: Path | None, wrote: list[str], compiled: set[Path]
) -> list[Check]:
    """A check that each file the acceptance names exists (not one another open step writes, ``elsewhere``), and
    that each Python one not yet in ``compiled`` compiles (it is then added to ``compiled``)."""
    acceptance = step.acceptance or ""
    own = produced_file(step.description, acceptance)
    checks: list[Check] = []
    for name in file_names(acceptance):
        if name in elsewhere and name != own and not any(p.endswith("/" + name) for p in wrote):
            continue
        where = _locate(name, root, wrote)
        if where is None:
            checks.append(Check(f"{name} exists", None, "no workspace to look in"))
        elif where is False:
            checks.append(Check(f"{name} exists", False, f"{name} was not created: write it"))
        else:
            assert isinstance(where, Path)
            checks.append(Check(f"{name} exists", True))
            if where.suffix == ".py" and where not in compiled:
                compiled.add(where)
                checks.append(_compiles(where))
    return checks


def _content_checks(evidence: Evidence, step: Step, goal: str, root: Path | None, wrote: list[str]) -> None:
    """Add to ``evidence`` the checks of what the acceptance's content clauses ask of a file, of the first line the
    task gives the step's data file (`_task_first_line`), and of what the description says that file holds (left
    to the judge: never failed)."""
    acceptance = step.acceptance or ""
    default = _only_file(acceptance)
    for clause in _with_subjects(_clauses(acceptance), default):
        if (asked := _content_check(clause, default)) is not None:
            evidence.checks.append(_file_content_check(*asked, root, wrote))
    data = produced_file(step.description, acceptance)
    if goal and data is not None and not data.endswith(".py") and isinstance(_locate(data, root, wrote), Path):
        _task_first_line(evidence, goal, data, root, wrote)
    if data is not None and not data.endswith(".py") and isinstance(_locate(data, root, wrote), Path):
        for asked in _described_content(step.description, data):  # not as the step describes: the judge reads it
            held = _file_content_check(*asked, root, wrote)
            detail = held.detail if held.passed is not True else ""
            evidence.checks.append(Check(_AS_DESCRIBED + held.what, True if held.passed else None, detail))


def _command_checks(step: Step, goal: str, produced: str | None, root: Path, wrote: list[str]) -> list[Check]:
    """The runs of the acceptance's commands, each failed when it should print and printed nothing, or (the script
    the step produces, ``produced``) printed other than what the step and the task say; and a note when that script
    is said to print and no command runs it."""
    acceptance = step.acceptance or ""
    printing = _asked_to_print(acceptance)
    run = commands(acceptance)
    checks: list[Check] = []
    if (
        produced is not None
        and produced.endswith(".py")
        and (says_prints(step.description, produced) or says_prints(goal, produced))
    ):
        # the step, or the task, says its script prints: a silent run fails too, whatever a repair made of the
        # step's own wording
        printing.add(f"python {produced}")
        if f"python {produced}" not in run:  # nothing runs it: the judge is told so
            unrun = "not run: the acceptance names no command that runs it, so what it prints is not shown"
            checks.append(Check(f"`python {produced}` runs", None, unrun))
    for command in run:
        check = _command_run_check(command, root)
        if check.passed and command in printing and not check.detail.strip():
            # a script that defines its function and never calls it runs, printing nothing
            check = Check(check.what, False, _SILENT)
        elif check.passed and produced is not None and command == f"python {produced}":
            check, called = _printed_as_said(check, step, goal, produced, root)
            if called is not None:
                checks.append(called)
        checks.append(_with_missing_file_hint(check, root, wrote))
    return checks


def _printed_as_said(check: Check, step: Step, goal: str, produced: str, root: Path) -> tuple[Check, Check | None]:
    """The passed run ``check`` of the step's script ``produced``, failed when what it printed is not what the step
    and the task say it prints (a wrapped value, another value, a line missing, a call's result); and the passed
    check of a call's printed result, when there is one to add."""
    acceptance = step.acceptance or ""
    wrapped = _wrapped_value(step.description, acceptance, produced, check.detail)
    said = f"{said_of(goal, produced)} {said_of(step.description, produced)}"
    each = _each_line_printed([goal, step.description], produced, check.detail, root)
    wrong = wrapped or _misprinted(said, check.detail) or each
    called = _printed_call(said, check.detail, produced, root) if wrong is None else None
    if called is not None and called.passed is False:
        wrong, called = called.detail, None
    if wrong is not None:
        check = Check(check.what, False, wrong)
    return check, called


def _printed_on_import(check: Check, root: Path) -> Check:
    """A failed check of what a script printed, told which workspace module it imports prints when imported (a
    top-level ``print()``, run before the script's own output): shown only the output, the extra lines look like a
    wrong result of the script itself."""
    m = re.match(r"`python ([\w/.\-]+\.py)`", check.what)
    if check.passed is not False or m is None or "it printed" not in check.detail:
        return check
    printing = [name for name in _workspace_imports(root / m.group(1), root) if _prints_at_top(root / f"{name}.py")]
    if not printing:
        return check
    module = printing[0]
    hint = (
        f". {module}.py prints when it is imported (its top-level print() runs first): put those lines under "
        f'`if __name__ == "__main__":` in {module}.py'
    )
    return Check(check.what, False, check.detail + hint)


def _workspace_imports(script: Path, root: Path) -> list[str]:
    """The workspace modules (``name.py`` at the top of ``root``) ``script`` imports, in order."""
    try:
        tree = ast.parse(script.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError, RecursionError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module.split(".")[0])
    return [n for n in dict.fromkeys(names) if (root / f"{n}.py").is_file() and root / f"{n}.py" != script]


def _prints_at_top(module: Path) -> bool:
    """Whether ``module`` calls print() when it is imported: in its top-level statements (a loop's body too), not in
    a def, a class or an ``if __name__ == "__main__":`` block."""
    try:
        tree = ast.parse(module.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError, RecursionError):
        return False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if isinstance(node, ast.If) and "__name__" in ast.dump(node.test):
            continue
        if any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print" for n in ast.walk(node)
        ):
            return True
    return False


def _other_outputs(acceptance: str, checks: list[Check]) -> list[Check]:
    """A failed check for each clause of ``acceptance`` that says a command prints a quoted text its run (passed,
    its whole output shown) did not print, not even as a part: a run that printed 16 fails "run.py prints '49' when
    executed" whatever a judge says. A text that is part of the output is left to the judge ("prints 'Hello'" of
    "Hello, Ada!")."""
    outputs = {c.what: c.detail for c in checks if c.passed is True and c.what.endswith(" runs")}
    out = []
    for clause in _with_commands(_clauses(acceptance)):
        said = _printed_clause(clause)
        printed = outputs.get(f"`{said[0]}` runs") if said is not None else None
        if said is None or printed is None or printed.endswith("…"):  # not run, or its output cut short
            continue
        expected = said[1].replace("\\n", "\n").strip()
        if expected and expected not in printed:
            shown = clip(printed, 80, fold=False)
            out.append(Check(f"`{said[0]}` prints {expected!r}", False, f"it printed {shown!r}, not {expected!r}"))
    return out


_IMPORTS = re.compile(r"^\s*(?:from\s+(?P<f>[\w.]+)\s+import|import\s+(?P<i>[\w.]+))", re.MULTILINE)

_AS_CALLED = "prints what its call gives: "
#: "prints count_vowels('banana')", "prints the result of mean([1, 2, 3, 4])", "prints util.shout('hi')": a call.
_PRINTS_A_CALL = re.compile(
    r"\bprints?\s+(?:out\s+)?(?:the\s+(?:result|value|output|return\s+value)\s+of\s+)?`?"
    r"(?P<call>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\()",
    re.IGNORECASE,
)
#: The child that prints a call of a workspace function: its module imported, its literal arguments passed.
_CALL_PRINTS = (
    "import ast, importlib, sys\n"
    "module, name, call = sys.argv[1], sys.argv[2], ast.parse(sys.argv[3], mode='eval').body\n"
    "fn = getattr(importlib.import_module(module), name)\n"
    "args = [ast.literal_eval(a) for a in call.args]\n"
    "kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}\n"
    "print(fn(*args, **kwargs))\n"
)


def _call_at(text: str, start: int) -> str | None:
    """The call that opens at ``text[start:]`` (a name, then its bracketed arguments, quotes respected), or None
    when its bracket is not closed within 200 characters."""
    depth, quote = 0, ""
    for i in range(start, min(len(text), start + 200)):
        ch = text[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return None


def _printed_call(said: str, output: str, script: str, root: Path) -> Check | None:
    """For a script its task or step says prints a call of a workspace function with literal arguments ("prints
    count_vowels('banana')"), the call made (its module imported in a child process, as `_behaves` does) and its
    printed value compared with what the script printed: exactly it, a passed check that settles what the step
    says it prints; not even part of its output, a failed one that names the value; else None (a label around the
    value is left to the judge). The function is the one a workspace module other than the script defines, by its
    module path when the call gives one."""
    printed = output.strip()
    if not printed or printed.endswith("…"):  # nothing, or cut short: not compared
        return None
    for m in _PRINTS_A_CALL.finditer(said):
        text = _call_at(said, m.start("call"))
        tree = _expression(text) if text else None
        if text is None or tree is None or not isinstance(call := tree.body, ast.Call):
            continue
        try:
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                ast.literal_eval(arg)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue  # not literal arguments: "prints to_upper(line)"
        if any(k.arg is None for k in call.keywords):
            continue
        dotted = ast.unparse(call.func)
        module, _, name = dotted.rpartition(".")
        if not module:
            module = _defined_in(name, root, skip=script) or ""
        elif root.joinpath(*module.split(".")).with_suffix(".py") == root / script:
            continue
        if not module or not name.isidentifier() or module.split(".")[-1] == Path(script).stem:
            continue
        what = f"{_AS_CALLED}{script} prints {clip(text, 80)}"
        done = _in_workspace(what, ["-c", _CALL_PRINTS, module, name, text], root)
        if isinstance(done, Check) or done.returncode != 0:
            return None  # the function's own step judges it; this check only compares outputs
        value = (done.stdout or "").strip()
        if not value:
            return None
        if printed == value:
            return Check(what, True, clip(value, 80, fold=False))
        if value not in printed:
            shown, want = clip(printed, 80, fold=False), clip(value, 80, fold=False)
            return Check(
                what,
                False,
                f"it printed {shown!r}, and {text} (from {module}) gives {want!r}: print({text}), its value, "
                f"after `from {module} import {name}`",
            )
        return None
    return None


def _inputs_named(step: Step, root: Path, wrote: Iterable[str]) -> list[Check]:
    """For a step that writes one Python script and says it uses a data file of the workspace ("Write count.py
    that prints the number of lines in notes.txt"), whether the script, or a workspace module it imports, names
    that file. Its checks run it with no input and no arguments: a script that reads standard input instead runs
    and prints something beside the point."""
    own = produced_file(step.description, step.acceptance or "")
    if own is None or not own.endswith(".py"):
        return []
    script = _locate(own, root, wrote)
    if not isinstance(script, Path):
        return []
    inputs = [
        n
        for n in file_names(step.description)
        if n != own and not n.endswith(".py") and isinstance(_locate(n, root, ()), Path)
    ]
    if not inputs:
        return []
    try:
        texts = [script.read_text(errors="replace")]
    except OSError:
        return []
    for m in _IMPORTS.finditer(texts[0]):  # a module of the workspace that the script imports may open it
        module = root.joinpath(*(m.group("f") or m.group("i")).split(".")).with_suffix(".py")
        with contextlib.suppress(OSError):
            texts.append(module.read_text(errors="replace"))
    checks = []
    for name in inputs:
        base = name.rsplit("/", 1)[-1]
        found = any(base in text for text in texts)
        detail = (
            ""
            if found
            else f"{own} never names {name}, and the step says it uses {name}: open {name!r} in {own} and read it, "
            f"e.g. `with open({name!r}) as f: text = f.read()` (the script is run with no input and no arguments, "
            "so sys.argv has no file and standard input is empty)"
        )
        checks.append(Check(f"{own} opens {name}", found, detail))
    return checks


def _task_first_line(evidence: Evidence, goal: str, name: str, root: Path | None, wrote: Iterable[str]) -> None:
    """Check the first line the task gives data file ``name`` ("Write README.md whose first line is # Counter"), and
    drop a failed first-line check of the acceptance that asks for another (an acceptance's "'Counter' is the
    first line" does not fail the "# Counter" the task asks for). The task is what the run is for; a plan's
    acceptance is a model's reading of it."""
    first = _FIRST.search(said_of(goal, name))
    if first is None:
        return
    text = first.group("text").strip()
    held = _file_content_check(name, "first line", text, root, wrote)
    literal = bool(first.group("q")) or not re.match(r"(?:the|a|an|its|their|some)\s", text, re.IGNORECASE)
    if not literal:  # "whose first line is the date": words about the line, not the line; the judge reads it
        detail = held.detail if held.passed is not True else ""
        evidence.checks.append(Check(f"as the task says: {held.what}", True if held.passed else None, detail))
        return
    other = _content_what(name, "first line", "").removesuffix("''")  # "the first line of README.md is "
    evidence.checks = [
        c for c in evidence.checks if not (c.passed is False and c.what.startswith(other) and c.what != held.what)
    ]
    detail = held.detail
    if held.passed is False and "first line is" in detail:
        # a step or acceptance that runs the first line into the rest ("'# Counter 1 2 3 4 5'") is told how the
        # task's line is laid out, not only that the line is not the task's
        detail += (
            f"; the task's words win over the step's description and acceptance: write {text!r} alone on the first "
            "line of the file, then a line break, and anything else after it"
        )
    evidence.checks.append(Check(f"as the task says: {held.what}", held.passed, detail))


def _file_content_check(name: str, kind: str, text: str, root: Path | None, wrote: Iterable[str]) -> Check:
    """Whether file ``name`` holds ``text`` as ``kind`` says (`_CONTENT_CHECKS`: a value, a key's value, a column's
    sum, a line count, a definition, code, words, the whole text, nothing), or holds it ("contains"), or starts with
    it as its first line ("first line"), compared without surrounding spaces."""
    what = _content_what(name, kind, text)
    where = _locate(name, root, wrote)
    if not isinstance(where, Path):
        return Check(what, None if where is None else False, "" if where is None else f"{name} does not exist")
    try:
        body = where.read_text(errors="replace")
    except OSError as exc:
        return Check(what, None, f"cannot be read: {exc}")
    check_kind = _CONTENT_CHECKS.get(kind)
    if check_kind is not None:
        return check_kind(what, name, body, text)
    return _contains_or_first_line_check(what, kind, body, text)


def _value_check(what: str, name: str, body: str, text: str) -> Check:
    """The file's data, read as JSON or a Python literal, equals the clause's."""
    held = _literal(body.strip())
    if held is not _NO_VALUE and held == _literal(text):
        return Check(what, True)
    return Check(what, False, f"it holds {clip(body.strip(), 120, fold=False)}")


def _empty_check(what: str, name: str, body: str, text: str) -> Check:
    return Check(what, True) if not body.strip() else Check(what, False, f"it holds {clip(body, 80)!r}")


def _key_check(what: str, name: str, body: str, text: str) -> Check:
    key, value = text.split(" = ", 1)
    held, why = _key_value(body, key, value)
    return Check(what, held, why)


def _sum_check(what: str, name: str, body: str, text: str) -> Check:
    column, total = text.split(" = ", 1)
    held, why = _column_sum(body, column, float(total))
    return Check(what, held, why)


def _line_count_check(what: str, name: str, body: str, text: str) -> Check:
    """The file has ``text`` lines, as Python counts them (a last line break ends a line, it does not start one)."""
    n = len(body.rstrip("\n").splitlines()) if body.strip() else 0
    return Check(what, True) if n == int(text) else Check(what, False, f"it has {n}")


def _defines_check(what: str, name: str, body: str, text: str) -> Check:
    """A function or class named ``text`` at the file's top level."""
    tree = _code_of(body)
    if tree is None:
        return Check(what, False, f"{name} does not compile")
    if any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n.name == text for n in tree.body):
        return Check(what, True)
    return Check(what, False, f"no function or class {text} at its top level")


def _code_check(what: str, name: str, body: str, text: str) -> Check:
    """Each statement of the code, as Python, somewhere in the file; else the judge reads it."""
    return _has_code(what, body, text)


def _words_check(what: str, name: str, body: str, text: str) -> Check:
    """Words not quoted ("shows apple banana kiwi"): the file's words, in order, or the judge's."""
    words = [w for w in re.split(r"[\s,]+", text.rstrip(".")) if w and w.lower() != "and"]
    if words == [w for w in re.split(r"[\s,]+", body) if w]:
        return Check(what, True)
    return Check(what, None, "the words said are not the file's, in order: read as a description, not checked")


def _whole_text_check(what: str, name: str, body: str, text: str) -> Check:
    """The whole text, line by line, as `cat` prints it; a backslash-n written out is a break."""
    lines = text.replace("\\n", "\n").strip().splitlines()
    if [line.rstrip() for line in body.strip().splitlines()] == [line.rstrip() for line in lines]:
        return Check(what, True)
    # data said in another notation: "`cat person.json` outputs `{'name': 'Ada'}`" of '{"name": "Ada"}'
    if re.match(r"\s*[\[{]", text) and (data := _literal(body.strip())) is not _NO_VALUE and data == _literal(text):
        return Check(what, True)
    return Check(what, False, f"it reads {clip(body.strip(), 120, fold=False)!r}")


#: The check of each kind of content clause (`_content_check`) other than "contains" and "first line":
#: (what is checked, the file's name, its text, the clause's text) -> the check.
_CONTENT_CHECKS: dict[str, Callable[[str, str, str, str], Check]] = {
    "value": _value_check,
    "empty": _empty_check,
    "key": _key_check,
    "sum": _sum_check,
    "lines": _line_count_check,
    "defines": _defines_check,
    "code": _code_check,
    "words": _words_check,
    "text": _whole_text_check,
}


def _contains_or_first_line_check(what: str, kind: str, body: str, text: str) -> Check:
    """Whether ``body`` holds ``text`` (``kind`` "contains": a number not as part of another, lines one after
    another, else as written) or starts with it as its first line."""
    first = (body.splitlines() or [""])[0]
    if kind == "contains" and re.fullmatch(r"-?\d+(?:\.\d+)?", text):  # a number, not part of another
        ok = re.search(rf"(?<![\d.]){re.escape(text)}(?![\d.]|\.\d)", body) is not None
    elif kind == "contains" and "\n" in text.strip().replace("\\n", "\n"):  # lines: one after another, in the file
        wanted = [line.strip() for line in text.strip().replace("\\n", "\n").splitlines()]
        held = [line.strip() for line in body.splitlines()]
        ok = any(held[i : i + len(wanted)] == wanted for i in range(len(held) - len(wanted) + 1))
    else:
        ok = text in body if kind == "contains" else first.strip() == text.strip()
    first = clip(first, 80, fold=False)
    return Check(what, True) if ok else Check(what, False, f"it does not (its first line is {first!r})")


def _column_sum(body: str, column: str, total: float) -> tuple[bool | None, str]:
    """Whether the CSV text's column (named by its header, any case) sums to ``total``; None (the judge's) when the
    text has no such column or a value of it is not a number."""
    try:
        rows = list(csv.reader(io.StringIO(body)))
    except csv.Error as exc:  # a field over csv's size limit, a NUL: not read as CSV
        return None, f"it cannot be read as CSV: {exc}"
    header = [h.strip().lower() for h in rows[0]] if rows else []
    if column.lower() not in header:
        return None, f"it has no column {column!r} in its header"
    at = header.index(column.lower())
    try:
        values = [float(r[at]) for r in rows[1:] if len(r) > at and r[at].strip()]
    except ValueError:
        return None, f"a value of its {column} column is not a number"
    held = sum(values)
    if abs(held - total) < 1e-9 * max(1.0, abs(total)):
        return True, ""
    return False, f"its {column} column sums to {held:g}"


def _has_code(what: str, body: str, code: str) -> Check:
    """Whether every statement of ``code`` is one of the file's (compared as parsed Python: its layout, and how it
    is wrapped, aside: "contains `def shout(s): return s.upper() + '!'`" holds of a file that has it on two lines).
    Code that is not found there is left to the judge: it may be written another way."""
    wanted, tree = _code_of(code), _code_of(body)
    if wanted is None or tree is None or not wanted.body:
        return Check(what, None, "it is not Python that parses")
    have = {ast.dump(node) for node in ast.walk(tree) if isinstance(node, ast.stmt)}
    if all(ast.dump(stmt) in have for stmt in wanted.body):
        return Check(what, True)
    return Check(what, None, "not found written this way (it may be written another way)")


#: "prints the number of lines", "prints the sum of the list": a step that asks for one value, not a sentence.
_PRINTS_VALUE = re.compile(
    r"\b(?:prints?|outputs?)\s+(?:out\s+)?(?:only\s+|just\s+)?(?:the|its)\s+(?:total\s+|final\s+)?"
    r"(?P<what>number|count|sum|total|average|mean|median|maximum|minimum|max|min|length|size|product|port|"
    r"result|value|answer|score|difference|square|cube|factorial)\b",
    re.IGNORECASE,
)
#: One line that is a value and words around it: "The number of lines in notes.txt is 3.", "Total lines: 3".
_WRAPPED = re.compile(
    r"(?P<words>.*[A-Za-z]{2}.*?)(?P<value>-?\d+(?:\.\d+)?)\.?\s*$|(?P<value2>-?\d+(?:\.\d+)?)\s+[A-Za-z].*"
)


def _wrapped_value(description: str, acceptance: str, script: str, output: str) -> str | None:
    """Why a script's one-line output wraps in words the one value its step asks it to print (None when it does
    not): a step "Write count.py that prints the number of lines in notes.txt" (no quote: the step gives no
    wording of its own) whose script printed "The number of lines in notes.txt is 3." The executor is told to
    print just the result, and here the evidence holds it to that. A step or acceptance that quotes anything (a
    wording of its own) is left to the other checks."""
    text = description or ""
    said = _COMMAND.sub("", f"{text} {acceptance}")  # its commands aside: "`python x.py` runs" quotes no wording
    if not says_prints(text, script) or _QUOTED.search(said) or "\n" in output.strip():
        return None
    asked = _PRINTS_VALUE.search(text)
    line = output.strip()
    m = _WRAPPED.fullmatch(line) if asked is not None else None
    if m is None or asked is None:
        return None
    value = m.group("value") or m.group("value2")
    return (
        f"it printed {clip(line, 100, fold=False)!r}: the step asks for the {asked.group('what')} alone; print just "
        f"the value ({value!r}), not words around it"
    )


_BY_COMMAS = re.compile(r"\bseparated\s+by\s+(?:a\s+)?commas?\b|\bcomma[- ]separated\b", re.IGNORECASE)
_BY_SPACES = re.compile(
    r"\bseparated\s+by\s+(?:a\s+)?(?:single\s+)?(?:spaces?|blanks?)\b|\bspace[- ]separated\b", re.IGNORECASE
)
_ON_ONE_LINE = re.compile(r"\bon\s+(?:one|a\s+single|a|the\s+same|a\s+single)\s+line\b", re.IGNORECASE)
_EACH_ON_A_LINE = re.compile(
    r"\bone\s+per\s+line\b|\beach\s+on\s+(?:its\s+own|a\s+separate|a\s+new|a)\s+line\b|\bone\s+line\s+per\b"
    r"|\bon\s+separate\s+lines\b",
    re.IGNORECASE,
)


def _misprinted(text: str, output: str) -> str | None:
    """How a script's output breaks the layout ``text`` (what the task and the step say of the script) gives it,
    or None: several items without a comma for "separated by commas", a comma for "separated by spaces", several
    lines for "on one line", several items on one line for "one per line" ("2 4 6 8 10" fails "on one line,
    separated by commas")."""
    out = output.strip()
    lines = [line for line in out.splitlines() if line.strip()]
    if not out or out.endswith("…"):
        return None
    shown = clip(out, 80, fold=False)
    if _BY_COMMAS.search(text) and "," not in out and len(out.split()) > 1:
        return f"it printed {shown!r}: the items are to be separated by commas"
    if _BY_SPACES.search(text) and "," in out and len(re.split(r"[\s,]+", out)) > 1:
        return f"it printed {shown!r}: the items are to be separated by spaces, without commas"
    if _ON_ONE_LINE.search(text) and not _EACH_ON_A_LINE.search(text) and len(lines) > 1:
        return f"it printed {len(lines)} lines: the items are to be on one line"
    one_per_line = _EACH_ON_A_LINE.search(text) and not _ON_ONE_LINE.search(text)
    if one_per_line and len(lines) == 1 and len(re.split(r"[\s,]+", out)) >= 3:
        return f"it printed {shown!r} on one line: the items are to be one per line"
    return None


#: "prints 'Hi ' followed by each name in names.txt": a quoted text before each line of a file of the workspace.
_FOLLOWED_BY_EACH = re.compile(
    r"(?P<head>\b(?:prints?|outputs?)\s+(?P<q>['\"])(?P<pre>[^'\"\n]{1,80})(?P=q)\s+followed\s+by\s+(?:each|every)"
    r"\s+\w+\s+(?:in|of|from)\s+)(?P<file>[\w\-/]{1,100}\.\w{1,8})",
    re.IGNORECASE,
)


def _each_line_printed(texts: Sequence[str], script: str, output: str, root: Path) -> str | None:
    """How a script's output differs from the one the task (or the step) gives it as a quoted text followed by each
    line of a data file of the workspace, or None: "Hi  Ada" (``print('Hi ', name)``) fails "prints 'Hi ' followed
    by each name in names.txt". Only where the file has two lines or more, and the whole output was seen."""
    if output.endswith("…"):
        return None
    for text in texts:
        said = said_of(text or "", script)
        for m in itertools.islice(_FOLLOWED_BY_EACH.finditer(text or ""), 20):  # a task says it once or twice
            if m.group("head").strip() not in said:  # said of another script
                continue
            data = _locate(m.group("file"), root, ())
            if not isinstance(data, Path):
                continue
            try:
                items = [line.strip() for line in data.read_text(errors="replace").splitlines() if line.strip()]
            except OSError:
                continue
            if not 2 <= len(items) <= 200:
                continue
            expected = [m.group("pre") + item for item in items]
            printed = [line.rstrip() for line in output.strip("\n").splitlines() if line.strip()]
            if printed != [e.rstrip() for e in expected]:
                shown, wanted = clip("\n".join(printed), 80, fold=False), clip("\n".join(expected), 80, fold=False)
                return (
                    f"it printed {shown!r}; {m.group('pre')!r} followed by each line of {m.group('file')} is {wanted!r}"
                    + _spacing_hint(printed, expected, m.group("pre"))
                )
    return None


def _spacing_hint(printed: Sequence[str], expected: Sequence[str], pre: str) -> str:
    """The fix, when ``printed`` is ``expected`` but for a space doubled where the text ``pre`` ends with one:
    ``print('Hi ', name)`` printed "Hi  Ada" (print() puts a space between its arguments); "" otherwise. What was
    printed and what was expected alone do not say where the extra space comes from."""
    if len(printed) != len(expected) or list(printed) == list(expected) or not pre.endswith(" "):
        return ""
    if not all(p == e or p.replace("  ", " ") == e for p, e in zip(printed, expected, strict=True)):
        return ""
    return (
        f". Fix: print() puts a space between its arguments, so print({pre!r}, name) prints two spaces; pass one "
        f"argument: print({pre!r} + name)"
    )


_SILENT = (
    "it ran and printed nothing, and the step asks it to print: make the script print its result "
    '(a function that is only defined does not run; call it, e.g. under `if __name__ == "__main__":`)'
)


_SAYS_PRINTS = re.compile(r"\b(?:prints?|printing|outputs?|displays?|shows?)\b", re.IGNORECASE)


def says_prints(description: str, name: str | None = None) -> bool:
    """Whether a step's description says it prints something ("a script that prints the sum"); with ``name``,
    whether it says so of that file: in a description that names several files, what follows a file's name (up to
    the next file's, a file it uses aside) is said of it, and what comes before the first name of the first: in
    "Write greet.py with a function greet(name) that returns ..., and main.py that imports greet and prints
    greet('Ada')", main.py prints and greet.py does not."""
    return bool(_SAYS_PRINTS.search(said_of(description or "", name)))


def said_of(text: str, name: str | None) -> str:
    """What ``text`` says of file ``name``: all of it when it names fewer than two files (or no ``name``), else what
    follows each mention of ``name`` up to the next file's (a file it uses aside: "reads data.txt and prints" is
    said of the script), and what comes before the first name, when ``name`` is the first."""
    mentions = file_mentions(text, used=False)  # "reads data.txt and prints": what app.py prints
    if name is None or len({n for n, _ in mentions}) < 2:
        return text
    said = ""
    for i, (named, at) in enumerate(mentions):
        if named != name:
            continue
        start = 0 if i == 0 else at
        end = next((later for other, later in mentions[i + 1 :] if other != name), len(text))
        said += " " + text[start:end]
    return said


def _asked_to_print(acceptance: str) -> set[str]:
    """The commands an acceptance says print something (`` `python x.py` prints ...``, ``x.py outputs ...``,
    `` `python x.py` runs and prints ...``)."""
    found = {m.group(1).strip() for m in _PRINTS.finditer(acceptance)}
    found |= {m.group("c").strip() for c in _with_commands(_clauses(acceptance)) if (m := _PRINTS_CLAUSE.fullmatch(c))}
    return found | {f"python {m.group(1)}" for m in _FILE_PRINTS.finditer(acceptance)}


def _exists(name: str, root: Path | None, written: Iterable[str]) -> bool | None:
    where = _locate(name, root, written)
    return None if where is None else where is not False


def missing_deliverables(plan: Plan, tools: Sequence[BaseTool], run_writes: Mapping[str, str]) -> list[str]:
    """The files the run promised that do not exist: the task's deliverables, and the files named in the
    acceptance of its done write steps (only those that can be looked for: a workspace is known, or the run
    wrote a file of that name)."""
    root = workspace_root(tools)
    writes = write_tool_names(tools)
    promised = deliverables(plan.goal)
    for step in plan.by_status(StepStatus.DONE):
        if declared_writes(step, writes) and not _GONE.search(step.acceptance or ""):
            promised += file_names(step.acceptance or "")
    return [n for n in dict.fromkeys(promised) if _exists(n, root, run_writes) is False]


def left_empty(plan: Plan, tools: Sequence[BaseTool], run_writes: Mapping[str, str]) -> list[str]:
    """The files done steps only created (`only_creates`: "Create strings.py file in the util directory") that are
    still empty at the end of the run, where the task asks for more than the file: verify passes such a file
    without a judge while another open step names it (its content is that step's), and a repair can skip or remove
    that step. Not an ``__init__.py``, a file the step or the task says is empty, or one a clause of the task only
    creates ("Create log.txt, then write app.py that appends to it")."""
    root = workspace_root(tools)
    out = []
    for step in plan.by_status(StepStatus.DONE):
        if not only_creates(step.description) or says_file_empty(step.description):
            continue
        for name in file_names(step.description):
            where = _locate(name, root, run_writes)
            if not isinstance(where, Path) or where.name == "__init__.py" or not _task_fills(plan.goal, name):
                continue
            try:
                empty = not where.read_text(errors="replace").strip()
            except OSError:
                continue
            if empty:
                shown = _shown(str(where), root)
                out.append(f"{shown} (step {step.id!r} created it empty for a later step, and no step wrote it)")
    return out


def _task_fills(goal: str, name: str) -> bool:
    """Whether task ``goal`` asks file ``name`` for content: a clause of it names the file, none says it is
    empty, and none only creates it."""

    def same(named: str) -> bool:  # "strings.py" of a step is the task's "util/strings.py"
        return named == name or named.endswith("/" + name) or name.endswith("/" + named)

    clauses = [c for c in re.split(r"[.;,:]\s|\bthen\b|\n", goal) if any(same(n) for n in file_names(c))]
    return bool(clauses) and not any(says_file_empty(c) or only_creates(c) for c in clauses)


#: A workspace with more files than this is not copied for `broken_runs` (the check is skipped, not run in place).
_COPY_LIMIT = 2000


def broken_runs(plan: Plan, tools: Sequence[BaseTool]) -> list[str]:
    """The commands the done steps' acceptance ran (`` `python x.py` ``, `` `pytest test_x.py` ``) that fail when run
    again at the end of the run, each with its step and why: a step done early is not a promise kept if a later
    step broke what it ran (a module its script imports, a file its test reads). They run in a copy of the
    workspace: a done step's effect is never made again in it (a script that appends to a file would append twice).
    Empty without a workspace, or with one of more than `_COPY_LIMIT` files."""
    root = workspace_root(tools)
    wanted = list(dict.fromkeys(c for s in plan.by_status(StepStatus.DONE) for c in commands(s.acceptance or "")))
    if root is None or not wanted:
        return []
    skip = {".planmode", ".git", "__pycache__", ".venv", "node_modules"}
    files = 0
    for _, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in skip]
        files += len(names)
        if files > _COPY_LIMIT:
            return []
    done = plan.by_status(StepStatus.DONE)
    by_command = {c: s.id for s in done for c in reversed(commands(s.acceptance or ""))}
    printing = {c: s.id for s in reversed(done) for c in _says_it_prints(s, plan.goal)}
    broken: list[str] = []
    checks: list[Check] = []
    with tempfile.TemporaryDirectory(prefix="planmode-recheck-") as tmp:
        copy = Path(tmp) / root.name
        shutil.copytree(root, copy, symlinks=True, ignore=shutil.ignore_patterns(*skip))
        for command in wanted:
            check = _command_run_check(command, copy)
            checks.append(check)
            if check.passed is False:
                step = by_command[command]
                broken.append(f"`{command}` (step {step!r}'s acceptance) fails now: {clip(check.detail, 300)}")
            elif check.passed and command in printing and not check.detail.strip():
                broken.append(f"`{command}` prints nothing now (step {printing[command]!r} says it prints)")
    for s in done:  # what a done step's acceptance says a command prints, printed at the end
        for c in _other_outputs(s.acceptance or "", checks):
            broken.append(f"{c.what} (step {s.id!r}'s acceptance) fails now: {c.detail}")
    return list(dict.fromkeys(broken))


def _says_it_prints(step: Step, goal: str = "") -> set[str]:
    """The commands a step says print something: its acceptance's (`_asked_to_print`), and its script's when its
    description, or the task (``goal``), says the script prints (as verify runs them: `gather`)."""
    said = _asked_to_print(step.acceptance or "")
    produced = produced_file(step.description, step.acceptance or "")
    if (
        produced is not None
        and produced.endswith(".py")
        and (says_prints(step.description, produced) or says_prints(goal, produced))
    ):
        said.add(f"python {produced}")
    return said


def unsupported_files(text: str, tools: Sequence[BaseTool], run_writes: Mapping[str, str]) -> list[str]:
    """The files ``text`` names that cannot be shown to exist (not in the workspace, not written by the run)."""
    root = workspace_root(tools)
    return [n for n in file_names(text) if not _exists(n, root, run_writes)]


def changed_files(tools: Sequence[BaseTool], run_writes: Mapping[str, str]) -> list[str]:
    """The files the run wrote that exist now, as shown to a user (relative to the workspace when known)."""
    root = workspace_root(tools)
    return [_shown(p, root) for p in run_writes if Path(p).is_file()]
