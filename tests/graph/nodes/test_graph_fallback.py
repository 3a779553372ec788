"""The patch node's last resort before failing: a whole plan, converted into a patch by diff. The model's
whole plan carries no statuses; done steps in it keep their records, so the diff leaves them alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from planmode.graph import build_graph
from planmode.persistence import sqlite_checkpointer
from planmode.state.models import StepStatus
from planmode.testing.scripted import PurposeScript, ScriptedChatModel
from tests.graph.nodes.test_graph_repair import HEADLESS, NEEDS_ADJUSTMENT, PLAN, TASK, Counting, thread

# what the model answers when asked for a whole plan: every step (done ones included, without statuses)
FULL_PLAN = {
    "title": "Service, repaired",
    "steps": [
        {"id": "a", "description": "write the config"},
        {"id": "c", "description": "write the docs"},
        {"id": "fix_b", "description": "install the toolchain", "dependencies": ["a"]},
        {"id": "b", "description": "build the service", "dependencies": ["a", "fix_b"]},
        {"id": "d", "description": "deploy the service", "dependencies": ["b"]},
    ],
}
# patches the node must refuse: one edits a done step, one is not a patch at all, one depends on nothing known
BAD_PATCHES = [
    {"reason": "redo a", "update_steps": [{"id": "a", "description": "write the config again"}]},
    {"nonsense": True},
    {"reason": "x", "add_steps": [{"id": "x", "description": "x", "dependencies": ["nope"]}]},
]


def test_refused_patches_fall_back_to_a_whole_plan_converted_by_diff(tmp_path: Path) -> None:
    counting = Counting()
    model = ScriptedChatModel(
        responder=PurposeScript(plan=[PLAN, FULL_PLAN], patch=BAD_PATCHES, reflect=NEEDS_ADJUSTMENT)
    )
    saver = sqlite_checkpointer(tmp_path / "db.sqlite")
    g = build_graph(model, checkpointer=saver, executor=counting.execute, verifier=counting.verify)
    cfg = thread()
    g.invoke({"messages": [("user", TASK)]}, cfg, context=HEADLESS)
    values: dict[str, Any] = g.get_state(cfg).values
    plan = values["plan"]
    assert values["status"] == "completed", values.get("error")
    assert model.calls("patch") == 3 and model.calls("plan") == 2
    assert plan.history[-1].source == "diff" and plan.history[-1].added == ["fix_b"]
    assert [r.kind for r in plan.rejections] == ["patch", "patch", "patch"]
    assert "done and cannot be modified" in plan.rejections[0].reasons[0]
    assert all(s.status is StepStatus.DONE for s in plan.steps)
    # a and c were done before the repair and were not executed again
    assert counting.runs["a"] == 1 and counting.runs["c"] == 1
    saver.conn.close()


def test_a_whole_plan_that_changes_a_done_step_keeps_the_done_step_as_it_is(tmp_path: Path) -> None:
    """The model was asked to keep done steps as they are; its whole plan changes done step a's description. The
    done step is kept exactly as it was, never run again, and the patch's reason says so. (Before fa53dbf the
    whole repair was refused and the run failed; the 1.5B re-sent a done step with another complexity that way.)"""
    changed = {
        "title": "t",
        "steps": [
            {**s, "description": s["description"] + " (changed)"} if s["id"] == "a" else s for s in FULL_PLAN["steps"]
        ],
    }
    model = ScriptedChatModel(
        responder=PurposeScript(plan=[PLAN, changed], patch=BAD_PATCHES, reflect=NEEDS_ADJUSTMENT)
    )
    counting = Counting()
    saver = sqlite_checkpointer(tmp_path / "db.sqlite")
    g = build_graph(model, checkpointer=saver, executor=counting.execute, verifier=counting.verify)
    cfg = thread()
    g.invoke({"messages": [("user", TASK)]}, cfg, context=HEADLESS)
    values: dict[str, Any] = g.get_state(cfg).values
    plan = values["plan"]
    assert values["status"] == "completed", values.get("error")
    assert plan.history[-1].source == "diff" and plan.history[-1].added == ["fix_b"]
    assert "done steps kept as they are: a" in (plan.history[-1].reason or "")
    assert plan.get("a").description == "write the config" and plan.get("a").status is StepStatus.DONE
    assert counting.runs["a"] == 1
    saver.conn.close()
