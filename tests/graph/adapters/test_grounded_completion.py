"""Issue 24 items 1 and 3, now the small-model adapter's (``model_profile="small"``: `planmode.adapters`):
"completed" is grounded in evidence read from a step's prose, and a plan must cover its task.

- verify judges the tool calls that ran and the files written, with checks that need no model (a write step made
  a write, the files its acceptance names exist, Python compiles, a named command runs) — never the executor's
  own words alone;
- the planner's plan is sent back when a step is named after a tool, a write step has no acceptance, or a file the
  task asks for is written by no step;
- finalize fails a run whose deliverables are missing, and its answer never names a file that does not exist.

Graph runs on a real SQLite file with the workspace tools and the scripted model, sync and async."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planmode.adapters.small_models.evidence import own_acceptance
from planmode.adapters.small_models.verify import COVERED
from planmode.graph import build_graph
from planmode.persistence import async_sqlite_checkpointer, sqlite_checkpointer
from planmode.state.models import Step
from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest, tool_call
from planmode.tools import workspace_tools

CFG = {"configurable": {"thread_id": "t"}}
TASK = "create mathx.py with add(a, b)"
GOOD = "def add(a, b):\n    return a + b\n"


GIVE_UP = {"assessment": "failed", "reasoning": "the step cannot be done"}  # the run ends at its first trouble


def write_step(acceptance: str = "mathx.py exists", **extra: Any) -> dict[str, Any]:
    return {
        "id": "write_mathx",
        "description": "Write mathx.py with add(a, b)",
        "tools": ["write_file"],
        "acceptance": acceptance,
        **extra,
    }


def plan_of(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"title": "mathx", "steps": list(steps)}


def against_a_failing_judge(
    tmp_path: Path,
    step: dict[str, Any],
    path: str,
    content: str,
    task: str,
    *,
    reason: str = "the content does not match the step's description",
    files: dict[str, str] | None = None,
    mode: str = "sync",
) -> tuple[dict[str, Any], ScriptedChatModel]:
    """A one-step plan whose step writes ``path`` with ``content``, judged by a judge that fails everything (with
    ``reason``), in a workspace that holds ``files`` first: what the checks decide is decided without the judge."""
    no = {"passed": False, "reason": reason}
    script = PurposeScript(plan=plan_of(step), execute=writer(path, content), verify=no, reflect=GIVE_UP)
    (tmp_path / "ws").mkdir(exist_ok=True)
    for name, text in (files or {}).items():
        (tmp_path / "ws" / name).write_text(text)
    out, model, _ = run(tmp_path, script, task=task, mode=mode)
    return out, model


def writer(path: str, content: str, then: str = "wrote it") -> Callable[[ScriptRequest], Any]:
    """An execute turn that really calls write_file, then answers."""

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return then
        return {"tool_calls": [tool_call("write_file", path=path, content=content)]}

    return execute


BROKEN = "def add(a, b) return a + b\n"  # does not compile: a step that writes it fails on the evidence


def fixer(word: str) -> Callable[[ScriptRequest], Any]:
    """An execute turn that writes mathx.py: broken, or good once ``word`` is in the request (the repair's)."""

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "done"
        content = GOOD if word in req.text() else BROKEN
        return {"tool_calls": [tool_call("write_file", path="mathx.py", content=content)]}

    return execute


def run(
    tmp_path: Path,
    script: PurposeScript,
    *,
    task: str = TASK,
    mode: str = "sync",
    executor: Any = None,
    **context: Any,
) -> tuple[dict[str, Any], ScriptedChatModel, Path]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    model = ScriptedChatModel(responder=script)
    ctx = {"mode": "plan", "approval": "auto", "max_explore_calls": 0, "max_attempts": 1, "model_profile": "small"}
    ctx.update(context)
    tools = workspace_tools(ws)
    if mode == "sync":
        saver = sqlite_checkpointer(tmp_path / "runs.sqlite")
        try:
            graph = build_graph(model, tools=tools, executor=executor, checkpointer=saver)
            out: dict[str, Any] = graph.invoke({"task": task}, CFG, context=ctx)
        finally:
            saver.conn.close()
    else:

        async def arun() -> dict[str, Any]:
            async with async_sqlite_checkpointer(tmp_path / "runs.sqlite") as asaver:
                graph = build_graph(model, tools=tools, executor=executor, checkpointer=asaver)
                result: dict[str, Any] = await graph.ainvoke({"task": task}, CFG, context=ctx)
                return result

        out = asyncio.run(arun())
    return out, model, ws


def final_text(out: dict[str, Any]) -> str:
    return str(out["messages"][-1].content)


def retry_reasons(model: ScriptedChatModel) -> str:
    """The text of every plan request after the first (the reasons fed back)."""
    return "\n".join([r.text() for r in model.requests if r.purpose == "plan"][1:])


# -- verify judges evidence ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_executor_that_only_claims_a_write_does_not_complete(tmp_path: Path, mode: str) -> None:
    script = PurposeScript(
        plan=plan_of(write_step()),
        execute="I created mathx.py with add(a, b).",  # a claim: no tool ran
        reflect={"assessment": "failed", "reasoning": "gave up"},
    )

    out, model, ws = run(tmp_path, script, mode=mode)

    assert not (ws / "mathx.py").exists()
    assert out["status"] != "completed"
    step = out["plan"].get("write_mathx")
    assert step.status.value == "failed"
    assert step.error is not None and "no write_file call ran" in step.error and "call write_file" in step.error
    assert model.calls("verify") == 0  # failed on the evidence: no judge is asked
    assert "created mathx.py" not in final_text(out)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_step_with_a_real_write_passes_and_the_judge_sees_the_evidence(tmp_path: Path, mode: str) -> None:
    step = write_step(
        "mathx.py exists, `python mathx.py` runs and add(a, b) returns their sum"
    )  # the last: the judge's
    script = PurposeScript(plan=plan_of(step), execute=writer("mathx.py", GOOD), final="Wrote mathx.py.")

    out, model, ws = run(tmp_path, script, mode=mode)

    assert out["status"] == "completed", out.get("error")
    assert (ws / "mathx.py").read_text() == GOOD
    (judged,) = [r for r in model.requests if r.purpose == "verify"]
    shown = judged.text()
    assert "write_file" in shown and "-> ok" in shown  # the tool call that ran
    assert "--- mathx.py" in shown and "return a + b" in shown  # the file and its content
    assert "mathx.py compiles: passed" in shown and "`python mathx.py` runs: passed" in shown
    assert "wrote it" not in shown and "report" not in shown  # a write step: its change, not its words
    assert "Files changed: mathx.py" in final_text(out)
    assert out["report"]["files_changed"] == ["mathx.py"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_reflection_that_calls_the_run_complete_does_not_skip_a_failed_step(tmp_path: Path, mode: str) -> None:
    """A false 'completed' on the 0.5B: main.py did not compile, its step failed verification, the reflection
    answered "complete", the step was skipped and the run ended `completed`. A "complete" over a failed step is
    read as "failed": the run ends failed, saying why, and the step stays failed."""
    script = PurposeScript(
        plan=plan_of(write_step()),
        execute=writer("mathx.py", BROKEN),
        reflect={"assessment": "complete", "reasoning": "the error is in the syntax"},
    )
    out, _, _ = run(tmp_path, script, mode=mode)
    assert out["status"] == "failed"
    assert "the reflection called the run complete, but write_mathx failed verification" in out["report"]["error"]
    assert out["plan"].get("write_mathx").status.value == "failed"


def test_a_python_file_that_does_not_compile_fails_the_step(tmp_path: Path) -> None:
    script = PurposeScript(
        plan=plan_of(write_step()), execute=writer("mathx.py", "def add(a, b:\n"), reflect={"assessment": "failed"}
    )

    out, _, _ = run(tmp_path, script)

    step = out["plan"].get("write_mathx")
    assert out["status"] == "failed" and step.status.value == "failed"
    assert step.error is not None and "mathx.py compiles" in step.error and "fix the syntax" in step.error


def test_a_python_file_holding_plain_text_is_told_it_is_not_code(tmp_path: Path) -> None:
    """The 0.5B wrote hello.py as the text it was to print, and was told "line 1: invalid syntax; fix the syntax";
    it wrote the same text again. The reason names what the file holds and the fix; code that does not compile
    keeps the plain reason."""
    script = PurposeScript(
        plan=plan_of(write_step()), execute=writer("mathx.py", "Hello, world!"), reflect={"assessment": "failed"}
    )

    out, _, _ = run(tmp_path, script)

    error = out["plan"].get("write_mathx").error or ""
    assert "mathx.py holds plain text ('Hello, world!'), not Python code; write the Python code" in error
    assert "(a script that prints that text holds print('Hello, world!'))" in error  # the code, shown

    from planmode.adapters.small_models.evidence import _compiles

    broken = tmp_path / "broken.py"
    broken.write_text("def add(a, b) return a + b\n")
    assert "plain text" not in (_compiles(broken).detail or "")
    test = tmp_path / "test_mathx.py"  # the 1.5B's: a test file is not shown a print()
    test.write_text("pytest test_mathx.py\n")
    said = _compiles(test).detail or ""
    assert "holds plain text ('pytest test_mathx.py')" in said and "print(" not in said


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_call_of_a_tool_that_does_not_exist_is_told_how_to_write_the_steps_file(tmp_path: Path, mode: str) -> None:
    """The 0.5B, in the step that writes count_lines.py, called the step before it, ``write_notes_txt``, and was
    told "not a valid tool, try one of [...]" five times. A write step's reply names the call that writes its file."""
    told: list[str] = []

    def execute(req: ScriptRequest) -> Any:
        results = req.tool_results()
        if not results:
            return {"tool_calls": [tool_call("write_notes_txt", path="mathx.py", content=GOOD)]}
        told.append(str(results[-1].content))
        if len(results) == 1:
            return {"tool_calls": [tool_call("write_file", path="mathx.py", content=GOOD)]}
        return "done"

    out, _, ws = run(tmp_path, PurposeScript(plan=plan_of(write_step()), execute=execute), mode=mode)

    assert out["status"] == "completed", out.get("error")
    assert told[0].startswith("Error: write_notes_txt is not a tool. This step writes mathx.py: call write_file")
    assert "<" not in told[0]  # no placeholder to copy as the content
    assert (ws / "mathx.py").read_text() == GOOD


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_same_failing_call_sent_twice_ends_the_attempt(tmp_path: Path, mode: str) -> None:
    """The 0.5B sent one failing call six turns in a row; the attempt ran to its turn bound. Two turns that make
    the same calls, all failed, end the attempt with the error, and the next attempt reads it."""
    seen: list[str] = []

    def execute(req: ScriptRequest) -> Any:
        seen.append(req.text())
        if "same failing call" in req.text():
            return writer("mathx.py", GOOD)(req)
        return {"tool_calls": [tool_call("write_file", path="mathx.py")]}  # no content: its arguments fail

    out, _, ws = run(
        tmp_path,
        PurposeScript(plan=plan_of(write_step()), execute=execute),
        mode=mode,
        max_attempts=2,
        max_executor_iterations=6,
    )

    assert out["status"] == "completed", out.get("error")
    first_attempt = [t for t in seen if "same failing call" not in t]
    assert len(first_attempt) == 2  # two turns, not six
    assert "the model sent the same failing call twice (write_file)" in seen[2]
    assert (ws / "mathx.py").read_text() == GOOD


def test_a_command_named_in_the_acceptance_must_exit_zero(tmp_path: Path) -> None:
    step = write_step("`python mathx.py` runs")
    script = PurposeScript(
        plan=plan_of(step), execute=writer("mathx.py", "raise SystemExit(3)\n"), reflect={"assessment": "failed"}
    )

    out, _, _ = run(tmp_path, script)

    failed = out["plan"].get("write_mathx")
    assert out["status"] == "failed"
    assert failed.error is not None and "`python mathx.py` runs" in failed.error and "exit code 3" in failed.error


def test_a_file_the_acceptance_names_must_exist(tmp_path: Path) -> None:
    """The step wrote a file, but not the one its acceptance names."""
    script = PurposeScript(
        plan=plan_of(write_step("mathx.py exists")),
        execute=writer("other.py", GOOD),
        reflect={"assessment": "failed"},
    )

    out, _, _ = run(tmp_path, script)

    step = out["plan"].get("write_mathx")
    assert out["status"] == "failed"
    assert step.error is not None and "mathx.py was not created" in step.error


# -- plans that cover the task ------------------------------------------------------------------------------

TOOL_STEPS = plan_of(
    {"id": "list_files", "description": "list_files", "tools": ["list_files"]},
    {"id": "read_file", "description": "read_file", "tools": ["read_file"]},
    {"id": "search_files", "description": "search_files", "tools": ["search_files"]},
)


def test_a_plan_naming_tools_as_steps_is_sent_back_with_the_fix(tmp_path: Path) -> None:
    """The reasons name the fix; the corrected plan, which reads the file back after writing it, is accepted
    (only reading before anything is written is exploration), its read-back step left out (verify reads what the
    write step wrote)."""
    read_back = {
        "id": "read_back",
        "description": "Read mathx.py back",
        "tools": ["read_file"],
        "dependencies": ["write_mathx"],
    }
    write = writer("mathx.py", GOOD)

    def execute(req: ScriptRequest) -> Any:
        if req.step_id == "write_mathx":
            return write(req)
        return "it reads back" if req.tool_results() else {"tool_calls": [tool_call("read_file", path="mathx.py")]}

    script = PurposeScript(plan=[TOOL_STEPS, plan_of(write_step(), read_back)], execute=execute)

    out, model, _ = run(tmp_path, script)

    assert model.calls("plan") == 2
    reasons = retry_reasons(model)
    assert "step 'list_files' is named after a tool" in reasons
    assert "no step writes mathx.py" in reasons and "tools ['write_file']" in reasons
    assert "step 'read_file' only reads" in reasons
    assert out["status"] == "completed", out.get("error")
    assert out["plan"].ids() == ["write_mathx"]
    assert "step 'read_back' left out: it only reads back mathx.py" in (out["plan"].history[0].reason or "")


def test_a_plan_that_copies_the_shapes_placeholders_is_sent_back(tmp_path: Path) -> None:
    """The 0.5B answered the plan request with the shape it was shown, ``{"id": "step_1", "description": "...",
    "acceptance": "..."}``; the step ran with no task to do. Placeholders are sent back with the fix."""
    copied = {"id": "step_1", "description": "...", "tools": [], "acceptance": "\u2026"}
    script = PurposeScript(plan=[plan_of(copied), plan_of(write_step())], execute=writer("mathx.py", GOOD))

    out, model, _ = run(tmp_path, script)

    reasons = retry_reasons(model)
    assert "step 'step_1' has the placeholder '...' as its description" in reasons
    assert "step 'step_1' has the placeholder '\u2026' as its acceptance" in reasons
    assert out["status"] == "completed" and out["plan"].ids() == ["write_mathx"]


def test_the_full_plan_fallback_is_held_to_the_coverage_a_first_plan_is(tmp_path: Path) -> None:
    """The 0.5B's fallback plan was the shape's example (one step, "...", no tools): it replaced the failed step
    that wrote hello.py, ran, and the run spent its time on a step with no task. A fallback plan that leaves a file
    of the task unwritten, or has placeholders, is refused like a first plan."""
    copied = {"id": "step_1", "description": "...", "tools": [], "acceptance": "..."}
    script = PurposeScript(
        plan=[plan_of(write_step()), plan_of(copied)],
        execute=writer("mathx.py", BROKEN),
        reflect={"assessment": "needs_adjustment", "reasoning": "mathx.py does not compile"},
        patch="{not json",
    )

    out, model, _ = run(tmp_path, script, max_reflections=1, max_patch_attempts=1)

    assert out["status"] == "failed" and model.calls("plan") == 2
    assert "step_1" not in out["plan"].ids() and model.calls("execute") == 1  # the copied step never ran
    reasons = [r for rej in out["plan"].rejections for r in rej.reasons]
    assert any("no step writes mathx.py" in r for r in reasons), reasons
    assert any("placeholder '...' as its description" in r for r in reasons), reasons


def test_a_plan_cut_off_while_it_repeats_itself_is_told_the_item_it_repeated(tmp_path: Path) -> None:
    """The 0.5B's plan listed "write_file" as a step's tools and then its dependencies until the output cap cut it
    off, twice, and was told only "no JSON object found ... raise the setting". The reason names the item it
    repeated and the fix; a plan cut off in prose keeps the plain reason."""
    from langchain_core.messages import AIMessage

    runaway = '{"title": "t", "steps": [{"id": "write_mathx", "tools": [' + '"write_file", ' * 120 + '"wri'
    prose = '{"title": "t", "steps": [{"id": "write_mathx", "description": "Write mathx.py, a module that'
    cut = {"finish_reason": "length"}
    plans = [AIMessage(content=runaway, response_metadata=cut), AIMessage(content=prose, response_metadata=cut)]
    script = PurposeScript(plan=[*plans, plan_of(write_step())], execute=writer("mathx.py", GOOD))

    out, model, _ = run(tmp_path, script, max_plan_attempts=3)

    first, second = [r.text() for r in model.requests if r.purpose == "plan"][1:3]
    assert "the answer repeated 'write_file' over and over until the max_output_tokens cap cut it off" in first
    assert "write each item once" in first
    assert "the answer was cut off at the max_output_tokens cap" in second
    assert out["status"] == "completed", out.get("error")


def test_a_write_step_without_acceptance_is_sent_back(tmp_path: Path) -> None:
    bare = plan_of(write_step(""))
    script = PurposeScript(plan=[bare, plan_of(write_step())], execute=writer("mathx.py", GOOD))

    out, model, _ = run(tmp_path, script)

    assert model.calls("plan") == 2
    assert "step 'write_mathx' writes but declares no check" in retry_reasons(model)  # the core's rule, first
    assert out["status"] == "completed", out.get("error")


def test_a_missing_deliverable_is_sent_back_then_added_by_planmode(tmp_path: Path) -> None:
    """The planner repeats a plan that writes no test file: the reason is fed back, and when the attempts run out
    planmode adds the step the reason names (its acceptance checked without a model) and says so in the plan's
    history; the run then writes both files."""
    task = "create mathx.py and a test for it in test_mathx.py"
    test = "from mathx import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"

    def execute(req: ScriptRequest) -> Any:
        target = ("test_mathx.py", test) if req.step_id == "write_test_mathx_py" else ("mathx.py", GOOD)
        return writer(*target)(req)

    script = PurposeScript(plan=plan_of(write_step()), execute=execute)  # the test file is written by no step

    out, model, ws = run(tmp_path, script, task=task, max_plan_attempts=2)

    assert model.calls("plan") == 2
    assert "no step writes test_mathx.py" in retry_reasons(model)
    plan = out["plan"]
    assert plan.ids() == ["write_mathx", "write_test_mathx_py"]
    added = plan.get("write_test_mathx_py")
    assert added.tools == ["write_file"]
    assert added.acceptance == "test_mathx.py exists and `pytest test_mathx.py` passes"  # a test is run
    assert added.dependencies == ["write_mathx"]
    assert "completed by planmode: no step wrote test_mathx.py: added step 'write_test_mathx_py'" in (
        plan.history[0].reason
    )
    assert out["status"] == "completed", out.get("error")
    assert sorted(p.name for p in ws.iterdir()) == ["mathx.py", "test_mathx.py"]


def test_planmode_mends_only_what_follows_from_the_plan_and_the_task(tmp_path: Path) -> None:
    """The 1.5B model's plan for 'write hello.py' (two read-only steps, twice): the readers are removed and the
    file's step added. A write step that names no file cannot be given acceptance: that plan still fails."""
    readers = plan_of(
        {"id": "find_dir", "description": "Find the directory", "tools": ["search_files"]},
        {"id": "read_dir", "description": "Read it", "tools": ["list_files"], "dependencies": ["find_dir"]},
    )
    script = PurposeScript(plan=readers, execute=writer("hello.py", "print('hi')\n"))
    out, model, ws = run(tmp_path, script, task="Write hello.py that prints hi", max_plan_attempts=2)
    assert model.calls("plan") == 2
    # read_dir depended only on find_dir: once find_dir is gone it is a reader that depends on nothing too
    assert out["plan"].ids() == ["write_hello_py"], out.get("error")
    assert out["plan"].get("write_hello_py").dependencies == []
    assert "removed the steps that only read (find_dir, read_dir)" in out["plan"].history[0].reason
    assert out["status"] == "completed", out.get("error")
    assert (ws / "hello.py").read_text() == "print('hi')\n"

    nameless = plan_of({"id": "do_it", "description": "Do the work", "tools": ["write_file"]})
    (tmp_path / "b").mkdir()
    out, model, ws = run(tmp_path / "b", PurposeScript(plan=nameless), task="Do the work", max_plan_attempts=2)
    assert model.calls("plan") == 2 and model.calls("execute") == 0
    assert out["status"] == "failed" and "declares no check" in out["report"]["error"]
    assert not list(ws.iterdir())


def test_a_step_that_only_uses_a_file_of_the_task_does_not_count_as_writing_it(tmp_path: Path) -> None:
    """The 0.5B's plan for "write data.csv ..., then avg.py that reads data.csv" had no step for data.csv: its step
    "Write avg.py that reads data.csv" counted as writing it. It is sent back; when the planner repeats it,
    planmode adds the step that writes data.csv before the step that reads it."""
    avg = {
        "id": "write_avg",
        "description": "Write avg.py that reads data.csv and prints the average",
        "tools": ["write_file"],
        "acceptance": "avg.py exists and `python avg.py` runs",
    }
    program = "print(sum(int(r.split(',')[1]) for r in open('data.csv').read().split()[1:]) / 3)\n"

    def execute(req: ScriptRequest) -> Any:
        if req.step_id == "write_data_csv":
            return writer("data.csv", "name,score\na,10\nb,20\nc,30\n")(req)
        return writer("avg.py", program)(req)

    task = "Write data.csv with three scores, then write avg.py that reads data.csv and prints the average"
    script = PurposeScript(plan=plan_of(avg), execute=execute)
    out, model, ws = run(tmp_path, script, task=task, max_plan_attempts=2)

    assert "no step writes data.csv" in retry_reasons(model)
    assert out["plan"].ids() == ["write_data_csv", "write_avg"]
    assert out["plan"].get("write_avg").dependencies == ["write_data_csv"]
    assert "added step 'write_data_csv' before 'write_avg', which uses it" in out["plan"].history[0].reason
    assert out["status"] == "completed", out.get("error")
    assert (ws / "data.csv").is_file()

    from planmode.adapters.small_models.coverage import plan_problems
    from planmode.state.models import Plan

    empty = tmp_path / "empty"
    empty.mkdir()
    writes_both = Step(**{**avg, "description": "Write data.csv, then avg.py that reads data.csv"})
    assert plan_problems(Plan(goal=task, steps=[writes_both]), workspace_tools(empty)) == []
    only_reads = Step(**avg)
    assert plan_problems(Plan(goal=task, steps=[only_reads]), workspace_tools(empty)) != []


def test_a_plan_that_writes_a_file_the_task_gives_to_read_is_sent_back_and_mended(tmp_path: Path) -> None:
    """A false "completed" on the 1.5B: for "Read names.txt, then write greet_all.py ...", told that its step that
    only read names.txt should be removed "or made a step that writes", its plan wrote names.txt with three names of
    its own, and greet_all.py greeted them. A step that writes a file the task gives to read is sent back; when the
    planner repeats it, planmode removes it. The task's names.txt is never written."""
    names = {
        "id": "write_names",
        "description": "Write names.txt with the list of names",
        "tools": ["write_file"],
        "acceptance": "names.txt exists",
    }
    greet = {
        "id": "write_greet_all",
        "description": "Write greet_all.py that prints 'Hi ' followed by each name in names.txt",
        "dependencies": ["write_names"],
        "tools": ["write_file"],
        "acceptance": "greet_all.py exists and `python greet_all.py` runs",
    }
    program = "for name in open('names.txt').read().split():\n    print('Hi ' + name)\n"

    def execute(req: ScriptRequest) -> Any:
        if req.step_id == "write_names":
            return writer("names.txt", "John\nJane\n")(req)
        return writer("greet_all.py", program)(req)

    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "names.txt").write_text("Ada\nGrace\n")
    task = "Read names.txt, then write greet_all.py that prints 'Hi ' followed by each name in names.txt."
    out, model, ws = run(tmp_path, PurposeScript(plan=plan_of(names, greet), execute=execute), task=task)
    assert "step 'write_names' writes names.txt, a file the task gives to read" in retry_reasons(model)
    assert out["plan"].ids() == ["write_greet_all"] and out["plan"].get("write_greet_all").dependencies == []
    assert "removed the steps that wrote a file the task gives to read (write_names)" in out["plan"].history[0].reason
    assert out["status"] == "completed", out.get("error")
    assert (ws / "names.txt").read_text() == "Ada\nGrace\n"

    from planmode.adapters.small_models.coverage import plan_problems
    from planmode.state.models import Plan

    fresh = tmp_path / "fresh"  # before the run: greet_all.py is still to write
    fresh.mkdir()
    (fresh / "names.txt").write_text("Ada\n")
    reader = Step(id="read_names", description="Read names.txt", tools=["read_file"], acceptance="")
    written = Step(**greet | {"dependencies": []})
    problems = plan_problems(Plan(goal=task, steps=[reader, written]), workspace_tools(fresh))
    assert problems == [
        "step 'read_names' only reads (read_file); looking around was done before planning: remove it"
    ]  # no "make it a step that writes": every file of the task has its writer
    fix = "calc.py has a bug: double(x) should return x * 2. Fix it."
    (ws / "calc.py").write_text("def double(x):\n    return x + 2\n")
    fixing = Step(id="fix", description="Fix calc.py", tools=["write_file"], acceptance="calc.py exists")
    assert plan_problems(Plan(goal=fix, steps=[fixing]), workspace_tools(ws)) == []  # a file to change, not given


@pytest.mark.parametrize(
    ("goal", "given"),
    [
        (
            "Read names.txt, then write greet_all.py that prints 'Hi ' followed by each name in names.txt.",
            ["names.txt"],
        ),
        ("Read config.json and print its port from show.py", ["config.json"]),
        ("Fix the bug in calc.py so that double(x) returns x * 2.", []),  # "in calc.py", in a clause that fixes it
        ("calc.py has a bug: double(x) should return x * 2. Fix it, then write check.py.", []),
        ("Read config.json, then update the port in config.json to 9000.", []),
        ("Change the port in config.json to 9000, then write show.py that reads config.json", []),
        ("Read missing.txt, then write out.py", []),  # not in the workspace
        ("Read names.txt, then add Bob to it.", []),  # a pronoun in a clause that changes
        ("Read config.json and set its port to 9000.", []),
        ("Read names.txt, then update them.", []),
        ("Read names.txt, then write greet.py that prints each name in it.", ["names.txt"]),  # "it" after greet.py
        ("Read names.txt and print it, then write out.py.", ["names.txt"]),  # printing it changes nothing
        ("Read names.txt, then write greet.py; fix it if it fails.", ["names.txt"]),
        ("Read names.txt and add up the numbers in it, then write total.py.", ["names.txt"]),  # "in it": read
    ],
)
def test_the_files_a_task_gives_to_read_are_those_it_only_reads(tmp_path: Path, goal: str, given: list[str]) -> None:
    from planmode.adapters.small_models.files import given_files

    for name in ("names.txt", "config.json", "calc.py"):
        (tmp_path / name).write_text("x\n")
    assert given_files(goal, tmp_path) == given


@pytest.mark.parametrize(
    ("goal", "changed"),
    [
        (
            "calc.py has a bug: double(x) should return x * 2. Fix it, then write check.py that imports calc.",
            ["calc.py"],
        ),
        ("Fix the bug in calc.py so that double(x) returns x * 2.", ["calc.py"]),
        ("Change the port in config.json to 9000, then write show.py that reads config.json", ["config.json"]),
        ("Read names.txt, then update them.", ["names.txt"]),
        ("Read names.txt, then write greet_all.py that prints each name in names.txt.", []),
        ("Read names.txt and add up the numbers in it, then write total.py.", []),
        ("Write check.py that imports calc.py and prints double(21).", []),
        ("Fix the bug in missing.py.", []),  # not in the workspace: a new file, `deliverables`
    ],
)
def test_the_files_a_task_says_to_fix_or_change_are_its_to_produce(
    tmp_path: Path, goal: str, changed: list[str]
) -> None:
    from planmode.adapters.small_models.files import changed_files

    for name in ("names.txt", "config.json", "calc.py"):
        (tmp_path / name).write_text("x\n")
    assert changed_files(goal, tmp_path) == changed


def test_a_plan_that_never_changes_the_file_the_task_fixes_is_mended(tmp_path: Path) -> None:
    """The 1.5B's plan for "calc.py has a bug ... Fix it, then write check.py" had an "identify_bug" step with no
    tool and a step for check.py: nothing changed calc.py, and the run failed. The file the task fixes is one the
    plan must write: the plan is sent back naming it, and when the planner repeats it, the step that names it gets
    the write tool."""
    task = "calc.py has a bug: double(x) should return x * 2. Fix it, then write check.py that prints double(21)."
    identify = {
        "id": "identify_bug",
        "description": "Identify the bug in double function in calc.py",
        "tools": [],
        "acceptance": "double function in calc.py is updated to return x * 2",
    }
    check = {
        "id": "write_check",
        "description": "Write check.py that imports calc and prints double(21)",
        "dependencies": ["identify_bug"],
        "tools": ["write_file"],
        "acceptance": "check.py exists and `python check.py` runs",
    }
    files = {
        "identify_bug": ("calc.py", "def double(x):\n    return x * 2\n"),
        "write_check": ("check.py", "import calc\nprint(calc.double(21))\n"),
    }

    def execute(req: ScriptRequest) -> Any:
        return writer(*files[req.step_id or ""])(req)

    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "calc.py").write_text("def double(x):\n    return x + 2\n")
    script = PurposeScript(plan=plan_of(identify, check), execute=execute, reflect=GIVE_UP)
    out, model, ws = run(tmp_path, script, task=task, max_plan_attempts=2)

    assert "no step writes calc.py" in retry_reasons(model)
    assert "write_file" in out["plan"].get("identify_bug").tools
    assert out["status"] == "completed", out.get("error")
    assert (ws / "calc.py").read_text() == "def double(x):\n    return x * 2\n"


_TOKENS = ["Read ", "read ", "Fix ", "update ", "then ", "in ", "of ", "each ", "write ", "x.py", "names.txt"]
_TOKENS += ["calc.py", "data/in.csv", " ", ", ", ". ", "; ", ": ", "and ", "from ", "Import ", "runs ", "qq"]
_TOKENS += ["it ", "to it", "its ", "add "]


def _words_before(text: str, at: int) -> list[str]:
    import re

    return [w.lower() for w in re.findall(r"[A-Za-z]+", text[:at])[-2:]]


@given(st.lists(st.sampled_from(_TOKENS), max_size=40))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_file_readers_read_a_text_once_and_say_what_they_said_before(tmp_path: Path, tokens: list[str]) -> None:
    """`file_mentions`, `given_files` and `deliverables` read each file name's words before it from one pass over
    the text (they re-read the whole text before each name: quadratic). Against that former definition, written
    out here, on random texts of the words they look at: the same answers."""
    import re

    from planmode.adapters.small_models import files

    text = "".join(tokens)
    for name in ("names.txt", "calc.py"):
        (tmp_path / name).write_text("x\n")
    found = [(m.group(1), m.start()) for m in files._FILE.finditer(text)]
    unused = [(n, at) for n, at in found if not any(w in files._USED for w in _words_before(text, at))]
    assert files.file_mentions(text, used=False) == unused
    wanted = [n for n, at in found if not any(w in files._NOT_PRODUCED for w in _words_before(text, at))]
    wanted = [n for n in dict.fromkeys(wanted) if not (tmp_path / n).exists()]
    assert files.deliverables(text, tmp_path) == wanted
    reads: dict[str, list[bool]] = {}
    for n, at in found:
        starts = [c.end() for c in files._CLAUSE_START.finditer(text[:at])]
        clause = {w.lower() for w in re.findall(r"[A-Za-z]+", text[:at][starts[-1] if starts else 0 :])}
        read = any(w in files._READ_ONLY for w in _words_before(text, at)) and not clause & files._CHANGES
        end = at + len(n)
        later = [a for _, a in found if a > at]
        gap = text[end : later[0] if later else len(text)]
        for p in re.finditer(r"\b(?:it|its|them)\b", gap, re.IGNORECASE):  # a pronoun in a clause that changes
            said = text[: end + p.start()]
            ends = [c.end() for c in files._CLAUSE_START.finditer(said)]
            since = max(ends[-1] if ends else 0, end)
            last = [w.lower() for w in re.findall(r"[A-Za-z]+", said)][-1:]
            clause = {w.lower() for w in re.findall(r"[A-Za-z]+", text[since : end + p.start()])}
            if (last and last[0] in files._CHANGES) or (last == ["to"] and clause & files._CHANGES):
                read = False
        reads.setdefault(n, []).append(read)
    assert files.given_files(text, tmp_path) == [n for n, r in reads.items() if all(r) and (tmp_path / n).is_file()]


def test_a_text_of_thousands_of_file_names_is_read_in_linear_time(tmp_path: Path) -> None:
    """An acceptance of 12,000 characters of file names took 12 s to verify (each name re-read the text before
    it); 100,000 characters here. The bound is for a hang, not a measure of speed."""
    import time

    from planmode.adapters.small_models.files import changed_files, deliverables, file_mentions, given_files

    text = "Read names.txt then fix x.py, " * 3_400
    (tmp_path / "names.txt").write_text("x\n")
    started = time.monotonic()
    assert len(file_mentions(text, used=False)) == 3_400 and deliverables(text) == ["x.py"]
    assert given_files(text, tmp_path) == []  # "fix" in the clause of each later mention
    assert changed_files(text, tmp_path) == ["names.txt"]  # the same "fix": from the second mention on
    assert changed_files("names.txt" + " to it" * 20_000 + " fix", tmp_path) == []  # no verb before any "to it"
    assert time.monotonic() - started < 10


GREET_ALL = {
    "id": "write_greet_all",
    "description": "Write greet_all.py that prints 'Hi ' followed by each name in names.txt",
    "tools": ["write_file"],
    "acceptance": "greet_all.py exists and `python greet_all.py` runs",
}
GREET_PROGRAM = "for name in open('names.txt').read().split():\n    print('Hi ' + name)\n"
GREET_TASK = "Read names.txt, then write greet_all.py that prints 'Hi ' followed by each name in names.txt."


def test_a_write_to_a_file_the_task_gives_to_read_is_refused_where_the_step_runs(tmp_path: Path) -> None:
    """Where the step runs, a call that writes a file the task only reads is refused (the plan check is advice;
    this is the guarantee): the step writing greet_all.py first rewrote names.txt, and names.txt stays the task's."""
    seen: list[str] = []

    def execute(req: ScriptRequest) -> Any:
        results = req.tool_results()
        seen.extend(str(r.content) for r in results)
        if not results:
            return {"tool_calls": [tool_call("write_file", path="names.txt", content="John\n")]}
        if len(results) == 1:
            return {"tool_calls": [tool_call("write_file", path="greet_all.py", content=GREET_PROGRAM)]}
        return "done"

    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "names.txt").write_text("Ada\nGrace\n")
    out, _, ws = run(tmp_path, PurposeScript(plan=plan_of(GREET_ALL), execute=execute), task=GREET_TASK)
    assert (ws / "names.txt").read_text() == "Ada\nGrace\n"
    assert any(
        "refused: names.txt is the work of a step that is done, or a file the task gives to read" in t for t in seen
    )
    assert any("write this step's own file, greet_all.py, with write_file)" in t for t in seen), seen  # by name
    assert out["status"] == "completed", out.get("error")


def test_a_repair_step_whose_own_file_the_task_gives_to_read_may_not_write_it(tmp_path: Path) -> None:
    """A step a reflection adds is not plan-checked: "Write names.txt with the names John and Jane", added after the
    greeting step failed, named the task's names.txt as its own file, and the own-file exemption let it overwrite
    the task's names. Where the step runs, a file the task gives to read is refused to every step."""
    seen: list[str] = []
    greets = {"n": 0}

    def execute(req: ScriptRequest) -> Any:
        results = req.tool_results()
        seen.extend(str(r.content) for r in results)
        if req.step_id == "write_names":
            if not results:
                return {"tool_calls": [tool_call("write_file", path="names.txt", content="John\nJane\n")]}
            return "done"
        if not results:
            greets["n"] += 1
            content = "print(\n" if greets["n"] == 1 else GREET_PROGRAM  # the first attempt does not compile
            return {"tool_calls": [tool_call("write_file", path="greet_all.py", content=content)]}
        return "done"

    reflect = {
        "assessment": "needs_adjustment",
        "reasoning": "greet_all.py needs names",
        "add_steps": [
            {
                "id": "write_names",
                "description": "Write names.txt with the names John and Jane",
                "acceptance": "names.txt exists",
            }
        ],
        "update_steps": [{"id": "write_greet_all", "dependencies": ["write_names"], "status": "pending"}],
    }
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "names.txt").write_text("Ada\nGrace\n")
    script = PurposeScript(plan=plan_of(GREET_ALL), execute=execute, reflect=[reflect, GIVE_UP])
    out, model, ws = run(tmp_path, script, task=GREET_TASK, max_reflections=2)

    assert model.calls("reflect") >= 1 and "write_names" in out["plan"].ids(), out["plan"].ids()
    assert (ws / "names.txt").read_text() == "Ada\nGrace\n"
    assert any("a file the task gives to read" in t for t in seen), seen


@pytest.mark.parametrize(
    ("program", "completed"),
    [(GREET_PROGRAM, True), ("for n in open('names.txt'):\n    print('Hi ', n.strip())\n", False)],
)
def test_a_script_that_prints_a_text_before_each_line_of_a_file_is_held_to_it(
    tmp_path: Path, program: str, completed: bool
) -> None:
    """Round 12's false claim: for "prints 'Hi ' followed by each name in names.txt", the 1.5B's greet_all.py
    printed "Hi  Ada" (``print('Hi ', name)``), its acceptance said only "runs with the expected output", the judge
    passed it, and the run ended `completed`. The task's text and the file's lines give the output: a run that
    prints otherwise fails, naming both."""
    step = GREET_ALL | {"acceptance": "greet_all.py exists and runs with the expected output"}
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "names.txt").write_text("Ada\nGrace\nLinus\n")
    script = PurposeScript(plan=plan_of(step), execute=writer("greet_all.py", program), reflect=GIVE_UP)
    out, _, _ = run(tmp_path, script, task=GREET_TASK)

    assert (out["status"] == "completed") is completed, out.get("error")
    if not completed:
        error = out["plan"].get("write_greet_all").error or ""
        assert "it printed 'Hi  Ada\\nHi  Grace\\nHi  Linus'" in error, error
        assert "'Hi ' followed by each line of names.txt is 'Hi Ada\\nHi Grace\\nHi Linus'" in error, error
        # the fix named (round 15's greet_names: told only the two outputs, the 1.5B broke the script)
        assert "print() puts a space between its arguments, so print('Hi ', name) prints two spaces" in error


def test_a_text_of_thousands_of_followed_by_each_clauses_is_read_in_linear_time(tmp_path: Path) -> None:
    """Each clause looked up what the text says of the script again (64 s at 84,000 characters); 210,000 here.
    The bound is for a hang, not a measure of speed."""
    import time

    from planmode.adapters.small_models.evidence import _each_line_printed

    (tmp_path / "a.txt").write_text("1\n2\n")
    started = time.monotonic()
    text = "prints 'x' followed by each line in a.txt " * 5_000
    assert _each_line_printed([text], "g.py", "x1\nx2", tmp_path) is None
    assert _each_line_printed([text], "g.py", "x1\nx3", tmp_path) == (
        "it printed 'x1\\nx3'; 'x' followed by each line of a.txt is 'x1\\nx2'"
    )
    assert time.monotonic() - started < 10


def test_a_task_that_changes_the_file_it_reads_by_a_pronoun_lets_its_step_write_it(tmp_path: Path) -> None:
    """For "Read names.txt, then add Bob to it", names.txt is the file to change, not one the task gives to read, so
    neither the plan check nor the step's tool gate refuses the step that adds Bob to it."""
    adding = {
        "id": "add_bob",
        "description": "Add Bob to names.txt",
        "tools": ["write_file"],
        "acceptance": "names.txt exists",
    }

    def execute(req: ScriptRequest) -> Any:
        if not req.tool_results():
            return {"tool_calls": [tool_call("write_file", path="names.txt", content="Ada\nGrace\nBob\n")]}
        return "done"

    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "names.txt").write_text("Ada\nGrace\n")
    script = PurposeScript(plan=plan_of(adding), execute=execute, reflect=GIVE_UP)
    out, model, ws = run(tmp_path, script, task="Read names.txt, then add Bob to it.")

    assert out["status"] == "completed", out.get("error")
    assert (ws / "names.txt").read_text() == "Ada\nGrace\nBob\n" and model.calls("plan") == 1


# -- finalize states only what the record shows -------------------------------------------------------------


def test_a_run_whose_deliverables_are_missing_is_not_completed(tmp_path: Path) -> None:
    """A custom executor that reports success and writes nothing, on a step whose acceptance names no file: the
    steps pass, but the file the task asks for does not exist."""

    def claims(step: Step, ctx: Any) -> str:
        return "Created mathx.py."

    plan = plan_of(write_step("the module is written"))
    out, model, ws = run(tmp_path, PurposeScript(plan=plan, final="Created mathx.py."), executor=claims)

    assert out["plan"].get("write_mathx").status.value == "done"
    assert out["status"] == "failed"
    error = out["report"]["error"]
    assert "mathx.py" in error and "not in the workspace" in error
    assert model.calls("final") == 0
    assert not (ws / "mathx.py").exists()


@pytest.mark.parametrize(
    ("demo_acceptance", "check", "later", "error"),
    [
        (  # the 1.5B's round at aaa6ec7: a repair step rewrote demo.py as a test that prints nothing, and completed
            "demo.py exists and `python demo.py` runs with the expected output.",
            "demo.py exists",
            "from rev import reverse\nassert reverse('abc') == 'cba'\n",
            "`python demo.py` prints nothing now (step 'write_demo' says it prints)",
        ),
        (
            "`python demo.py` prints 'cba'",
            "demo.py exists",
            "from rev import reverse\nprint(reverse('xyz'))\n",
            "`python demo.py` prints 'cba' (step 'write_demo''s acceptance) fails now: it printed 'zyx', not 'cba'",
        ),
        ("`python demo.py` prints 'cba'", "demo.py exists", "from rev import reverse\nprint(reverse('abc'))\n", None),
    ],
)
def test_a_run_whose_later_step_changes_what_a_done_step_printed_is_not_completed(
    tmp_path: Path, demo_acceptance: str, check: str, later: str, error: str | None
) -> None:
    """Each command a done step's acceptance ran is run again at the end; a step that said its script prints (in
    its description or acceptance) is held to that there too: silent now, or not printing the quoted text, and the
    run is not completed. The 1.5B's reflection added a step that rewrote a done demo.py as an assert; the run
    claimed the task done while demo.py printed nothing."""
    steps = (
        {
            "id": "write_rev",
            "description": "Write rev.py with reverse(s)",
            "tools": ["write_file"],
            "acceptance": "rev.py exists",
        },
        {
            "id": "write_demo",
            "description": "Write demo.py that imports rev.py and prints reverse('abc').",
            "tools": ["write_file"],
            "acceptance": demo_acceptance,
            "dependencies": ["write_rev"],
        },
        {
            "id": "add_check",
            "description": "Add a check after writing the code in demo.py",
            "tools": ["write_file"],
            "acceptance": check,
            "dependencies": ["write_demo"],
        },
    )
    files = {
        "write_rev": ("rev.py", "def reverse(s):\n    return s[::-1]\n"),
        "write_demo": ("demo.py", "from rev import reverse\nprint(reverse('abc'))\n"),
        "add_check": ("demo.py", later),
    }

    def execute(req: ScriptRequest) -> Any:
        return writer(*files[req.step_id or ""])(req)

    task = "Write rev.py with reverse(s) and demo.py that prints reverse('abc')"
    out, _, _ = run(tmp_path, PurposeScript(plan=plan_of(*steps), execute=execute), task=task)

    assert [s.status.value for s in out["plan"].steps] == ["done", "done", "done"]
    if error is None:
        assert out["status"] == "completed", out.get("error")
    else:
        assert out["status"] == "failed" and error in out["report"]["error"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_run_whose_later_step_breaks_what_a_done_step_ran_is_not_completed(tmp_path: Path, mode: str) -> None:
    """Each step is verified when it is done; a later step can still break it (rewrite the module a done step's
    script imports). "Completed" means every command the done steps' acceptance ran still runs at the end."""
    steps = (
        {
            "id": "write_lib",
            "description": "Write lib.py with f()",
            "tools": ["write_file"],
            "acceptance": "lib.py exists",
        },
        {
            "id": "write_app",
            "description": "Write app.py that imports lib and prints f()",
            "tools": ["write_file"],
            "acceptance": "app.py exists and `python app.py` runs",
            "dependencies": ["write_lib"],
        },
        {
            "id": "rewrite_lib",
            "description": "Rewrite lib.py with g() instead",
            "tools": ["write_file"],
            "acceptance": "lib.py exists",
            "dependencies": ["write_app"],
        },
    )
    files = {
        "write_lib": ("lib.py", "def f():\n    return 1\n"),
        "write_app": ("app.py", "import lib\nprint(lib.f())\n"),
        "rewrite_lib": ("lib.py", "def g():\n    return 2\n"),
    }

    def execute(req: ScriptRequest) -> Any:
        return writer(*files[req.step_id or ""])(req)

    task = "write lib.py and app.py"
    out, _, _ = run(tmp_path, PurposeScript(plan=plan_of(*steps), execute=execute), task=task, mode=mode)

    assert [s.status.value for s in out["plan"].steps] == ["done", "done", "done"]
    assert out["status"] == "failed"
    error = out["report"]["error"]
    assert "`python app.py` (step 'write_app''s acceptance) fails now" in error
    assert "AttributeError" in error

    files["rewrite_lib"] = ("lib.py", "def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    (tmp_path / "b").mkdir()
    out, _, _ = run(tmp_path / "b", PurposeScript(plan=plan_of(*steps), execute=execute), task=task, mode=mode)
    assert out["status"] == "completed", out.get("error")


def test_the_end_of_run_recheck_never_repeats_a_done_steps_effect_in_the_workspace(tmp_path: Path) -> None:
    """The re-check at the end runs the done steps' commands again: in a copy of the workspace. A script that
    appends a line each time it runs left one line (its verification's), not two."""
    step = write_step("log.py exists and `python log.py` runs")
    step["description"] = "Write log.py that appends a line to out.txt"
    appender = "with open('out.txt', 'a') as f:\n    f.write('ran\\n')\n"
    script = PurposeScript(plan=plan_of(step), execute=writer("log.py", appender))
    out, _, ws = run(tmp_path, script, task="write log.py")
    assert out["status"] == "completed", out.get("error")
    assert (ws / "out.txt").read_text() == "ran\n"  # verify ran it once; the re-check ran it elsewhere
    assert not list(tmp_path.glob("planmode-recheck-*"))


def test_the_final_answer_never_names_a_file_that_does_not_exist(tmp_path: Path) -> None:
    script = PurposeScript(
        plan=plan_of(write_step()),
        execute=writer("mathx.py", GOOD),
        final="Created mathx.py, along with a test file test_mathx.py.",  # the test file was never written
    )

    out, _, ws = run(tmp_path, script)

    answer = final_text(out)
    assert out["status"] == "completed", out.get("error")
    assert not (ws / "test_mathx.py").exists()
    assert "test_mathx.py" not in answer
    assert "write_mathx" in answer and "Files changed: mathx.py" in answer


# -- the parts ------------------------------------------------------------------------------------------------


def test_file_names_and_deliverables_are_read_from_the_task(tmp_path: Path) -> None:
    from planmode.adapters.small_models.files import deliverables, file_names

    assert file_names("create mathx.py and test_mathx.py (e.g. planmode.tools), then data/in.csv.") == [
        "mathx.py",
        "test_mathx.py",
        "data/in.csv",
    ]
    assert deliverables("read data.csv and write avg.py") == ["avg.py"]
    (tmp_path / "data.csv").write_text("a\n1\n")
    assert deliverables("write avg.py that averages a column of data.csv", tmp_path) == ["avg.py"]  # an input
    (tmp_path / "utils.py").write_text("")
    assert deliverables("fix utils.py and add test_utils.py", tmp_path) == ["test_utils.py"]
    assert deliverables("delete old.py") == []


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_write_step_answered_in_words_is_told_once_to_call_the_tool(tmp_path: Path, mode: str) -> None:
    """Qwen2.5-Coder-1.5B answered a write step with 'use the write_file tool with the content and path'. Within
    the same attempt the model is told to call the tool, and the write it then makes completes the step."""
    told: list[str] = []

    def execute(req: ScriptRequest) -> Any:
        last = str(req.messages[-1].content)
        if last.startswith("Nothing was written"):
            told.append(last)
            return {"tool_calls": [tool_call("write_file", path="mathx.py", content=GOOD)]}
        if req.tool_results():
            return "wrote mathx.py"
        return "To write mathx.py, use the `write_file` tool with the content and path arguments."

    out, model, ws = run(tmp_path, PurposeScript(plan=plan_of(write_step()), execute=execute), mode=mode)

    assert out["status"] == "completed", out.get("error")
    assert out["plan"].get("write_mathx").attempts == 1
    assert told == [
        "Nothing was written: this step changes files with write_file. Call write_file now, with the whole "
        "content; do not describe the call or ask for the tool, it is available. Or answer with only the whole "
        "content of mathx.py in one fenced code block, and planmode writes it to mathx.py with write_file."
    ]
    assert model.calls("execute") == 2  # the answer in words, the write (the step's file: the step ends there)
    assert (ws / "mathx.py").read_text() == GOOD


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_write_steps_file_answered_in_a_fence_is_written_with_the_steps_tool(tmp_path: Path, mode: str) -> None:
    """Qwen2.5-Coder-1.5B answered write steps with the code in words and a fence, even after being told to call
    the tool. After the nudge, a reply that is the step's one file in one fence is a call of the step's write tool
    (path from the approved step, never from the reply), run through the same gate and recorded as a tool run."""

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "done"
        if str(req.messages[-1].content).startswith("Nothing was written"):
            return f"Here is the file:\n```python\n{GOOD}```\nRun it with:\n```bash\npython mathx.py\n```"
        return f"To create mathx.py, write:\n```python\n{GOOD}```"  # the first answer is never written

    out, model, ws = run(tmp_path, PurposeScript(plan=plan_of(write_step()), execute=execute), mode=mode)

    assert out["status"] == "completed", out.get("error")
    step = out["plan"].get("write_mathx")
    assert step.attempts == 1
    assert (ws / "mathx.py").read_text() == GOOD
    assert sorted(p.name for p in ws.iterdir()) == ["mathx.py"]
    assert model.calls("execute") == 2  # the answer in words, the fenced file (written: the step ends there)
    assert (step.result or "").startswith("Created mathx.py")  # the write tool's own result: it ran


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_step_called_by_its_own_name_writes_its_file_in_the_first_turn(tmp_path: Path, mode: str) -> None:
    """Qwen2.5-Coder-1.5B called the step (write_test_primes) with the file's content and no path, four times in a
    run, and was told each time that no such tool exists. In a step that produces one file, that call is its write
    tool's call on that file: written in the first turn, no nudge."""
    call = '```json\n{"name": "write_mathx", "arguments": {"content": ' + json.dumps(GOOD) + "}}\n```"
    script = PurposeScript(plan=plan_of(write_step()), execute=lambda req: "done" if req.tool_results() else call)

    out, model, ws = run(tmp_path, script, mode=mode)

    assert out["status"] == "completed", out.get("error")
    assert (ws / "mathx.py").read_text() == GOOD
    assert model.calls("execute") == 1  # the call: the step's file written, the step ends


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_step_called_by_its_own_name_writes_where_the_call_says_when_the_step_names_two_files(
    tmp_path: Path, mode: str
) -> None:
    """The 1.5B called write_count_lines with count_lines.py and its content eight times in a run, each refused as
    an unknown tool. In a step that names two files to write, which one the call writes is not the step's to say:
    the call is its write tool's call on the path it names, through the same gate."""
    script_py = "print(len(open('notes.txt').read().splitlines()))\n"
    call = {"name": "write_count", "args": {"path": "count_lines.py", "content": script_py}}
    step = write_step("count_lines.py exists", description="Write count_lines.py and notes.txt")
    step["id"] = "write_count"
    script = PurposeScript(
        plan=plan_of(step), execute=lambda req: "done" if req.tool_results() else {"tool_calls": [call]}
    )

    out, model, ws = run(tmp_path, script, task="write count_lines.py", mode=mode)
    assert out["status"] == "completed", out.get("error")

    assert (ws / "count_lines.py").read_text() == script_py
    ran = [m for r in model.requests if r.purpose == "execute" for m in r.tool_results()]
    assert ran and ran[0].name == "write_file" and ran[0].status != "error"
    assert model.calls("execute") == 2


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("tools", [["edit_file"], ["write_file", "edit_file"]])
def test_a_call_named_after_the_step_with_an_edits_arguments_is_a_call_of_the_edit_tool(
    tmp_path: Path, mode: str, tools: list[str]
) -> None:
    """The 1.5B called ``update_double_function`` with path, old_string and new_string four times for a step that
    declares edit_file: each refused as an unknown tool, the fix never made. A call named after the step whose
    arguments fit exactly one declared write tool is that tool's call, through the same gate; arguments that fit
    no declared tool (a description; a whole-file write for an edit-only step) are still refused."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "calc.py").write_text("def double(x):\n    return x + 2\n")
    (tmp_path / "ws" / "use.py").write_text("import calc\nprint(calc.double(21))\n")
    calls = [{"name": "fix_calc", "args": {"path": "calc.py", "description": "return x * 2"}}]
    if tools == ["edit_file"]:  # fits write_file, which the step does not declare
        calls.append({"name": "fix_calc", "args": {"path": "calc.py", "content": "def double(x):\n    return 0\n"}})
    calls.append({"name": "fix_calc", "args": {"path": "calc.py", "old_string": "x + 2", "new_string": "x * 2"}})
    step = {
        "id": "fix_calc",
        "description": "Fix double in calc.py to return x * 2",
        "tools": tools,
        "acceptance": "`python use.py` prints '42'",
    }
    script = PurposeScript(
        plan=plan_of(step), execute=lambda req: "done" if req.tool_results() else {"tool_calls": calls}
    )

    out, model, ws = run(tmp_path, script, task="fix calc.py", mode=mode)

    assert out["status"] == "completed", out.get("error")
    assert (ws / "calc.py").read_text() == "def double(x):\n    return x * 2\n"
    ran = [m for r in model.requests if r.purpose == "execute" for m in r.tool_results()]
    refused = [("fix_calc", "error")] * (len(calls) - 1)
    assert [(m.name, m.status) for m in ran[: len(calls)]] == [*refused, ("edit_file", "success")]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_step_cannot_rewrite_the_file_of_a_done_step(tmp_path: Path, mode: str) -> None:
    """The 1.5B, in the step that writes count_lines.py, called write_file on notes.txt three times: the done
    step's three lines became four and the task failed on its first file. Where the step runs, a write to a
    file a done step produced and this step does not is refused (the model is told); its own file is written."""
    notes = {
        "id": "write_notes",
        "description": "Write notes.txt with three lines",
        "tools": ["write_file"],
        "acceptance": "notes.txt exists",
    }
    count = {
        "id": "write_count",
        "description": "Write count_lines.py that prints the number of lines in notes.txt",
        "dependencies": ["write_notes"],
        "tools": ["write_file", "edit_file"],
        "acceptance": "`python count_lines.py` prints '3'",
    }
    source = "print(len(open('notes.txt').read().splitlines()))\n"

    def execute(req: ScriptRequest) -> Any:
        if "Step `write_notes`" in req.text():
            return (
                "done"
                if req.tool_results()
                else {"tool_calls": [tool_call("write_file", path="notes.txt", content="a\nb\nc\n")]}
            )
        if req.tool_results():  # told the two were refused: its own file
            return {"tool_calls": [tool_call("write_file", path="count_lines.py", content=source)]}
        return {
            "tool_calls": [
                tool_call("write_file", path="notes.txt", content="x\n"),
                tool_call("edit_file", path="./notes.txt", old_string="a", new_string="z"),
                tool_call("write_file", path="sub/../notes.txt", content="y\n"),
                # a call named after the step writes the step's file, but not over a done step's file it names
                tool_call("write_count", path="notes.txt", content="Line 1\nLine 2\n"),
            ]
        }

    script = PurposeScript(plan=plan_of(notes, count), execute=execute, reflect=GIVE_UP)
    out, model, ws = run(tmp_path, script, task="write notes.txt and count_lines.py", mode=mode)

    assert out["status"] == "completed", out.get("error")
    assert (ws / "notes.txt").read_text() == "a\nb\nc\n"  # the done step's work, as it was
    assert (ws / "count_lines.py").read_text() == source
    ran = [
        m
        for r in model.requests
        if r.purpose == "execute" and "Step `write_count`" in r.text()
        for m in r.tool_results()
    ]
    assert [(m.name, m.status) for m in ran[:4]] == [
        ("write_file", "error"),
        ("edit_file", "error"),
        ("write_file", "error"),
        ("write_file", "error"),
    ]
    assert "refused: notes.txt is the work of a step that is done, or a file the task gives to read" in str(
        ran[0].content
    )


def test_done_files_are_the_done_steps_files_the_step_does_not_produce() -> None:
    from planmode.adapters.small_models.files import done_files
    from planmode.state.models import Plan, StepStatus

    def step(i: str, description: str, status: StepStatus = StepStatus.PENDING) -> Step:
        return Step(id=i, description=description, tools=["write_file"], status=status)

    done = [step("a", "Write notes.txt", StepStatus.DONE), step("b", "Write stats.py with mean", StepStatus.DONE)]
    plan = Plan(goal="g", version=1, steps=[*done, step("p", "Write later.py")])
    assert done_files(plan, step("c", "Write count.py that counts the lines in notes.txt")) == {"notes.txt", "stats.py"}
    assert done_files(plan, step("c", "Fix median() in stats.py")) == {"notes.txt"}  # its own file: a fix
    assert done_files(plan, step("c", "Update notes.txt and stats.py")) == frozenset()  # names both to change
    assert done_files(plan, done[0]) == {"stats.py"}  # a step is never kept from its own file


def test_a_call_named_after_a_reading_step_with_a_read_tools_arguments_reads(tmp_path: Path) -> None:
    """The 1.5B called ``read_data`` with read_file's arguments six times for a step that declares read_file, each
    refused as an unknown tool. A call that fits no declared tool (a write for a step that only reads) is still
    refused, and writes nothing."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "names.txt").write_text("Ada\n")
    calls = [
        {"name": "read_names", "args": {"path": "names.txt", "content": "Eve\n"}},
        {"name": "read_names", "args": {"path": "names.txt", "start_line": None, "end_line": None}},
    ]
    step = {"id": "read_names", "description": "Read names.txt", "tools": ["read_file"], "acceptance": ""}
    script = PurposeScript(
        plan=plan_of(step), execute=lambda req: "read it" if req.tool_results() else {"tool_calls": calls}
    )

    _, model, ws = run(tmp_path, script, task="read names.txt")

    ran = [m for r in model.requests if r.purpose == "execute" for m in r.tool_results()]
    assert [(m.name, m.status) for m in ran[:2]] == [("read_names", "error"), ("read_file", "success")]
    assert "Ada" in str(ran[1].content) and (ws / "names.txt").read_text() == "Ada\n"


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("name", ["main.py", "main"])
def test_a_call_named_after_the_file_it_writes_is_a_call_of_the_write_tool(
    tmp_path: Path, mode: str, name: str
) -> None:
    """The 0.5B wrote greet.py and main.py in one turn as calls named write_greet and "main.py" (later "main"),
    each with the path and the content: the second was refused as an unknown tool and main.py never written. A
    call to an unknown tool named after the file its path names, with a content, is the write tool's call of
    that path, through the same gate; a name that is not the file's is still refused."""
    greet = "def greet(name):\n    return 'Hello, ' + name + '!'\n"
    main = "import greet\nprint(greet.greet('Ada'))\n"
    calls = [
        {"name": "write_both", "args": {"path": "greet.py", "content": greet}},
        {"name": name, "args": {"path": "main.py", "content": main}},
        {"name": "other.py", "args": {"path": "main2.py", "content": main}},
    ]
    step = write_step("greet.py exists and main.py exists", description="Write greet.py and main.py")
    step["id"] = "write_both"
    script = PurposeScript(
        plan=plan_of(step), execute=lambda req: "done" if req.tool_results() else {"tool_calls": calls}
    )

    out, model, ws = run(tmp_path, script, task="write greet.py and main.py", mode=mode)

    assert out["status"] == "completed", out.get("error")
    assert (ws / "main.py").read_text() == main and (ws / "greet.py").read_text() == greet
    assert not (ws / "main2.py").exists()  # "other.py" is not the file it writes: an unknown tool, refused
    ran = [m for r in model.requests if r.purpose == "execute" for m in r.tool_results()]
    assert [m.name for m in ran[:3]] == ["write_file", "write_file", "other.py"]
    assert ran[2].status == "error"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_call_whose_name_mentions_its_file_or_holds_a_known_call_is_that_call(tmp_path: Path, mode: str) -> None:
    """The 0.5B called "Create mathx.py and its test" with the path and the content of mathx.py, then with
    ``{"write_file": {"path": ..., "content": ...}}``, and "pytest test_mathx.py" with test_mathx.py's: each refused
    as an unknown tool. A name that mentions the file its call writes, and a call held as the one argument of
    an unknown one, are the write tool's calls, through the same gate; "append main.py" is not a whole write."""
    greet = "def greet(name):\n    return 'Hello, ' + name + '!'\n"
    main = "import greet\nprint(greet.greet('Ada'))\n"
    calls = [
        {"name": "Create greet.py and its main", "args": {"path": "greet.py", "content": greet}},
        {"name": "Write both files", "args": {"write_file": {"path": "main.py", "content": main}}},
        {"name": "append main.py", "args": {"path": "main.py", "content": "junk\n"}},
        {"name": "pytest other.py", "args": {"path": "main2.py", "content": main}},
    ]
    reads = [{"name": "identify_bug", "args": {"function": "read_file", "path": "main.py"}}]  # the 1.5B's
    step = write_step("greet.py exists and main.py exists", description="Write greet.py and main.py")
    step["id"] = "write_both"
    script = PurposeScript(
        plan=plan_of(step),
        execute=lambda req: (
            {"tool_calls": reads if req.tool_results() else calls} if len(req.tool_results()) < 5 else "done"
        ),
    )

    out, model, ws = run(tmp_path, script, task="write greet.py and main.py", mode=mode)

    assert out["status"] == "completed", out.get("error")
    assert (ws / "main.py").read_text() == main and (ws / "greet.py").read_text() == greet
    assert not (ws / "main2.py").exists()
    ran = [r for r in model.requests if r.purpose == "execute"][-1].tool_results()  # the last turn's transcript
    assert [(m.name, m.status) for m in ran] == [
        ("write_file", "success"),
        ("write_file", "success"),
        ("append main.py", "error"),
        ("pytest other.py", "error"),
        ("read_file", "success"),
    ]
    assert "greet.greet('Ada')" in str(ran[4].content)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("name", ["write_file", "write_tests", "test_x.py"])
def test_a_write_whose_content_is_a_list_of_lines_writes_the_lines(tmp_path: Path, mode: str, name: str) -> None:
    """The 1.5B sent test_shapes.py's content as a list of lines (``["import pytest", "from shapes import ..."]``),
    and the call was refused. A list of strings sent as a write's content is the file's lines, whether the call
    names the write tool, the step or the file; a list of anything else is still refused."""
    lines = ["def test_x():", "    assert 1 + 1 == 2"]
    call = {"name": name, "args": {"path": "test_x.py", "content": lines}}
    step = write_step("test_x.py exists", description="Write test_x.py")
    step["id"] = "write_tests"
    script = PurposeScript(
        plan=plan_of(step), execute=lambda req: "done" if req.tool_results() else {"tool_calls": [call]}
    )

    out, _model, ws = run(tmp_path, script, task="write test_x.py", mode=mode)

    assert out["status"] == "completed", out.get("error")
    assert (ws / "test_x.py").read_text() == "def test_x():\n    assert 1 + 1 == 2\n"
    from planmode.adapters.small_models.calls import _text_content

    assert _text_content([1, 2]) is None and _text_content([]) is None and _text_content({"a": 1}) is None
    assert _text_content(["a\n", "b"]) == "a\nb\n"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_package_file_the_step_says_is_empty_is_written_empty_under_its_folder(tmp_path: Path, mode: str) -> None:
    """The 1.5B's step "Write empty __init__.py in util directory" (accepted by "util/__init__.py exists and is
    empty") called itself with the path alone six times, each refused for lack of a content; its next call, with
    an empty content, wrote a top-level __init__.py (the step's file read as "__init__.py"). A call named after
    the step with a path and no content writes the file empty when the step says it is empty, and the step's
    file is where its acceptance puts it."""
    call = {"name": "write_util_init", "args": {"path": "util/__init__.py"}}
    step = {
        "id": "write_util_init",
        "description": "Write empty __init__.py in util directory",
        "tools": ["write_file"],
        "acceptance": "util/__init__.py exists and is empty",
    }
    script = PurposeScript(
        plan=plan_of(step), execute=lambda req: "done" if req.tool_results() else {"tool_calls": [call]}
    )

    out, _model, ws = run(tmp_path, script, task="make the util package", mode=mode)

    assert out["status"] == "completed", out.get("error")
    assert (ws / "util" / "__init__.py").read_text() == "" and not (ws / "__init__.py").exists()

    # a step that does not say its file is empty: a call without a content writes nothing
    other = {
        **step,
        "id": "write_strings",
        "description": "Write strings.py in util",
        "acceptance": "util/strings.py exists",
    }
    bare = {"name": "write_strings", "args": {"path": "util/strings.py"}}
    script = PurposeScript(
        plan=plan_of(other), execute=lambda req: "done" if req.tool_results() else {"tool_calls": [bare]}
    )
    (tmp_path / "b").mkdir()
    out, _model, ws = run(
        tmp_path / "b", script, task="make the util package (util/__init__.py may be empty)", mode=mode
    )
    assert out["status"] == "failed" and not (ws / "util" / "strings.py").exists()

    # "is not empty" says the opposite: a call without a content writes nothing
    full = {**step, "id": "write_full", "acceptance": "util/__init__.py exists and is not empty"}
    full["description"] = "Write __init__.py in util directory"
    bare = {"name": "write_full", "args": {"path": "util/__init__.py"}}
    script = PurposeScript(
        plan=plan_of(full), execute=lambda req: "done" if req.tool_results() else {"tool_calls": [bare]}
    )
    (tmp_path / "c").mkdir()
    out, _model, ws = run(tmp_path / "c", script, task="make the util package", mode=mode)
    assert out["status"] == "failed" and not (ws / "util" / "__init__.py").exists()


HELLO_STEP = {
    "id": "write_hello",
    "description": "Write hello.py that prints hi",
    "tools": ["write_file"],
    "acceptance": "`python hello.py` prints 'hi'",
}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_step_file_written_under_a_folder_of_the_models_own_is_written_where_the_step_says(
    tmp_path: Path, mode: str
) -> None:
    """The 1.5B wrote src/hello.py and src/fizzbuzz.py for steps that write hello.py and fizzbuzz.py and run them
    at the top: an attempt lost each time. A write of the step's one file under a folder that is not in the
    workspace and that neither the step nor the goal names is the step's file."""
    call = {"name": "write_file", "args": {"path": "src/hello.py", "content": "print('hi')\n"}}
    script = PurposeScript(
        plan=plan_of(HELLO_STEP), execute=lambda req: "done" if req.tool_results() else {"tool_calls": [call]}
    )

    out, model, ws = run(tmp_path, script, task="write hello.py", mode=mode)
    assert model.calls("execute") == 1

    assert out["status"] == "completed", out.get("error")
    assert sorted(p.name for p in ws.iterdir()) == ["hello.py"]
    assert out["plan"].get("write_hello").attempts == 1


@pytest.mark.parametrize(
    ("task", "path", "made", "where"),
    [
        ("write hello.py in src", "src/hello.py", (), "src/hello.py"),  # the goal names the folder
        ("write hello.py", "src/hello.py", ("src",), "src/hello.py"),  # the folder is the workspace's
        ("write hello.py", "src/other.py", (), "src/other.py"),  # not the step's file
    ],
)
def test_a_write_under_a_folder_the_step_or_the_workspace_has_is_left_as_called(
    tmp_path: Path, task: str, path: str, made: tuple[str, ...], where: str
) -> None:
    call = {"name": "write_file", "args": {"path": path, "content": "print('hi')\n"}}
    script = PurposeScript(
        plan=plan_of(HELLO_STEP),
        execute=lambda req: "done" if req.tool_results() else {"tool_calls": [call]},
        reflect=GIVE_UP,
    )
    for folder in made:
        (tmp_path / "ws" / folder).mkdir(parents=True)
    _out, _model, ws = run(tmp_path, script, task=task)
    assert (ws / where).is_file() and not (ws / "hello.py").exists()


def test_a_fenced_answer_is_not_written_when_the_step_does_not_name_one_file(tmp_path: Path) -> None:
    """Two files in the step (or none): which one a fence is would be a guess, so nothing is offered or written."""
    fenced = f"```python\n{GOOD}```"
    told: list[str] = []

    def execute(req: ScriptRequest) -> Any:
        told.append(str(req.messages[-1].content))
        return fenced

    step = write_step("mathx.py and other.py exist", description="Write mathx.py and other.py")
    script = PurposeScript(plan=plan_of(step), execute=execute)
    out, model, ws = run(tmp_path, script, task="create mathx.py and other.py")
    assert told[1].startswith("Nothing was written")  # the nudge was given, without the offer, on every attempt
    assert model.calls("execute") == len(told) and all("fenced" not in t for t in told)
    assert not list(ws.iterdir())
    assert out["plan"].get("write_mathx").status.value == "failed"


def test_a_fenced_answer_is_written_only_by_a_write_tool_the_step_declares(tmp_path: Path) -> None:
    """A step that declares edit_file (no whole content) gets no offer, and a step that declares no write tool gets
    no nudge: its fenced answer is its result, and nothing is written."""
    fenced = f"```python\n{GOOD}```"
    step = write_step(tools=["edit_file"])
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "mathx.py").write_text("")  # an edit of a file that exists (of none, it may write it)
    out, model, ws = run(tmp_path, PurposeScript(plan=plan_of(step), execute=lambda req: fenced, reflect=GIVE_UP))
    asked = [r.messages[-1].content for r in model.requests if r.purpose == "execute"]
    assert len(asked) == 2 and "fenced" not in str(asked[-1])
    assert [p.name for p in ws.iterdir()] == ["mathx.py"] and (ws / "mathx.py").read_text() == ""

    (tmp_path / "b").mkdir()
    reader = {"id": "show", "description": "Show the code of add(a, b)", "tools": ["read_file"]}
    script = PurposeScript(plan=plan_of(reader), execute=lambda req: fenced)
    out, model, ws = run(tmp_path / "b", script, task="show the code of add(a, b)")
    assert model.calls("execute") == 1
    assert "return a + b" in (out["plan"].get("show").result or "")
    assert not list(ws.iterdir())


def test_the_nudge_stays_within_the_turn_bound_and_only_for_write_steps(tmp_path: Path) -> None:
    words = "I would write mathx.py."
    script = PurposeScript(plan=plan_of(write_step()), execute=lambda req: words, reflect=GIVE_UP)
    out, model, ws = run(tmp_path, script, max_executor_iterations=1)
    assert model.calls("execute") == 1  # one turn allowed: no nudge
    assert out["plan"].get("write_mathx").status.value == "failed"
    assert not list(ws.iterdir())

    reader = {"id": "look", "description": "Say what add(a, b) returns", "tools": ["read_file"]}
    (tmp_path / "b").mkdir()
    script = PurposeScript(plan=plan_of(reader), execute=lambda req: "add(a, b) returns a + b")
    out, model, _ = run(tmp_path / "b", script, task="say what add(a, b) returns")
    assert model.calls("execute") == 1  # not a write step: its answer in words is its result
    assert out["plan"].get("look").result == "add(a, b) returns a + b"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_acceptance_the_checks_decide_is_not_sent_to_the_judge(tmp_path: Path, mode: str) -> None:
    """Every clause is a file that exists or a command that runs: the checks decide, no model judges. Qwen2.5-
    Coder-1.5B's judge failed a step whose file existed and ran because 'the executor's report is empty'."""
    step = write_step("mathx.py exists and `python mathx.py` runs")
    script = PurposeScript(plan=plan_of(step), execute=writer("mathx.py", GOOD, then=""), verify={"passed": False})

    out, model, ws = run(tmp_path, script, mode=mode)

    assert out["status"] == "completed", out.get("error")
    assert model.calls("verify") == 0
    assert (ws / "mathx.py").read_text() == GOOD


def test_the_function_is_defined_without_a_file_is_looked_up_in_the_acceptances_one_file(tmp_path: Path) -> None:
    """The 1.5B's judge failed a right util/strings.py on "util/strings.py exists and the shout function is
    defined" ("The shout function is not defined in util/strings.py"): the clause names no file, so the check looked
    nowhere. It is looked up in the acceptance's one file; a file without it fails the step; and the judge's
    reason, had it been asked, is contradicted."""
    step = write_step("mathx.py exists and the add function is defined")
    script = PurposeScript(plan=plan_of(step), execute=writer("mathx.py", GOOD), verify={"passed": False})
    out, model, _ = run(tmp_path, script)
    assert out["status"] == "completed", out.get("error")
    assert model.calls("verify") == 0  # the checks decided

    (tmp_path / "b").mkdir()
    other = "def sub(a, b):\n    return a - b\n"
    script = PurposeScript(plan=plan_of(step), execute=writer("mathx.py", other), reflect=GIVE_UP)
    out, model, _ = run(tmp_path / "b", script)
    assert out["status"] == "failed" and model.calls("verify") == 0
    assert "add" in (out["plan"].get("write_mathx").error or "")

    from planmode.adapters.small_models.evidence import Check, Evidence

    found = Evidence(runs=[], files={"util/strings.py": "def shout(s): return s.upper() + '!'\n"}, checks=[])
    found.checks.append(Check("util/strings.py exists", True))
    said = "The shout function is not defined in util/strings.py. The file exists but the function is missing."
    assert "shout" in found.refutes(said, report_shown=False)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_first_line_the_task_gives_a_file_wins_over_the_acceptances(tmp_path: Path, mode: str) -> None:
    """A false "completed" on the 1.5B: the task said "README.md whose first line is # Counter", the plan's
    acceptance "'Counter' is the first line"; the right "# Counter" failed on it, the step then wrote "Counter" and
    passed. The task's first line is checked, and a first-line check of the acceptance that asks for another is
    dropped: "# Counter" passes, "Counter" fails."""
    step = {
        "id": "write_readme",
        "description": "Write README.md with the title 'Counter' and a first line '# Counter'",
        "tools": ["write_file"],
        "acceptance": "README.md exists and 'Counter' is the first line",
    }
    task = "Write README.md whose first line is # Counter, then stop."
    out, _, _ = run(
        tmp_path, PurposeScript(plan=plan_of(step), execute=writer("README.md", "# Counter\n")), task=task, mode=mode
    )
    assert out["status"] == "completed", out.get("error")

    (tmp_path / "b").mkdir()
    script = PurposeScript(plan=plan_of(step), execute=writer("README.md", "Counter\n"), reflect=GIVE_UP)
    out, _, _ = run(tmp_path / "b", script, task=task, mode=mode)
    assert out["status"] == "failed"
    assert "as the task says: the first line of README.md is '# Counter'" in (
        out["plan"].get("write_readme").error or ""
    )
    # and it says how: the 1.5B wrote its step's one line "# Counter 1 2 3 4 5" four times, told only that it was
    # not the task's first line
    assert "write '# Counter' alone on the first line of the file, then a line break" in (
        out["plan"].get("write_readme").error or ""
    )

    # words about the line, not the line: not a failure of its own (the judge reads the file)
    dated = {**step, "description": "Write README.md with the date first", "acceptance": "README.md exists"}
    (tmp_path / "c").mkdir()
    script = PurposeScript(plan=plan_of(dated), execute=writer("README.md", "2026-11-27\n"), verify={"passed": True})
    out, _, _ = run(tmp_path / "c", script, task="Write README.md whose first line is the date.", mode=mode)
    assert out["status"] == "completed", out.get("error")


def test_a_write_step_without_acceptance_is_settled_by_its_write_not_its_report(tmp_path: Path) -> None:
    """Qwen2.5-Coder-1.5B's repaired plan had a write step without acceptance; the step wrote list_primes.py and
    answered with nothing, and 'the step produced no output' failed it. Its write is its evidence; a step that
    declares no write tool is still judged on its answer."""
    from planmode.adapters.small_models.evidence import gather
    from planmode.state.graph_state import StepOutcome, ToolRun

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "list_primes.py").write_text("print(2)\n")
    tools = workspace_tools(ws)
    writer_step = Step(id="w", description="Write list_primes.py", tools=["write_file"])
    wrote = ToolRun(name="write_file", args='{"path": "list_primes.py"}', ok=True, result="Created list_primes.py")
    outcome = StepOutcome(step_id="w", ok=True, output="", tool_runs=[wrote], writes={str(ws / "list_primes.py"): "x"})
    assert gather(writer_step, outcome, tools).settles("")
    nothing = StepOutcome(step_id="w", ok=True, output="", tool_runs=[])
    assert not gather(writer_step, nothing, tools).settles("")  # no write: the check fails instead
    reader = Step(id="r", description="Say what list_primes.py prints", tools=["read_file"])
    assert not gather(reader, StepOutcome(step_id="r", ok=True, output="", tool_runs=[]), tools).settles("")


def test_a_write_step_of_the_full_plan_fallback_gets_acceptance_as_the_planners_would(tmp_path: Path) -> None:
    """The 1.5B's fallback plan (after its patches failed) had write steps with ``"acceptance": ""``; a patch's
    write step is sent back without acceptance and the planner's is mended, and so is the fallback's now."""
    first = write_step("mathx.py exists and `python mathx.py` runs")
    fallback = {"id": "rewrite_mathx", "description": "Write mathx.py again, correctly", "tools": ["write_file"]}
    script = PurposeScript(
        plan=[plan_of(first), plan_of(fallback)],
        execute=fixer("again"),
        reflect={"assessment": "needs_adjustment", "reasoning": "mathx.py does not compile"},
        patch="{not json",
    )

    out, model, ws = run(tmp_path, script, max_reflections=1)

    assert model.calls("plan") == 2  # the plan, then the fallback
    plan = out["plan"]
    assert plan.history[-1].source == "diff"
    assert plan.get("rewrite_mathx").acceptance == "mathx.py exists"
    assert "had no acceptance" in (plan.history[-1].reason or "")
    assert out["status"] == "completed", out.get("error")
    assert (ws / "mathx.py").read_text() == GOOD


def test_a_patch_that_lists_a_tool_as_a_dependency_is_read_as_the_model_meant_it(tmp_path: Path) -> None:
    """The 1.5B's reflection proposed ``"dependencies": ["write_file"]`` for the step it fixed, and the patch was
    refused: "depends on unknown step 'write_file'". A dependency that names a tool and no step is dropped."""
    fixed = {
        "id": "write_mathx",
        "description": "Write mathx.py again, with the colon",
        "dependencies": ["write_file"],
    }
    script = PurposeScript(
        plan=plan_of(write_step("mathx.py exists and `python mathx.py` runs")),
        execute=fixer("colon"),
        reflect={"assessment": "needs_adjustment", "reasoning": "a colon is missing", "update_steps": [fixed]},
    )

    out, model, ws = run(tmp_path, script, max_reflections=1)

    plan = out["plan"]
    assert out["status"] == "completed", out.get("error")
    assert model.calls("patch") == 0 and not plan.rejections  # the reflection's own patch applied
    assert plan.get("write_mathx").dependencies == []
    assert (ws / "mathx.py").read_text() == GOOD


def test_kept_runs_adds_back_only_the_runs_of_files_the_new_acceptance_drops() -> None:
    from planmode.adapters.small_models.coverage import kept_runs

    old = "test_shapes.py exists and `pytest test_shapes.py` passes"
    assert kept_runs(old, "test_shapes.py compiles") == (
        "test_shapes.py compiles and `pytest test_shapes.py` passes",
        ["pytest test_shapes.py"],
    )
    assert kept_runs(old, "`pytest test_shapes.py` passes") == ("`pytest test_shapes.py` passes", [])
    assert kept_runs("`python run.py` prints '16'", "") == ("`python run.py` runs", ["python run.py"])
    # a command with arguments of the model's own is not held to: a repair may drop it
    assert kept_runs("shapes.py exists and `python shapes.py area_square(3)` returns 9", "shapes.py exists") == (
        "shapes.py exists",
        [],
    )


def test_a_repair_that_drops_what_an_acceptance_ran_keeps_it(tmp_path: Path) -> None:
    """A false 'completed' on the 1.5B: its reflection changed write_test_shapes' acceptance from "`pytest
    test_shapes.py` passes" to "test_shapes.py compiles"; the next test_shapes.py compiled, failed under pytest,
    and the run claimed the task done. A repair keeps every run of a file its step's acceptance had."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "shapes.py").write_text("def area_square(s):\n    return s * s\n")
    failing = "def test_area():\n    assert area_square(3) == 9\n"  # no import: a NameError under pytest
    step = {
        "id": "write_test_shapes",
        "description": "Write test_shapes.py with a pytest test of area_square",
        "tools": ["write_file"],
        "acceptance": "test_shapes.py exists and `pytest test_shapes.py` passes",
    }
    weaker = {"id": "write_test_shapes", "description": "Fix the syntax", "acceptance": "test_shapes.py compiles"}
    script = PurposeScript(
        plan=plan_of(step),
        execute=writer("test_shapes.py", failing),
        reflect={"assessment": "needs_adjustment", "reasoning": "a syntax error", "update_steps": [weaker]},
    )

    out, model, _ = run(tmp_path, script, task="write test_shapes.py", max_reflections=1)

    plan = out["plan"]
    assert out["status"] != "completed"
    kept = plan.get("write_test_shapes").acceptance
    assert kept == "test_shapes.py compiles and `pytest test_shapes.py` passes"
    patched = [h for h in plan.history if h.source == "patch"]
    assert patched and "keeps `pytest test_shapes.py` in its acceptance" in (patched[0].reason or "")
    assert model.calls("patch") == 0  # the reflection's own patch, applied as kept


@pytest.mark.parametrize("done", [False, True])
def test_a_patch_that_adds_an_open_step_again_updates_it_and_a_done_one_stays_refused(
    tmp_path: Path, done: bool
) -> None:
    """The 1.5B's reflection 'added' write_convert_py, the failed step it meant to fix, and the patch was refused
    as a duplicate id. A step added with the id of an open step is that step's update; a done step's id is still
    refused (done steps never change)."""
    steps = [write_step("mathx.py exists and `python mathx.py` runs")]
    if done:
        steps.insert(
            0,
            {
                "id": "notes",
                "description": "Write notes.txt",
                "tools": ["write_file"],
                "acceptance": "notes.txt exists",
            },
        )
        steps[1]["dependencies"] = ["notes"]
    again = {
        "id": "notes" if done else "write_mathx",
        "description": "Write mathx.py again, with the colon",
        "tools": ["write_file"],
    }

    def execute(req: ScriptRequest) -> Any:
        if not req.tool_results() and "notes.txt" in req.text().split("Step `", 1)[-1][:80]:
            return {"tool_calls": [tool_call("write_file", path="notes.txt", content="n\n")]}
        return fixer("colon")(req)

    script = PurposeScript(
        plan=plan_of(*steps),
        execute=execute,
        reflect={"assessment": "needs_adjustment", "reasoning": "a colon is missing", "add_steps": [again]},
        patch="{not json",
    )
    out, model, ws = run(tmp_path, script, max_reflections=1, max_patch_attempts=1)

    plan = out["plan"]
    if done:
        assert plan.rejections and "notes" in " ".join(plan.rejections[0].reasons)
        assert plan.get("notes").description == "Write notes.txt"  # the done step did not change
        assert plan.get("notes").status.value == "done"
    else:
        assert out["status"] == "completed", out.get("error")
        assert not plan.rejections and model.calls("patch") == 0
        assert [s.id for s in plan.steps] == ["write_mathx"]
        assert plan.get("write_mathx").description == "Write mathx.py again, with the colon"
        assert (ws / "mathx.py").read_text() == GOOD


def test_the_full_plan_fallback_keeps_the_done_steps_whatever_the_model_resends(tmp_path: Path) -> None:
    """The 1.5B's fallback plan re-sent a done step with another complexity, and the whole repair was refused ("is
    done and cannot be modified"). The model was told to keep done steps as they are: its copy of one is ignored,
    and the done step stays exactly as it was."""
    notes = {"id": "notes", "description": "Write notes.txt", "tools": ["write_file"], "acceptance": "notes.txt exists"}
    first = write_step("mathx.py exists and `python mathx.py` runs", dependencies=["notes"])
    resent = {**notes, "complexity": "high", "description": "Write notes.txt (done)"}
    fallback = {"id": "rewrite_mathx", "description": "Write mathx.py again, correctly", "tools": ["write_file"]}

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "done"
        step = req.text().split("Step `", 1)[-1][:40]
        if step.startswith("notes"):
            return {"tool_calls": [tool_call("write_file", path="notes.txt", content="n\n")]}
        good = step.startswith("rewrite")
        return {"tool_calls": [tool_call("write_file", path="mathx.py", content=GOOD if good else "def add(:\n")]}

    script = PurposeScript(
        plan=[plan_of(notes, first), plan_of(resent, fallback)],
        execute=execute,
        reflect={"assessment": "needs_adjustment", "reasoning": "mathx.py does not compile"},
        patch="{not json",
    )
    out, model, ws = run(tmp_path, script, max_reflections=1, max_patch_attempts=1)

    plan = out["plan"]
    assert out["status"] == "completed", (out.get("error"), [r.reasons for r in plan.rejections])
    assert model.calls("plan") == 2 and plan.history[-1].source == "diff"  # the fallback's plan, applied
    kept = plan.get("notes")
    assert (kept.description, kept.complexity.value, kept.status.value) == ("Write notes.txt", "medium", "done")
    assert (ws / "mathx.py").read_text() == GOOD


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failed_step_the_fallback_plan_keeps_unchanged_runs_again(tmp_path: Path, mode: str) -> None:
    """The 1.5B's fallback plan re-sent the failed test step as it was; it stayed failed, its trouble stayed, and
    the run gave up on the next reflection. The corrected whole plan is the plan to run: a failed step it keeps is
    re-opened and runs again (with its last error to read)."""
    step = write_step("mathx.py exists and `python mathx.py` runs")
    seen: list[str] = []

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "done"
        seen.append(req.text())
        content = GOOD if len(seen) > 2 else "def add(:\n"  # two broken attempts, then right
        return {"tool_calls": [tool_call("write_file", path="mathx.py", content=content)]}

    script = PurposeScript(
        plan=[plan_of(step), plan_of(step)],  # the fallback re-sends the step exactly
        execute=execute,
        reflect={"assessment": "needs_adjustment", "reasoning": "mathx.py does not compile"},
        patch="{not json",
    )
    out, model, ws = run(tmp_path, script, mode=mode, max_reflections=1, max_patch_attempts=1, max_attempts=2)
    plan = out["plan"]
    assert out["status"] == "completed", (out.get("error"), [r.reasons for r in plan.rejections])
    assert model.calls("plan") == 2 and len(seen) == 3  # the fallback asked, and the step ran a third time
    assert "line 1" in seen[2]  # the retry reads its last error
    assert (ws / "mathx.py").read_text() == GOOD


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failed_step_a_patch_keeps_runs_again(tmp_path: Path, mode: str) -> None:
    """The 1.5B's reflection added "fix the syntax of mathx.py" after the failed step that wrote it and left that
    step failed: the new step waited on a failed step, and the run gave up on its next reflection. A failed step
    the patch keeps runs again (with its last error), then the steps the patch added (given the write tool: the
    reflection's steps name none)."""
    fix = {
        "id": "fix_mathx",
        "description": "Fix the syntax of mathx.py",
        "tools": ["write_file"],
        "acceptance": "mathx.py compiles",
        "dependencies": ["write_mathx"],
    }
    seen: list[str] = []

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "done"
        seen.append(req.step_id or "")
        content = GOOD if len(seen) > 2 else BROKEN  # two broken attempts, then right
        return {"tool_calls": [tool_call("write_file", path="mathx.py", content=content)]}

    script = PurposeScript(
        plan=plan_of(write_step("mathx.py exists and `python mathx.py` runs")),
        execute=execute,
        reflect={"assessment": "needs_adjustment", "reasoning": "a bracket is wrong", "add_steps": [fix]},
    )
    out, model, ws = run(tmp_path, script, mode=mode, max_reflections=1, max_attempts=2)

    assert out["status"] == "completed", out.get("error")
    assert seen == ["write_mathx", "write_mathx", "write_mathx", "fix_mathx"]
    assert model.calls("patch") == 0  # the reflection's own patch, applied
    assert [s.status.value for s in out["plan"].steps] == ["done", "done"]
    # the reflection's compact step named no tools: the step that writes mathx.py is given the write tool, said so
    assert out["plan"].get("fix_mathx").tools == ["write_file"]
    assert "new step 'fix_mathx' writes mathx.py: given write_file" in (out["plan"].history[-1].reason or "")
    assert (ws / "mathx.py").read_text() == GOOD


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_patch_that_takes_a_failed_write_steps_write_tool_away_keeps_it(tmp_path: Path, mode: str) -> None:
    """The 1.5B's patch gave the failed write_avg the tools ["python"]: each of its next writes was refused ("not
    a valid tool, try one of [list_files, read_file, search_files]") until the run failed. A repair changes how a
    step writes, not whether it may: the step keeps its write tool, and the patch's reason says so."""
    seen: list[str] = []

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "done"
        seen.append(req.step_id or "")
        content = GOOD if len(seen) > 1 else BROKEN
        return {"tool_calls": [tool_call("write_file", path="mathx.py", content=content)]}

    patch = {
        "reason": "fix the syntax",
        "update_steps": [{"id": "write_mathx", "tools": ["python"], "description": "Write mathx.py, its syntax fixed"}],
    }
    script = PurposeScript(
        plan=plan_of(write_step("mathx.py exists and `python mathx.py` runs")),
        execute=execute,
        reflect={"assessment": "needs_adjustment", "reasoning": "a bracket is wrong"},
        patch=patch,
    )
    out, model, ws = run(tmp_path, script, mode=mode, max_reflections=1, max_attempts=1)

    assert out["status"] == "completed", out.get("error")
    assert model.calls("patch") == 1  # the patch model's patch, applied at its first try
    assert out["plan"].get("write_mathx").tools == ["write_file", "python"]
    assert "step 'write_mathx' keeps write_file" in (out["plan"].history[-1].reason or "")
    assert (ws / "mathx.py").read_text() == GOOD


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_script_asked_for_one_value_that_prints_a_sentence_around_it_fails(tmp_path: Path, mode: str) -> None:
    """A false "completed" on the 1.5B, twice: "Write count_lines.py that prints the number of lines in notes.txt",
    accepted by "`python count_lines.py` runs correctly"; the script printed "The number of lines in notes.txt is
    3.", the judge passed it, and the task's check reads 3. The value alone is asked for: words around it fail the
    step with the fix; the value alone passes. (The judge had failed the right script first, reading "passed (3)"
    as exit code 3: a run's output is shown as what it printed.)"""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "notes.txt").write_text("a\nb\nc\n")
    step = {
        "id": "write_count",
        "description": "Write count_lines.py that prints the number of lines in notes.txt",
        "tools": ["write_file"],
        "acceptance": "count_lines.py exists and `python count_lines.py` runs correctly",
    }
    sentence = "n = len(open('notes.txt').read().splitlines())\nprint(f'The number of lines in notes.txt is {n}.')\n"
    bare = "print(len(open('notes.txt').read().splitlines()))\n"
    seen: list[str] = []

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "done"
        seen.append(req.text())
        content = sentence if len(seen) == 1 else bare
        return {"tool_calls": [tool_call("write_file", path="count_lines.py", content=content)]}

    judged: list[str] = []

    def verify(req: ScriptRequest) -> Any:
        judged.append(req.text())
        return {"reason": "it prints the number", "passed": True}

    script = PurposeScript(plan=plan_of(step), execute=execute, verify=verify)
    out, _, _ = run(tmp_path, script, mode=mode, task="write count_lines.py", max_attempts=2)

    assert out["status"] == "completed", out.get("error")
    assert len(seen) == 2
    assert "it printed 'The number of lines in notes.txt is 3.': the step asks for the number alone" in seen[1]
    assert "print just the value ('3')" in seen[1]
    assert len(judged) == 1 and "`python count_lines.py` runs: passed, printing: 3" in judged[0]


def test_a_check_that_fails_or_a_clause_no_check_covers_is_not_settled() -> None:
    from planmode.adapters.small_models.evidence import Check, Evidence

    ran = Evidence(runs=[], checks=[Check("mathx.py exists", True), Check("`python mathx.py` runs", True)])
    assert ran.settles("mathx.py exists and `python mathx.py` runs.")
    assert ran.settles("mathx.py runs successfully; mathx.py exists")
    assert not ran.settles("mathx.py exists and prints 5")  # a clause for the judge
    assert not ran.settles("test_mathx.py exists")  # no such check passed
    assert not ran.settles("`pytest test_mathx.py` passes")
    assert not ran.settles("")
    assert not ran.settles("mathx.py exists")  # nothing ran: the judge reads the file against the step
    checks = [Check("hello.py exists", True), Check("`python hello.py` runs", True, "Hi, you!")]
    hello = Evidence(runs=[], checks=checks)
    assert hello.settles('hello.py exists and `python hello.py` prints "Hi, you!"')  # the comma is quoted
    assert hello.settles("`python hello.py` outputs exactly: `Hi, you!`")
    assert not hello.settles("`python hello.py` prints 'Hi you'")  # printed otherwise: the judge decides
    failed = Evidence(runs=[], checks=[Check("mathx.py exists", True), Check("mathx.py compiles", False)])
    assert not failed.settles("mathx.py exists")
    unknown = Evidence(runs=[], checks=[Check("mathx.py exists", None, "no workspace to look in")])
    assert not unknown.settles("mathx.py exists")


def test_an_empty_report_is_not_mentioned_to_the_judge(tmp_path: Path) -> None:
    """Qwen2.5-Coder-1.5B's judge failed a step whose file existed and ran because 'the executor's report is
    empty'; told instead that no report is not a failure, it failed right steps because 'the executor did not
    provide a report' (three of four judgements in a run). With no report, the judge reads no word of one."""
    step = write_step("mathx.py exists, `python mathx.py` runs and add(a, b) returns their sum")
    script = PurposeScript(plan=plan_of(step), execute=writer("mathx.py", GOOD, then=""))

    out, model, _ = run(tmp_path, script)

    assert out["status"] == "completed", out.get("error")
    (judged,) = [r for r in model.requests if r.purpose == "verify"]
    shown = judged.text()
    assert "report" not in shown.lower() and "(empty)" not in shown
    assert "mathx.py compiles: passed" in shown


def test_the_judge_of_a_write_step_that_wrote_reads_the_evidence_not_the_report(tmp_path: Path) -> None:
    """The 1.5B's judge failed a step that wrote temps.txt, twice, because 'the claim does not specify any direct
    output'. A write step's deliverable is its change: when it made one, the judge is shown the evidence alone. A
    step that changes nothing is still judged on its answer."""
    step = write_step("mathx.py exists and add(a, b) returns their sum")
    report = "There is no direct output specified for the write_file call."
    out, model, _ = run(tmp_path, PurposeScript(plan=plan_of(step), execute=writer("mathx.py", GOOD, then=report)))
    assert out["status"] == "completed", out.get("error")
    (judged,) = [r for r in model.requests if r.purpose == "verify"]
    assert report not in judged.text() and "report" not in judged.text().lower()
    assert "return a + b" in judged.text()  # the file, read

    (tmp_path / "b").mkdir()
    reader = {"id": "say", "description": "Say what add(2, 3) returns", "tools": ["read_file"], "acceptance": "says 5"}
    script = PurposeScript(plan=plan_of(reader), execute=lambda req: "add(2, 3) returns 5")
    out, model, _ = run(tmp_path / "b", script, task="say what add(2, 3) returns")
    (judged,) = [r for r in model.requests if r.purpose == "verify"]
    assert "add(2, 3) returns 5" in judged.text().split("a claim, not evidence", 1)[-1]


DENIED = {
    "passed": False,
    "reason": "The tool wrote files that did not meet the criteria, as `mathx.py` does not exist.",
}
NO_REPORT = {"passed": False, "reason": "The executor did not provide a report of its own, which is required."}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_judges_reason_the_evidence_contradicts_is_asked_once_more(tmp_path: Path, mode: str) -> None:
    """The 1.5B's judge failed a right temps.txt four times, each on a reason the evidence contradicts ('temps.txt
    does not exist' beside a passed check that found it). Such a verdict is asked once more, the contradiction
    named; the second verdict is the judgement."""
    script = PurposeScript(
        plan=plan_of(write_step()), execute=writer("mathx.py", GOOD, then=""), verify=[DENIED, {"passed": True}]
    )
    out, model, _ = run(tmp_path, script, mode=mode)
    assert out["status"] == "completed", out.get("error")
    first, second = [r for r in model.requests if r.purpose == "verify"]
    assert COVERED in first.text()  # only existence is asked: the judge is told what is left to judge
    assert "The evidence contradicts it (the checks found mathx.py: it exists)" in second.text()
    assert DENIED["reason"] in second.text()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_twice_contradicted_the_checks_decide_only_where_they_cover_every_clause(tmp_path: Path, mode: str) -> None:
    """Two failed verdicts, both on reasons the evidence contradicts: where the checks decide every clause of the
    acceptance (the file exists), the step passes; where a clause is left to the judge (what add returns), the
    second verdict stands and the step fails with its reason."""
    script = PurposeScript(plan=plan_of(write_step()), execute=writer("mathx.py", GOOD), verify=[DENIED, NO_REPORT])
    out, model, _ = run(tmp_path, script, mode=mode)
    assert out["status"] == "completed", out.get("error")
    assert model.calls("verify") == 2

    (tmp_path / "b").mkdir()
    step = write_step("mathx.py exists and add(a, b) returns their sum")
    failed = {"assessment": "failed", "reasoning": "the judge says no"}
    script = PurposeScript(
        plan=plan_of(step), execute=writer("mathx.py", GOOD), verify=[DENIED, NO_REPORT], reflect=failed
    )
    out, model, _ = run(tmp_path / "b", script, mode=mode)
    assert out["status"] == "failed" and model.calls("verify") == 2
    first = next(r for r in model.requests if r.purpose == "verify")
    assert COVERED not in first.text()
    assert out["plan"].get("write_mathx").error == NO_REPORT["reason"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_second_reason_that_only_repeats_the_contradiction_is_contradicted_again(tmp_path: Path, mode: str) -> None:
    """The 1.5B's judge, shown the contradiction of its first reason, failed the step again on the contradiction
    itself ("The evidence contradicts it (the checks found show_vowels.py: it exists)."). Where the checks decide
    every clause, they decide."""
    echo = {"passed": False, "reason": "The evidence contradicts it (the checks found mathx.py: it exists)."}
    script = PurposeScript(plan=plan_of(write_step()), execute=writer("mathx.py", GOOD), verify=[DENIED, echo])
    out, model, _ = run(tmp_path, script, mode=mode)
    assert out["status"] == "completed", out.get("error")
    assert model.calls("verify") == 2


def test_a_judges_reason_the_evidence_does_not_contradict_stands(tmp_path: Path) -> None:
    """A reason about the content ('mathx.py is missing the function sub') is a judgement: not asked again."""
    lacking = {"passed": False, "reason": "mathx.py is missing the function sub"}
    failed = {"assessment": "failed", "reasoning": "the judge says no"}
    script = PurposeScript(plan=plan_of(write_step()), execute=writer("mathx.py", GOOD), verify=lacking, reflect=failed)
    out, model, _ = run(tmp_path, script)
    assert out["status"] == "failed" and model.calls("verify") == 1
    assert out["plan"].get("write_mathx").error == lacking["reason"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_first_failed_judgement_is_a_retry_when_asked_and_a_second_ends_the_run(tmp_path: Path, mode: str) -> None:
    """The 1.5B's reflection judged runs failed over a step it could fix ('run.py has a circular import'), with
    most of the time left. With retry_judged_failed (--gguf's default) the first 'failed' re-runs the failed steps
    once, their error carrying the reflection's words; a second 'failed' ends the run."""
    step = write_step("mathx.py exists and `python mathx.py` runs")
    broken = "from mathx import add\nprint(add(1, 2))\n"
    seen: list[str] = []

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "done"
        seen.append(req.text())
        content = GOOD if "circular import" in req.text() else broken
        return {"tool_calls": [tool_call("write_file", path="mathx.py", content=content)]}

    reflect = {"assessment": "failed", "reasoning": "mathx.py has a circular import"}
    script = PurposeScript(plan=plan_of(step), execute=execute, reflect=reflect)
    out, model, ws = run(tmp_path, script, mode=mode, retry_judged_failed=True)
    assert out["status"] == "completed", out.get("error")
    assert model.calls("reflect") == 1 and len(seen) == 2
    assert "the reflection judged the run failed: mathx.py has a circular import" in seen[1]
    assert (ws / "mathx.py").read_text() == GOOD

    (tmp_path / "b").mkdir()
    script = PurposeScript(plan=plan_of(step), execute=writer("mathx.py", broken), reflect=reflect)
    out, model, _ = run(tmp_path / "b", script, mode=mode, retry_judged_failed=True)
    assert out["status"] == "failed" and model.calls("reflect") == 2  # the second 'failed' stands
    (tmp_path / "b1").mkdir()
    out, model, _ = run(tmp_path / "b1", script, mode=mode, retry_judged_failed=True, max_reflections=1)
    assert out["status"] == "failed" and model.calls("reflect") == 1  # retried once, then out of reflections
    assert "gave up after 1 reflection" in final_text(out)

    (tmp_path / "c").mkdir()
    script = PurposeScript(plan=plan_of(step), execute=writer("mathx.py", broken), reflect=reflect)
    out, model, _ = run(tmp_path / "c", script, mode=mode)
    assert out["status"] == "failed" and model.calls("reflect") == 1  # not asked: the model's word ends it


def test_an_empty_workspace_is_not_explored(tmp_path: Path) -> None:
    """Exploring an empty workspace only finds that it is empty: no explore call (on the 1.5B model the first
    explore call of a file task wrote 451 tokens, a minute of the run). A workspace with a file is explored."""
    script = PurposeScript(plan=plan_of(write_step()), execute=writer("mathx.py", GOOD), explore="found nothing")
    out, model, _ = run(tmp_path, script, max_explore_calls=2)
    assert out["status"] == "completed", out.get("error")
    assert model.calls("explore") == 0

    (tmp_path / "b" / "ws").mkdir(parents=True)
    (tmp_path / "b" / "ws" / "notes.txt").write_text("old notes\n")
    script = PurposeScript(plan=plan_of(write_step()), execute=writer("mathx.py", GOOD), explore="found notes.txt")
    out, model, _ = run(tmp_path / "b", script, max_explore_calls=2)
    assert out["status"] == "completed", out.get("error")
    assert model.calls("explore") == 1


def test_a_step_mended_in_for_a_file_with_a_non_ascii_name_gets_a_valid_id(tmp_path: Path) -> None:
    """The id of a step planmode adds is made from the file's name; a name with letters outside ASCII must not
    make an invalid id (Step would refuse it and the plan node would crash)."""
    task = "create mathx.py and données.csv"
    script = PurposeScript(plan=plan_of(write_step()), execute=writer("mathx.py", GOOD))
    out, _, _ = run(tmp_path, script, task=task, max_plan_attempts=2)
    first = out["plan"].history[0]  # the mended plan, as approved (its csv step then fails: the executor writes .py)
    assert first.added == ["write_mathx", "write_donn_es_csv"], out.get("error")
    assert "added step 'write_donn_es_csv'" in first.reason


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_without_a_final_summary_the_record_is_the_answer_and_no_model_is_asked(tmp_path: Path, mode: str) -> None:
    """--gguf's default: a small model took most of a minute to summarise a run (one run of the 1.5B was killed at
    its time limit in that call, its three files done). With final_summary off the answer is the record."""
    script = PurposeScript(plan=plan_of(write_step()), execute=writer("mathx.py", GOOD), final="I wrote ghost.py too.")
    out, model, _ = run(tmp_path, script, mode=mode, final_summary=False)
    assert out["status"] == "completed", out.get("error")
    assert model.calls("final") == 0
    assert final_text(out) == f"Done: {TASK}\nSteps done: write_mathx.\n\nFiles changed: mathx.py."

    (tmp_path / "b").mkdir()
    out, model, _ = run(tmp_path / "b", script, mode=mode)
    assert model.calls("final") == 1  # on by default elsewhere


STDIN_REPORT = "import sys\nfor line in sys.stdin:\n    print(float(line) * 9 / 5 + 32)\n"  # reads stdin, not temps.txt


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_script_the_step_says_prints_is_not_done_by_running_alone(tmp_path: Path, mode: str) -> None:
    """A false 'completed' on the 1.5B: report.py was to read temps.txt and print, its acceptance asked only that
    `python report.py` runs; it read stdin instead, ran, printed nothing, and the checks settled it without a
    judge. A step whose description says it prints is not settled by running alone: a silent run fails with the
    fix, and a script that prints is shown to the judge with its output."""
    step = {
        "id": "write_report",
        "description": "Write report.py that reads temps.txt and prints c_to_f of each number",
        "tools": ["write_file"],
        "acceptance": "report.py exists and `python report.py` runs",
    }
    script = PurposeScript(plan=plan_of(step), execute=writer("report.py", STDIN_REPORT), reflect=GIVE_UP)
    out, model, _ = run(tmp_path, script, mode=mode, task="create report.py")
    assert out["status"] == "failed" and model.calls("verify") == 0  # failed on the evidence, no judge asked
    assert "it ran and printed nothing" in out["plan"].get("write_report").error

    (tmp_path / "b").mkdir()
    printing = "print(32.0)\nprint(212.0)\n"
    script = PurposeScript(plan=plan_of(step), execute=writer("report.py", printing), reflect=GIVE_UP)
    out, model, _ = run(tmp_path / "b", script, mode=mode, task="create report.py")
    assert out["status"] == "completed", out.get("error")
    (judged,) = [r for r in model.requests if r.purpose == "verify"]  # the judge reads what it printed
    assert "`python report.py` runs: passed, printing:\n    32.0\n    212.0" in judged.text()


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("temps = open('temps.txt').read().split()\n", "it ran and printed nothing"),
        # temps.txt is in the workspace: an input it must open, and the failure shows how (the 1.5B's shout.py read
        # sys.argv[1] three times after "open 'input.txt' in shout.py and read it")
        (
            STDIN_REPORT,
            "report.py never names temps.txt, and the step says it uses temps.txt: open 'temps.txt' in "
            "report.py and read it, e.g. `with open('temps.txt') as f: text = f.read()`",
        ),
    ],
)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_script_the_plan_says_prints_is_run_by_its_acceptance(
    tmp_path: Path, mode: str, source: str, why: str
) -> None:
    """Two false 'completed' on llama-server: acceptance that ran nothing ('report.py exists and correctly reads
    temps.txt and prints c_to_f'), and a judge that passed a report.py reading stdin on its source. planmode adds
    `python report.py` runs to such a step's acceptance (shown for approval, recorded as a fix), so what the script
    prints is evidence: silent, it fails; reading stdin instead of temps.txt, it fails before it runs."""
    step = {
        "id": "write_report",
        "description": "Write report.py that reads temps.txt and prints c_to_f of each number",
        "tools": ["write_file"],
        "acceptance": "report.py exists and correctly reads temps.txt and prints c_to_f",
    }
    script = PurposeScript(plan=plan_of(step), execute=writer("report.py", source), reflect=GIVE_UP)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "temps.txt").write_text("0\n100\n")  # the input it is to read
    out, _, _ = run(tmp_path, script, mode=mode, task="create report.py")
    plan = out["plan"]
    assert plan.get("write_report").acceptance.endswith("and `python report.py` runs")
    assert "its acceptance runs it" in (plan.history[0].reason or "")
    assert out["status"] == "failed" and why in plan.get("write_report").error


def test_mend_runs_adds_a_run_only_where_a_printing_script_is_run_by_nothing() -> None:
    from planmode.adapters.small_models.coverage import mend_runs
    from planmode.state.models import Plan

    def one(description: str, acceptance: str, tools: tuple[str, ...] = ("write_file",)) -> str:
        step = Step(id="s", description=description, tools=list(tools), acceptance=acceptance)
        mended, _ = mend_runs(Plan(goal="g", version=1, steps=[step]), workspace_tools(Path(".")))
        return mended.steps[0].acceptance

    says = "Write app.py that prints hi"
    assert one(says, "app.py exists") == "app.py exists and `python app.py` runs"
    assert one(says, "app.py exists and `python app.py` prints 'hi'") == "app.py exists and `python app.py` prints 'hi'"
    assert one(says, "app.py exists and runs") == "app.py exists and runs"  # 'exists and runs' runs it already
    assert one("Write app.py with add(a, b)", "app.py exists") == "app.py exists"  # says nothing of printing
    assert one("Write notes.txt that shows the plan", "notes.txt exists") == "notes.txt exists"  # not a script
    assert one(says, "app.py exists", tools=("read_file",)) == "app.py exists"  # writes nothing
    # a test file pytest collects is run by pytest (a test that compiles is not a test that passes)
    test = "Write test_shapes.py with a test of area_square"
    assert one(test, "test_shapes.py exists") == "test_shapes.py exists and `pytest test_shapes.py` passes"
    assert one(test, "`python -m pytest test_shapes.py` passes") == "`python -m pytest test_shapes.py` passes"
    assert one(test, "`pytest test_shapes.py` passes") == "`pytest test_shapes.py` passes"
    assert one(test, "`python test_shapes.py` runs") == "`python test_shapes.py` runs"  # run as a script: left
    assert one(test, "python test_shapes.py passes") == "python test_shapes.py passes"  # said, unquoted (the demo)
    assert one("Write shapes_test.py", "shapes_test.py exists").endswith("and `pytest shapes_test.py` passes")
    assert one("Write testing.py with helpers", "testing.py exists") == "testing.py exists"  # not a test file


def test_mend_tools_replaces_a_tool_name_that_means_exactly_one_of_the_graphs_tools() -> None:
    from planmode.adapters.small_models.coverage import mend_tools
    from planmode.state.models import Plan

    def one(*tools: str) -> list[str]:
        step = Step(id="s", description="Write app.py", tools=list(tools), acceptance="app.py exists")
        mended, notes = mend_tools(Plan(goal="g", version=1, steps=[step]), workspace_tools(Path(".")))
        assert bool(notes) == (list(mended.steps[0].tools) != list(tools))
        return list(mended.steps[0].tools)

    assert one("write") == ["write_file"]  # the 1.5B's corrected plan
    assert one("Write-File", "read") == ["write_file", "read_file"]
    assert one("write_file", "write") == ["write_file"]  # no tool twice
    assert one("edit") == ["edit_file"]
    assert one("deploy") == ["deploy"]  # names no tool: left (the step cannot run it)
    assert one("file") == ["file"]  # not a first word
    assert one("write_file", "search_files") == ["write_file", "search_files"]
    assert one("create_package") == ["write_file"]  # the 1.5B's package_util: a made-up tool that creates files
    assert one("mkdir", "write_file") == ["write_file"]
    assert one("created") == ["created"]  # a word, not the verb


def test_mend_dependencies_drops_a_tool_named_as_a_dependency_and_a_dependency_listed_twice() -> None:
    from planmode.adapters.small_models.coverage import mend_dependencies
    from planmode.state.models import Plan

    def deps(*dependencies: str, ids: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
        steps = [Step(id=i, description=f"do {i}") for i in ("a", *ids)]
        steps.append(Step(id="b", description="Write b.py", dependencies=list(dependencies)))
        mended, notes = mend_dependencies(Plan(goal="g", version=1, steps=steps), workspace_tools(Path(".")))
        return list(mended.steps[-1].dependencies), notes

    assert deps("a", "read_file") == (["a"], ["step 'b' dependencies mended: tool 'read_file' is not a step"])
    assert deps("read_file", "read_file")[0] == []  # the 0.5B's answer to "depends on unknown step 'read_file'"
    assert deps("a", "a") == (["a"], ["step 'b' dependencies mended: a dependency was listed twice"])
    assert deps("a") == (["a"], [])
    assert deps("a", "missing")[0] == ["a", "missing"]  # not a tool: left, for the planner to be told
    assert deps("a", "read_file", ids=("read_file",))[0] == ["a", "read_file"]  # a step of that name: kept

    # the 1.5B's package_util: "write_util_strings" for the step write_strings, which writes util/strings.py
    strings = Step(id="write_strings", description="Write util/strings.py with shout(s)", acceptance="")
    app = Step(id="write_app", description="Write app.py", dependencies=["write_util_strings"])
    mended, notes = mend_dependencies(Plan(goal="g", version=1, steps=[strings, app]), workspace_tools(Path(".")))
    assert mended.steps[1].dependencies == ["write_strings"]
    assert notes == ["step 'write_app' dependencies mended: 'write_util_strings' is step 'write_strings'"]
    assert deps("create_a")[0] == ["a"]  # the id without its verb
    assert deps("write_c", ids=("c", "make_c"))[0] == ["write_c"]  # two steps it could mean: left


def test_mend_reads_leaves_out_only_a_step_that_reads_back_what_an_earlier_step_writes() -> None:
    from planmode.adapters.small_models.coverage import mend_reads
    from planmode.state.models import Plan

    def mended(*steps: Step) -> tuple[list[tuple[str, list[str]]], list[str]]:
        plan, notes = mend_reads(Plan(goal="g", version=1, steps=list(steps)), workspace_tools(Path(".")))
        return [(s.id, list(s.dependencies)) for s in plan.steps], notes

    write = Step(id="write_data", description="Write data.csv with three rows", tools=["write_file"])
    read = Step(
        id="read_data",
        description="Read data.csv and verify the contents",
        tools=["read_file"],
        dependencies=["write_data"],
        acceptance="data.csv contents match",
    )
    avg = Step(
        id="write_avg", description="Write avg.py that reads data.csv", tools=["write_file"], dependencies=["read_data"]
    )
    # the 1.5B's plan: avg.py now comes after the write of data.csv
    assert mended(write, read, avg) == (
        [("write_data", []), ("write_avg", ["write_data"])],
        [
            "step 'read_data' left out: it only reads back data.csv, which an earlier step writes "
            "(verify reads what each step wrote)"
        ],
    )
    again = read.model_copy(update={"id": "again", "dependencies": ["read_data"]})
    assert mended(write, read, again, avg.model_copy(update={"dependencies": ["again"]}))[0] == [
        ("write_data", []),
        ("write_avg", ["write_data"]),
    ]  # a chain of them: each left out, the dependent tied to the write
    # kept: an input no step writes; a step that names no file; one that writes too; one that depends on nothing
    names = Step(id="read_names", description="Read names.txt", tools=["read_file"], dependencies=["write_data"])
    vague = read.model_copy(update={"description": "Check the output", "acceptance": "it looks right"})
    both = read.model_copy(update={"tools": ["read_file", "write_file"]})
    alone = read.model_copy(update={"dependencies": []})
    for step in (names, vague, both, alone):
        assert mended(write, step)[1] == [], step
    # the file written by a step that does not come before it is not read back
    late = Step(id="late", description="Write data.csv", tools=["write_file"], dependencies=["read_data"])
    other = Step(id="other", description="Write other.txt", tools=["write_file"])
    assert mended(other, read.model_copy(update={"dependencies": ["other"]}), late)[1] == []


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_plan_that_reads_back_a_file_it_wrote_runs_without_that_step(tmp_path: Path, mode: str) -> None:
    """The 1.5B planned write data.csv, "Read data.csv and verify the contents" (read_file), write avg.py; the
    read step failed twice (a call named read_data, then list_files on ./data.csv) and the run ended before avg.py
    was written. The read-back step is left out when the plan is made, shown as planmode's fix."""
    read = {
        "id": "read_data",
        "description": "Read data.csv and verify the contents",
        "dependencies": ["write_data"],
        "tools": ["read_file"],
        "acceptance": "data.csv contents match the written content",
    }
    data = {
        "id": "write_data",
        "description": "Write data.csv",
        "tools": ["write_file"],
        "acceptance": "data.csv exists and `cat data.csv` prints 'a,1'",
    }
    avg = {
        "id": "write_avg",
        "description": "Write avg.py that reads data.csv and prints the average",
        "dependencies": ["read_data"],
        "tools": ["write_file"],
        "acceptance": "`python avg.py` prints '1.0'",
    }
    source = "rows = open('data.csv').read().split()\nprint(sum(float(r.split(',')[1]) for r in rows) / len(rows))\n"

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "done"
        if "Step `write_data`" in req.text():
            return {"tool_calls": [tool_call("write_file", path="data.csv", content="a,1\n")]}
        return {"tool_calls": [tool_call("write_file", path="avg.py", content=source)]}

    script = PurposeScript(plan=plan_of(data, read, avg), execute=execute, reflect=GIVE_UP)
    out, model, _ = run(tmp_path, script, task="write data.csv and avg.py", mode=mode)

    assert out["status"] == "completed", out.get("error")
    plan = out["plan"]
    assert [s.id for s in plan.steps] == ["write_data", "write_avg"]
    assert plan.get("write_avg").dependencies == ["write_data"]
    assert "step 'read_data' left out: it only reads back data.csv" in (plan.history[0].reason or "")
    assert model.calls("execute") == 2 and model.calls("verify") == 0  # a write a step, each settled by its checks


def test_mend_new_files_lets_a_step_that_edits_a_file_no_one_writes_write_it(tmp_path: Path) -> None:
    from planmode.adapters.small_models.coverage import mend_new_files
    from planmode.state.models import Plan

    (tmp_path / "calc.py").write_text("def double(x):\n    return x + 2\n")

    def tools_of(*steps: Step) -> tuple[list[list[str]], list[str]]:
        plan, notes = mend_new_files(Plan(goal="g", version=1, steps=list(steps)), workspace_tools(tmp_path))
        return [list(s.tools) for s in plan.steps], notes

    # the 1.5B's step: app.py does not exist and no step writes it
    app = Step(id="import_util", description="Import util in app.py", tools=["edit_file"], acceptance="app.py exists")
    assert tools_of(app) == (
        [["edit_file", "write_file"]],
        ["step 'import_util' changes app.py, which does not exist and no step writes: it may write_file it"],
    )
    fix = Step(id="fix", description="Fix double in calc.py", tools=["edit_file"], acceptance="calc.py exists")
    assert tools_of(fix)[1] == []  # calc.py exists: an edit
    writer = Step(id="w", description="Write app.py", tools=["write_file"], acceptance="app.py exists")
    after = app.model_copy(update={"dependencies": ["w"]})
    assert tools_of(writer, after)[1] == []  # a step it comes after writes app.py whole
    # the 1.5B's greet_names plan: the edit comes first, the writer after it; the edit may write the file
    later = writer.model_copy(update={"dependencies": ["import_util"]})
    assert tools_of(app, later)[0] == [["edit_file", "write_file"], ["write_file"]]
    assert tools_of(app, writer)[0][0] == ["edit_file", "write_file"]  # no order between them: no help either
    both = app.model_copy(update={"tools": ["write_file", "edit_file"]})
    assert tools_of(both)[1] == []  # it may write already
    reads = app.model_copy(update={"tools": ["read_file"]})
    assert tools_of(reads)[1] == []  # it changes nothing


def test_mend_run_steps_puts_a_run_step_into_the_acceptance_of_the_step_that_writes_the_script() -> None:
    from planmode.adapters.small_models.coverage import mend_run_steps
    from planmode.state.models import Plan

    def mended(*steps: Step) -> tuple[list[tuple[str, list[str], str]], list[str]]:
        plan, notes = mend_run_steps(Plan(goal="g", version=1, steps=list(steps)), workspace_tools(Path(".")))
        return [(s.id, list(s.dependencies), s.acceptance) for s in plan.steps], notes

    app = Step(
        id="write_app",
        description="Write app.py that prints shout('hi')",
        tools=["write_file"],
        acceptance="app.py exists",
    )
    run = Step(id="run_app", description="Run app.py", tools=["run_file"], dependencies=["write_app"], acceptance="")
    after = Step(
        id="after",
        description="Write notes.md",
        tools=["write_file"],
        dependencies=["run_app"],
        acceptance="notes.md exists",
    )
    # the 1.5B's plan: "Run app.py" with run_file
    assert mended(app, run, after) == (
        [("write_app", [], "app.py exists and `python app.py` runs"), ("after", ["write_app"], "notes.md exists")],
        ["step 'run_app' only runs app.py with run_file: step 'write_app' runs it (`python app.py` runs)"],
    )
    test = Step(id="write_test", description="Write test_app.py", tools=["write_file"], acceptance="test_app.py exists")
    pytest_step = Step(
        id="t", description="Test test_app.py using pytest", tools=["pytest"], dependencies=["write_test"]
    )
    assert mended(test, pytest_step)[0] == [("write_test", [], "test_app.py exists and `pytest test_app.py` passes")]
    # the 1.5B's replan: "Check that main.py runs correctly with 'Ada'" with the tool "run"
    check = run.model_copy(update={"description": "Check that app.py runs correctly", "tools": ["run"]})
    assert mended(app, check)[0] == [("write_app", [], "app.py exists and `python app.py` runs")]
    ran = app.model_copy(update={"acceptance": "`python app.py` runs"})
    assert mended(ran, run)[0] == [("write_app", [], "`python app.py` runs")]  # it runs it already
    # kept: a tool of the graph; a script no step before it writes; a step that is not a run; two scripts
    assert mended(app, run.model_copy(update={"tools": ["read_file"]}))[1] == []
    assert mended(app, run.model_copy(update={"dependencies": []}))[1] == []
    assert mended(app, run.model_copy(update={"description": "Explain app.py"}))[1] == []
    assert mended(app, run.model_copy(update={"description": "Run app.py and b.py"}))[1] == []


def test_mend_length_drops_only_steps_that_can_do_nothing_and_only_to_meet_the_limit() -> None:
    from planmode.adapters.small_models.coverage import mend_length
    from planmode.state.models import Plan

    def ids(max_steps: int, *steps: Step) -> tuple[list[str], list[str]]:
        mended, notes = mend_length(Plan(goal="g", version=1, steps=list(steps)), workspace_tools(Path(".")), max_steps)
        return [s.id for s in mended.steps], notes

    write = [Step(id=f"w{i}", description=f"Write f{i}.py", tools=["write_file"]) for i in range(3)]
    test = Step(id="t", description="Test the app using pytest", tools=["pytest"])
    talk = Step(id="say", description="Explain it", tools=["speak"])
    words = Step(id="words", description="Sum it up")  # no tools: it answers in words, never dropped
    assert ids(3, *write, test) == (
        ["w0", "w1", "w2"],
        ["over the limit of 3 steps: dropped 't' (no tool of the graph, nothing depends on it)"],
    )
    assert ids(4, *write, test)[0] == ["w0", "w1", "w2", "t"]  # within the limit: nothing dropped
    assert ids(3, *write, talk, test)[0] == ["w0", "w1", "w2"]
    assert ids(4, *write, talk, test)[0] == ["w0", "w1", "w2", "say"]  # as many as it is over, the last ones first
    assert ids(2, *write, test)[0] == ["w0", "w1", "w2", "t"]  # dropping it is not enough: the planner is told
    assert ids(3, *write, words)[0] == ["w0", "w1", "w2", "words"]
    many = [Step(id=f"x{i}", description="x", tools=["pytest"]) for i in range(3)]
    assert ids(3, *write, *many)[0] == [s.id for s in [*write, *many]]  # three over: the planner's to shorten
    needed = Step(id="t", description="Test", tools=["pytest"])
    after = Step(id="w3", description="Write f3.py", tools=["write_file"], dependencies=["t"])
    assert ids(3, *write[:2], needed, after)[0] == ["w0", "w1", "t", "w3"]  # a step depends on it: kept


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_plan_one_step_over_the_limit_with_a_step_that_can_do_nothing_runs_without_it(
    tmp_path: Path, mode: str
) -> None:
    """The 1.5B's plan had six steps with five allowed, the sixth testing with the tool "pytest" (not a tool of
    the graph); told the limit, it sent the same six again, and the run failed before any step. That step is
    dropped, shown for approval as planmode's fix, and the plan runs."""
    tests = {
        "id": "test_app",
        "description": "Test the app using pytest",
        "tools": ["pytest"],
        "acceptance": "pytest passes",
    }
    script = PurposeScript(plan=plan_of(HELLO_STEP, tests), execute=writer("hello.py", "print('hi')\n"))

    out, model, ws = run(tmp_path, script, task="write hello.py", mode=mode, max_steps=1)

    assert out["status"] == "completed", out.get("error")
    assert [s.id for s in out["plan"].steps] == ["write_hello"]
    assert "dropped 'test_app'" in out["plan"].history[0].reason
    assert model.calls("plan") == 1
    assert (ws / "hello.py").read_text() == "print('hi')\n"


@pytest.mark.parametrize(
    ("acceptance", "mended"),
    [
        ("config.json exists and `python config.json` prints the port", "config.json exists"),  # the 1.5B's
        ("`python notes.txt` writes 'three lines of text'", "notes.txt exists"),  # the 0.5B's
        ("words.txt exists, `python words.txt` runs", "words.txt exists"),
        ("a.py exists and `python a.py` prints 1", None),  # Python: kept
        ("`python -m pytest test_a.py` passes", None),
        (  # the 1.5B's, on llama-server: what it says is printed is what the file holds
            "config.json exists and `python -m json.loads config.json)` prints `{'port': 8080}`",
            "config.json exists and config.json contains {'port': 8080}",
        ),
        ("`python -m json.tool data.json` runs", "data.json exists"),
        (  # the 1.5B's: code on the command line (no check runs it), its quotes not even closed
            "config.json exists and `python -c 'import json; print(json.load(open(\\'config.json\\')))\"` returns "
            "{'port': 8080}'",
            "config.json exists and config.json contains {'port': 8080}",
        ),
        ("a.py exists and `python -c 'print(1)'` prints 1", "a.py exists"),
    ],
)
def test_mend_data_runs_leaves_out_a_clause_that_runs_a_data_file_with_python(
    acceptance: str, mended: str | None
) -> None:
    from planmode.adapters.small_models.coverage import mend_data_runs
    from planmode.state.models import Plan

    plan = Plan(goal="g", version=1, steps=[Step(id="s", description="Write it", acceptance=acceptance)])
    out, notes = mend_data_runs(plan)
    assert out.steps[0].acceptance == (mended or acceptance)
    assert bool(notes) == (mended is not None)


def test_a_run_of_a_script_nothing_writes_named_after_the_steps_data_file_is_left_out(tmp_path: Path) -> None:
    """The 1.5B's step "Write data.csv with the header line name,score ..." was accepted by "data.csv exists and
    `python data.py` runs": the right data.csv failed twice on "data.py was not created", and the run gave up. A
    script that is nowhere else (task, steps, workspace) is left out; a script the task or a step names stays."""
    from planmode.adapters.small_models.coverage import mend_stem_runs
    from planmode.state.models import Plan

    task = "Write data.csv with three scores. Then write avg.py that reads data.csv and prints the average"
    data = Step(id="d", description="Write data.csv with three scores", tools=["write_file"], acceptance="x")

    def mended(acceptance: str, *others: Step, goal: str = task) -> str:
        plan = Plan(goal=goal, steps=[data.model_copy(update={"acceptance": acceptance}), *others])
        out, notes = mend_stem_runs(plan, workspace_tools(tmp_path))
        assert bool(notes) == (out.steps[0].acceptance != acceptance)
        return out.steps[0].acceptance

    assert mended("data.csv exists and `python data.py` runs") == "data.csv exists"
    assert mended("`python data.py` runs") == "data.csv exists"
    assert mended("data.csv exists and `python avg.py` runs") == "data.csv exists and `python avg.py` runs"
    assert mended("`python data.py` runs", goal="Write data.csv and data.py") == "`python data.py` runs"
    writer_of_it = Step(id="w", description="Write data.py that loads data.csv", tools=["write_file"])
    assert mended("`python data.py` runs", writer_of_it) == "`python data.py` runs"
    (tmp_path / "data.py").write_text("print(1)\n")
    assert mended("`python data.py` runs") == "`python data.py` runs"

    step = {"id": "write_data", "description": "Write data.csv with three scores", "tools": ["write_file"]}
    step["acceptance"] = "data.csv exists and `python data.py` runs"
    script = PurposeScript(plan=plan_of(step), execute=writer("data.csv", "name,score\na,10\n"))
    (tmp_path / "graph").mkdir()
    out, _, _ = run(tmp_path / "graph", script, task="Write data.csv with three scores")
    assert out["status"] == "completed", out.get("error")  # planned, approved and run without the stray clause
    assert "ran `python data.py`, a script nothing writes" in (out["plan"].history[0].reason or "")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_plan_that_runs_a_json_file_with_python_is_mended_and_its_step_passes(tmp_path: Path, mode: str) -> None:
    """The 1.5B's plan accepted config.json by "`python config.json` prints the port": no check runs that, and its
    judge failed a right config.json on it. The clause is left out (the file's existence kept), shown for
    approval as planmode's fix."""
    step = {
        "id": "write_config",
        "description": "Write config.json with port 8080",
        "tools": ["write_file"],
        "acceptance": "config.json exists and `python config.json` prints the port",
    }
    script = PurposeScript(plan=plan_of(step), execute=writer("config.json", '{"port": 8080}'))

    out, _model, ws = run(tmp_path, script, task="write config.json", mode=mode)

    assert out["status"] == "completed", out.get("error")
    assert out["plan"].get("write_config").acceptance == "config.json exists"
    assert "ran a file that is not Python with Python" in out["plan"].history[0].reason
    assert (ws / "config.json").read_text() == '{"port": 8080}'


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_plan_whose_step_depends_on_a_tool_runs_without_that_dependency(tmp_path: Path, mode: str) -> None:
    """The 0.5B's plan made its second step depend on "read_file" (a tool), and its corrected plan listed
    "read_file" twice: both refused, the run failed before any step. The dependency on a tool is dropped,
    shown for approval as planmode's fix, and the plan runs."""
    second = {
        "id": "write_bye",
        "description": "Write bye.py that prints bye",
        "dependencies": ["write_hello", "read_file", "write_hello"],
        "tools": ["write_file"],
        "acceptance": "`python bye.py` prints 'bye'",
    }

    def execute(req: ScriptRequest) -> Any:
        name = "bye.py" if "write_bye" in req.text() else "hello.py"
        text = "bye" if name == "bye.py" else "hi"
        return {"tool_calls": [tool_call("write_file", path=name, content=f"print('{text}')\n")]}

    script = PurposeScript(plan=plan_of(HELLO_STEP, second), execute=execute)

    out, model, ws = run(tmp_path, script, task="write hello.py and bye.py", mode=mode)

    assert out["status"] == "completed", out.get("error")
    assert out["plan"].get("write_bye").dependencies == ["write_hello"]
    assert "tool 'read_file' is not a step" in out["plan"].history[0].reason
    assert model.calls("plan") == 1  # not asked again
    assert (ws / "bye.py").read_text() == "print('bye')\n"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_plan_step_that_names_a_tool_by_its_first_word_gets_the_tool(tmp_path: Path, mode: str) -> None:
    """The 1.5B's corrected plan gave a step the tool "write": the step could write nothing, and each of its
    write_file calls was refused until the run failed. The planner's tool name is read as the one graph tool it
    names, the change is shown for approval as planmode's fix, and the step writes."""
    step = {**HELLO_STEP, "tools": ["write"]}
    call = {"name": "write_file", "args": {"path": "hello.py", "content": "print('hi')\n"}}
    script = PurposeScript(
        plan=plan_of(step), execute=lambda req: "done" if req.tool_results() else {"tool_calls": [call]}
    )

    out, _model, ws = run(tmp_path, script, task="write hello.py", mode=mode)

    assert out["status"] == "completed", out.get("error")
    assert out["plan"].get("write_hello").tools == ["write_file"]
    assert "'write' -> 'write_file'" in out["plan"].history[0].reason
    assert (ws / "hello.py").read_text() == "print('hi')\n"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_write_step_ends_at_the_write_of_its_file(tmp_path: Path, mode: str) -> None:
    """After writing its step's file, the 1.5B's next turn most often wrote it again or wrote garbage ('{"function":}',
    a list_files on the file, a call of a tool named after the step): up to eight more turns in one step. A write
    step whose one file its write tool wrote ends there, without another model turn; its result is the write's.
    A step that names no one file is asked again after its write."""
    call = {"name": "write_file", "args": {"path": "hello.py", "content": "print('hi')\n"}}
    script = PurposeScript(plan=plan_of(HELLO_STEP), execute=lambda req: {"tool_calls": [call]})  # it would go on

    out, model, ws = run(tmp_path, script, task="write hello.py", mode=mode)

    assert out["status"] == "completed", out.get("error")
    assert (ws / "hello.py").read_text() == "print('hi')\n"
    assert model.calls("execute") == 1
    assert out["plan"].get("write_hello").result == "Created hello.py (12 bytes)"

    two = {**HELLO_STEP, "description": "Write hello.py and bye.py", "acceptance": "hello.py exists"}
    script = PurposeScript(
        plan=plan_of(two), execute=lambda req: "done" if req.tool_results() else {"tool_calls": [call]}
    )
    (tmp_path / "b").mkdir()
    out, model, _ws = run(tmp_path / "b", script, task="write hello.py", mode=mode)
    assert model.calls("execute") == 2 and out["plan"].get("write_hello").result == "done"


def test_a_module_is_not_asked_to_print_what_its_users_print() -> None:
    """The 1.5B's plans asked "`python rev.py` returns the reversed string 'abc'" of a module that defines
    reverse(s); its judge failed the right rev.py four times because the run "returns nothing". A write step that
    defines functions and says nothing of printing runs its module; what it returns is checked by the steps that
    use it. A script that says it prints, or a clause on another file, is left as planned."""
    from planmode.adapters.small_models.coverage import mend_module_runs
    from planmode.state.models import Plan

    def one(description: str, acceptance: str) -> str:
        step = Step(id="s", description=description, tools=["write_file"], acceptance=acceptance)
        mended, notes = mend_module_runs(Plan(goal="g", version=1, steps=[step]), workspace_tools(Path(".")))
        assert bool(notes) == (mended.steps[0].acceptance != acceptance)
        return mended.steps[0].acceptance

    rev = "Write rev.py with a function reverse(s) that returns the string s reversed"
    assert one(rev, "rev.py exists and `python rev.py` returns the reversed string 'abc'") == (
        "rev.py exists and `python rev.py` runs"
    )
    greet = "Write greet.py with a function greet(name) that returns 'Hello, ' + name + '!'"
    assert one(greet, "`python greet.py Ada` prints 'Hello, Ada!', and greet.py exists") == (
        "`python greet.py` runs, and greet.py exists"
    )
    assert one("Write list_primes.py that prints the primes", "`python list_primes.py` prints '2 3'") == (
        "`python list_primes.py` prints '2 3'"
    )
    assert one(rev, "`python demo.py` prints 'cba'") == "`python demo.py` prints 'cba'"
    assert one("Write rev.py that reverses its input", "`python rev.py` prints 'cba'") == "`python rev.py` prints 'cba'"


def test_in_a_step_naming_two_files_printing_is_said_of_the_file_it_follows(tmp_path: Path) -> None:
    """The 0.5B's step "Write greet.py with a function greet(name) ..., and main.py that imports greet and prints
    greet('Ada')", accepted by "`python greet.py` runs": greet.py ran, printed nothing (a module), and failed for
    "the step asks it to print" twice. The printing is main.py's."""
    from planmode.adapters.small_models.evidence import says_prints

    both = "Write greet.py with a function greet(name) that returns 'Hello, ' + name + '!', and main.py that prints it"
    assert not says_prints(both, "greet.py") and says_prints(both, "main.py") and says_prints(both)
    assert says_prints("Print the numbers in fizz.py, then notes.txt", "fizz.py")  # before the first name: its
    assert says_prints("Write count.py that prints the lines of notes.txt", "count.py")
    assert says_prints("Write report.py that reads temps.txt and prints each", "report.py")  # a file it uses

    step = {
        "id": "write_greet",
        "description": both,
        "tools": ["write_file"],
        "acceptance": "greet.py exists and `python greet.py` runs",
    }
    module = "def greet(name):\n    return 'Hello, ' + name + '!'\n"
    out, _, _ = run(
        tmp_path, PurposeScript(plan=plan_of(step), execute=writer("greet.py", module)), task="write greet.py"
    )
    assert out["plan"].get("write_greet").status.value == "done", out["plan"].get("write_greet").error


MARKUP = (
    '<tools>\n<function name="update_code" description="Edit the specified file. Read-only." '
    'parameters={"properties": {"file": {"type": "string"}}}>\n</tools>'
)


PROSE_WITH_CALLS = (  # the 1.5B's exploring answer on greet_names; the planner copied the calls as its "plan"
    "To plan this task, I need to read names.txt.\n\nHere's the detailed plan in JSON format:\n\n```json\n"
    '{\n  "name": "read_names",\n  "arguments": {\n    "path": "names.txt"\n  }\n}\n```\nThis plan reads it.'
)


@pytest.mark.parametrize(
    "answer", [MARKUP, '{"name": "update_code", "arguments": {"file": "calc.py"}}', PROSE_WITH_CALLS]
)
def test_an_exploring_answer_that_is_tool_markup_is_not_what_exploring_found(tmp_path: Path, answer: str) -> None:
    """The 1.5B answered exploring with a made-up tool's declaration (`<tools><function name="update_code" ...>`);
    shown it as what exploring found, the planner gave a step the tool update_code, and the run failed. Such an
    answer is not findings: the planner is shown what the read-only tools returned instead."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "calc.py").write_text("def double(x):\n    return x + 2\n")
    read = {"tool_calls": [tool_call("read_file", path="calc.py")]}
    script = PurposeScript(
        plan=plan_of(write_step()),
        execute=writer("mathx.py", GOOD),
        explore=lambda req: answer if req.tool_results() else read,
    )
    out, model, _ = run(tmp_path, script, max_explore_calls=2)
    assert out["status"] == "completed", out.get("error")
    shown = next(r for r in model.requests if r.purpose == "plan").text()
    assert "update_code" not in shown and "read_names" not in shown
    assert "What exploring found (the tools' results):" in shown and "return x + 2" in shown


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_file_the_acceptance_names_that_a_later_step_writes_is_not_looked_for_yet(tmp_path: Path, mode: str) -> None:
    """The 1.5B's README step had the acceptance "README.md exists and contains a link to counter.py"; it failed
    twice because counter.py, the next step's file, did not exist yet, and the run gave up. A file another open
    step writes is that step's to produce; the file the step itself writes is still looked for."""
    readme = {
        "id": "write_readme",
        "description": "Write README.md about counter.py",
        "tools": ["write_file"],
        "acceptance": "README.md exists and links to counter.py",
    }
    counter = {
        "id": "write_counter",
        "description": "Write counter.py that prints 1",
        "tools": ["write_file"],
        "dependencies": ["write_readme"],
        "acceptance": "`python counter.py` prints '1'",
    }
    files = {
        "write_readme": ("README.md", "# Counter\nSee counter.py\n"),
        "write_counter": ("counter.py", "print(1)\n"),
    }

    def execute(req: ScriptRequest) -> Any:
        path, content = next(v for k, v in files.items() if f"Step `{k}`" in req.text())
        return {"tool_calls": [tool_call("write_file", path=path, content=content)]}

    script = PurposeScript(plan=plan_of(readme, counter), execute=execute)
    out, _model, ws = run(tmp_path, script, task="write README.md and counter.py", mode=mode)

    assert out["status"] == "completed", out.get("error")
    assert out["plan"].get("write_readme").attempts == 1
    assert (ws / "counter.py").is_file()


@pytest.mark.parametrize(
    ("source", "status", "judged"),
    [
        ("import vowels\nprint(vowels.count_vowels('banana'))\n", "completed", 0),  # exactly the call's value
        ("import vowels\nprint(len('banana'))\n", "failed", 0),  # 6, not 3: failed on the evidence
        ("import vowels\nprint('Vowels:', vowels.count_vowels('banana'))\n", "failed", 1),  # a label: the judge's
    ],
)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_script_said_to_print_a_call_is_held_to_that_calls_value(
    tmp_path: Path, mode: str, source: str, status: str, judged: int
) -> None:
    """The 1.5B's judge failed a right show_vowels.py twice ("prints the string 'banana' instead of the vowel
    count"), beside the run that printed 3, for "prints count_vowels('banana')". The call is made on the workspace's
    vowels.py: a script that printed exactly its value is done without the judge (here a judge that fails
    everything), one that printed something else fails with the value named, and a label around it is judged."""
    step = {
        "id": "write_show",
        "description": "Write show_vowels.py that imports vowels.py and prints count_vowels('banana')",
        "tools": ["write_file"],
        "acceptance": "show_vowels.py exists and `python show_vowels.py` runs",
    }
    vowels = "def count_vowels(s):\n    return sum(c in 'aeiou' for c in s)\n"
    task = "Write show_vowels.py that prints count_vowels('banana')."
    out, model = against_a_failing_judge(
        tmp_path, step, "show_vowels.py", source, task, files={"vowels.py": vowels}, mode=mode
    )
    assert out["status"] == status and model.calls("verify") == judged
    if status == "failed" and not judged:
        assert "gives '3': print(count_vowels('banana'))" in (out["plan"].get("write_show").error or "")


@pytest.mark.parametrize(
    ("first", "later", "judged"),
    [
        ("", "Write the shout function in util/strings.py", ["write_shout"]),  # empty now, its content later
        ("x = 1\n", "Write the shout function in util/strings.py", ["create_strings"]),  # content: judged
        ("", "Write app.py that prints hi", ["create_strings"]),  # no later step names it: judged
    ],
)
def test_an_empty_file_a_step_only_creates_for_a_later_step_is_not_judged(
    tmp_path: Path, first: str, later: str, judged: list[str]
) -> None:
    """The 1.5B's plan created util/strings.py in one step and wrote its function in the next; its judge failed the
    empty file three times ("does not have the content it is supposed to have") and the run ended in a deadlock.
    A step that only creates a file, which it left empty for a later step of the plan, has nothing to judge;
    content, or no later step, is judged (here by a judge that fails the first step)."""
    create = {
        "id": "create_strings",
        "description": "Create strings.py file in the util directory",
        "tools": ["write_file"],
        "acceptance": "util/strings.py exists",
    }
    fill = {"id": "write_shout", "description": later, "tools": ["write_file"], "dependencies": ["create_strings"]}
    fill["acceptance"] = "util/strings.py exists" if "strings" in later else "app.py exists"
    target = "util/strings.py" if "strings" in later else "app.py"

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "done"
        if req.step_id == "create_strings":
            return {"tool_calls": [tool_call("write_file", path="util/strings.py", content=first)]}
        return {"tool_calls": [tool_call("write_file", path=target, content="def shout(s):\n    return s\n")]}

    def verify(req: ScriptRequest) -> Any:
        return {"passed": req.step_id != "create_strings", "reason": "it does not have the content it should"}

    script = PurposeScript(plan=plan_of(create, fill), execute=execute, verify=verify, reflect=GIVE_UP)
    out, model, _ = run(tmp_path, script, task="Create util/strings.py with shout(s).")
    assert [r.step_id for r in model.requests if r.purpose == "verify"] == judged
    assert out["status"] == ("completed" if judged == ["write_shout"] else "failed"), out.get("error")


PATCHED_AVG = {  # the step as round 14's patch left it: no "prints", and "standard input is empty" copied in
    "id": "write_avg_py",
    "description": "Update avg.py to remove the leading indentation from line 5. The script should be run with the "
    "input `20` and no arguments, as `sys.argv` has no file and standard input is empty.",
    "tools": ["write_file", "python"],
    "acceptance": "The script should run without errors and print the average of the score column and `python avg.py` "
    "runs",
}
AVG_TASK = "Write avg.py that reads data.csv and prints the average of the score column."


@pytest.mark.parametrize(
    "call",
    [
        {"name": "write_avg_py", "args": {"score": "20"}},  # the 1.5B's: no content, written as an empty avg.py
        {"name": "write_file", "args": {"path": "avg.py", "content": "rows = open('data.csv').read()\n"}},  # silent
    ],
)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_step_a_patch_rewrote_is_still_held_to_what_the_task_says_its_script_prints(
    tmp_path: Path, mode: str, call: dict[str, Any]
) -> None:
    """A false "completed" on the 1.5B (round 14's csv_average): a patch rewrote the step that writes avg.py as
    "Update avg.py to remove the leading indentation ... standard input is empty"; a call named after the step with
    no content was written as an empty avg.py (the step "said its file is empty"), it ran printing nothing, the
    judge passed it, and the run claimed the task. "empty" said of standard input is not said of a file, and a
    script the task says prints is held to printing, whatever its step now says."""

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "done"
        return {"tool_calls": [tool_call(call["name"], **call["args"])]}

    script = PurposeScript(plan=plan_of(PATCHED_AVG), execute=execute, verify={"passed": True}, reflect=GIVE_UP)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "data.csv").write_text("name,score\na,10\nb,20\nc,30\n")
    out, _, ws = run(tmp_path, script, mode=mode, task=AVG_TASK)
    assert out["status"] == "failed"
    assert not (ws / "avg.py").exists() or (ws / "avg.py").read_text().strip()  # never written empty


BIGGEST_NUMBERS = {  # the held-out biggest's plan: the first step's acceptance runs the next step's script
    "id": "write_numbers",
    "description": "Write numbers.txt with the numbers 4, 9 and 2, one per line.",
    "tools": ["write_file"],
    "acceptance": "numbers.txt exists and the largest number is printed by `python biggest.py`",
}
BIGGEST_TASK = (
    "Write numbers.txt with the numbers 4, 9 and 2, one per line. Then write biggest.py that reads numbers.txt and "
    "prints the largest number."
)


GOOD_BIGGEST = "print(max(int(x) for x in open('numbers.txt').read().split()))\n"


@pytest.mark.parametrize(
    ("acceptance", "source", "error"),
    [
        (BIGGEST_NUMBERS["acceptance"], GOOD_BIGGEST, None),
        (BIGGEST_NUMBERS["acceptance"], "print(max(open('numbers.txt').read().split()) + 1)\n", "TypeError"),
        # met by no step but the first's clause, which is run at the end: the run is not completed
        ("numbers.txt exists and `python biggest.py` prints '4'", GOOD_BIGGEST, "`python biggest.py` prints '4'"),
    ],
)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_clause_that_runs_a_later_steps_script_is_that_steps_and_is_run_at_the_end(
    tmp_path: Path, mode: str, acceptance: str, source: str, error: str | None
) -> None:
    """The held-out biggest: the step that wrote numbers.txt had "the largest number is printed by `python
    biggest.py`" in its acceptance, biggest.py being the next step's file, and failed on it until the run ended.
    That clause is the next step's: the first step is judged without it (the judge is told so), a biggest.py that
    raises fails its own step, and the clause still runs at the end of the run, where what it says is held."""
    biggest = {
        "id": "write_biggest",
        "description": "Write biggest.py that reads numbers.txt and prints the largest number.",
        "tools": ["write_file"],
        "dependencies": ["write_numbers"],
        "acceptance": "biggest.py exists",
    }
    files = {"write_numbers": ("numbers.txt", "4\n9\n2\n"), "write_biggest": ("biggest.py", source)}

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "done"
        return {"tool_calls": [tool_call("write_file", path=files[req.step_id][0], content=files[req.step_id][1])]}

    first = {**BIGGEST_NUMBERS, "acceptance": acceptance}
    script = PurposeScript(plan=plan_of(first, biggest), execute=execute, verify={"passed": True}, reflect=GIVE_UP)
    out, model, _ = run(tmp_path, script, mode=mode, task=BIGGEST_TASK)
    assert out["plan"].get("write_numbers").attempts == 1
    judged = next(r for r in model.requests if r.purpose == "verify" and r.step_id == "write_numbers").text()
    assert "Not judged here" in judged and "`python biggest.py`" in judged
    assert "can't open file" not in judged
    assert out["status"] == ("completed" if error is None else "failed"), out["report"]["error"]
    if error is not None:
        assert error in (out["report"]["error"] or "") + (out["plan"].get("write_biggest").error or "")


@pytest.mark.parametrize(
    ("acceptance", "wrote", "kept", "theirs"),
    [
        (
            BIGGEST_NUMBERS["acceptance"],
            [],
            "numbers.txt exists",
            ["the largest number is printed by `python biggest.py`"],
        ),
        (
            "`python biggest.py` prints 4, 9 and 2; numbers.txt has 3 lines",
            [],
            "numbers.txt has 3 lines",
            ["`python biggest.py` prints 4, 9 and 2"],
        ),
        (
            "numbers.txt exists, has 3 lines and is read by biggest.py",
            [],
            "numbers.txt exists, has 3 lines",
            ["is read by biggest.py"],
        ),
        (BIGGEST_NUMBERS["acceptance"], ["/ws/biggest.py"], BIGGEST_NUMBERS["acceptance"], []),  # it wrote it: its own
        (
            "biggest.py exists and `python biggest.py` prints 9",
            [],
            "",
            ["biggest.py exists and `python biggest.py` prints 9"],
        ),
        ("numbers.txt exists", [], "numbers.txt exists", []),
    ],
)
def test_own_acceptance_leaves_out_only_what_another_steps_file_meets(
    acceptance: str, wrote: list[str], kept: str, theirs: list[str]
) -> None:
    step = Step(id="write_numbers", description="Write numbers.txt with 4, 9 and 2.", acceptance=acceptance)
    assert own_acceptance(step, frozenset({"biggest.py"}), wrote) == (kept, theirs)


@pytest.mark.parametrize(
    ("task", "status"),
    [
        ("Create util/strings.py with shout(s).", "failed"),  # the task asks for its content: empty is not done
        ("Create util/strings.py.", "completed"),  # the task only creates it
        ("Create util/strings.py as an empty module for shout(s).", "completed"),  # the task says it is empty
    ],
)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_file_left_empty_for_a_later_step_a_repair_removed_is_not_completed(
    tmp_path: Path, mode: str, task: str, status: str
) -> None:
    """An empty file a step only creates passes without a judge while a later open step names it (its content is
    that step's). If a repair then removes that step, nothing fills the file: the run does not end `completed` with
    an empty util/strings.py the task asks a function of. A task that only creates the file, or says it is empty,
    is still done."""
    create = {
        "id": "create_strings",
        "description": "Create strings.py file in the util directory",
        "tools": ["write_file"],
        "acceptance": "util/strings.py exists",
    }
    fill = {
        "id": "write_shout",
        "description": "Write the shout function in util/strings.py",
        "tools": ["write_file"],
        "dependencies": ["create_strings"],
        "acceptance": "util/strings.py exists",
    }

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results() or req.step_id != "create_strings":
            return "nothing to write"  # the later step writes nothing: it fails
        return {"tool_calls": [tool_call("write_file", path="util/strings.py", content="")]}

    drop = {"assessment": "needs_adjustment", "reasoning": "not needed", "remove_steps": ["write_shout"]}
    script = PurposeScript(plan=plan_of(create, fill), execute=execute, reflect=drop)
    out, _, ws = run(tmp_path, script, mode=mode, task=task)
    assert out["plan"].get("create_strings").status.value == "done"
    assert out["plan"].get("write_shout") is None  # the repair removed it
    assert (ws / "util" / "strings.py").read_text() == ""
    assert out["status"] == status, out["report"]["error"]
    if status == "failed":
        assert "util/strings.py (step 'create_strings' created it empty" in out["report"]["error"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_later_failed_judgement_that_gives_a_repair_is_read_as_that_repair(tmp_path: Path, mode: str) -> None:
    """The 1.5B's second reflection said "failed" and, in the same answer, gave the steps to add or change (round
    14's greet_main, greet_names, temps_three), and the run ended with reflections and time left. With
    retry_judged_failed, such a "failed" is read as needs_adjustment and its repair is applied; a "failed" with no
    repair still ends the run (`test_a_first_failed_judgement_is_a_retry_when_asked_and_a_second_ends_the_run`)."""
    step = write_step("mathx.py exists and `python mathx.py` runs")
    broken = "from mathx import add\nprint(add(1, 2))\n"

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "done"
        content = GOOD if "without importing itself" in req.text() else broken
        return {"tool_calls": [tool_call("write_file", path="mathx.py", content=content)]}

    fix = {"id": "write_mathx", "description": "Write mathx.py with add(a, b), without importing itself"}
    reflect = [
        {"assessment": "failed", "reasoning": "mathx.py has a circular import"},  # the first: a retry
        {"assessment": "failed", "reasoning": "it imports itself", "update_steps": [fix]},  # with its repair
    ]
    script = PurposeScript(plan=plan_of(step), execute=execute, reflect=reflect)
    out, model, ws = run(tmp_path, script, mode=mode, retry_judged_failed=True)
    assert out["status"] == "completed", out["report"]["error"]
    assert model.calls("reflect") == 2 and (ws / "mathx.py").read_text() == GOOD
    assert out["plan"].get("write_mathx").description == fix["description"]  # the reflection's repair, applied

    (tmp_path / "b").mkdir()
    script = PurposeScript(plan=plan_of(step), execute=execute, reflect=reflect)
    out, model, _ = run(tmp_path / "b", script, mode=mode)  # not asked for: the model's first word ends the run
    assert out["status"] == "failed" and model.calls("reflect") == 1


@pytest.mark.parametrize(
    ("content", "judged"),
    [
        ("4\n9\n2\n", False),  # the lines the step describes: its layout is seen, nothing is left to judge
        ("4 9 2\n", True),  # on one line: the lines are not as described, and the judge decides (here: fails it)
    ],
)
def test_a_layout_clause_is_decided_by_the_check_that_held_the_file_to_its_lines(
    tmp_path: Path, content: str, judged: bool
) -> None:
    """The held-out biggest's judge failed a right numbers.txt ('4\\n9\\n2') seven times on "numbers.txt exists and
    contains the numbers 4, 9, and 2, separated by newlines" ("The file 'numbers.txt' does not exist"), and the
    run failed. Every clause but the layout was a passed check, and the check that the file reads the lines the step
    describes decides the layout too. A file on one line is not decided by it: the judge is asked."""
    step = {
        "id": "write_numbers",
        "description": "Write numbers.txt with the numbers 4, 9, and 2, one per line.",
        "tools": ["write_file"],
        "acceptance": "numbers.txt exists and contains the numbers 4, 9, and 2, separated by newlines.",
    }
    task = "Write numbers.txt with the numbers 4, 9 and 2, one per line."
    out, model = against_a_failing_judge(
        tmp_path, step, "numbers.txt", content, task, reason="The file 'numbers.txt' does not exist."
    )
    assert out["status"] == ("failed" if judged else "completed"), out["report"]["error"]
    assert (model.calls("verify") > 0) == judged


@pytest.mark.parametrize(
    ("description", "source", "status", "judged"),
    [
        ("Create mathx.py with a function add(a, b) returning a + b", GOOD, "completed", False),  # a module: silent
        ("Create mathx.py with a function add(a, b) returning a + b", GOOD + "print(add(1, 1))\n", "failed", True),
        ("Create mathx.py that prints add(2, 3)", GOOD, "failed", False),  # said to print, printed nothing
    ],
)
def test_runs_with_the_correct_output_is_decided_by_a_silent_run_only_where_nothing_asks_for_output(
    tmp_path: Path, description: str, source: str, status: str, judged: bool
) -> None:
    """The 1.5B's judge failed a right mathx.py ten times on "`python mathx.py` runs with the correct output" ("the
    actual output is `None`"), every check passed, and the run failed. A module that only defines its function prints
    nothing, and nothing asks it to: the run decides the clause. Output is left to the judge (here one that fails
    everything), and a script said to print that prints nothing fails without it."""
    step = write_step("mathx.py exists and `python mathx.py` runs with the correct output", description=description)
    out, model = against_a_failing_judge(
        tmp_path, step, "mathx.py", source, f"{description}.", reason="the actual output is `None`"
    )
    assert out["status"] == status, out["report"]["error"]
    assert (model.calls("verify") > 0) == judged


@pytest.mark.parametrize(
    ("source", "status"),
    [
        ("with open('notes.txt') as f:\n    print(len(f.readlines()))\n", "completed"),  # 3: decided, not judged
        ("print(5)\n", "failed"),  # not the count notes.txt has: the count check fails it
    ],
)
def test_prints_the_correct_number_of_lines_is_decided_by_the_count_check(
    tmp_path: Path, source: str, status: str
) -> None:
    """The 1.5B's judge failed a right count_lines.py (it printed 3 for a three-line notes.txt) twice on "`python
    count_lines.py` prints the correct number of lines", beside a passed check that it printed the number of lines
    in notes.txt, and the model then rewrote it to read standard input. The count check decides the clause."""
    step = {
        "id": "write_count_lines",
        "description": "Write count_lines.py that prints the number of lines in notes.txt",
        "tools": ["write_file"],
        "acceptance": "count_lines.py exists and `python count_lines.py` prints the correct number of lines",
    }
    task = "Write count_lines.py that prints the number of lines in notes.txt."
    out, model = against_a_failing_judge(
        tmp_path, step, "count_lines.py", source, task, files={"notes.txt": "Line 1\nLine 2\nLine 3"}
    )
    assert out["status"] == status, out["report"]["error"]
    assert model.calls("verify") == 0  # decided by the checks, either way


def test_a_patch_whose_new_step_the_step_cap_cuts_off_is_told_why_and_what_to_do(tmp_path: Path) -> None:
    """Round 15's package_util: its plan at the cap of 5 steps, the 1.5B sent added steps in two repairs, refused
    "the patch changes nothing" six times (the cap had cut them off), and the run ran out its 600 s. The refusal it is
    shown says the plan is full and to update the failed step; here the model then does, and the run completes."""
    first = write_step("mathx.py exists")
    second = {
        "id": "write_app",
        "description": "Write app.py that prints 3",
        "tools": ["write_file"],
        "dependencies": ["write_mathx"],
        "acceptance": "`python app.py` prints '3'",
    }

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "done"
        if req.step_id == "write_mathx":
            return {"tool_calls": [tool_call("write_file", path="mathx.py", content=GOOD)]}
        fixed = "with print(add(1, 2))" in req.text()
        content = "from mathx import add\nprint(add(1, 2))\n" if fixed else "print(2)\n"
        return {"tool_calls": [tool_call("write_file", path="app.py", content=content)]}

    add = {"id": "fix_app", "description": "Fix app.py to print 3", "tools": ["write_file"], "after": "write_app"}
    reflect = {"assessment": "needs_adjustment", "reasoning": "app.py prints 2", "add_steps": [add]}
    update = {"id": "write_app", "description": "Write app.py with print(add(1, 2)) that prints 3"}
    patch = {"reason": "fix it in place", "update_steps": [update]}
    script = PurposeScript(plan=plan_of(first, second), execute=execute, reflect=reflect, patch=patch)
    out, model, _ = run(tmp_path, script, max_steps=2, max_patch_attempts=2)
    assert out["status"] == "completed", out["report"]["error"]
    [asked] = [r for r in model.requests if r.purpose == "patch"]
    told = "the plan already has its most steps (2), so no step can be added: update 'write_app' (the failed step)"
    assert told in asked.text() and "the patch changes nothing" not in asked.text()


@pytest.mark.parametrize(
    ("printed", "hinted"),
    [
        (["Hi  Ada", "Hi  Grace"], True),  # print('Hi ', name)
        (["Hi Ada", "Hi  Grace"], True),
        (["Hi Ada"], False),  # a line missing: not a spacing slip
        (["Hello Ada", "Hello Grace"], False),  # other words
        (["Hi Ada", "Hi Grace"], False),  # right
    ],
)
def test_a_doubled_space_from_prints_arguments_is_named_with_its_fix(printed: list[str], hinted: bool) -> None:
    from planmode.adapters.small_models.evidence import _spacing_hint

    hint = _spacing_hint(printed, ["Hi Ada", "Hi Grace"], "Hi ")
    assert bool(hint) is hinted
    assert not hinted or "print('Hi ' + name)" in hint


@pytest.mark.parametrize(
    ("convert", "hinted"),
    [
        ("def c_to_f(c):\n    return c * 9 / 5 + 32\n\nprint(c_to_f(0))\nprint(c_to_f(100))\n", True),
        ("def c_to_f(c):\n    return c * 9 / 5 + 32\n\nfor c in (0, 100):\n    print(c_to_f(c))\n", True),
        ("def c_to_f(c):\n    return c * 9 / 5 + 32\n\nif __name__ == '__main__':\n    print(c_to_f(0))\n", False),
    ],
)
def test_a_script_whose_output_is_wrong_is_told_a_module_it_imports_prints_on_import(
    tmp_path: Path, convert: str, hinted: bool
) -> None:
    """Round 15's temps_three: convert.py ended in "example usage" prints, report.py imported it and printed
    '32.0\\n212.0' twice, and the 1.5B, shown only the output, judged c_to_f wrong and gave up. The failure names
    the module that prints when imported, and the fix; a module whose prints are under `__main__` is not named."""
    step = {
        "id": "write_report",
        "description": "Write report.py that imports convert and prints c_to_f(0) and c_to_f(100) on one line",
        "tools": ["write_file"],
        "acceptance": "`python report.py` runs",
    }
    report = "import convert\nprint(convert.c_to_f(0), convert.c_to_f(100))\n"
    script = PurposeScript(plan=plan_of(step), execute=writer("report.py", report), reflect=GIVE_UP)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "convert.py").write_text(convert)
    out, _, _ = run(tmp_path, script, task="Write report.py that prints c_to_f(0) and c_to_f(100) on one line.")
    assert out["status"] == ("failed" if hinted else "completed")
    error = out["plan"].get("write_report").error or ""
    assert ("it printed" in error) is hinted, error
    told = "convert.py prints when it is imported (its top-level print() runs first): put those lines under `if"
    assert (told in error) is hinted, error


@pytest.mark.parametrize(
    ("name", "path", "written"),
    [
        ("write_double_function", "calc.py", True),  # round 15's fix_double, nine times refused
        ("create_double", "./calc.py", True),
        ("write_double_function", "other.py", False),  # not the step's file: stays unknown
        ("update_double_function", "calc.py", False),  # says another change than a whole write
        ("double_function", "calc.py", False),  # does not say it writes
        ("write_notes_txt", "calc.py", False),  # names another file (the step before): a confused call
        ("write_calc_py", "calc.py", True),
    ],
)
def test_an_unknown_call_that_says_it_writes_the_steps_own_file_is_its_write(
    tmp_path: Path, name: str, path: str, written: bool
) -> None:
    """Round 15's fix_double: in a step that writes calc.py, the 1.5B called write_double_function with calc.py's
    path and content nine times, each refused as an unknown tool, and the run failed. An unknown tool whose name
    says it writes, called with exactly the step's own file and a content, is the step's write tool (its gate
    applies); another file, another change, or a name that says no write stays unknown."""
    step = {
        "id": "add_double_function",
        "description": "Write calc.py with double(x) that returns x * 2",
        "tools": ["write_file"],
        "acceptance": "calc.py exists",
    }
    good = "def double(x):\n    return x * 2\n"
    call = {"name": name, "args": {"path": path, "content": good}}
    script = PurposeScript(
        plan=plan_of(step),
        execute=lambda req: "done" if req.tool_results() else {"tool_calls": [call]},
        reflect=GIVE_UP,
    )
    out, _, ws = run(tmp_path, script, task="Write calc.py with double(x) that returns x * 2.")
    assert (ws / "calc.py").is_file() is written
    assert not (ws / "other.py").exists()
    assert out["status"] == ("completed" if written else "failed"), out["report"]["error"]


@pytest.mark.parametrize(
    ("content", "status"),
    [("4\n9\n2\n", "completed"), ("4 9 2\n", "failed")],  # decided by the lines, either way: no judge
)
@pytest.mark.parametrize("said", ["4\n9\n2", "4\\n9\\n2"])  # line breaks real (JSON's \n), or written out
def test_a_files_whole_text_given_unquoted_is_checked(tmp_path: Path, content: str, status: str, said: str) -> None:
    """The held-out biggest (at f0bc382): the plan's acceptance "numbers.txt exists and its contents are 4\\n9\\n2"
    (the line breaks real), a right numbers.txt, and a judge that failed it five times ("not created at all");
    the run failed. Unquoted lines given as a file's contents are checked as its whole text."""
    step = {
        "id": "write_numbers",
        "description": "Write numbers.txt",
        "tools": ["write_file"],
        "acceptance": f"numbers.txt exists and its contents are {said}",
    }
    task = "Write numbers.txt with 4, 9 and 2, one per line."
    out, model = against_a_failing_judge(
        tmp_path, step, "numbers.txt", content, task, reason="The file 'numbers.txt' was not created at all."
    )
    assert out["status"] == status, out["report"]["error"]
    assert model.calls("verify") == 0
