"""Reliability of the storage design: with a store, full step outputs live in the store only.

State (pending writes and checkpoints, on a real SQLite file) keeps at most ``result_chars`` of each output, and a
plan step's summary is ``stored_result_chars`` long; the verifier and the dependent steps still get the full
output, and the final summary ``result_chars`` of it, read back from the store.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

from planmode.context import PlanModeContext
from planmode.executors import StepContext
from planmode.graph import build_graph
from planmode.nodes import OUTPUT_NAMESPACE
from planmode.persistence import async_sqlite_checkpointer, sqlite_checkpointer
from planmode.state.models import Step
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

PLAN = {"steps": [{"id": "a", "description": "produce"}, {"id": "b", "description": "use", "dependencies": ["a"]}]}
BIG = 20_000


class Big:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen_by_verifier: dict[str, int] = {}
        self.dependency_sizes: dict[str, dict[str, int]] = {}

    def execute(self, step: Step, ctx: StepContext) -> str:
        with self.lock:
            self.dependency_sizes[step.id] = {k: len(v) for k, v in ctx.dependencies.items()}
        return step.id * BIG

    def verify(self, step: Step, output: str, ctx: StepContext) -> bool:
        with self.lock:
            self.seen_by_verifier[step.id] = len(output)
        return True


def test_full_outputs_stay_in_the_store_and_out_of_the_checkpoints(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    saver = sqlite_checkpointer(db)
    store = InMemoryStore()
    big = Big()
    graph = build_graph(
        ScriptedChatModel(responder=PurposeScript(plan=PLAN)),
        executor=big.execute,
        verifier=big.verify,
        checkpointer=saver,
        store=store,
    )
    config: dict[str, Any] = {"configurable": {"thread_id": "t"}}
    settings = PlanModeContext(mode="plan", approval="auto", result_chars=300)
    graph.invoke({"messages": [("user", "Produce a, then use it in b")]}, config, context=settings)
    values = graph.get_state(config).values
    saver.conn.close()
    assert values["status"] == "completed"
    assert big.seen_by_verifier == {"a": BIG, "b": BIG}  # the verifier judged the whole output
    assert big.dependency_sizes["b"] == {"a": BIG}  # and b got a's whole output
    stored = {i.key: len(i.value["output"]) for i in store.search((*OUTPUT_NAMESPACE, "t"))}
    assert stored == {"a.1": BIG, "b.1": BIG}
    assert all(len(s.result or "") <= 300 for s in values["plan"].steps)
    with sqlite3.connect(db) as conn:
        largest_write = conn.execute("SELECT max(length(value)) FROM writes").fetchone()[0]
        largest_checkpoint = conn.execute("SELECT max(length(checkpoint)) FROM checkpoints").fetchone()[0]
        query = "SELECT checkpoint FROM checkpoints UNION ALL SELECT value FROM writes"
        blobs = [row[0] for row in conn.execute(query)]
    conn.close()
    # A checkpoint holds the plan, the settings and the channel bookkeeping (about 5 KB here): well below one
    # output, and no output whole.
    assert largest_write < BIG // 4 and largest_checkpoint < BIG // 3, (largest_write, largest_checkpoint)
    assert not any(b"a" * 1000 in blob or b"b" * 1000 in blob for blob in blobs if blob)


def _run_with(
    tmp_path: Path, store: InMemoryStore | None, mode: str = "sync", **settings: Any
) -> tuple[dict[str, Any], ScriptedChatModel]:
    """Two steps whose outputs are 800 distinct characters each; the final summary is written by the model."""
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    config: dict[str, Any] = {"configurable": {"thread_id": "t"}}
    context = PlanModeContext(mode="plan", approval="auto", **settings)
    given = {"messages": [("user", "Produce a, then use it in b")]}

    def output(step: Step, ctx: StepContext) -> str:
        return "".join(f"{step.id}{i:03d} " for i in range(160))

    def build(saver: Any) -> Any:
        return build_graph(model, executor=output, verifier=lambda s, o, c: True, checkpointer=saver, store=store)

    if mode == "sync":
        saver = sqlite_checkpointer(tmp_path / "db.sqlite")
        try:
            graph = build(saver)
            graph.invoke(given, config, context=context)
            return graph.get_state(config).values, model
        finally:
            saver.conn.close()

    async def arun() -> dict[str, Any]:
        async with async_sqlite_checkpointer(tmp_path / "db.sqlite") as saver:
            graph = build(saver)
            await graph.ainvoke(given, config, context=context)
            return (await graph.aget_state(config)).values

    return asyncio.run(arun()), model


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_with_a_store_state_keeps_a_short_summary_and_the_final_summary_reads_the_store(
    tmp_path: Path, mode: str
) -> None:
    """Issue 25, item 3: every checkpoint repeats the plan, so with the full output in the store a step's summary
    in state is `stored_result_chars` long. The final summary still reads `result_chars` of each output, from the
    store: what the model is shown does not change."""
    values, model = _run_with(tmp_path, InMemoryStore(), mode, result_chars=300, stored_result_chars=60)
    assert values["status"] == "completed"
    assert all(len(s.result or "") <= 60 + len(" …[truncated]") for s in values["plan"].steps)
    final = next(r.text() for r in model.requests if r.purpose == "final")
    assert "a050" in final and "b050" in final  # about 300 characters of each output: past what state keeps
    assert "a060" not in final  # and no more


def test_without_a_store_state_keeps_result_chars(tmp_path: Path) -> None:
    values, model = _run_with(tmp_path, None, result_chars=300, stored_result_chars=60)
    assert values["status"] == "completed"
    assert [s.id + "050" in (s.result or "") for s in values["plan"].steps] == [True, True]
    final = next(r.text() for r in model.requests if r.purpose == "final")
    assert "a050" in final and "a060" not in final
