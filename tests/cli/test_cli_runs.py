"""Runs as the CLI keeps and shows them (issue 23 items 4 and 6, issue 22 §2): a new task never replaces an earlier run,
each run says what it is and what to do next, ``--json`` for scripts, one labelled time zone; and ``run``'s settings
options come from `PlanModeContext`'s fields. Real subprocesses (a pty for Ctrl-C), a real SQLite file and the
scripted OpenAI-compatible server."""

from __future__ import annotations

import json
import re
import shlex
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

import pexpect
import pytest

from planmode.context import PlanModeContext
from planmode.testing.openai_server import Fault, ScriptedOpenAIServer
from tests.cli.test_cli_daily import HOSTILE, _purpose, cli, responder, spawn

pytestmark = pytest.mark.integration

TASK = "Write notes.md, then read it back"


def _run(db: Path | str, ws: Path, url: str, *extra: str, task: str = TASK, thread: str | None = "t1") -> Any:
    args = ["run", task, "--workspace", str(ws), "--db", str(db), "--mode", "plan", "--base-url", url, *extra]
    if thread is not None:
        args += ["--thread", thread]
    return cli(*args, OPENAI_API_KEY="test")


def _json(*args: str) -> Any:
    proc = cli(*args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


# -- issue 22 §2: run's settings options are generated from the settings' fields --------------------------------


def test_run_offers_every_setting_with_its_env_var() -> None:
    proc = cli("run", "--help", COLUMNS="400")
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    for f in fields(PlanModeContext):
        flag = "--" + f.name.replace("_", "-")
        if f.name == "negotiated_output":  # written by planmode, not a user's setting
            assert flag not in text
            continue
        assert flag in text, flag
        if f.name != "workspace":
            env = "OPENAI_BASE_URL" if f.name == "base_url" else f"PLANMODE_{f.name.upper()}"
            assert env in text, env


def test_the_settings_run_missed_reach_the_run(tmp_path: Path) -> None:
    from planmode.graph import build_graph
    from planmode.persistence import sqlite_checkpointer

    db = tmp_path / "runs.sqlite"
    with ScriptedOpenAIServer(responder()) as srv:
        proc = cli(
            "run",
            TASK,
            "--workspace",
            str(tmp_path),
            "--db",
            str(db),
            "--thread",
            "t1",
            "--mode",
            "plan",
            "--auto-approve",
            "--base-url",
            srv.base_url,
            "--max-reflections",
            "5",
            "--max-plan-attempts",
            "4",
            "--max-explore-calls",
            "2",
            "--max-executor-iterations",
            "7",
            "--result-chars",
            "300",
            "--no-check-staleness",
            OPENAI_API_KEY="test",
            PLANMODE_MAX_PATCH_ATTEMPTS="2",
            PLANMODE_MAX_RETRIES="1",
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from planmode.context import settings_dict

    graph = build_graph(checkpointer=sqlite_checkpointer(db))
    settings = settings_dict(graph.get_state({"configurable": {"thread_id": "t1"}}).values["settings"])
    assert settings["max_reflections"] == 5 and settings["max_plan_attempts"] == 4
    assert settings["max_explore_calls"] == 2 and settings["max_executor_iterations"] == 7
    assert settings["result_chars"] == 300 and settings["check_staleness"] is False
    assert settings["max_patch_attempts"] == 2 and settings["max_retries"] == 1


# -- issue 23 item 4: a new task never replaces an earlier run ------------------------------------------------------


def test_a_new_task_on_a_finished_thread_is_refused_with_the_follow_up_command_which_keeps_both(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.sqlite"
    with ScriptedOpenAIServer(responder()) as srv:
        first = _run(db, tmp_path, srv.base_url, "--auto-approve")
        assert first.returncode == 0, first.stdout + first.stderr
        again = _run(db, tmp_path, srv.base_url, "--auto-approve", task="Now add a date to notes.md")
        assert again.returncode == 2, again.stdout + again.stderr
        refusal = " ".join(again.stderr.split())
        assert "already has a run (completed)" in refusal
        runs = _json("ls", "--db", str(db), "--json")["runs"]
        assert [(r["thread_id"], r["goal"], r["state"]) for r in runs] == [("t1", TASK, "completed")]
        # the command printed is exact: run it as it is
        command = refusal[refusal.index("planmode run") :]
        argv = shlex.split(command)
        assert argv[argv.index("--follow-up") + 1] == "t1" and "--thread" not in argv
        follow = cli(*argv[1:], OPENAI_API_KEY="test")
        assert follow.returncode == 0, follow.stdout + follow.stderr
    runs = _json("ls", "--db", str(db), "--json")["runs"]
    assert len(runs) == 2
    new, old = runs  # newest first
    assert (old["thread_id"], old["goal"], old["state"]) == ("t1", TASK, "completed")
    assert new["goal"] == "Now add a date to notes.md" and new["state"] == "completed"
    shown = _json("show", new["thread_id"], "--db", str(db), "--json")
    assert shown["follows"]["thread_id"] == "t1"
    assert _json("show", "t1", "--db", str(db), "--json")["goal"] == TASK
    history = _json("history", "t1", "--db", str(db), "--json")["snapshots"]
    assert history[0]["status"] == "completed"


def test_a_new_task_on_a_thread_awaiting_approval_is_refused_with_the_resume_command(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    with ScriptedOpenAIServer(responder()) as srv:
        first = _run(db, tmp_path, srv.base_url)  # not a terminal, no --auto-approve: left awaiting approval
        assert first.returncode == 3, first.stdout + first.stderr
        again = _run(db, tmp_path, srv.base_url, task="Something else")
        follow = cli("run", "x", "--follow-up", "t1", "--db", str(db), "--base-url", srv.base_url, OPENAI_API_KEY="k")
    assert again.returncode == 2, again.stdout + again.stderr
    assert f"Continue it with: planmode resume t1 --db {db}" in " ".join(again.stderr.split())
    assert follow.returncode == 2 and "not finished" in follow.stderr
    runs = _json("ls", "--db", str(db), "--json")["runs"]
    assert [(r["thread_id"], r["goal"], r["state"]) for r in runs] == [("t1", TASK, "awaiting_approval")]


def test_resume_on_a_finished_run_says_it_is_finished(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    with ScriptedOpenAIServer(responder()) as srv:
        assert _run(db, tmp_path, srv.base_url, "--auto-approve").returncode == 0
        proc = cli("resume", "t1", "--db", str(db), OPENAI_API_KEY="test")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = " ".join(proc.stderr.split())
    assert "is finished (completed): there is nothing to resume" in err
    assert f"planmode show t1 --db {db}" in err and "--follow-up t1" in err


# -- issue 23 item 6: what a run is, what to do next, --json, one time zone -------------------------------------------


def test_a_ctrl_c_run_is_interrupted_in_ls_and_show_with_the_resume_command(tmp_path: Path) -> None:
    base = responder()

    def slow_execute(body: dict[str, Any]) -> Any:
        answer = base(body)
        return Fault(delay=30.0, then=answer) if _purpose(body) == "execute" else answer

    db = tmp_path / "r.sqlite"
    with ScriptedOpenAIServer(slow_execute) as srv:
        args = ["run", TASK, "--workspace", str(tmp_path), "--db", str(db), "--thread", "t9", "--mode", "plan"]
        child = spawn([*args, "--auto-approve", "--base-url", srv.base_url], OPENAI_API_KEY="test")
        child.expect(r"step started: .{0,16}draft")
        time.sleep(0.5)
        child.sendintr()
        child.expect("Stopping")
        child.sendintr()
        child.expect(pexpect.EOF)
        child.close()
    assert child.exitstatus == 130
    listed = cli("ls", "--db", str(db))
    assert listed.returncode == 0 and "interrupted" in listed.stdout and "running" not in listed.stdout
    (run,) = _json("ls", "--db", str(db), "--json")["runs"]
    assert (run["state"], run["status"], run["next"]) == ("interrupted", "running", f"planmode resume t9 --db {db}")
    # --status keeps what ls shows: an interrupted run is not running
    assert _json("ls", "--db", str(db), "--json", "--status", "running")["runs"] == []
    assert [r["thread_id"] for r in _json("ls", "--db", str(db), "--json", "--status", "interrupted")["runs"]] == ["t9"]
    shown = cli("show", "t9", "--db", str(db))
    text = " ".join(shown.stdout.split())
    assert "state: interrupted" in text and f"continue it with: planmode resume t9 --db {db}" in text
    assert f"goal: {TASK}" in text


def test_a_rolled_back_run_shows_what_it_is_and_each_steps_result(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    with ScriptedOpenAIServer(responder()) as srv:
        assert _run(db, tmp_path, srv.base_url, "--auto-approve").returncode == 0
    snaps = _json("history", "t1", "--db", str(db), "--json")["snapshots"]
    mid = next(s for s in snaps if s["status"] == "running" and s["steps"].get("done") == 1)
    back = cli("rollback", "t1", mid["prefix"], "--db", str(db))
    assert back.returncode == 0, back.stdout + back.stderr
    (run,) = _json("ls", "--db", str(db), "--json")["runs"]
    assert run["state"] == "interrupted" and run["next"] == f"planmode resume t1 --db {db}"
    shown = _json("show", "t1", "--db", str(db), "--json")
    assert shown["state"] == "interrupted" and shown["goal"] == TASK
    draft = next(s for s in shown["steps"] if s["id"] == "draft")
    assert draft["status"] == "done" and draft["result"]
    text = " ".join(cli("show", "t1", "--db", str(db)).stdout.split())
    assert "state: interrupted" in text and f"- draft (done) result: {draft['result']}" in text
    # while a process holds the thread (its lease), the same run is running
    from planmode.persistence import sqlite_checkpointer, thread_lease

    saver = sqlite_checkpointer(db)
    with thread_lease(saver, "t1"):
        (held,) = _json("ls", "--db", str(db), "--json")["runs"]
        shown_held = _json("show", "t1", "--db", str(db), "--json")
    saver.conn.close()
    assert held["state"] == "running" and held["next"] is None
    assert shown_held["state"] == "running" and shown_held["next"] is None


def test_ls_through_langgraph_lists_the_same_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database only LangGraph's serializer reads is listed through it, with the same answer."""
    from typer.testing import CliRunner

    from planmode.cli import runlist
    from planmode.cli.app import app

    db = tmp_path / "runs.sqlite"
    with ScriptedOpenAIServer(responder()) as srv:
        assert _run(db, tmp_path, srv.base_url, "--auto-approve").returncode == 0
        assert _run(db, tmp_path, srv.base_url, thread="t2").returncode == 3  # awaiting approval
    fast = _json("ls", "--db", str(db), "--json")

    def unreadable(*args: Any, **kwargs: Any) -> Any:
        raise LookupError("a checkpoint of type 'pickle'")

    monkeypatch.setattr(runlist, "sqlite_runs", unreadable)
    slow = CliRunner().invoke(app, ["ls", "--db", str(db), "--json"])
    assert slow.exit_code == 0, slow.output
    assert json.loads(slow.stdout) == fast
    assert [r["state"] for r in fast["runs"]] == ["awaiting_approval", "completed"]


def test_json_keys_are_stable_and_model_text_is_data(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    with ScriptedOpenAIServer(responder()) as srv:
        assert _run(db, tmp_path, srv.base_url, "--auto-approve").returncode == 0
    listed = _json("ls", "--db", str(db), "--json")
    assert set(listed) == {"database", "databases", "runs"}
    assert set(listed["runs"][0]) == {
        "database",
        "thread_id",
        "checkpoint_ns",
        "checkpoint_id",
        "state",
        "status",
        "goal",
        "title",
        "plan_version",
        "steps",
        "total_steps",
        "updated_at",
        "error",
        "next",
    }
    assert listed["runs"][0]["title"] == "Notes [bold]"  # model text, kept as it is
    shown = _json("show", "t1", "--db", str(db), "--json")
    assert set(shown) == {
        "thread_id",
        "state",
        "status",
        "goal",
        "title",
        "plan_version",
        "workspace",
        "updated_at",
        "next",
        "error",
        "answer",
        "follows",
        "steps",
    }
    assert set(shown["steps"][0]) == {"id", "description", "status", "attempts", "result", "error"}
    assert all(h in json.dumps(shown, ensure_ascii=False) for h in HOSTILE)
    history = _json("history", "t1", "--db", str(db), "--json")
    assert set(history) == {"thread_id", "snapshots"}
    assert set(history["snapshots"][0]) == {
        "number",
        "back",
        "checkpoint_id",
        "prefix",
        "parent_id",
        "created_at",
        "step",
        "label",
        "status",
        "plan_version",
        "steps",
        "next",
        "awaiting_approval",
        "source",
    }


def test_every_command_prints_times_in_utc_labelled(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    with ScriptedOpenAIServer(responder()) as srv:
        assert _run(db, tmp_path, srv.base_url, "--auto-approve").returncode == 0
    stamp = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")
    tz = {"TZ": "America/New_York"}  # a local zone far from UTC: nothing is printed in it
    listed = cli("ls", "--db", str(db), **tz).stdout
    shown = cli("show", "t1", "--db", str(db), **tz).stdout
    history = cli("history", "t1", "--db", str(db), **tz).stdout
    head = _json("ls", "--db", str(db), "--json")["runs"][0]["updated_at"]
    assert head.endswith("+00:00")
    expected = head.replace("T", " ")[:19] + " UTC"
    assert stamp.findall(listed) == [expected]
    assert f"updated: {expected}" in shown
    # history's times are short (issue 45 item 8): the day once in the title, UTC; each row's time of day in UTC
    assert f"times in UTC, {expected[:10]}" in history and f" {expected[11:19]} " in history


def test_a_run_paused_at_its_budget_says_so(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    with ScriptedOpenAIServer(responder()) as srv:
        proc = _run(db, tmp_path, srv.base_url, "--auto-approve", "--max-tokens", "50")
    assert proc.returncode == 6, proc.stdout + proc.stderr
    (run,) = _json("ls", "--db", str(db), "--json")["runs"]
    assert run["state"] == "over_budget" and run["status"] != "over_budget"  # only the pending interrupt says it
    text = " ".join(cli("show", "t1", "--db", str(db)).stdout.split())
    assert "state: paused: over budget" in text and f"planmode resume t1 --db {db} --max-tokens N" in text


# -- the pure parts -------------------------------------------------------------------------------------------------


def test_the_cli_status_lists_match_the_state_models() -> None:
    from typing import get_args

    from planmode.cli.runlist import RUN_STATUSES, STEP_STATUSES
    from planmode.state.graph_state import RunStatus
    from planmode.state.models import StepStatus

    assert get_args(RunStatus) == RUN_STATUSES
    assert tuple(s.value for s in StepStatus) == STEP_STATUSES


@pytest.mark.parametrize(
    ("status", "interrupt", "running", "state"),
    [
        ("completed", None, False, "completed"),
        ("failed", None, True, "failed"),
        ("running", None, True, "running"),
        ("running", None, False, "interrupted"),
        ("planning", None, False, "interrupted"),
        ("new", None, False, "interrupted"),
        ("awaiting_approval", "planmode.approval", True, "awaiting_approval"),
        ("awaiting_approval", None, False, "awaiting_approval"),
        ("running", "planmode.step_approval", False, "awaiting_approval"),
        ("running", "planmode.stale", True, "awaiting_approval"),
        ("running", "", False, "awaiting_approval"),
        ("running", "planmode.budget", True, "over_budget"),
        ("planning", "planmode.model_unavailable", False, "model_unavailable"),
        ("model_unavailable", None, False, "model_unavailable"),
    ],
)
def test_run_state_table(status: str, interrupt: str | None, running: bool, state: str) -> None:
    from planmode.cli.runlist import run_state

    assert run_state(status, interrupt, running) == state


def test_ls_and_show_on_postgresql_say_what_each_run_is(tmp_path: Path, pg_url: str) -> None:
    import uuid

    import psycopg

    from planmode.persistence import postgres_checkpointer, thread_lease

    name = f"cliruns_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = pg_url.rsplit("/", 1)[0] + "/" + name
    try:
        with ScriptedOpenAIServer(responder()) as srv:
            assert _run(url, tmp_path, srv.base_url, "--auto-approve").returncode == 0
            assert _run(url, tmp_path, srv.base_url, thread="t2").returncode == 3
        runs = _json("ls", "--db", url, "--json")["runs"]
        assert [(r["thread_id"], r["state"]) for r in runs] == [("t2", "awaiting_approval"), ("t1", "completed")]
        snaps = _json("history", "t1", "--db", url, "--json")["snapshots"]
        mid = next(s for s in snaps if s["status"] == "running" and s["steps"].get("done") == 1)
        assert cli("rollback", "t1", mid["prefix"], "--db", url).returncode == 0
        assert _json("show", "t1", "--db", url, "--json")["state"] == "interrupted"
        saver = postgres_checkpointer(url)
        try:
            with thread_lease(saver, "t1"), thread_lease(saver, "t2"):  # t2: a process holds it while it asks
                assert _json("show", "t1", "--db", url, "--json")["state"] == "running"
                runs = _json("ls", "--db", url, "--json")["runs"]
                assert {r["thread_id"]: r["state"] for r in runs} == {"t1": "running", "t2": "awaiting_approval"}
        finally:
            saver.conn.close()
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")
