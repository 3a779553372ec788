"""Writes ``tests/persistence/data/old_checkpoints.sqlite``: planmode threads as planmode 0.x before the JSON-data
checkpoints wrote them (commit 4793953: `Plan`, `StepOutcome`, `PlanUpdate` and ``Send`` tasks carrying a
`Step` were stored as Pydantic objects). Run with that version's ``src`` first on the path::

    git archive 4793953 src | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old/src python tests/persistence/data/make_old_checkpoints.py

Threads: ``old-awaiting`` stops at the approval; ``old-done`` ran to the end (a failed step, a patch).
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command
from serde_scenario import FIX_PATCH, NEEDS_ADJUSTMENT, PLAN, TASK

from planmode.graph import build_graph
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

OUT = Path(__file__).with_name("old_checkpoints.sqlite")


def main() -> None:
    OUT.unlink(missing_ok=True)
    conn = sqlite3.connect(str(OUT), check_same_thread=False)
    runs: dict[str, int] = {}

    def execute(step: Any, ctx: Any) -> str:
        runs[step.id] = runs.get(step.id, 0) + 1
        return f"{step.id} finished"

    def verify(step: Any, output: str, ctx: Any) -> tuple[bool, str]:
        return (False, "no toolchain") if step.id == "b" and "fix_b" not in runs else (True, "")

    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, reflect=NEEDS_ADJUSTMENT, patch=FIX_PATCH))
    graph = build_graph(model, executor=execute, verifier=verify, checkpointer=SqliteSaver(conn))
    ctx = {"mode": "plan", "max_attempts": 1}
    for thread in ("old-awaiting", "old-done"):
        graph.invoke({"messages": [("user", TASK)]}, {"configurable": {"thread_id": thread}}, context=ctx)
    done = {"configurable": {"thread_id": "old-done"}}
    revision = graph.get_state(done).interrupts[0].value["revision"]
    graph.invoke(Command(resume={"action": "approve", "revision": revision}), done)
    assert graph.get_state(done).values["status"] == "completed"
    conn.execute("VACUUM")
    conn.close()


if __name__ == "__main__":
    main()
