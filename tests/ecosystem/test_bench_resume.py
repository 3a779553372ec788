"""The real-task bench across sittings: a results file is continued at one commit, and planmode runs with the
small-model adapter off (``planmode``) and on (``planmode_small``), each row saying which.

Offline: the scripted OpenAI-compatible server stands in for the model server; the continuation tests replace the
child run (`bench.real_tasks._child`) with a counter, so they count the runs the suite makes without running any.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a folder of the repository, not an installed package
    sys.path.insert(0, str(ROOT))

import bench.real_tasks as real_tasks  # noqa: E402
import bench.report  # noqa: E402

from planmode.testing.openai_server import ScriptedOpenAIServer  # noqa: E402


@pytest.fixture
def server() -> Iterator[str]:
    before = signal.getsignal(signal.SIGTERM)
    try:
        with ScriptedOpenAIServer(lambda request: "DONE") as srv:
            yield srv.base_url
    finally:
        signal.signal(signal.SIGTERM, before)


def _at(monkeypatch: pytest.MonkeyPatch, commit: str, dirty: bool = False, date: str = "2026-11-28 10:00 UTC") -> None:
    made = {"commit": commit, "uncommitted_changes": dirty, "date": date}
    monkeypatch.setattr(bench.report, "provenance", lambda: dict(made))


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Replace the child run with one that only records (system, task) and says DONE."""
    made: list[tuple[str, str]] = []

    def child(system: str, task: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        made.append((system, task.id))
        return {"status": "said_done", "claimed": True, "answer": "DONE", "steps": []}

    monkeypatch.setattr(real_tasks, "_child", child)
    return made


def _main(base_url: str, out: Path, *extra: str) -> int:
    argv = ["--base-url", base_url, "--served-model", "scripted", "--out", str(out), "--set", "heldout"]
    return real_tasks.main([*argv, "--tasks", "countdown", "evens", *extra])


def _keys(out: Path) -> list[tuple[str, str, int]]:
    return [(r["system"], r["task"], r["run"]) for r in json.loads(out.read_text())["runs"]]


def test_a_continued_file_runs_only_the_runs_it_does_not_hold(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Session 1 makes run 1 of two tasks x two systems; session 2 (--runs 2) makes only run 2, in the interleaved
    order; a run lost from the file (a killed session) is made again by itself; a complete file makes nothing."""
    out = tmp_path / "heldout.json"
    made = _counted(monkeypatch)
    systems = ["--systems", "loop", "loop_repair"]
    _at(monkeypatch, "abc1234", date="2026-11-28 10:00 UTC")
    assert _main(server, out, *systems, "--runs", "1") == 0
    assert made == [("loop", "countdown"), ("loop_repair", "countdown"), ("loop_repair", "evens"), ("loop", "evens")]
    made.clear()
    _at(monkeypatch, "abc1234", date="2026-11-28 14:00 UTC")
    assert _main(server, out, *systems, "--runs", "2") == 0
    assert made == [("loop_repair", "countdown"), ("loop", "countdown"), ("loop", "evens"), ("loop_repair", "evens")]
    keys = _keys(out)
    assert len(keys) == len(set(keys)) == 8
    meta = json.loads(out.read_text())["meta"]
    assert meta["date"] == "2026-11-28 10:00 UTC" and meta["runs_per_task"] == 2
    assert [(c["date"], c["runs_added"]) for c in meta["continuations"]] == [("2026-11-28 14:00 UTC", 4)]

    data = json.loads(out.read_text())  # a session killed during (loop, evens, run 2): its run is not in the file
    data["runs"] = [r for r in data["runs"] if (r["system"], r["task"], r["run"]) != ("loop", "evens", 1)]
    out.write_text(json.dumps(data))
    made.clear()
    assert _main(server, out, *systems, "--runs", "2") == 0
    assert made == [("loop", "evens")]
    assert sorted(_keys(out)) == sorted(keys)

    made.clear()
    complete = out.read_bytes()
    assert _main(server, out, *systems, "--runs", "2") == 0
    assert made == [] and out.read_bytes() == complete  # nothing to make: the file is not touched
    continuations = json.loads(out.read_text())["meta"]["continuations"]
    assert [c["runs_added"] for c in continuations] == [4, 1]


@pytest.mark.parametrize(
    ("commit", "dirty", "extra", "said"),
    [
        ("def5678", False, (), "git worktree add ../planmode-bench abc1234"),
        ("abc1234", True, (), "uncommitted changes"),
        ("abc1234", False, ("--max-tokens", "999"), "budget"),
    ],
)
def test_a_file_from_another_commit_or_budget_is_refused_and_left_as_it_was(
    commit: str,
    dirty: bool,
    extra: tuple[str, ...],
    said: str,
    server: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "heldout.json"
    made = _counted(monkeypatch)
    _at(monkeypatch, "abc1234")
    assert _main(server, out, "--systems", "loop", "--runs", "1") == 0
    before = out.read_bytes()
    made.clear()
    capsys.readouterr()
    _at(monkeypatch, commit, dirty=dirty)
    assert _main(server, out, "--systems", "loop", "--runs", "2", *extra) == 2
    assert made == [] and out.read_bytes() == before
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and said in err and "--fresh" in err, err
    assert _main(server, out, "--systems", "loop", "--runs", "1", "--fresh", *extra) == 0  # --fresh starts over
    assert len(made) == 2 and json.loads(out.read_text())["meta"]["commit"] == commit


def test_a_file_made_with_uncommitted_changes_is_not_continued(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "heldout.json"
    made = _counted(monkeypatch)
    _at(monkeypatch, "abc1234", dirty=True)
    assert _main(server, out, "--systems", "loop", "--runs", "1") == 0
    _at(monkeypatch, "abc1234")
    before = out.read_bytes()
    assert _main(server, out, "--systems", "loop", "--runs", "2") == 2
    assert out.read_bytes() == before and len(made) == 2


def test_a_file_that_is_not_results_is_refused_not_overwritten(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "heldout.json"
    _counted(monkeypatch)
    _at(monkeypatch, "abc1234")
    for text in ("[1, 2]", "{not json", json.dumps({"runs": [{"system": "loop"}]})):
        out.write_text(text)
        assert _main(server, out, "--systems", "loop", "--runs", "1") == 2
        assert out.read_text() == text


def test_planmode_runs_with_the_adapter_off_and_planmode_small_with_it_on(tmp_path: Path) -> None:
    """Both planmode systems on the scripted server (the run pauses at its 200-token budget); each row records the
    profile its run's settings held, and meta names both. The profile is the system's, not a --planmode-set."""
    from planmode.testing.responders import PlanResponder

    plan = {"title": "hello", "steps": [{"id": "write", "description": "Write hello.py", "dependencies": []}]}
    out = tmp_path / "profiles.json"
    before = signal.getsignal(signal.SIGTERM)
    try:
        with ScriptedOpenAIServer(PlanResponder(plan)) as srv:
            argv = ["--base-url", srv.base_url, "--served-model", "scripted", "--tasks", "hello", "--out", str(out)]
            argv += ["--systems", "planmode", "planmode_small", "--runs", "1", "--max-tokens", "200"]
            assert real_tasks.main(argv) == 0
    finally:
        signal.signal(signal.SIGTERM, before)
    data = json.loads(out.read_text())
    assert {r["system"]: r["model_profile"] for r in data["runs"]} == {"planmode": "default", "planmode_small": "small"}
    assert data["meta"]["model_profiles"] == {"planmode": "default", "planmode_small": "small"}
    for r in data["runs"]:
        assert r["status"] == "paused (planmode.budget)", r  # a planmode run: its pause, its purposes
    with pytest.raises(ValueError, match="the system names the profile"):
        real_tasks.setting_overrides(["model_profile=small"])


def test_the_tables_count_planmode_smalls_claims_and_repairs_as_planmodes() -> None:
    def rec(system: str) -> dict[str, Any]:
        return {
            "model": "m",
            "server": "s",
            "system": system,
            "task": "hello",
            "steps": 1,
            "status": "completed",
            "claimed": True,
            "done": False,
            "false_claim": True,
            "seconds": 1.0,
            "calls": 2,
            "prompt_tokens": 10,
            "completion_tokens": 5,
            "repairs": {"patches_applied": 1, "patches_refused": 2},
        }

    lines = real_tasks.table({"runs": [rec("planmode_small"), rec("loop")]}).splitlines()
    small = next(line for line in lines if "| planmode_small |" in line)
    loop = next(line for line in lines if "| loop |" in line)
    assert "| 1 / 2 |" in small and "| 1 | 1 |" in small  # claimed, false claims, repairs
    assert small.count("n/a") == 0 and loop.count("n/a") == 3


def test_a_stop_while_the_file_is_written_leaves_the_runs_recorded_before(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM (the session's timeout) may land while the results are written: the file keeps what it held."""
    out = tmp_path / "heldout.json"
    _counted(monkeypatch)
    _at(monkeypatch, "abc1234")
    assert _main(server, out, "--systems", "loop", "--runs", "1") == 0
    before = out.read_bytes()
    write = Path.write_text

    def stopped(self: Path, text: str, *args: Any, **kwargs: Any) -> int:
        write(self, text[:20], *args, **kwargs)
        if self.suffix in (".json", ".part") and self.parent == tmp_path:
            raise SystemExit(143)
        return len(text)

    monkeypatch.setattr(Path, "write_text", stopped)
    with pytest.raises(SystemExit):
        _main(server, out, "--systems", "loop", "--runs", "2")
    monkeypatch.setattr(Path, "write_text", write)
    assert out.read_bytes() == before
