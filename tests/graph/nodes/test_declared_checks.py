"""Checks are data (issue 42): a step's checks are part of its approved definition, verify runs them in the sandbox
and nothing else, a failed check decides (no judge overrules it), a step whose checks pass and that has no prose is
done without a judge call, and finalize runs every done step's checks again.

Graph runs on a real SQLite file with the workspace tools and the scripted model (a test double), sync and async."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from planmode.graph import build_graph
from planmode.persistence import async_sqlite_checkpointer, sqlite_checkpointer
from planmode.sandbox import sandbox_status
from planmode.state.approvals import definition_digest
from planmode.state.models import FileCheck, Plan, Step
from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest, tool_call
from planmode.tools import workspace_tools

CFG = {"configurable": {"thread_id": "t"}}
TASK = "write app.py"
PASS = {"passed": True, "reason": "looks right"}


def writer(files: dict[str, str], then: str = "wrote it") -> Callable[[ScriptRequest], Any]:
    """An execute turn that really calls write_file for each of ``files``, then answers."""

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return then
        return {"tool_calls": [tool_call("write_file", path=p, content=c) for p, c in files.items()]}

    return execute


def one_step(**step: Any) -> dict[str, Any]:
    base = {"id": "write_app", "description": "Write app.py", "tools": ["write_file"]}
    return {"title": "app", "steps": [{**base, **step}]}


def run(
    tmp_path: Path, script: PurposeScript, *, mode: str = "sync", files: dict[str, str] | None = None, **context: Any
) -> tuple[dict[str, Any], ScriptedChatModel, Path]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    for name, text in (files or {}).items():
        (ws / name).write_text(text)
    model = ScriptedChatModel(responder=script)
    ctx = {"mode": "plan", "approval": "auto", "max_explore_calls": 0, "max_attempts": 1, **context}
    tools = workspace_tools(ws)
    if mode == "sync":
        saver = sqlite_checkpointer(tmp_path / "runs.sqlite")
        try:
            graph = build_graph(model, tools=tools, checkpointer=saver)
            out: dict[str, Any] = graph.invoke({"task": TASK}, CFG, context=ctx)
        finally:
            saver.conn.close()
    else:

        async def arun() -> dict[str, Any]:
            async with async_sqlite_checkpointer(tmp_path / "runs.sqlite") as asaver:
                graph = build_graph(model, tools=tools, checkpointer=asaver)
                result: dict[str, Any] = await graph.ainvoke({"task": TASK}, CFG, context=ctx)
                return result

        out = asyncio.run(arun())
    return out, model, ws


def judge_calls(model: ScriptedChatModel) -> int:
    return sum(1 for r in model.requests if r.purpose == "verify")


GIVE_UP = {"assessment": "failed", "reasoning": "the step cannot be done"}


# -- checks decide -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_step_whose_checks_pass_completes_without_a_judge_call(tmp_path: Path, mode: str) -> None:
    checks = [
        {"kind": "file", "path": "app.py", "contains": ["print"]},
        {"kind": "run", "command": "python app.py", "stdout": "hello"},
    ]
    script = PurposeScript(plan=one_step(checks=checks), execute=writer({"app.py": "print('hello')\n"}), verify=PASS)

    out, model, _ = run(tmp_path, script, mode=mode)

    assert out["status"] == "completed", out["messages"][-1].content
    assert judge_calls(model) == 0


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_wrong_output_fails_the_step_even_when_the_judge_says_passed(tmp_path: Path, mode: str) -> None:
    checks = [{"kind": "run", "command": "python app.py", "stdout": "hello"}]
    step = one_step(checks=checks, acceptance="the greeting is friendly")
    script = PurposeScript(
        plan=step, execute=writer({"app.py": "print('Hello there, world')\n"}), verify=PASS, reflect=GIVE_UP
    )

    out, model, _ = run(tmp_path, script, mode=mode)

    assert out["status"] == "failed"
    assert judge_calls(model) == 0  # the failed check decided: the judge was never asked
    step_error = out["plan"].get("write_app").error or ""
    assert "expected 'hello'" in step_error and "Hello there, world" in step_error


def test_only_prose_goes_to_the_judge_with_the_check_results_as_evidence(tmp_path: Path) -> None:
    checks = [{"kind": "run", "command": "python app.py", "stdout_contains": ["hello"]}]
    step = one_step(checks=checks, acceptance="the greeting is friendly")
    script = PurposeScript(plan=step, execute=writer({"app.py": "print('hello friend')\n"}), verify=PASS)

    out, model, _ = run(tmp_path, script)

    assert out["status"] == "completed"
    judged = [r.text() for r in model.requests if r.purpose == "verify"]
    assert len(judged) == 1
    assert "Declared checks, run by planmode" in judged[0] and "hello friend" in judged[0]


def test_the_retry_is_shown_the_failed_checks_output(tmp_path: Path) -> None:
    checks = [{"kind": "run", "command": "python app.py", "exit_code": 0}]
    attempts: list[str] = []

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "done"
        attempts.append(req.text())
        body = "raise SystemExit('boom: config missing')\n" if len(attempts) == 1 else "print('ok')\n"
        return {"tool_calls": [tool_call("write_file", path="app.py", content=body)]}

    script = PurposeScript(plan=one_step(checks=checks), execute=execute)

    out, _, _ = run(tmp_path, script, max_attempts=2)

    assert out["status"] == "completed"
    assert len(attempts) == 2 and "boom: config missing" in attempts[1]


# -- verify runs nothing that the plan does not declare ----------------------------------------------------


def test_verify_runs_no_command_that_the_plan_does_not_declare(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    evil = f"open({str(marker)!r}, 'w').write('ran')\n"
    # the prose names a command; nothing declares it: it must never run (only the judge reads the prose)
    step = one_step(acceptance="`python app.py` runs and `python evil.py` prints nothing")
    script = PurposeScript(plan=step, execute=writer({"app.py": "print(1)\n"}), verify=PASS)

    out, _, _ = run(tmp_path, script, files={"evil.py": evil})

    assert out["status"] == "completed"
    assert not marker.exists()


def test_a_command_the_settings_do_not_allow_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    plan = one_step(checks=[{"kind": "run", "command": f"touch {marker}"}])
    script = PurposeScript(plan=plan, execute=writer({"app.py": "print(1)\n"}), reflect=GIVE_UP)

    out, model, _ = run(tmp_path, script, max_plan_attempts=1)

    assert out["status"] == "failed"
    assert "`touch` is not a command checks may run" in str(out["messages"][-1].content)
    assert not marker.exists()
    assert not any(r.purpose == "execute" for r in model.requests)  # the planner's plan was refused


def test_the_command_guard_holds_where_the_command_runs(tmp_path: Path) -> None:
    # whatever reached the plan (an edit, a state update), run_checks refuses a program the run does not allow
    from planmode.checks import run_checks
    from planmode.sandbox import SandboxPolicy
    from planmode.state.checks import RunCheck

    marker = tmp_path / "ran.txt"
    for command in (f"touch {marker}", f"/usr/bin/touch {marker}", f"./python {marker}", "sh -c 'touch x'"):
        results = run_checks([RunCheck(command=command)], tmp_path, allowed=["python"], policy=SandboxPolicy())
        assert results[0].passed is False and "not a command checks may run" in results[0].detail
    assert not marker.exists()


def test_a_write_step_without_a_check_or_prose_is_sent_back_to_the_planner(tmp_path: Path) -> None:
    bare = one_step()
    fixed = one_step(checks=[{"kind": "file", "path": "app.py"}])
    script = PurposeScript(plan=[bare, fixed], execute=writer({"app.py": "print(1)\n"}))

    out, model, _ = run(tmp_path, script)

    assert out["status"] == "completed"
    asked = [r.text() for r in model.requests if r.purpose == "plan"]
    assert len(asked) == 2 and "declares no check" in asked[1]


def test_a_check_that_runs_code_cannot_read_the_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-openai")
    monkeypatch.setenv("PLANMODE_APPROVAL_KEY", "secret-approval-key")
    leak = "import os\nprint(os.environ.get('OPENAI_API_KEY'), os.environ.get('PLANMODE_APPROVAL_KEY'))\n"
    checks = [{"kind": "run", "command": "python leak.py", "stdout": "None None"}]
    plan = one_step(checks=checks, acceptance="`python leak.py` runs")  # prose naming the command runs nothing
    script = PurposeScript(plan=plan, execute=writer({"leak.py": leak}), verify=PASS, reflect=GIVE_UP)

    out, model, _ = run(tmp_path, script)

    assert out["status"] == "completed", out["messages"][-1].content
    every_request = "\n".join(r.text() for r in model.requests)
    assert "sk-secret-openai" not in every_request and "secret-approval-key" not in every_request


@pytest.mark.skipif(not sandbox_status().active, reason="bubblewrap is not active here")
def test_under_bubblewrap_a_check_cannot_write_outside_the_workspace(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"  # under /tmp: the sandbox's own /tmp takes the write, the host never sees it
    at_home = Path.home() / "planmode-sandbox-probe.txt"  # the home is hidden and read-only
    code = (
        f"for p in ({str(outside)!r}, {str(at_home)!r}):\n"
        "    try:\n        open(p, 'w').write('x')\n    except OSError:\n        print('refused', p)\n"
    )
    checks = [{"kind": "run", "command": "python w.py", "stdout_contains": [f"refused {at_home}"]}]
    plan = one_step(checks=checks, acceptance="`python w.py` runs")
    script = PurposeScript(plan=plan, execute=writer({"w.py": code}), verify=PASS, reflect=GIVE_UP)

    out, _, _ = run(tmp_path, script)

    assert out["status"] == "completed", out["messages"][-1].content
    assert not outside.exists() and not at_home.exists()


def test_with_running_checks_off_no_command_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    code = f"open({str(marker)!r}, 'w').write('ran')\n"
    checks = [{"kind": "run", "command": "python app.py"}]
    script = PurposeScript(plan=one_step(checks=checks), execute=writer({"app.py": code}), verify=PASS)

    out, _, _ = run(tmp_path, script, run_checks=False)

    assert out["status"] == "completed"
    assert not marker.exists()


# -- finalize re-runs the checks -----------------------------------------------------------------------------


def test_a_later_step_that_breaks_an_earlier_steps_check_fails_the_run(tmp_path: Path) -> None:
    plan = {
        "title": "two",
        "steps": [
            {
                "id": "write_util",
                "description": "Write util.py",
                "tools": ["write_file"],
                "checks": [{"kind": "run", "command": 'python -c "import util; print(util.two())"', "stdout": "2"}],
            },
            {
                "id": "rewrite_util",
                "description": "Rewrite util.py",
                "tools": ["write_file"],
                "dependencies": ["write_util"],
                "checks": [{"kind": "file", "path": "util.py", "contains": ["three"]}],
            },
        ],
    }

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "done"
        body = "def two():\n    return 2\n" if req.step_id == "write_util" else "def three():\n    return 3\n"
        return {"tool_calls": [tool_call("write_file", path="util.py", content=body)]}

    out, _, ws = run(tmp_path, PurposeScript(plan=plan, execute=execute))

    assert out["status"] == "failed"
    said = str(out["messages"][-1].content)
    assert "write_util" in said and "end of the run" in said
    assert (ws / "util.py").read_text().startswith("def three")  # the recheck ran on a copy: nothing changed


# -- checks are part of what is approved ----------------------------------------------------------------------


def test_a_check_edited_after_approval_is_a_step_nobody_approved() -> None:
    step = Step(id="a", description="d", checks=[{"kind": "run", "command": "python a.py", "stdout": "1"}])
    edited = step.model_copy(update={"checks": [step.checks[0].model_copy(update={"stdout": "2"})]})
    assert definition_digest(step, "g") != definition_digest(edited, "g")
    assert Plan(goal="g", steps=[step]).shape != Plan(goal="g", steps=[edited]).shape


def test_a_step_without_checks_hashes_as_before_checks_existed() -> None:
    # plans approved before checks existed stay approved: a step without checks hashes as the five fields did
    import hashlib
    import json

    plain = Step(id="a", description="d", tools=["write_file"], acceptance="ok")
    before = ["g", "a", "d", [], ["write_file"], "medium", "ok"]
    blob = json.dumps(before, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert definition_digest(plain, "g") == hashlib.sha256(blob.encode()).hexdigest()[:24]


def test_the_small_model_adapter_is_not_imported_by_a_default_run(tmp_path: Path) -> None:
    code = (
        "import sys, pathlib\n"
        "from planmode.graph import build_graph\n"
        "from planmode.testing.scripted import PurposeScript, ScriptedChatModel\n"
        "from planmode.tools import workspace_tools\n"
        f"ws = pathlib.Path({str(tmp_path)!r})\n"
        "g = build_graph(ScriptedChatModel(responder=PurposeScript()), tools=workspace_tools(ws))\n"
        "cfg = {'configurable': {'thread_id': 't'}}\n"
        "g.invoke({'task': 'say hi'}, cfg, context={'mode': 'plan', 'approval': 'auto'})\n"
        "print('small_models' in ' '.join(sys.modules))\n"
    )
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3] / "src")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "False"


def test_prose_checks_reads_backticked_commands_as_planmodes_checks() -> None:
    from planmode.adapters.small_models import prose_checks

    step = Step(id="a", description="Write app.py", tools=["write_file"], acceptance="`python app.py` runs")
    plan, notes = prose_checks(Plan(goal="g", steps=[step]), ["python"])
    [check] = plan.steps[0].checks
    assert check.command == "python app.py" and check.by == "planmode" and notes
    plan, notes = prose_checks(Plan(goal="g", steps=[step]), [])  # a program the run does not allow: none
    assert plan.steps[0].checks == [] and not notes


def test_without_the_adapter_prose_becomes_no_check(tmp_path: Path) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    ws = tmp_path / "ws"
    ws.mkdir()
    step = one_step(acceptance="app.py exists and `python app.py` runs")
    model = ScriptedChatModel(responder=PurposeScript(plan=step))
    graph = build_graph(model, tools=workspace_tools(ws), checkpointer=InMemorySaver())
    graph.invoke({"task": TASK}, CFG, context={"mode": "plan", "max_explore_calls": 0})
    payload = graph.get_state(CFG).interrupts[0].value
    assert payload["plan"]["steps"][0]["checks"] == [] and payload["checks"]["commands"] == []
    assert "Commands the checks run" not in payload["markdown"]


def test_a_human_edits_checks_in_the_toml_form() -> None:
    from planmode.cli.plan_form import read_form, to_form

    step = Step(
        id="a",
        description="d",
        tools=["write_file"],
        checks=[
            {"kind": "run", "command": "python a.py", "stdout": "1\n2"},
            {"kind": "file", "path": "a.json", "json": {"k": [1]}},
        ],
    )
    plan = Plan(goal="g", steps=[step])
    form = to_form(plan, [])
    assert 'command = "python a.py"' in form and "json = {k = [1]}" in form
    back = read_form(form, plan)
    assert not hasattr(back, "message") and Step.model_validate(back["steps"][0]).checks == step.checks
    edited = read_form(form.replace('stdout = "1\\n2"', 'stdout = "3"'), plan)
    assert Step.model_validate(edited["steps"][0]).checks[0].stdout == "3"
    removed = read_form(form.replace('  {kind = "file", path = "a.json", json = {k = [1]}},\n', ""), plan)
    assert [c.kind for c in Step.model_validate(removed["steps"][0]).checks] == ["run"]
    bad = read_form(form.replace("checks = [", "checks = 3\nx = ["), plan)
    assert hasattr(bad, "message")


def test_planmodes_own_probe_code_is_not_shadowed_by_a_workspace_module(tmp_path: Path) -> None:
    from planmode.adapters.small_models.evidence import _in_workspace

    marker = tmp_path / "shadowed.txt"
    (tmp_path / "json.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    (tmp_path / "mine.py").write_text("VALUE = 7\n")
    done = _in_workspace("probe", ["-c", "import json, mine; print(json.dumps(mine.VALUE))"], tmp_path)
    assert not isinstance(done, type(None)) and getattr(done, "returncode", None) == 0, done
    assert done.stdout.strip() == "7" and not marker.exists()


def test_a_plan_without_checks_keeps_the_revision_and_shape_it_had_before_checks_existed() -> None:
    # an approval asked before the upgrade names this revision: it must still be the plan shown
    plan = Plan(
        goal="g",
        title="t",
        steps=[
            Step(id="a", description="d", tools=["write_file"], acceptance="ok"),
            Step(id="b", description="e", dependencies=["a"]),
        ],
    )
    assert (plan.revision, plan.shape) == ("4656d0b00d5a32b6", "74379e73b2ac934b")  # as computed by 7c2ede4
    with_check = plan.steps[0].model_copy(update={"checks": [FileCheck(path="x")]})
    checked = plan.model_copy(update={"steps": [with_check]})
    assert checked.revision != Plan(goal="g", title="t", steps=[plan.steps[0]]).revision
