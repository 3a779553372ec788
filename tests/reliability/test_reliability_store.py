"""Reliability of the storage design: with a store, full step outputs live in the store only.

State (pending writes and checkpoints, on a real SQLite file) keeps at most ``result_chars`` of each output;
the verifier and the dependent steps still get the full output, read back from the store.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

from langgraph.store.memory import InMemoryStore

from planmode.context import PlanModeContext
from planmode.executors import StepContext
from planmode.graph import build_graph
from planmode.nodes import OUTPUT_NAMESPACE
from planmode.persistence import sqlite_checkpointer
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
