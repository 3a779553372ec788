"""Reliability: `planmode.edit_plan`. Concurrent edits of one thread (threads, processes; SQLite and PostgreSQL)
are each applied, or refused and recorded in ``plan.rejections``; none vanishes (``update_state`` alone is
last-writer-wins)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from langgraph.types import Command

from planmode import edit_plan
from planmode.graph import build_graph
from planmode.persistence import postgres_checkpointer, sqlite_checkpointer
from planmode.persistence.edit import EditResult
from planmode.state import Plan, PlanPatch
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

pytestmark = pytest.mark.integration

PLAN = {
    "title": "Numbers",
    "steps": [
        {"id": "a", "description": "collect the numbers"},
        {"id": "b", "description": "report", "dependencies": ["a"]},
    ],
}
CFG: Any = {"configurable": {"thread_id": "shared"}}
ROUNDS = 20


def _graph(db: Path | str) -> Any:
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    saver = postgres_checkpointer(db) if isinstance(db, str) else sqlite_checkpointer(db)
    return build_graph(model, executor=lambda step, ctx: f"{step.id} done", checkpointer=saver)


def _waiting(db: Path | str, cfg: Any = CFG) -> Any:
    graph = _graph(db)
    graph.invoke(
        {"messages": [("user", "collect the numbers, then report")]},
        cfg,
        context={"mode": "plan", "approval": "ask", "max_steps": 100},
    )
    assert graph.get_state(cfg).next == ("approve",)
    return graph


def _add(step_id: str) -> dict[str, Any]:
    return {"reason": f"add {step_id}", "add_steps": [{"id": step_id, "description": f"step {step_id}"}]}


def _assert_none_vanished(plan: Plan, attempts: dict[str, EditResult]) -> None:
    """Every edit is in the plan (applied) or in its rejections (refused, under its own source)."""
    refused_sources = {r.source for r in plan.rejections}
    for name, result in attempts.items():
        if result.applied:
            assert plan.get(name) is not None, f"{name} was reported applied but is not in the plan"
        else:
            assert plan.get(name) is None, f"{name} was reported refused but is in the plan"
            assert name in refused_sources, f"{name} was refused but not recorded"
            assert any("stale edit" in r for r in result.reasons), result.reasons
    added = set(plan.ids()) - {"a", "b"}
    assert added == {n for n, r in attempts.items() if r.applied}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_two_threads_editing_at_once_never_lose_an_edit(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    db: Path | str = tmp_path / "edits.sqlite" if backend == "sqlite" else request.getfixturevalue("pg_url")
    cfg: Any = {"configurable": {"thread_id": f"shared-{uuid.uuid4().hex}"}}
    graph = _waiting(db, cfg)
    other = _graph(db)  # a second graph object: its own connection (pool) to the same database
    attempts: dict[str, EditResult] = {}
    for i in range(ROUNDS):
        revision = graph.get_state(cfg).values["plan"].revision  # both editors read the same plan
        barrier = threading.Barrier(2)

        def edit(g: Any, name: str, rev: str = revision, b: threading.Barrier = barrier) -> None:
            b.wait()
            attempts[name] = edit_plan(g, cfg, _add(name), expected_revision=rev, source=name)

        workers = [
            threading.Thread(target=edit, args=(graph, f"x{i}")),
            threading.Thread(target=edit, args=(other, f"y{i}")),
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=60)
        applied = [n for n in (f"x{i}", f"y{i}") if attempts[n].applied]
        assert len(applied) == 1, {n: attempts[n] for n in (f"x{i}", f"y{i}")}  # one wins, one is stale

    plan = graph.get_state(cfg).values["plan"]
    assert plan.version == 1 + ROUNDS
    _assert_none_vanished(plan, attempts)
    # The thread is still a normal run waiting for approval: approve what is shown now and it runs.
    graph.invoke(None, cfg)
    payload = graph.get_state(cfg).interrupts[0].value
    assert payload["revision"] == plan.revision
    graph.invoke(Command(resume={"action": "approve", "revision": payload["revision"]}), cfg)
    assert graph.get_state(cfg).values["status"] == "completed"
    if backend == "postgres":
        graph.checkpointer.conn.close()
        other.checkpointer.conn.close()


WORKER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from planmode import edit_plan
    from planmode.graph import build_graph
    from planmode.persistence import postgres_checkpointer, sqlite_checkpointer
    from planmode.testing.scripted import PurposeScript, ScriptedChatModel

    db, me, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    graph = build_graph(ScriptedChatModel(responder=PurposeScript(plan={})), checkpointer=sqlite_checkpointer(db))
    cfg = {"configurable": {"thread_id": "shared"}}
    while not (db.parent / "go").exists():
        time.sleep(0.001)
    out = {}
    for i in range(rounds):
        name = f"{me}{i}"
        revision = graph.get_state(cfg).values["plan"].revision
        time.sleep(0.002)  # between reading the plan and editing it, as a person or a program would
        result = edit_plan(graph, cfg, {"reason": name, "add_steps": [{"id": name, "description": name}]},
                           expected_revision=revision, source=name)
        out[name] = [result.applied, result.reasons]
    print(json.dumps(out))
""")


def test_two_processes_editing_at_once_never_lose_an_edit(tmp_path: Path) -> None:
    db = tmp_path / "edits.sqlite"
    graph = _waiting(db)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(db), me, str(ROUNDS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for me in ("p", "q")
    ]
    time.sleep(0.5)
    (tmp_path / "go").touch()
    attempts: dict[str, EditResult] = {}
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        for name, (applied, reasons) in json.loads(out).items():
            attempts[name] = EditResult(applied=applied, plan=None, reasons=reasons)
    assert len(attempts) == 2 * ROUNDS
    plan = graph.get_state(CFG).values["plan"]
    _assert_none_vanished(plan, attempts)
    assert plan.version == 1 + sum(r.applied for r in attempts.values())


def test_a_stale_edit_is_refused_and_recorded_and_the_approval_shows_the_current_plan(tmp_path: Path) -> None:
    graph = _waiting(tmp_path / "edits.sqlite")
    first = graph.get_state(CFG).values["plan"]
    ok = edit_plan(graph, CFG, PlanPatch.model_validate(_add("c")), expected_revision=first.revision)
    assert ok.applied and ok.plan is not None and ok.plan.ids() == ["a", "b", "c"]
    stale = edit_plan(graph, CFG, _add("d"), expected_revision=first.revision, source="bob")
    assert not stale.applied and stale.plan is not None and stale.plan.ids() == ["a", "b", "c"]
    assert stale.plan.rejections[-1].source == "bob" and "stale edit" in stale.reasons[0]
    # a whole plan works too (converted into a patch by diff)
    whole = Plan.model_validate({"goal": first.goal, **PLAN})
    back = edit_plan(graph, CFG, whole, expected_revision=ok.plan.revision)
    assert back.applied and back.plan is not None and back.plan.ids() == ["a", "b"]
    with pytest.raises(ValueError, match="expected_revision"):
        edit_plan(graph, CFG, _add("e"), expected_revision="")
    from planmode.errors import ThreadNotFoundError

    with pytest.raises(ThreadNotFoundError):
        edit_plan(graph, {"configurable": {"thread_id": "nobody"}}, _add("e"), expected_revision="x")
