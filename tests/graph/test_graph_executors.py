"""Users' own executors and verifiers: plain callables or LangChain runnables; what they return is
normalised, and one that raises is a failed attempt, not a crash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableLambda

from planmode.executors import Verdict
from planmode.graph import build_graph
from planmode.persistence import sqlite_checkpointer
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

PLAN = {
    "title": "t",
    "steps": [{"id": "a", "description": "first"}, {"id": "b", "description": "second", "dependencies": ["a"]}],
}
HEADLESS = {"mode": "plan", "approval": "auto", "max_attempts": 1}


def _run(tmp_path: Path, **kwargs: Any) -> dict[str, Any]:
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, reflect={"assessment": "failed"}))
    saver = sqlite_checkpointer(tmp_path / "db.sqlite")
    graph = build_graph(model, checkpointer=saver, **kwargs)
    cfg: Any = {"configurable": {"thread_id": "t"}}
    graph.invoke({"messages": [("user", "do a, then b")]}, cfg, context=HEADLESS)
    values: dict[str, Any] = graph.get_state(cfg).values
    saver.conn.close()
    return values


def test_runnable_executor_and_verifier(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []

    def execute(x: dict[str, Any]) -> dict[str, str]:
        return {"output": f"{x['step'].id} by a runnable, after {sorted(x['context'].dependencies)}"}

    executor = RunnableLambda(execute)

    def judge(x: dict[str, Any]) -> Verdict:
        seen.append((x["step"].id, x["output"]))
        return Verdict(passed=True)

    values = _run(tmp_path, executor=executor, verifier=RunnableLambda(judge))
    assert values["status"] == "completed", values.get("error")
    assert seen == [("a", "a by a runnable, after []"), ("b", "b by a runnable, after ['a']")]
    assert values["plan"].get("b").result == "b by a runnable, after ['a']"


def test_a_raising_executor_is_a_failed_attempt_with_the_error(tmp_path: Path) -> None:
    def boom(step: Any, ctx: Any) -> str:
        raise RuntimeError(f"disk full while running {step.id}")

    values = _run(tmp_path, executor=boom, verifier=lambda s, o, c: True)
    assert values["status"] == "failed"
    step = values["plan"].get("a")
    assert step.status.value == "failed" and "RuntimeError: disk full while running a" in step.error


def test_a_verifier_returning_a_reason_fails_the_step_with_it(tmp_path: Path) -> None:
    values = _run(tmp_path, executor=lambda s, c: "ok", verifier=lambda s, o, c: (s.id != "b", "b is not good"))
    assert values["plan"].get("a").status.value == "done"
    assert values["plan"].get("b").error == "b is not good"


def test_an_executor_can_report_a_blocked_step_and_reflect_decides(tmp_path: Path) -> None:
    def execute(step: Any, ctx: Any) -> Any:
        if step.id == "b":
            return {"ok": False, "blocked": True, "error": "the API key for b is missing"}
        return "ok"

    values = _run(tmp_path, executor=execute, verifier=lambda s, o, c: True)
    b = values["plan"].get("b")
    assert b.status.value == "blocked" and b.error == "the API key for b is missing"
    assert b.attempts == 1  # blocked at once: not retried like a failure
    assert values["status"] == "failed" and "judged failed" in values["error"]  # reflect (scripted) gave up
