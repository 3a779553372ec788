"""Renderings of a plan: markdown for humans, a compact text for prompts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from planmode.state.checks import describe_check
from planmode.text import clip, markdown_text

if TYPE_CHECKING:
    from planmode.state.models import Plan

__all__ = ["STATUS_MARK", "plan_to_markdown", "plan_to_prompt"]

STATUS_MARK = {
    "pending": "[ ]",
    "running": "[~]",
    "done": "[x]",
    "failed": "[!]",
    "blocked": "[-]",
    "skipped": "[s]",
}


def plan_to_markdown(plan: Plan) -> str:
    """The plan as markdown: a heading, the goal, then one list item per step with its details. Every text of
    the plan is escaped (`planmode.text.markdown_text`): a step's description cannot hide itself or another
    step (an HTML comment), add a heading, a link or a table, or carry a control character."""
    md = markdown_text
    lines = [f"# {md(plan.title or 'Plan')}", "", f"**Goal:** {md(plan.goal)}", ""]
    lines.append(f"_version {plan.version} · revision `{plan.revision}`_")
    lines.append("")
    for n, s in enumerate(plan.steps, 1):
        lines.append(f"{n}. {STATUS_MARK[s.status.value]} **{s.id}** — {md(s.description)}")
        meta = [f"status: {s.status.value}", f"complexity: {s.complexity.value}"]
        if s.dependencies:
            meta.append("after: " + ", ".join(s.dependencies))  # step ids: identifiers (`StepId`)
        if s.tools:
            meta.append("tools: " + ", ".join(md(t) for t in s.tools))
        lines.append("   - " + " · ".join(meta))
        for check in s.checks:
            lines.append(f"   - check: {md(describe_check(check))}")
        if s.acceptance:
            lines.append(f"   - acceptance: {md(s.acceptance)}")
        if s.result:
            lines.append(f"   - result: {md(clip(s.result, 300))}")
        if s.error:
            lines.append(f"   - error: {md(clip(s.error, 300))}")
    return "\n".join(lines).rstrip() + "\n"


def plan_to_prompt(plan: Plan) -> str:
    """A compact rendering for prompts. Done steps take one short line; the others carry their details."""
    lines = [f"Goal: {plan.goal}", f"Plan v{plan.version}: {plan.title}".rstrip(": ")]
    for s in plan.steps:
        if s.status.value == "done":
            lines.append(f"- {s.id} [done]: {clip(s.result or s.description, 80)}")
            continue
        parts = [f"- {s.id} [{s.status.value}]: {s.description}"]
        if s.dependencies:
            parts.append(f" (after {', '.join(s.dependencies)})")
        if s.tools:
            parts.append(f" tools={','.join(s.tools)}")
        if s.checks:
            parts.append(" checks: " + "; ".join(describe_check(c) for c in s.checks))
        if s.acceptance:
            parts.append(f" accept: {s.acceptance}")
        if s.error:
            parts.append(f" error: {clip(s.error, 200)}")
        lines.append("".join(parts))
    return "\n".join(lines)
