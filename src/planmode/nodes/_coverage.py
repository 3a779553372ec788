"""Does a plan cover its task? The checks the plan node makes on a planner's plan before it is shown to a human.

A plan is sent back to the planner, with reasons that name the fix, when:

- a step that writes nothing is named after a tool (``list_files``, ``read_file``): a step is an action, its
  tools go in ``tools``;
- a step that writes (declares a write tool of the graph) has no acceptance criteria;
- a file the task asks for (`planmode.nodes._evidence.deliverables`) is written by no step — no step that
  declares a write tool names it in its description or acceptance;
- the task asks for files and a step that depends on nothing only reads (declares read-only tools only):
  looking around belongs to planning (the explore phase), not to the plan (reading a file back after a step
  wrote it is a step).

The checks about writing apply only when the graph has write tools (without them no step can write). Pure: the
workspace is only looked at to tell a file the task names as existing (an input) from one to produce."""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.tools import BaseTool

from planmode.nodes._evidence import declared_writes, deliverables, preferred_write, workspace_root, write_tool_names
from planmode.state.models import Plan

__all__ = ["plan_problems", "step_problems"]


def _bare(text: str) -> str:
    """A step's id or description reduced to what could be a tool name: lower case, no quotes, no call syntax."""
    text = text.strip().strip("`'\".:").lower()
    return re.sub(r"\(.*\)$", "", text).strip()


def step_problems(plan: Plan, tools: Sequence[BaseTool], ids: Sequence[str] | None = None) -> list[str]:
    """The problems of single steps (``ids``, or all): named after a tool, or writing without acceptance. A patch
    is held to these for the steps it adds or changes."""
    names = {t.name.lower() for t in tools}
    writes = write_tool_names(tools)
    problems: list[str] = []
    for step in plan.steps:
        if ids is not None and step.id not in ids:
            continue
        named = _bare(step.id) in names or _bare(step.description) in names
        if named and not declared_writes(step, writes):  # `deploy` using the deploy tool is an action
            problems.append(
                f"step {step.id!r} is named after a tool. A step is an action: give it an id and description that "
                f"say what it does (e.g. 'write_report': 'Write report.md with ...') and list tools in 'tools'"
            )
        if declared_writes(step, writes) and not step.acceptance.strip():
            problems.append(
                f"step {step.id!r} writes but has no acceptance: add acceptance that names the file, e.g. "
                f"'out.py exists and `python out.py` runs'"
            )
    return problems


def plan_problems(plan: Plan, tools: Sequence[BaseTool]) -> list[str]:
    """Why ``plan`` does not cover its task as a plan must (empty: it does), each reason naming the fix."""
    names = {t.name.lower() for t in tools}
    writes = write_tool_names(tools)
    problems = step_problems(plan, tools)
    if not writes:
        return problems
    example = preferred_write(writes)
    wanted = deliverables(plan.goal, workspace_root(tools))
    writers = [s for s in plan.steps if declared_writes(s, writes)]
    for name in wanted:
        if not any(name in f"{s.description} {s.acceptance}" for s in writers):
            problems.append(
                f"no step writes {name}: add a step (or change one) whose description names {name}, with "
                f"tools [{example!r}] and acceptance '{name} exists'"
            )
    if wanted:  # a step that only reads before anything is written is exploring (reading back later is fine)
        for step in plan.steps:
            reads = step.tools and all(t.lower() in names for t in step.tools) and not declared_writes(step, writes)
            if reads and not step.dependencies:
                problems.append(
                    f"step {step.id!r} only reads ({', '.join(step.tools)}); looking around was done before "
                    "planning: remove it, or make it a step that writes"
                )
    return problems
