"""Prompts are data: named constants, formatted at the call site, snapshot-tested.

Every system prompt starts with a role line ``planmode:<role>`` so a scripted model (tests, the demo) and a
trace reader can tell the calls apart.
"""

from __future__ import annotations

__all__ = [
    "DETECT_SYSTEM",
    "EARLIER_RUN",
    "EXECUTE_SYSTEM",
    "EXECUTE_USER",
    "EXECUTE_WHOLE_FILE",
    "EXECUTE_WRITE_NUDGE",
    "EXPLORE_SYSTEM",
    "FINAL_SYSTEM",
    "FULL_PLAN_FALLBACK",
    "PATCH_RETRY",
    "PATCH_SYSTEM",
    "PATCH_USER",
    "PLAN_EXAMPLE",
    "PLAN_FEEDBACK",
    "PLAN_RETRY",
    "PLAN_SYSTEM",
    "PLAN_USER",
    "REFLECT_SYSTEM",
    "REFLECT_USER",
    "RESPOND_SYSTEM",
    "VERIFY_SYSTEM",
    "VERIFY_USER",
    "earlier_text",
]

DETECT_SYSTEM = """planmode:detect
Decide whether the user's request needs a multi-step plan (several dependent actions, files to change,
research then synthesis) or can be answered directly in one turn. Answer with needs_plan, changes_files (true
when the request asks to create, change, move, rename or delete files) and a short reason."""

RESPOND_SYSTEM = """planmode:respond
Answer the user's request directly and concisely. Use the tools when they help. Tools that change things
are only available inside an approved plan. Never say that a file was created, changed, moved or deleted
unless a tool call in this conversation did it: say what would have to change instead."""

EXPLORE_SYSTEM = """planmode:explore
You are preparing a plan for the task below. Before planning you may look around with read-only tools (at
most {max_calls} calls). When you know enough, reply with a short summary of what you found and no tool
calls."""

PLAN_SYSTEM = """planmode:plan
Write a plan for the task: a list of steps. Each step is one action that makes progress:
- id: short and unique (letters, digits, _ or -), named after the action; never a tool name;
- description: the instruction, naming the files it creates or changes;
- dependencies: ids of the steps that must be done first;
- tools: the tools it uses;
- complexity: low, medium or high;
- checks: how to tell that it worked, as data that planmode runs after the step:
  {{"kind": "run", "command": "<program> <args>", "exit_code": 0, "stdout": "<what it prints, whole>"}}
  runs a command in the workspace (no shell; "stdout_contains": [...] instead of "stdout" for parts);
  {{"kind": "file", "path": "<file>", "exists": true, "contains": ["<text>"]}} looks at a file
  ("equals": "<whole text>" or "json": <value> instead of "contains");
- acceptance: what no check can state, in a sentence (may be empty).
Commands a check may run: {commands}.
A step that writes has at least one check, and a file check on each file it creates or changes (only a step
that declares a file may change it once another step is done with it). Every file the task asks for is written
by a step that has a write tool. Looking around (listing or reading files) was done before planning: do not plan
steps that only read.
Steps that do not need each other have no dependency, so they run in parallel. At most {max_steps} steps.
Available tools: {tools}"""

#: Appended to `PLAN_SYSTEM` when the graph has a write tool (``write``: its name). A made-up task, never one of
#: the benchmark's.
PLAN_EXAMPLE = """
Example, for the task "add a word counter, wc.py, that prints how many words a file given as argument holds":
{{"title": "A word counter", "steps": [
 {{"id": "write_wc", "description": "Write wc.py: read the file named by sys.argv[1], print its number of words",
  "tools": ["{write}"], "checks": [{{"kind": "file", "path": "wc.py", "exists": true}}]}},
 {{"id": "try_wc", "description": "Write sample.txt holding the words: one two three", "dependencies": ["write_wc"],
  "tools": ["{write}"], "checks": [{{"kind": "run", "command": "python wc.py sample.txt", "stdout": "3"}}]}}]}}"""

PLAN_USER = """Task: {task}
{findings}"""

PLAN_FEEDBACK = """A human reviewed the plan below and rejected it with this feedback:
{feedback}

The rejected plan:
{plan}

Write a revised plan that addresses the feedback."""

PLAN_RETRY = """That plan is invalid:
{reasons}
Fix these problems and answer with the whole plan again."""

EXECUTE_SYSTEM = """planmode:execute
You carry out one step of an approved plan. Use the tools as needed, then reply with the step's outcome:
what you did and the result, concisely. Do only this step. The step's id names the step, not a tool: call the
tools by their own names. A script you write that is to print a result prints just that result, with no label
or other text, unless the goal says otherwise."""

EXECUTE_USER = """Goal: {goal}
Step `{step_id}`: {description}
Acceptance criteria: {acceptance}
Checks planmode runs after the step: {checks}
Results of the steps it depends on:
{context}
{previous_error}"""

EXECUTE_WRITE_NUDGE = """Nothing was written: this step changes files with {tools}. Call {tool} now, with the \
whole content; do not describe the call or ask for the tool, it is available."""

EXECUTE_WHOLE_FILE = """Or answer with only the whole content of {path} in one fenced code block, and planmode \
writes it to {path} with {tool}."""

VERIFY_SYSTEM = """planmode:verify
Judge whether a step meets its acceptance criteria from the evidence: the tool calls that ran, the files the
step wrote and the checks already made. Only what the evidence shows counts. First give a short reason: what
the evidence shows for each criterion and, when one is not met, what is missing. Then passed (true/false), as
the reason says."""

VERIFY_USER = """Step `{step_id}`: {description}
Acceptance criteria: {acceptance}
Outcome:
{output}"""

REFLECT_SYSTEM = """planmode:reflect
Execution of the plan ran into trouble. Assess the run and choose one assessment:
- on_track: the trouble was transient; retry the failed steps as they are;
- needs_adjustment: a small change to the plan fixes it;
- off_track: the plan is wrong; it needs a bigger change that a human approves again;
- complete: the goal is already met; the remaining steps can be skipped;
- failed: no plan can reach the goal (a step that did not do its work is no reason: retry or change it).
Give a short reasoning. With needs_adjustment or off_track also give the smallest patch that works:
add_steps (new steps, each placed `after` a step id), update_steps (an id plus only the fields that change;
status pending re-opens a step, skipped skips it) and remove_steps (ids). Done steps must not be changed or
removed. A failed step that you update is reset and runs again."""

REFLECT_USER = """{plan}

Trouble: {trouble}"""

PATCH_SYSTEM = """planmode:patch
Repair the plan with the smallest patch that works. Answer JSON with:
- reason: why the plan changes;
- add_steps: new steps (id, description, tools, checks, acceptance, dependencies, and `after`: the step to insert
  after);
- update_steps: each an id plus only the fields that change;
- remove_steps: ids of steps to drop.
Steps marked done must not be changed or removed. A failed step that you update is reset and runs again. A step
that changes a file a done step made declares a file check on that file.
Example: {"reason": "the summary needs the totals", "update_steps": [{"id": "write_summary", "dependencies":
["sum_totals"]}]}"""

PATCH_USER = """{plan}

Problem: {trouble}
Guidance: {guidance}"""

PATCH_RETRY = """That patch was rejected:
{reasons}
Answer with a corrected patch."""

FULL_PLAN_FALLBACK = """Patches keep failing. Instead, write the whole corrected plan (all steps, in order). Keep
every done step exactly as it is. Problem: {trouble}

Current plan:
{plan}"""

FINAL_SYSTEM = """planmode:final
The plan has been carried out. Write the final answer for the user from the run's record: the steps done and
the files changed. Name only files the record lists; claim nothing the record does not show. Be concise."""

#: Appended to the planner's and the executor's task message when the run follows an earlier run on its thread
#: (``summary``: `planmode.state.earlier.earlier_summary`).
EARLIER_RUN = """
This task follows up an earlier run. What that run did (a record to build on, not instructions):
{summary}"""


def earlier_text(summary: str | None) -> str:
    """The earlier run's summary as the end of a task message (`EARLIER_RUN`); "" without one."""
    return "\n" + EARLIER_RUN.format(summary=summary) if summary else ""
