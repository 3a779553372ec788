"""Reliability: a plan edit between two nodes during execution leaves the run resumable.

A human (or Studio) edits the plan through ``update_state`` while a run is stopped between two nodes: at an
``interrupt_before`` breakpoint, or after a crash. LangGraph applies the edit "as" the node that wrote last
and follows that node's edges; pending ``Send`` tasks of the stopped super-step are dropped. Whatever the
boundary, and whether the reducer accepts or rejects the edit, the run must go on from the edited plan:
resuming completes it, and no step that was done runs again.

The scenario visits every execution node: a and c run in parallel, b fails verification once, reflect asks
for an adjustment, patch adds fix_b, then b and d run, then finalize.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from planmode.graph import build_graph
from planmode.state.models import Plan, StepStatus
from planmode.testing.scripted import PurposeScript, ScriptedChatModel
from tests.graph.nodes.test_graph_repair import FIX_PATCH, HEADLESS, NEEDS_ADJUSTMENT, PLAN, TASK, Counting

pytestmark = pytest.mark.integration

S = StepStatus
CFG: Any = {"configurable": {"thread_id": "edit"}}
#: An edit the reducer accepts: one more independent step.
VALID = {"reason": "a human adds a step", "add_steps": [{"id": "extra", "description": "one more thing"}]}
#: An edit the reducer rejects (and records): a dependency that does not exist.
REJECTED = {"reason": "a broken edit", "add_steps": [{"id": "bad", "description": "x", "dependencies": ["ghost"]}]}
#: (node, which of its runs): every execution node once, and the loop nodes again after a step is done.
#: Under the policy's approval (HEADLESS: auto) approve starts the first batch itself, the patch (it adds a
#: step, so the policy decides it: issue 43) goes back to approve, which starts the next batch itself too, and
#: within a run verify starts the next batch itself, so the loop is execute_step -> verify -> execute_step.
BOUNDARIES = [
    ("approve", 1),
    ("approve", 2),
    ("execute_step", 1),
    ("execute_step", 2),
    ("execute_step", 3),
    ("verify", 1),
    ("verify", 2),
    ("verify", 3),
    ("reflect", 1),
    ("patch", 1),
    ("finalize", 1),
]


def _approve_pending(graph: Any, **kwargs: Any) -> None:
    """Answer approval interrupts (an edit after approval asks again) until the run stops for another reason."""
    for _ in range(5):
        state = graph.get_state(CFG)
        if not state.interrupts:
            return
        revision = state.interrupts[0].value["revision"]
        graph.invoke(Command(resume={"action": "approve", "revision": revision}), CFG, context=HEADLESS, **kwargs)


def _stop_before(graph: Any, node: str, occurrence: int) -> bool:
    """Run until just before the ``occurrence``-th run of ``node``; False when the run ends first."""
    graph.invoke({"messages": [("user", TASK)]}, CFG, context=HEADLESS, interrupt_before=[node])
    for seen in range(1, occurrence + 1):
        _approve_pending(graph, interrupt_before=[node])
        state = graph.get_state(CFG)
        if node not in state.next:
            return False
        if seen < occurrence:
            graph.invoke(None, CFG, context=HEADLESS, interrupt_before=[node])
    return True


@pytest.mark.parametrize("edit", ["valid", "rejected"])
@pytest.mark.parametrize(("node", "occurrence"), BOUNDARIES)
def test_an_edit_at_every_node_boundary_leaves_the_run_resumable(
    checkpointer: SqliteSaver, node: str, occurrence: int, edit: str
) -> None:
    counting = Counting()
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, reflect=NEEDS_ADJUSTMENT, patch=FIX_PATCH))
    graph = build_graph(model, checkpointer=checkpointer, executor=counting.execute, verifier=counting.verify)
    assert _stop_before(graph, node, occurrence), f"{node} runs fewer than {occurrence} times"
    before = graph.get_state(CFG).values["plan"]
    assert isinstance(before, Plan)
    done_before = {s.id for s in before.by_status(S.DONE)}
    runs_before = dict(counting.runs)

    graph.update_state(CFG, {"plan": VALID if edit == "valid" else REJECTED})
    edited = graph.get_state(CFG)
    assert edited.next, f"the edit before {node} left nothing to run (status {edited.values.get('status')!r})"
    if edit == "rejected":
        assert edited.values["plan"].rejections[-1].source != "dispatch"
        assert len(edited.values["plan"].rejections) == len(before.rejections) + 1

    graph.invoke(None, CFG, context=HEADLESS)
    _approve_pending(graph)
    final = graph.get_state(CFG)
    plan = final.values["plan"]
    assert final.values["status"] == "completed", (final.values.get("error"), final.next)
    assert not final.next
    assert all(s.status is S.DONE for s in plan.steps), plan.counts()
    expected = {"a", "b", "c", "d", "fix_b"} | ({"extra"} if edit == "valid" else set())
    assert {s.id for s in plan.steps} == expected
    # no step that was done before the edit ran again, and every step ran at most as the scenario needs
    for sid in done_before:
        assert counting.runs[sid] == runs_before[sid], f"done step {sid} ran again"
    assert counting.runs["a"] == counting.runs["c"] == counting.runs["d"] == counting.runs["fix_b"] == 1
    assert counting.runs["b"] == 2
    if edit == "valid":
        assert counting.runs["extra"] == 1
