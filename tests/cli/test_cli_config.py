"""The configuration file (issue 45, item 8): ``[tool.planmode]`` in the nearest ``pyproject.toml`` or a
``planmode.toml``. A flag beats an environment variable, which beats the file, which beats the default; an unknown
key, a wrong type, a secret or a value that loosens a guard is one line naming the file and the key, exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from planmode.testing.openai_server import ScriptedOpenAIServer
from tests.cli.test_cli_daily import cli, responder

pytestmark = pytest.mark.integration

SRC = str(Path(__file__).resolve().parents[2] / "src")  # this checkout's code, whatever the folder it runs in


def _settings(db: Path, thread: str = "t1") -> dict[str, Any]:
    from planmode.context import settings_dict
    from planmode.graph import build_graph
    from planmode.persistence import sqlite_checkpointer

    graph = build_graph(checkpointer=sqlite_checkpointer(db))
    return settings_dict(graph.get_state({"configurable": {"thread_id": thread}}).values["settings"])


def _run(ws: Path, *extra: str, url: str = "http://127.0.0.1:9/v1", **env: str) -> Any:
    args = ["run", "Write notes.md, then read it back", "--workspace", str(ws), "--thread", "t1", *extra]
    return cli(*args, "--auto-approve", "--base-url", url, OPENAI_API_KEY="test", **env)


def test_a_flag_beats_the_environment_which_beats_the_file_which_beats_the_default(tmp_path: Path) -> None:
    project = tmp_path / "project"
    ws = project / "src" / "pkg"  # the file is found from the workspace upward
    ws.mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.planmode]\nmode = "plan"\nmax-steps = 7\nmax_attempts = 5\n'
        'max_reflect_attempts = 4\ndb = "state/runs.sqlite"\ncheck_commands = ["python"]\n'
    )
    with ScriptedOpenAIServer(responder()) as srv:
        proc = _run(
            ws,
            "--max-reflect-attempts",
            "2",
            url=srv.base_url,
            PLANMODE_MAX_ATTEMPTS="3",
            XDG_STATE_HOME=str(tmp_path / "state"),
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    db = project / "state" / "runs.sqlite"  # the file's db, relative to the file
    assert db.is_file()
    settings = _settings(db)
    assert settings["max_steps"] == 7  # the file beats the default (20)
    assert settings["max_attempts"] == 3  # the environment beats the file
    assert settings["max_reflect_attempts"] == 2  # the flag beats both
    assert settings["mode"] == "plan" and settings["check_commands"] == ["python"]  # tightening is fine
    assert settings["max_parallel"] == 4  # not in the file: the default
    assert f"settings from {project / 'pyproject.toml'}: mode='plan', max_steps=7" in proc.stdout.replace("\n", "")
    # the read-only commands find the run through the file's db, from the workspace, and from the folder the run
    # was started in (the repository's root here), as every run is found (issue 45 item 3)
    for folder in (ws, Path.cwd()):
        listed = cli("ls", "--json", cwd=folder, PYTHONPATH=SRC, XDG_STATE_HOME=str(tmp_path / "state"))
        assert listed.returncode == 0 and '"thread_id": "t1"' in listed.stdout, listed.stderr


def test_planmode_toml_wins_in_its_folder_and_a_pyproject_without_the_table_is_passed_by(tmp_path: Path) -> None:
    from planmode.cli.config import load_config

    (tmp_path / "pyproject.toml").write_text("[tool.planmode]\nmax_steps = 3\n")
    (tmp_path / "planmode.toml").write_text("max_steps = 9\n")
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "inner"\n')
    config = load_config(inner)
    assert config.path == tmp_path / "planmode.toml" and config.settings == {"max_steps": 9}


@pytest.mark.parametrize(
    ("text", "key", "says"),
    [
        ("max_paralel = 2\n", "max_paralel", "unknown key"),
        ('max_parallel = "four"\n', "max_parallel", "max_parallel"),
        ("max_parallel = 0\n", "max_parallel", "at least 1"),
        ('mode = "yolo"\n', "mode", "mode"),
        ('check_commands = "python"\n', "check_commands", "a list of strings"),
        ('api_key = "sk-SECRET-123"\n', "api_key", "a secret is not read"),
        ('approval_key = "0123456789abcdef-SECRET"\n', "approval_key", "a secret is not read"),
        ("sandbox = false\n", "sandbox", "never loosen"),
        ("run_checks = false\n", "run_checks", "never loosen"),
        ('check_commands = ["python", "pytest", "bash"]\n', "check_commands", "never loosen"),
        ('approval = "auto"\n', "approval", "never loosen"),
        ("allow_git_writes = true\n", "allow_git_writes", "never loosen"),
        ('base_url = "https://collector.example/v1"\n', "base_url", "only a server on this machine"),
        ('base_url = "http://127.0.0.1.evil.example:8080/v1"\n', "base_url", "only a server on this machine"),
        ('db = "postgresql://u:p@db.example:5432/runs"\n', "db", "only a server on this machine"),
    ],
)
def test_a_bad_key_or_value_is_one_line_naming_the_file_and_key_and_nothing_runs(
    tmp_path: Path, text: str, key: str, says: str
) -> None:
    (tmp_path / "planmode.toml").write_text(text)
    proc = _run(tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = " ".join(proc.stderr.split())  # one error, wrapped at the terminal's width
    assert said.count("error:") == 1 and f"{tmp_path / 'planmode.toml'}: {key}:" in said and says in said, said
    assert "SECRET" not in proc.stderr + proc.stdout  # a secret is refused without being repeated
    assert not (tmp_path / ".planmode").exists()  # nothing was stored


def test_a_loopback_server_from_a_file_is_taken(tmp_path: Path) -> None:
    (tmp_path / "planmode.toml").write_text('base_url = "http://127.0.0.1:9/v1"\n')
    from planmode.cli.config import load_config

    assert load_config(tmp_path).settings == {"base_url": "http://127.0.0.1:9/v1"}


def test_a_file_that_is_not_toml_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.planmode\nmax_steps = 3\n")
    proc = _run(tmp_path)
    assert proc.returncode == 2 and f"{tmp_path / 'pyproject.toml'}: not valid TOML" in proc.stderr
    assert proc.stderr.count("error:") == 1
