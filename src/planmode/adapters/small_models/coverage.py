"""Does a plan cover its task? The checks the plan node makes on a planner's plan before it is shown to a human.

A plan is sent back to the planner, with reasons that name the fix, when:

- a step that writes nothing is named after a tool (``list_files``, ``read_file``): a step is an action, its
  tools go in ``tools``;
- a step that writes (declares a write tool of the graph) has no acceptance criteria;
- a file the task asks for (`planmode.adapters.small_models.files.deliverables`) is written by no step — no step that
  declares a write tool names it in its description or acceptance;
- the task asks for files and a step that depends on nothing only reads (declares read-only tools only):
  looking around belongs to planning (the explore phase), not to the plan.

A step that only reads back files that earlier steps of the plan write ("Read data.csv and verify the contents")
is left out by `mend_reads`, its dependents tied to what it depended on: verify already reads what each write
step wrote, and a step that only reads gives a weak executor room to wander (call tools that do not exist,
list a file as a folder) before any file the task asks for is written.

The checks about writing apply only when the graph has write tools (without them no step can write). Pure: the
workspace is only looked at to tell a file the task names as existing (an input) from one to produce.

`mend_plan` is the last resort when the planner's attempts run out on these problems alone (a small model often
repeats them however the reasons are worded): it makes the fixes the reasons name, where a fix follows from the
plan and the task without judgement, and says what it changed. The plan is then shown for approval as usual."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from functools import partial
from pathlib import Path

from langchain_core.tools import BaseTool

from planmode.adapters.small_models.evidence import (
    _TEST_FILE,
    _clauses,
    commands,
    declared_writes,
    preferred_write,
    says_prints,
    workspace_root,
    write_tool_names,
)
from planmode.adapters.small_models.files import (
    changed_files,
    deliverables,
    file_mentions,
    file_names,
    given_files,
    produced_file,
)
from planmode.state.draft import free_id
from planmode.state.models import Plan, Step, as_step_id

__all__ = [
    "kept_runs",
    "mend_acceptance",
    "mend_kept_runs",
    "mend_module_runs",
    "mend_new_files",
    "mend_plan",
    "mend_reads",
    "mend_run_steps",
    "mend_runs",
    "mend_stem_runs",
    "mend_tools",
    "plan_problems",
    "step_problems",
]


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
        if declared_writes(step, writes) and not step.acceptance.strip() and not step.checks:  # checks declare it
            problems.append(
                f"step {step.id!r} writes but has no acceptance: add acceptance that names the file, e.g. "
                f"'out.py exists and `python out.py` runs'"
            )
        for field, text in (("description", step.description), ("acceptance", step.acceptance)):
            if text.strip() and _PLACEHOLDER.fullmatch(text.strip()):
                problems.append(
                    f"step {step.id!r} has the placeholder {text.strip()!r} as its {field}, copied from the "
                    f"shape: write what the step does and what shows it is done, for this task"
                )
    return problems


#: A field a model copied from the shape it was shown instead of filling it: dots, an ellipsis, a type's name.
_PLACEHOLDER = re.compile(r"[.\u2026\s_\-?]+|<[^<>]*>|string|str|text|description|acceptance", re.IGNORECASE)


def plan_problems(
    plan: Plan, tools: Sequence[BaseTool], ids: Sequence[str] | None = None, made: Collection[str] = ()
) -> list[str]:
    """Why ``plan`` does not cover its task as a plan must (empty: it does), each reason naming the fix. With
    ``ids``, only those steps are held to the rules of single steps (a repair's open steps: its done steps were
    held to them when they were planned); every step counts as writing what it names. ``made``: the files the run
    wrote so far, still the task's to produce though they exist (`files.deliverables`)."""
    names = {t.name.lower() for t in tools}
    writes = write_tool_names(tools)
    problems = step_problems(plan, tools, ids)
    if not writes:
        return problems
    example = preferred_write(writes)
    wanted = task_files(plan.goal, workspace_root(tools), made)
    writers = [s for s in plan.steps if declared_writes(s, writes)]
    for name in wanted:
        if not any(_names_to_write(s, name) for s in writers):
            problems.append(
                f"no step writes {name}: add a step (or change one) whose description names {name}, with "
                f"tools [{example!r}] and acceptance '{name} exists'"
            )
    unwritten = any(not any(_names_to_write(s, n) for s in writers) for n in wanted)
    if wanted:  # a step that only reads before anything is written is exploring (reading back later is fine)
        for step in plan.steps:
            if ids is not None and step.id not in ids:
                continue
            reads = step.tools and all(t.lower() in names for t in step.tools) and not declared_writes(step, writes)
            if reads and not step.dependencies:
                # "or make it a step that writes" only where a file of the task has no writer: said otherwise, it
                # invites a step that overwrites an input file the task gives
                fix = "remove it, or make it the step that writes a file no step writes" if unwritten else "remove it"
                problems.append(
                    f"step {step.id!r} only reads ({', '.join(step.tools)}); looking around was done before "
                    f"planning: {fix}"
                )
    for step in _given_writers(plan, tools, ids):
        problems.append(
            f"step {step.id!r} writes {produced_file(step.description, step.acceptance)}, a file the task gives to "
            "read (it exists): do not change it; remove the step (a step that needs it reads it)"
        )
    return problems


def task_files(goal: str, root: Path | None, made: Collection[str] = ()) -> list[str]:
    """The files a plan for ``goal`` must write: the new ones it names (`deliverables`) and the ones of the
    workspace it says to fix or change (`changed_files`)."""
    return list(dict.fromkeys([*deliverables(goal, root, made=made), *changed_files(goal, root)]))


def _given_writers(plan: Plan, tools: Sequence[BaseTool], ids: Sequence[str] | None = None) -> list[Step]:
    """The steps (of ``ids``, or all) that write, as their one file, a file of the workspace the task only reads
    (`given_files`): a step that writes an input the task gives ("Read data.txt, then write app.py ...") replaces
    the data the task is about."""
    given = given_files(plan.goal, workspace_root(tools))
    writes = write_tool_names(tools)
    return [
        s
        for s in plan.steps
        if (ids is None or s.id in ids)
        and declared_writes(s, writes)
        and produced_file(s.description, s.acceptance) in given
    ]


def _names_to_write(step: Step, name: str, text: str | None = None) -> bool:
    """Whether ``step`` (its description and acceptance, or ``text``) names file ``name`` as one to write, not only
    as one it uses: "Write app.py that reads data.csv" names data.csv only as an input, so it does not count as
    writing data.csv."""
    text = f"{step.description} {step.acceptance}" if text is None else text
    if name not in text:
        return False
    mentions = [n for n, _ in file_mentions(text) if n == name]
    return not mentions or any(n == name for n, _ in file_mentions(text, used=False))


def mend_plan(plan: Plan, tools: Sequence[BaseTool], max_steps: int | None = None) -> tuple[Plan, list[str]] | None:
    """``plan`` with the problems of `plan_problems` fixed where the fix follows from the plan and the task, and
    what was changed; None when a problem needs judgement (a step named after a tool that others depend on, a
    write step that names no file) or the fixed plan would pass ``max_steps``. The fixes:

    - a step that only reads and depends on nothing, in a task that asks for files, is removed (and from the
      dependencies of the others): looking around was done while planning;
    - a file the task asks for that no writing step names is given to the step that names it (its tools get the
      graph's write tool), or else to a new last step that writes it;
    - a step that writes without acceptance gets ``<the files it names> exists``, which is checked without a model.
    """
    writes = write_tool_names(tools)
    if not writes or not plan.steps:
        return None
    names = {t.name.lower() for t in tools}
    write = preferred_write(writes)
    wanted = task_files(plan.goal, workspace_root(tools))
    to_change = set(changed_files(plan.goal, workspace_root(tools)))  # "Change calc.py as the task asks"
    notes: list[str] = []
    steps = list(plan.steps)
    removed: list[str] = []
    while wanted:  # a reader that depended only on a removed reader is one that depends on nothing now
        readers = [
            s.id
            for s in steps
            if s.tools
            and all(t.lower() in names for t in s.tools)
            and not declared_writes(s, writes)
            and not s.dependencies
        ]
        if not readers:
            break
        removed += readers
        steps = [
            s.model_copy(update={"dependencies": [d for d in s.dependencies if d not in readers]})
            for s in steps
            if s.id not in readers
        ]
    given = {s.id for s in _given_writers(plan.model_copy(update={"steps": steps}), tools)}
    if given:
        steps = [
            s.model_copy(update={"dependencies": [d for d in s.dependencies if d not in given]})
            for s in steps
            if s.id not in given
        ]
        notes.append(f"removed the steps that wrote a file the task gives to read ({', '.join(sorted(given))})")
    if removed:
        notes.append(f"removed the steps that only read ({', '.join(removed)}): exploring did that")
    for name in wanted:
        if any(_names_to_write(s, name) for s in steps if declared_writes(s, writes)):
            continue
        at = next(
            (
                i
                for i, s in enumerate(steps)
                if not declared_writes(s, writes) and _names_to_write(s, name, f"{s.id} {s.description}")
            ),
            None,
        )
        if at is not None:
            step = steps[at]
            steps[at] = step.model_copy(update={"tools": [*step.tools, write]})
            notes.append(f"step {step.id!r} writes {name}: gave it {write}")
            continue
        ids = {s.id for s in steps}
        new_id = free_id(as_step_id("write_" + name.lower())[:56], ids)
        user = next((i for i, s in enumerate(steps) if name in f"{s.description} {s.acceptance}"), None)
        if user is None:
            steps.append(
                Step(
                    id=new_id,
                    description=f"{'Change' if name in to_change else 'Write'} {name} as the task asks",
                    tools=[write],
                    acceptance=f"{name} exists",
                    dependencies=[steps[-1].id] if steps else [],
                )
            )
            notes.append(f"no step wrote {name}: added step {new_id!r}")
            continue
        # a step uses it ("Write avg.py that reads data.csv"): it is written before, and that step waits for it
        first = steps[user]
        steps.insert(
            user,
            Step(
                id=new_id,
                description=f"{'Change' if name in to_change else 'Write'} {name} as the task asks",
                tools=[write],
                acceptance=f"{name} exists",
                dependencies=list(first.dependencies),
            ),
        )
        steps[user + 1] = first.model_copy(update={"dependencies": [*first.dependencies, new_id]})
        notes.append(f"no step wrote {name}: added step {new_id!r} before {first.id!r}, which uses it")
    for i, step in enumerate(steps):
        if declared_writes(step, writes) and not step.acceptance.strip():
            acceptance = _exists_acceptance(step, wanted)
            if acceptance is None:
                return None
            steps[i] = step.model_copy(update={"acceptance": acceptance})
            notes.append(f"step {step.id!r} had no acceptance: {acceptance!r}")
    if not steps or (max_steps is not None and len(steps) > max_steps):
        return None
    mended = plan.model_copy(update={"steps": steps})
    return (mended, notes) if notes and not plan_problems(mended, tools) else None


def mend_acceptance(plan: Plan, tools: Sequence[BaseTool], ids: Sequence[str]) -> tuple[Plan, list[str]]:
    """``plan`` with each step of ``ids`` that writes without acceptance given ``<the files it names> exists``
    (as `mend_plan` does), and what was changed; a step that names no file is left as it is."""
    writes = write_tool_names(tools)
    wanted = deliverables(plan.goal, workspace_root(tools))
    notes: list[str] = []
    steps = list(plan.steps)
    for i, step in enumerate(steps):
        if step.id in ids and declared_writes(step, writes) and not step.acceptance.strip():
            acceptance = _exists_acceptance(step, wanted)
            if acceptance is not None:
                steps[i] = step.model_copy(update={"acceptance": acceptance})
                notes.append(f"step {step.id!r} had no acceptance: {acceptance!r}")
    return (plan.model_copy(update={"steps": steps}) if notes else plan), notes


def mend_runs(plan: Plan, tools: Sequence[BaseTool], ids: Sequence[str] | None = None) -> tuple[Plan, list[str]]:
    """``plan`` with each write step (of ``ids``, or all) that says the Python script it writes prints something,
    and whose acceptance runs nothing that runs it, given `` and `python <script>` runs`` in its acceptance (a test
    file pytest collects, `` and `pytest <file>` passes``); and what was changed. What a script prints is then
    evidence (its output shown to the judge, a silent run failed) under an acceptance the plan's approval covers.
    An acceptance that runs nothing ("app.py exists and correctly reads data.txt and prints the total") leaves the
    judge only the source to go on, and a script that reads the wrong input passes on it."""
    notes: list[str] = []
    steps = list(plan.steps)
    for i, step, script in _python_writers(steps, tools, ids):
        if _TEST_FILE.fullmatch(script.rsplit("/", 1)[-1]) and step.acceptance.strip():
            said = re.search(rf"\b(?:python3?|pytest)\s+{re.escape(script)}", step.acceptance)  # `quoted` or not
            if said is None:  # run by nothing: pytest runs it
                added = f"`pytest {script}` passes"
                steps[i] = step.model_copy(update={"acceptance": f"{step.acceptance.strip().rstrip('.')} and {added}"})
                notes.append(
                    f"step {step.id!r} writes the test {script} and ran nothing: its acceptance runs it ({added})"
                )
            continue
        if not says_prints(step.description, script):
            continue
        if not step.acceptance.strip() or f"python {script}" in commands(step.acceptance):
            continue
        added = f"`python {script}` runs"
        steps[i] = step.model_copy(update={"acceptance": f"{step.acceptance.strip().rstrip('.')} and {added}"})
        notes.append(f"step {step.id!r} says {script} prints and ran nothing: its acceptance runs it ({added})")
    return (plan.model_copy(update={"steps": steps}) if notes else plan), notes


#: A backticked command that runs a file that is not Python with Python: "`python config.json` prints the port".
_RUNS_DATA = re.compile(r"`python3?\s+(?:-m\s+[\w.]+\s+)?(?P<f>[\w/.\-]+\.(?!py\b)[A-Za-z0-9]+)\b[^`]*`")
#: A backticked `python -c CODE`: no check runs code given on the command line.
_RUNS_CODE = re.compile(r"`python3?\s+-c\b[^`]*`")
#: What such a clause says it prints, when that is data: "prints `{'port': 8080}`".
_PRINTS_DATA = re.compile(r"\b(?:prints|outputs|shows|returns|gives)\s+`?(?P<lit>\{[^{}\n]*\}|\[[^\[\]\n]*\])`?")


def mend_data_runs(plan: Plan, ids: Sequence[str] | None = None) -> tuple[Plan, list[str]]:
    """``plan`` with each acceptance clause (of the steps of ``ids``, or all) that runs a data file with Python
    (`` `python config.json` prints the port``, `` `python notes.txt` writes ...``, `` `python -m json.tool
    config.json` ...``) left out, the file's existence kept, or the data it says it prints as what the file
    holds; and what was changed. Such a clause cannot pass: no check runs it, and no run shows what it says."""
    notes: list[str] = []
    steps = list(plan.steps)

    def unrun(clause: str) -> bool:
        return bool(_RUNS_DATA.search(clause) or _RUNS_CODE.search(clause))

    for i, step in enumerate(steps):
        if (ids is not None and step.id not in ids) or not unrun(step.acceptance or ""):
            continue
        parts = _clauses(step.acceptance)
        dropped = [c for c in parts if unrun(c)]
        kept = [c for c in parts if not unrun(c)]
        files = list(dict.fromkeys(m.group("f") for c in dropped for m in _RUNS_DATA.finditer(c)))
        for c in dropped:  # "`python -m json.tool config.json` prints `{'port': 8080}`": what the file holds
            run, data = _RUNS_DATA.search(c), _PRINTS_DATA.search(c)
            named = [f for f in file_names(c) if not f.endswith(".py")]
            target = run.group("f") if run is not None else (named[0] if len(named) == 1 else None)
            if target is not None and data is not None:
                kept.append(f"{target} contains {data.group('lit')}")
            elif target is not None and target not in files:
                files.append(target)
        kept += [f"{f} exists" for f in files if not any(f in c for c in kept)]
        steps[i] = step.model_copy(update={"acceptance": " and ".join(kept)})
        said = "; ".join(f'"{c}"' for c in dropped)
        notes.append(
            f"step {step.id!r} ran a file that is not Python with Python (or code given to `python -c`), "
            f"left out: {said}"
        )
    return (plan.model_copy(update={"steps": steps}) if notes else plan), notes


def mend_stem_runs(plan: Plan, tools: Sequence[BaseTool], ids: Sequence[str] | None = None) -> tuple[Plan, list[str]]:
    """``plan`` with each acceptance clause (of the steps of ``ids``, or all) that runs ``x.py`` left out, when the
    step writes a data file of that stem (``x.csv``) and ``x.py`` is nowhere else: not in the task, not in any
    step's description, not in the workspace; and what was changed. Such a clause ("data.csv exists and `python
    data.py` runs", of a step that writes data.csv) cannot pass: no step writes the script it runs."""
    root = workspace_root(tools)
    wanted = set(deliverables(plan.goal)) | set(file_names(plan.goal))
    described = {f for s in plan.steps for f in file_names(s.description)}
    notes: list[str] = []
    steps = list(plan.steps)
    for i, step in enumerate(steps):
        if ids is not None and step.id not in ids:
            continue
        data = {f.rsplit(".", 1)[0]: f for f in file_names(step.description) if not f.endswith(".py")}
        stray = [
            c
            for c in commands(step.acceptance or "")
            if (script := c.split()[-1]).endswith(".py")
            and len(c.split()) == 2
            and script[:-3] in data
            and script not in wanted | described
            and not (root is not None and (root / script).exists())
        ]
        if not stray:
            continue
        parts = _clauses(step.acceptance)
        kept = [c for c in parts if not any(s in c for s in stray)]
        files = [data[c.split()[-1][:-3]] for c in stray]
        kept += [f"{f} exists" for f in dict.fromkeys(files) if not any(f in c for c in kept)]
        steps[i] = step.model_copy(update={"acceptance": " and ".join(kept)})
        notes.append(
            f"step {step.id!r} ran {', '.join(f'`{c}`' for c in stray)}, a script nothing writes named after its "
            f"data file: left out"
        )
    return (plan.model_copy(update={"steps": steps}) if notes else plan), notes


def _python_writers(
    steps: Sequence[Step], tools: Sequence[BaseTool], ids: Sequence[str] | None
) -> list[tuple[int, Step, str]]:
    """The write steps (of ``ids``, or all) that produce one Python file: (index, step, the file)."""
    writes = write_tool_names(tools)
    out = []
    for i, step in enumerate(steps):
        if (ids is not None and step.id not in ids) or not declared_writes(step, writes):
            continue
        script = produced_file(step.description, step.acceptance)
        if script is not None and script.endswith(".py"):
            out.append((i, step, script))
    return out


#: A step that defines a function or a class ("Write rev.py with a function reverse(s) that returns ...").
_DEFINES = re.compile(r"\b(?:function|def|class|method)\s+`?[A-Za-z_]\w*\s*\(", re.IGNORECASE)
#: A clause that runs a script and expects what it returns or prints: "`python rev.py` returns 'cba'".
_RUN_EXPECTS = re.compile(
    r"`(?P<c>python3?\s+(?P<f>[\w/.\-]+\.py)[^`]*)`\s+(?:returns?|prints?|outputs?|shows?|displays?|gives?)\b"
    r"(?:'[^']*'|\"[^\"]*\"|`[^`]*`|[^,;'\"`])*",
    re.IGNORECASE,
)


def mend_module_runs(plan: Plan, tools: Sequence[BaseTool], ids: Sequence[str] | None = None) -> tuple[Plan, list[str]]:
    """``plan`` with each write step (of ``ids``, or all) that writes a module of functions and says nothing of
    printing, and whose acceptance expects its script to return or print something when run, given "`python
    <module>` runs" for that clause instead; and what was changed. A module's functions are called by the steps
    that use it, and their output is checked there: run as a script, a module that only defines reverse(s)
    returns and prints nothing, so "`python rev.py` returns 'cba'" could never pass."""
    notes: list[str] = []
    steps = list(plan.steps)
    for i, step, module in _python_writers(steps, tools, ids):
        if not _DEFINES.search(step.description) or says_prints(step.description, module):
            continue
        acceptance = _RUN_EXPECTS.sub(partial(_runs_only, module), step.acceptance)
        if acceptance != step.acceptance:
            steps[i] = step.model_copy(update={"acceptance": acceptance})
            notes.append(
                f"step {step.id!r} writes the module {module}, which prints nothing of its own: its acceptance runs "
                f"it ({acceptance!r}); the steps that use it check what its functions return"
            )
    return (plan.model_copy(update={"steps": steps}) if notes else plan), notes


def _runs_only(module: str, m: re.Match[str]) -> str:
    return f"`python {module}` runs" if m.group("f") == module else m.group(0)


def mend_new_files(plan: Plan, tools: Sequence[BaseTool]) -> tuple[Plan, list[str]]:
    """``plan`` with a whole-file write tool (one that takes ``path`` and ``content``) added to each step that
    changes its one file only in place (``edit_file``) when that file does not exist in the workspace and no step
    it comes after writes it whole; and what was changed. No edit can make a file that does not exist, and a
    writer that runs after the edit is no help to it."""
    root = workspace_root(tools)
    whole = [t.name for t in tools if {"path", "content"} <= set(t.args) and t.name in write_tool_names(tools)]
    if root is None or not whole:
        return plan, []
    tool = "write_file" if "write_file" in whole else whole[0]
    writes = write_tool_names(tools)
    notes: list[str] = []
    steps = list(plan.steps)
    by_id = {s.id: s for s in steps}
    for i, step in enumerate(steps):
        declared = declared_writes(step, writes)
        if not declared or set(declared) & set(whole):
            continue
        made = produced_file(step.description, step.acceptance)
        if made is None or (root / made).exists():
            continue
        before = _ancestors(by_id, step)  # a writer that runs after the edit is no help to it
        if any(set(o.tools) & set(whole) and made in f"{o.description} {o.acceptance}" for o in before):
            continue
        steps[i] = step.model_copy(update={"tools": [*step.tools, tool]})
        notes.append(f"step {step.id!r} changes {made}, which does not exist and no step writes: it may {tool} it")
    return (plan.model_copy(update={"steps": steps}) if notes else plan), notes


def mend_tools(plan: Plan, tools: Sequence[BaseTool], ids: Sequence[str] | None = None) -> tuple[Plan, list[str]]:
    """``plan`` with each tool name of a step (of ``ids``, or all) that is not a tool of the graph, and that names
    exactly one of them by its first word ("write" for write_file, "Read_File"), replaced by that tool; and what
    was changed. A step whose tool names no tool of the graph can call none: each of its calls would be refused.
    Names that match no tool, or several, are left."""
    names = {t.name for t in tools}
    if not names:
        return plan, []
    notes: list[str] = []
    steps = list(plan.steps)
    for i, step in enumerate(steps):
        if ids is not None and step.id not in ids:
            continue
        fixed = [tool_meant(t, names) for t in step.tools]
        if fixed != list(step.tools):
            changes = [f"{a!r} -> {b!r}" for a, b in zip(step.tools, fixed, strict=True) if a != b]
            steps[i] = step.model_copy(update={"tools": list(dict.fromkeys(fixed))})
            notes.append(f"step {step.id!r} named tools the graph does not have: {', '.join(changes)}")
    return (plan.model_copy(update={"steps": steps}) if notes else plan), notes


def mend_dependencies(
    plan: Plan, tools: Sequence[BaseTool], ids: Sequence[str] | None = None
) -> tuple[Plan, list[str]]:
    """``plan`` with each dependency of a step (of ``ids``, or all) that names a tool of the graph and no step
    left out, and each dependency listed twice listed once; and what was changed. A tool named as a dependency
    (``["write_words", "read_file"]``) is never a step to wait for; told so, a planner may only repeat it."""
    names = {t.name for t in tools}
    step_ids = {s.id for s in plan.steps}
    notes: list[str] = []
    steps = list(plan.steps)
    for i, step in enumerate(steps):
        if ids is not None and step.id not in ids:
            continue
        tools_named = [d for d in step.dependencies if d in names and d not in step_ids]
        meant = {d: m for d in step.dependencies if d not in step_ids and (m := _step_meant(d, plan, step)) is not None}
        kept = [meant.get(d, d) for d in dict.fromkeys(step.dependencies) if d not in tools_named]
        kept = list(dict.fromkeys(kept))
        if kept != list(step.dependencies):
            steps[i] = step.model_copy(update={"dependencies": kept})
            said = [f"tool {d!r} is not a step" for d in dict.fromkeys(tools_named)]
            said += [f"{d!r} is step {m!r}" for d, m in meant.items()]
            if len(set(step.dependencies)) != len(step.dependencies):
                said.append("a dependency was listed twice")
            notes.append(f"step {step.id!r} dependencies mended: {'; '.join(said)}")
    return (plan.model_copy(update={"steps": steps}) if notes else plan), notes


def _step_meant(dependency: str, plan: Plan, step: Step) -> str | None:
    """The one other step a dependency that names no step means: the one whose id, or whose one file, reads the
    same without a leading verb ("write_util_strings" for the step "write_strings" that writes util/strings.py).
    None when no step, or more than one, reads so."""
    key = _dependency_key(dependency)
    if not key:
        return None
    found = [
        s.id
        for s in plan.steps
        if s.id != step.id
        and (
            _dependency_key(s.id) == key
            or ((made := produced_file(s.description, s.acceptance)) is not None and _dependency_key(made) == key)
        )
    ]
    return found[0] if len(found) == 1 else None


def _dependency_key(text: str) -> str:
    """An id or a file name as a dependency may spell it: lower case, words joined by "_", no ``.py``, no leading
    verb (``write_``, ``create_``)."""
    bare = re.sub(r"[^a-z0-9]+", "_", re.sub(r"\.py$", "", text.strip().lower())).strip("_")
    return re.sub(r"^(?:write|create|make|add|build)_", "", bare)


#: A command a repair keeps: a file of the workspace run as it is (`` `python x.py` ``, `` `pytest test_x.py` ``).
_KEPT_RUN = re.compile(r"(?:python3?|pytest)\s+[\w/.\-]+\.py")


def kept_runs(old: str, new: str) -> tuple[str, list[str]]:
    """``new`` acceptance with every command of the ``old`` one that runs a file as it is and that ``new`` does not
    run added back, and those commands. A repair may reword a step's acceptance, never drop what it ran: "`pytest
    test_x.py` passes" reworded to "test_x.py compiles" would let a failing test file pass."""
    have = set(commands(new))
    lost = [c for c in commands(old) if _KEPT_RUN.fullmatch(c) and c not in have]
    if not lost:
        return new, []
    said = " and ".join(f"`{c}` {'passes' if c.startswith('pytest') else 'runs'}" for c in lost)
    return (f"{new.rstrip().rstrip('.')} and {said}" if new.strip() else said), lost


def mend_kept_runs(before: Plan, plan: Plan, ids: Sequence[str]) -> tuple[Plan, list[str]]:
    """``plan`` with each step of ``ids`` that ``before`` holds keeping the runs of its acceptance there
    (`kept_runs`); and what was kept."""
    steps, notes = list(plan.steps), []
    for i, step in enumerate(steps):
        old = before.get(step.id) if step.id in ids else None
        if old is None:
            continue
        acceptance, lost = kept_runs(old.acceptance or "", step.acceptance or "")
        if lost:
            steps[i] = step.model_copy(update={"acceptance": acceptance})
            notes.append(f"step {step.id!r} keeps {', '.join(f'`{c}`' for c in lost)} in its acceptance")
    return (plan.model_copy(update={"steps": steps}) if notes else plan), notes


def _ancestors(by_id: dict[str, Step], step: Step) -> list[Step]:
    """The steps ``step`` comes after, directly or not."""
    seen: dict[str, Step] = {}
    todo = list(step.dependencies)
    while todo:
        d = todo.pop()
        if d in by_id and d not in seen:
            seen[d] = by_id[d]
            todo.extend(by_id[d].dependencies)
    return list(seen.values())


def _left_out(plan: Plan, dropped: dict[str, list[str]]) -> list[Step]:
    """``plan``'s steps but the ``dropped`` ones (id -> what it depended on), each dependent of a dropped step tied
    to what that step depended on instead."""

    def tied(deps: Sequence[str]) -> list[str]:
        out: list[str] = []
        for d in deps:
            out.extend(tied(dropped[d]) if d in dropped else [d])
        return list(dict.fromkeys(out))

    return [s.model_copy(update={"dependencies": tied(s.dependencies)}) for s in plan.steps if s.id not in dropped]


_RUN_STEP = re.compile(r"\s*(?:run|execute|test|launch|start|check|verify|validate|confirm)\b", re.IGNORECASE)


def mend_run_steps(plan: Plan, tools: Sequence[BaseTool]) -> tuple[Plan, list[str]]:
    """``plan`` without the steps that only run a script an earlier step writes, with tools the graph does not have
    ("Run app.py" with ``run_file``, "Test app.py using pytest" with ``pytest``): the run goes into the acceptance of
    the step that writes the script (`` `python app.py` runs``, ``pytest`` for a test file), where verify runs it;
    the step's dependents depend on what it depended on. And what was changed. No tool of the graph runs a
    script: such a step can only answer in words, and nothing it says is evidence."""
    names = {t.name for t in tools}
    writes = write_tool_names(tools)
    if not writes:
        return plan, []
    steps = {s.id: s for s in plan.steps}
    order = [s.id for s in plan.steps]
    dropped: dict[str, list[str]] = {}
    notes: list[str] = []
    for sid in order:
        step = steps[sid]
        if not step.tools or set(step.tools) & names or not _RUN_STEP.match(step.description):
            continue
        scripts = [f for f in file_names(f"{step.description} {step.acceptance}") if f.endswith(".py")]
        if len(scripts) != 1:
            continue
        script = scripts[0]
        ancestors = {a.id for a in _ancestors(steps, step)}
        writer = next(
            (
                steps[a]
                for a in reversed(order)
                if a in ancestors
                and declared_writes(steps[a], writes)
                and produced_file(steps[a].description, steps[a].acceptance) == script
            ),
            None,
        )
        if writer is None:
            continue
        run = (
            f"`pytest {script}` passes"
            if _TEST_FILE.fullmatch(script.rsplit("/", 1)[-1])
            else f"`python {script}` runs"
        )
        if run.split("`")[1] not in commands(writer.acceptance):
            steps[writer.id] = writer.model_copy(
                update={"acceptance": f"{writer.acceptance.strip().rstrip('.')} and {run}".removeprefix(" and ")}
            )
        dropped[sid] = list(step.dependencies)
        notes.append(
            f"step {sid!r} only runs {script} with {', '.join(step.tools)}: step {writer.id!r} runs it ({run})"
        )
    if not dropped:
        return plan, []
    plan = plan.model_copy(update={"steps": [steps[s] for s in order]})  # the writers' acceptance as changed
    return plan.model_copy(update={"steps": _left_out(plan, dropped)}), notes


def mend_reads(plan: Plan, tools: Sequence[BaseTool]) -> tuple[Plan, list[str]]:
    """``plan`` without the steps that only read back files earlier steps write: a step whose tools are all
    read-only tools of the graph, that depends on some step, and whose every named file (one at least) a step it
    comes after (directly or not) that declares a write tool names; its dependents depend on its dependencies
    instead. And what was left out."""
    writes = write_tool_names(tools)
    read_only = {t.name for t in tools} - set(writes)
    if not writes:
        return plan, []
    by_id = {s.id: s for s in plan.steps}
    dropped: dict[str, list[str]] = {}  # id -> the dependencies its dependents take instead
    notes = []
    for step in plan.steps:
        if not step.tools or not set(step.tools) <= read_only or not step.dependencies:
            continue
        named = file_names(f"{step.description} {step.acceptance or ''}")
        writers = [s for s in _ancestors(by_id, step) if declared_writes(s, writes)]
        if not named or not all(any(n in f"{w.description} {w.acceptance or ''}" for w in writers) for n in named):
            continue
        dropped[step.id] = list(step.dependencies)
        notes.append(
            f"step {step.id!r} left out: it only reads back {', '.join(named)}, which an earlier step writes "
            "(verify reads what each step wrote)"
        )
    if not dropped:
        return plan, []
    return plan.model_copy(update={"steps": _left_out(plan, dropped)}), notes


#: At most this many steps are dropped to bring a plan within its step limit (`mend_length`); a plan further over
#: it is the planner's to shorten.
_MAX_DROPPED = 2


def mend_length(plan: Plan, tools: Sequence[BaseTool], max_steps: int | None) -> tuple[Plan, list[str]]:
    """``plan`` without the steps past the step limit that can do nothing: steps whose tools are all names the
    graph does not have (a step with no tools answers in words, and is kept) and that no step depends on, the
    last ones first, as many as the plan is over the limit, at most `_MAX_DROPPED` (none when that is not enough
    to meet it); and what was dropped. Such a step ("Test app.py using pytest" with the tool "pytest", not a tool
    of the graph) could call no tool, so dropping it loses no work."""
    over = len(plan.steps) - max_steps if max_steps else 0
    if not 0 < over <= _MAX_DROPPED:
        return plan, []
    names = {t.name for t in tools}
    needed = {d for s in plan.steps for d in s.dependencies}
    idle = [s.id for s in plan.steps if s.id not in needed and s.tools and not set(s.tools) & names]
    if len(idle) < over:
        return plan, []
    drop = set(idle[-over:])
    kept = [s for s in plan.steps if s.id not in drop]
    names_dropped = ", ".join(repr(s.id) for s in plan.steps if s.id in drop)
    note = f"over the limit of {max_steps} steps: dropped {names_dropped} (no tool of the graph, nothing depends on it)"
    return plan.model_copy(update={"steps": kept}), [note]


def tool_meant(name: str, names: set[str]) -> str:
    """The graph's tool ``name`` means: itself when it is one, the one it names with other case or by its first
    word, else itself."""
    if name in names:
        return name
    bare = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    same = [n for n in names if n.lower() == bare]
    if len(same) == 1:
        return same[0]
    first = [n for n in names if n.lower().split("_")[0] == bare]
    if len(first) == 1:
        return first[0]
    # "create_package", "make_dir": a made-up tool that means making a file is write_file (it makes the folders)
    if bare.split("_")[0] in _CREATES and "write_file" in names:
        return "write_file"
    return name


#: A made-up tool's first word that means writing a new file (write_file makes its folders).
_CREATES = frozenset({"create", "make", "mkdir", "touch", "generate", "save"})


def _exists_acceptance(step: Step, wanted: Sequence[str]) -> str | None:
    """``<files> exists`` for the files a step names (those the task asks for first), or None if it names none."""
    files = [f for f in file_names(f"{step.description} {step.id}") if f in wanted] or file_names(step.description)
    return " and ".join(f"{f} exists" for f in files) if files else None
