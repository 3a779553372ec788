"""The sync durability wait (issue 25, item 5): on ``graph.invoke`` (the CLI's path), a step that depends on a
done step starts only once the checkpoint that records it done is saved, even when LangGraph's default "async"
durability saves checkpoints behind execution. The saver here saves 50 ms late; without the wait in execute_step
the dependent starts with nothing of its dependency saved (a crash then would run the done step again)."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import pytest

import planmode.nodes.execute_step as execute_step_module
from planmode.graph import build_graph
from planmode.persistence import sqlite_checkpointer
from planmode.state.models import Plan, Step, StepStatus
from planmode.state.reducer import restore_plan
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

CHAIN = {
    "title": "Chain",
    "steps": [
        {"id": "a", "description": "first"},
        {"id": "b", "description": "second", "dependencies": ["a"]},
        {"id": "c", "description": "third", "dependencies": ["b"]},
    ],
}


def _run(tmp_path: Path) -> dict[str, bool]:
    """For each step, whether its dependencies' done was saved when its executor started."""
    saver = sqlite_checkpointer(tmp_path / "runs.sqlite")
    put = saver.put

    def slow_put(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.05)  # a slow disk: the background save lags the next super-step
        return put(*args, **kwargs)

    saver.put = slow_put  # type: ignore[method-assign]
    config = {"configurable": {"thread_id": "chain"}}
    seen: dict[str, bool] = {}

    def executor(step: Step, ctx: Any) -> str:
        saved = saver.get_tuple(config)  # the newest checkpoint saved so far
        plan = restore_plan(saved.checkpoint["channel_values"].get("plan")) if saved else None
        done = {s.id for s in plan.steps if s.status is StepStatus.DONE} if isinstance(plan, Plan) else set()
        seen[step.id] = set(step.dependencies) <= done
        return f"{step.id} done"

    with contextlib.closing(saver.conn):
        graph = build_graph(
            ScriptedChatModel(responder=PurposeScript(plan=[CHAIN])), executor=executor, checkpointer=saver
        )
        graph.invoke(
            {"messages": [("user", "do a, then b, then c")]}, config, context={"mode": "plan", "approval": "auto"}
        )
        assert graph.get_state(config).values["status"] == "completed"
    return seen


def test_a_dependent_starts_only_after_its_dependency_is_saved_done(tmp_path: Path) -> None:
    assert _run(tmp_path) == {"a": True, "b": True, "c": True}


def test_without_the_wait_the_dependent_starts_before_the_save(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same run with the wait removed: the test above is what tells the two apart."""
    monkeypatch.setattr(execute_step_module, "wait_until_durable", lambda **_: None)
    seen = _run(tmp_path)
    assert seen["a"] is True  # no dependency
    assert not (seen["b"] and seen["c"])


def test_the_wait_wakes_on_the_savers_announcement_and_asks_the_database_at_most_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same slow saves: each wait of execute_step ends on the SQLite saver's announcement of the save, with at
    most one database check per wait (polling checked every few ms, each check taking the saver's lock), and every
    step still starts after its dependency's done is saved."""
    import planmode.persistence.checkpointers as persistence

    checks: list[tuple[str, str, str]] = []
    waited: list[float] = []
    check = persistence._checkpoint_saved
    wait = persistence.wait_until_durable

    def counted_check(saver: Any, key: tuple[str, str, str]) -> bool:
        checks.append(key)
        return check(saver, key)

    def counted_wait(**kwargs: Any) -> None:
        start = time.monotonic()
        wait(**kwargs)
        waited.append(time.monotonic() - start)

    monkeypatch.setattr(persistence, "_checkpoint_saved", counted_check)
    monkeypatch.setattr(execute_step_module, "wait_until_durable", counted_wait)
    assert _run(tmp_path) == {"a": True, "b": True, "c": True}
    assert len(waited) == 2  # b and c waited for the checkpoint that recorded their dependency done
    assert min(waited) >= 0.04  # each waited for a slow save (several are queued: LangGraph saves them in order)
    # one check when the wait starts, then one per quarter second (a save by another process is never announced)
    rechecks = sum(int(w / persistence._ANNOUNCED_RECHECK) for w in waited)
    assert len(checks) <= len(waited) + rechecks
