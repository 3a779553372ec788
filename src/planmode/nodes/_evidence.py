"""What one attempt of a step did, as verify shows it to the judge: the tool calls that ran, the files written,
and the results of the step's declared checks (`planmode.checks`). Nothing here reads the step's prose: what is
checked is what the plan declares.

One fact is checked without a declared check, because it is declared too: a step that declares a write tool and
whose attempt made no write did not do its work (its reply alone is not evidence).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from langchain_core.tools import BaseTool

from planmode.checks import CheckResult, results_text, run_checks, sandbox_policy
from planmode.context import PlanModeContext
from planmode.state.graph_state import StepOutcome, ToolRun
from planmode.state.models import Step
from planmode.text import clip
from planmode.tools.binding import read_only_names
from planmode.tools.workspace import workspace_root

__all__ = [
    "FILE_CHARS",
    "Evidence",
    "changed_files",
    "declared_checks",
    "declared_writes",
    "gather",
    "preferred_write",
    "sandbox_policy",
    "shown_path",
    "workspace_root",
    "write_tool_names",
]

#: Characters of a written file shown to the judge.
FILE_CHARS = 1500


def write_tool_names(tools: Sequence[BaseTool]) -> frozenset[str]:
    """The names of the graph's tools that change things (not read-only)."""
    return frozenset(t.name for t in tools) - read_only_names(tools)


def preferred_write(writes: frozenset[str]) -> str:
    """The write tool to name in an example or a fix: ``write_file`` when the graph has it."""
    return "write_file" if "write_file" in writes else sorted(writes)[0]


def declared_writes(step: Step, writes: frozenset[str]) -> list[str]:
    """The write tools of the graph that ``step`` declares."""
    return [t for t in dict.fromkeys(step.tools) if t in writes]


def shown_path(path: str, root: Path | None) -> str:
    """A path as a user reads it: relative to the workspace when it lies inside it."""
    if root is not None:
        try:
            return Path(path).resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    return path


@dataclass
class Evidence:
    """One successful attempt of a step: what ran, what it wrote, and what its declared checks found."""

    runs: list[ToolRun] | None
    files: dict[str, str] = field(default_factory=dict)
    """Files the attempt wrote: shown name -> the beginning of their content (or a note that they are gone)."""
    results: list[CheckResult] = field(default_factory=list)
    no_write: str = ""
    """Set when the step declares a write tool and none ran: why the attempt fails."""

    @property
    def failed(self) -> bool:
        """Whether the attempt fails on the evidence alone (a declared check failed, or no declared write ran)."""
        return bool(self.no_write) or any(r.passed is False for r in self.results)

    def to_prompt(self, report: str, limit: int = 6000) -> str:
        """The evidence as the judge reads it; the executor's report last, marked as a claim."""
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
        if self.results:
            lines.append(results_text(self.results))
        if report.strip():
            lines += ["The executor's own report (a claim, not evidence):", clip(report, 1500, fold=False)]
        return clip("\n".join(lines), limit, marker="\n…[truncated]", fold=False)


def gather(step: Step, outcome: StepOutcome, tools: Sequence[BaseTool], results: list[CheckResult]) -> Evidence:
    """The evidence of one successful attempt of ``step``, with its declared checks' ``results``."""
    root = workspace_root(tools)
    evidence = Evidence(runs=outcome.tool_runs, results=results)
    writes = write_tool_names(tools)
    declared = declared_writes(step, writes)
    if declared and outcome.tool_runs is not None:
        made = bool(outcome.writes) or any(r.ok and r.name in writes for r in outcome.tool_runs)
        if not made:
            evidence.no_write = (
                f"no {' or '.join(declared)} call ran, so nothing changed; the reply alone is not evidence: "
                f"call {declared[0]} to make the change"
            )
    for path in outcome.writes:
        p = Path(path)
        name = shown_path(path, root)
        if not p.is_file():
            evidence.files[name] = "(the file no longer exists)"
            continue
        try:
            evidence.files[name] = clip(p.read_text(errors="replace"), FILE_CHARS, marker="\n…", fold=False)
        except OSError as exc:
            evidence.files[name] = f"(cannot be read: {exc.strerror or exc})"
    return evidence


def changed_files(tools: Sequence[BaseTool], run_writes: Mapping[str, str]) -> list[str]:
    """The files the run wrote that exist now, as shown to a user (relative to the workspace when known)."""
    root = workspace_root(tools)
    return [shown_path(p, root) for p in run_writes if Path(p).is_file()]


def declared_checks(
    step: Step, root: Path | None, settings: PlanModeContext, *, copy_workspace: bool = False
) -> list[CheckResult]:
    """The results of ``step``'s declared checks, run under the run's settings (`planmode.checks.run_checks`)."""
    if not step.checks:
        return []
    return run_checks(
        step.checks,
        root,
        allowed=settings.check_commands,
        policy=sandbox_policy(settings),
        enabled=settings.run_checks,
        copy_workspace=copy_workspace,
    )
