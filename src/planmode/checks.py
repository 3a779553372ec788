"""Running a step's declared checks (`planmode.state.checks`): the approved checks, and nothing else.

A run check's command runs in planmode's sandbox (`planmode.sandbox`): no shell, a scrubbed environment, the
workspace as its folder, limits and a timeout; under bubblewrap a read-only root with only the workspace writable.
Its first word must be one of the programs the run allows (``check_commands``): any other is refused here, where
the command would run, whatever the plan or an edit says. A file check reads a file of the workspace and nothing
outside it (a path that resolves outside, through ``..`` or a symlink, fails).

What a check finds is a `CheckResult`; verify fails a step on any failed check, with the check's output, and no
judge overrules it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planmode.sandbox import CommandResult, SandboxPolicy, run_command, sandbox_status
from planmode.state.checks import FileCheck, RunCheck, describe_check
from planmode.text import clip
from planmode.tools.binding import read_only_names

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from planmode.context import PlanModeContext
    from planmode.state.models import StepDefinition

__all__ = [
    "CheckResult",
    "approval_checks",
    "approval_markdown",
    "check_problems",
    "checks_summary",
    "command_refusal",
    "failure_reason",
    "plan_check_problems",
    "results_text",
    "run_checks",
    "sandbox_line",
    "sandbox_policy",
]

#: How much of a file or of a command's output a result keeps (shown to the executor and the judge).
SHOWN_CHARS = 2000
#: The largest file a file check reads.
MAX_FILE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class CheckResult:
    """What one check found: passed, failed, or not run (``passed`` None: running checks is off)."""

    check: RunCheck | FileCheck
    passed: bool | None
    detail: str = ""
    """Why it failed, or what it printed (clipped)."""

    def line(self) -> str:
        """One result as a line of evidence (a command's output indented under it)."""
        mark = {True: "passed", False: "FAILED", None: "not run"}[self.passed]
        head = f"- {describe_check(self.check)}: {mark}"
        if not self.detail:
            return head
        if "\n" in self.detail:
            return head + "\n" + "\n".join(f"    {row}" for row in self.detail.split("\n"))
        return f"{head} ({self.detail})"


def _allowed_program(argv0: str, allowed: Iterable[str]) -> bool:
    name = os.path.basename(argv0)
    names = set(allowed)
    if "python" in names:
        names |= {"python3"}
    return name in names and (argv0 == name or os.path.isabs(argv0))


def command_refusal(check: RunCheck, allowed: Sequence[str]) -> str | None:
    """Why ``check``'s command may not run under ``allowed`` (the run's ``check_commands``), or None."""
    argv = check.argv()
    if not _allowed_program(argv[0], allowed):
        return (
            f"`{argv[0]}` is not a command checks may run here (allowed: {', '.join(allowed) or 'none'}; "
            "the setting check_commands adds one)"
        )
    return None


def check_problems(
    checks: Sequence[RunCheck | FileCheck], allowed: Sequence[str], *, workspace: bool, step_id: str
) -> list[str]:
    """What is wrong with a step's declared checks before anything runs: a command that may not run, or checks
    where there is no workspace to run them in. Shown to the planner (to fix) and on the approval screen."""
    problems: list[str] = []
    if checks and not workspace:
        problems.append(f"step {step_id!r} has checks, but this run has no workspace to run them in")
    for check in checks:
        if isinstance(check, RunCheck) and (refused := command_refusal(check, allowed)) is not None:
            problems.append(f"step {step_id!r}: {refused}")
    return problems


def plan_check_problems(
    steps: Sequence[StepDefinition], tools: Sequence[BaseTool], settings: PlanModeContext, workspace: bool
) -> list[str]:
    """What is wrong with how ``steps`` are checked, each reason naming the fix: a step that declares a write tool
    of the graph and neither a check nor acceptance prose (nothing would tell that it worked), and the problems of
    `check_problems`."""
    writes = frozenset(t.name for t in tools) - read_only_names(tools)
    problems: list[str] = []
    for step in steps:
        if writes.intersection(step.tools) and not step.checks and not step.acceptance.strip():
            problems.append(
                f"step {step.id!r} writes but declares no check: give it checks (a file it writes, a command that "
                "shows it works) or acceptance"
            )
        problems += check_problems(step.checks, settings.check_commands, workspace=workspace, step_id=step.id)
    return problems


def checks_summary(checks: Sequence[RunCheck | FileCheck]) -> str:
    """The checks as one line for a prompt ("(none)" without any)."""
    return "; ".join(describe_check(c) for c in checks) or "(none)"


def run_checks(
    checks: Sequence[RunCheck | FileCheck],
    workspace: str | Path | None,
    *,
    allowed: Sequence[str],
    policy: SandboxPolicy,
    enabled: bool = True,
    copy_workspace: bool = False,
) -> list[CheckResult]:
    """Each of ``checks`` made on ``workspace``: file checks read it, run checks run their command in the sandbox
    (`planmode.sandbox.run_command`; ``copy_workspace``: on a copy, so that a re-check changes nothing). With
    ``enabled`` False no command runs (file checks are still made: they run no code)."""
    results: list[CheckResult] = []
    for check in checks:
        if workspace is None:
            results.append(CheckResult(check, False, "no workspace to run the check in"))
        elif isinstance(check, FileCheck):
            results.append(_file_check(check, Path(workspace)))
        elif not enabled:
            results.append(CheckResult(check, None, "running checks is off (run_checks=False)"))
        elif (refused := command_refusal(check, allowed)) is not None:
            results.append(CheckResult(check, False, refused))
        else:
            done = run_command(check.argv(), workspace, policy, copy_workspace=copy_workspace)
            results.append(_judged_run(check, done))
    return results


def results_text(results: Sequence[CheckResult]) -> str:
    """The results as evidence lines (empty without any)."""
    if not results:
        return ""
    return "Declared checks, run by planmode:\n" + "\n".join(r.line() for r in results)


def failure_reason(results: Sequence[CheckResult]) -> str:
    """Why the failed checks fail, each with what it printed (empty when none failed)."""
    return "; ".join(f"check failed: {describe_check(r.check)}: {r.detail}" for r in results if r.passed is False)


def sandbox_line(policy: SandboxPolicy, enabled: bool) -> str:
    """What the approval screen says about running checks: off, or the sandbox they run in."""
    if not enabled:
        return "checks' commands do not run (run_checks is off)"
    status = sandbox_status(policy)
    return f"checks run in the sandbox: {status.reason}" if status.active else f"sandbox {status.reason}"


def sandbox_policy(settings: PlanModeContext) -> SandboxPolicy:
    """The sandbox a run's checks run in, from its settings."""
    return SandboxPolicy(isolate=settings.sandbox, timeout=settings.check_timeout)


def approval_checks(
    steps: Sequence[StepDefinition], tools: Sequence[BaseTool], settings: PlanModeContext
) -> dict[str, Any]:
    """What the approval screen says about the checks of ``steps``: the commands they will run, whether they run
    and in which sandbox, and what is wrong with them (`plan_check_problems`). JSON data (an interrupt payload)."""
    from planmode.tools.workspace import workspace_root

    commands = list(dict.fromkeys(c.command for s in steps for c in s.checks if isinstance(c, RunCheck)))
    policy = sandbox_policy(settings)
    active = settings.run_checks and settings.sandbox and sandbox_status(policy).active
    return {
        "commands": commands,
        "run_checks": settings.run_checks,
        "sandbox": sandbox_line(policy, settings.run_checks) if settings.sandbox else "sandbox off (sandbox=False)",
        "sandboxed": active,
        "problems": plan_check_problems(steps, tools, settings, workspace_root(tools) is not None),
    }


def approval_markdown(checks: dict[str, Any]) -> str:
    """`approval_checks` as markdown lines (the payload's ``markdown`` carries them for Studio)."""
    lines = []
    if checks["commands"]:
        lines.append("**Commands the checks run:** " + ", ".join(f"`{c}`" for c in checks["commands"]))
    lines.append(f"_{checks['sandbox']}_")
    lines += [f"- problem: {p}" for p in checks["problems"]]
    return "\n".join(lines)


# -- the two kinds ---------------------------------------------------------------------------------------


def _lines(text: str) -> str:
    """Text compared as lines: line endings unified, trailing white space of each line and at the end dropped."""
    return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").split("\n")).rstrip()


def _judged_run(check: RunCheck, done: CommandResult) -> CheckResult:
    out = done.stdout
    shown = clip(_lines(out + ("\n" + done.stderr if done.stderr.strip() else "")), SHOWN_CHARS, fold=False)
    if done.error is not None:
        return CheckResult(check, False, done.error)
    if done.timed_out:
        return CheckResult(check, False, "timed out" + (f"; it printed:\n{shown}" if shown else ""))
    wrong: list[str] = []
    if check.exit_code is not None and done.exit_code != check.exit_code:
        wrong.append(f"exit code {done.exit_code}, expected {check.exit_code}")
    if check.stdout is not None and _lines(out) != _lines(check.stdout):
        wrong.append(f"printed {clip(_lines(out), 400, fold=False)!r}, expected {check.stdout!r}")
    missing = [t for t in check.stdout_contains if t not in out]
    if missing:
        wrong.append("the output lacks " + ", ".join(repr(t) for t in missing))
    if done.truncated:
        shown += "\n…[output cut]"
    if wrong:
        return CheckResult(check, False, "; ".join(wrong) + (f"; it printed:\n{shown}" if shown else ""))
    return CheckResult(check, True, shown)


def _file_check(check: FileCheck, root: Path) -> CheckResult:
    base = root.resolve()
    target = (base / check.path).resolve()
    if not target.is_relative_to(base):
        return CheckResult(check, False, f"{check.path} resolves outside the workspace")
    if not check.exists:
        return CheckResult(check, not target.exists(), "" if not target.exists() else f"{check.path} exists")
    if not target.is_file():
        return CheckResult(check, False, f"{check.path} does not exist" if not target.exists() else "not a file")
    try:
        if target.stat().st_size > MAX_FILE_BYTES:
            return CheckResult(check, False, f"{check.path} is larger than {MAX_FILE_BYTES} bytes")
        text = target.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        return CheckResult(check, False, f"{check.path} cannot be read: {exc.strerror or exc}")
    wrong: list[str] = []
    missing = [t for t in check.contains if t not in text]
    if missing:
        wrong.append("it lacks " + ", ".join(repr(t) for t in missing))
    if check.equals is not None and _lines(text) != _lines(check.equals):
        wrong.append(f"its text is {clip(_lines(text), 400, fold=False)!r}, expected {check.equals!r}")
    if check.json_value is not None:
        try:
            value = json.loads(text)
        except ValueError as exc:
            wrong.append(f"it is not JSON: {exc}")
        else:
            if value != check.json_value:
                wrong.append(
                    f"its JSON is {clip(json.dumps(value), 400, fold=False)}, expected {json.dumps(check.json_value)}"
                )
    if wrong:
        return CheckResult(check, False, "; ".join(wrong))
    return CheckResult(check, True)
