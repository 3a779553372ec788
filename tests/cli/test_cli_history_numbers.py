"""``planmode history``'s numbers name one checkpoint for good (a rollback does not shift them), ``rollback N`` takes
them, and a rollback's label names the snapshot by that number and the plan's step, not LangGraph's step counter
(issue 45, item 8)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from planmode.testing.openai_server import ScriptedOpenAIServer
from tests.cli.test_cli_daily import cli, responder

pytestmark = pytest.mark.integration

ROW = re.compile(r"[│|]\s+(\d+)\s+[│|]\s+([0-9a-f-]{8,})\s+[│|]")


def _ran(tmp_path: Path) -> Path:
    db = tmp_path / "runs.sqlite"
    with ScriptedOpenAIServer(responder()) as srv:
        proc = cli(
            "run",
            "Write notes.md, then read it back",
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
            OPENAI_API_KEY="test",
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return db


def _table(db: Path) -> dict[str, int]:
    """history at 80 columns: each checkpoint shown (its full id, found from the prefix shown), with its number."""
    hist = cli("history", "t1", "--db", str(db), COLUMNS="80")
    assert hist.returncode == 0, hist.stderr
    ids = [str(s["checkpoint_id"]) for s in _snapshots(db)]
    out: dict[str, int] = {}
    for n, prefix in ROW.findall(hist.stdout):
        (cid,) = [i for i in ids if i.startswith(prefix)]
        out[cid] = int(n)
    return out


def _snapshots(db: Path) -> list[dict[str, object]]:
    proc = cli("history", "t1", "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    snaps: list[dict[str, object]] = json.loads(proc.stdout)["snapshots"]
    return snaps


def test_history_numbers_do_not_shift_after_a_rollback_and_rollback_n_means_what_was_shown(tmp_path: Path) -> None:
    db = _ran(tmp_path)
    before = _table(db)
    assert len(before) >= 8 and sorted(before.values()) == list(range(1, len(before) + 1))
    by_label = {str(s["label"]): s for s in _snapshots(db)}
    executed, started = by_label["executed draft"], by_label["started draft"]
    # Both numbers are read before either rollback; the second one is used after the first rollback.
    first = cli("rollback", "t1", str(before[str(executed["checkpoint_id"])]), "--db", str(db))
    assert first.returncode == 0, first.stdout + first.stderr
    after_one = _table(db)
    assert {c: after_one[c] for c in before} == before  # every old checkpoint keeps its number
    n = before[str(started["checkpoint_id"])]
    second = cli("rollback", "t1", str(n), "--db", str(db))
    assert second.returncode == 0, second.stdout + second.stderr
    after = _snapshots(db)
    assert {str(s["checkpoint_id"]): s["number"] for s in after if s["checkpoint_id"] in before} == before
    head = after[0]
    # The head copies the checkpoint that was shown as #n before any rollback, and says so by number and step id.
    assert head["label"] == f"rolled back to #{n}: started draft", head
    assert head["steps"] == started["steps"] and head["next"] == started["next"]
    text = cli("history", "t1", "--db", str(db), COLUMNS="200").stdout
    assert f"rolled back to #{n}: started draft" in text and "rolled back to step" not in text


def test_rollback_to_a_number_the_thread_does_not_have_is_one_line(tmp_path: Path) -> None:
    db = _ran(tmp_path)
    count = len(_table(db))
    proc = cli("rollback", "t1", str(count + 1), "--db", str(db))
    assert proc.returncode == 2
    assert f"no snapshot #{count + 1} in this thread: it has #1 to #{count}" in proc.stderr
    assert len(_table(db)) == count  # nothing added
