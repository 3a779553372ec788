"""The graph's decisions as tables: a state in, a route (or a verdict) out.

`find_trouble`, `staleness_check_due` and `gates_may_stop` (nodes/_batch.py) and the six routers of
graph/routing.py are pure functions of the state: each row below is one case, so a change to a decision shows
up as a changed row. `next_batch` has a table too, for its cases that do not involve approval (those are
tested through the graph in test_approval_*.py and test_first_batch.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.types import Send

from planmode._compat import CONFIG_KEY_RESUMING
from planmode.context import PlanModeContext
from planmode.graph.routing import (
    route_after_approve,
    route_after_dispatch,
    route_after_patch,
    route_after_plan,
    route_after_reflect,
    route_after_respond,
)
from planmode.nodes import _batch
from planmode.nodes._batch import (
    PROCESS_TOKEN,
    find_trouble,
    gates_may_stop,
    next_batch,
    staleness_check_due,
)
from planmode.state.approvals import add_approval_records, grant, new_run_record
from planmode.state.models import Plan, PlanSource, Step, StepStatus
from planmode.state.reducer import PlanUpdate

S = StepStatus


def step(sid: str, *deps: str, status: S = S.PENDING, attempts: int = 0, error: str | None = None) -> Step:
    return Step(id=sid, description=f"do {sid}", dependencies=list(deps), status=status, attempts=attempts, error=error)


def plan(*steps: Step, version: int = 1) -> Plan:
    return Plan(goal="g", title="t", steps=list(steps), version=version)


# -- find_trouble: why execution cannot simply go on -----------------------------------------------------------

TROUBLE: list[tuple[str, Plan, str | None]] = [
    ("empty plan", plan(), None),
    ("all pending, ready", plan(step("a"), step("b")), None),
    ("a dependency done", plan(step("a", status=S.DONE), step("b", "a")), None),
    ("a step running, its dependent waits", plan(step("a", status=S.RUNNING), step("b", "a")), None),
    ("every step done", plan(step("a", status=S.DONE), step("b", "a", status=S.DONE)), None),
    (
        "a failed step",
        plan(step("a", status=S.FAILED, attempts=2, error="boom"), step("b")),
        "step 'a' failed after 2 attempt(s): boom",
    ),
    (
        "a failed step without a reason",
        plan(step("a", status=S.FAILED, attempts=1)),
        "step 'a' failed after 1 attempt(s): no reason",
    ),
    (
        "two failed steps, in plan order",
        plan(step("b", status=S.FAILED, attempts=1, error="x"), step("a", status=S.FAILED, attempts=3, error="y")),
        "step 'b' failed after 1 attempt(s): x; step 'a' failed after 3 attempt(s): y",
    ),
    (
        "failed wins over blocked",
        plan(step("a", status=S.BLOCKED, error="key"), step("b", status=S.FAILED, attempts=1, error="boom")),
        "step 'b' failed after 1 attempt(s): boom",
    ),
    ("a blocked step", plan(step("a", status=S.BLOCKED, error="needs a key")), "step 'a' is blocked: needs a key"),
    (
        "two blocked steps",
        plan(step("a", status=S.BLOCKED), step("b", status=S.BLOCKED, error="later")),
        "step 'a' is blocked: no reason; step 'b' is blocked: later",
    ),
    (
        "deadlock: a dependency skipped",
        plan(step("a", status=S.SKIPPED), step("b", "a"), step("c", "a", "b")),
        "deadlock: no step can run (b waits for a; c waits for a, b)",
    ),
    (
        "deadlock: only the missing dependencies are named",
        plan(step("a", status=S.DONE), step("s", status=S.SKIPPED), step("b", "a", "s")),
        "deadlock: no step can run (b waits for s)",
    ),
    ("skipped and done only: finished, no trouble", plan(step("a", status=S.SKIPPED), step("b", status=S.DONE)), None),
]


@pytest.mark.parametrize(("plan_", "expected"), [row[1:] for row in TROUBLE], ids=[row[0] for row in TROUBLE])
def test_find_trouble(plan_: Plan, expected: str | None) -> None:
    assert find_trouble(plan_) == expected


# -- staleness_check_due: must the workspace fingerprint be taken again? --------------------------------------

NOW = 1_000_000.0


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_batch, "time", SimpleNamespace(time=lambda: NOW))


@pytest.fixture
def resuming() -> Iterator[None]:
    """Inside a task of a run that resumes (LangGraph sets the flag in the task's config)."""
    config: RunnableConfig = {"configurable": {CONFIG_KEY_RESUMING: True}}
    token = var_child_runnable_config.set(config)
    try:
        yield
    finally:
        var_child_runnable_config.reset(token)


INVOCATION = "this invocation"


@pytest.fixture
def this_invocation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside one invocation of the graph (outside a run, `invocation_token` knows none: every check is due)."""
    monkeypatch.setattr(_batch, "invocation_token", lambda: INVOCATION)


def checked(token: Any = PROCESS_TOKEN, invocation: Any = INVOCATION, at: Any = NOW) -> dict[str, Any]:
    return {"fingerprint_checked": {"token": token, "invocation": invocation, "at": at}}


DUE: list[tuple[str, dict[str, Any], bool]] = [
    ("never checked", {}, True),
    ("the record is not a dict", {"fingerprint_checked": "yes"}, True),
    ("checked by another process", checked(token="another process"), True),
    ("checked in another invocation (a pause)", checked(invocation="an earlier invocation"), True),
    ("no invocation recorded", {"fingerprint_checked": {"token": PROCESS_TOKEN, "at": NOW}}, True),
    ("checked in this invocation, here", checked(), False),
    ("checked an hour ago in this invocation: no timer", checked(at=NOW - 3600), False),
]


@pytest.mark.usefixtures("frozen_clock", "this_invocation")
@pytest.mark.parametrize(("state", "expected"), [row[1:] for row in DUE], ids=[row[0] for row in DUE])
def test_staleness_check_due(state: dict[str, Any], expected: bool) -> None:
    assert staleness_check_due(state) is expected  # type: ignore[arg-type]


@pytest.mark.usefixtures("frozen_clock", "this_invocation", "resuming")
def test_a_fresh_check_is_due_again_when_the_run_resumes() -> None:
    assert staleness_check_due(checked()) is True  # type: ignore[arg-type]
    assert staleness_check_due({}) is True


def test_outside_a_run_every_check_is_due() -> None:
    assert staleness_check_due(checked()) is True  # type: ignore[arg-type]  # no invocation can be told


# -- gates_may_stop: must verify leave the next batch to dispatch (and its gates)? -----------------------------

FINGERPRINT = {"workspace_fingerprint": {"a.txt": "digest"}}
GATES: list[tuple[str, dict[str, Any], dict[str, Any], bool]] = [
    ("no gate", {}, {"check_staleness": False}, False),
    ("no gate, staleness on but no fingerprint", {}, {"check_staleness": True}, False),
    ("per-step approval", {}, {"step_approval": "writes", "check_staleness": False}, True),
    ("a token limit", {}, {"max_tokens": 1000, "check_staleness": False}, True),
    ("a cost limit", {}, {"max_cost": 0.5, "check_staleness": False}, True),
    ("a budget kept in state", {"budget": {"max_tokens": 10}}, {"check_staleness": False}, True),
    ("an empty budget in state", {"budget": {}}, {"check_staleness": False}, False),
    ("a fingerprint, the check due", FINGERPRINT, {"check_staleness": True}, True),
    ("a fingerprint, checked just now", {**FINGERPRINT, **checked()}, {"check_staleness": True}, False),
    ("a fingerprint, staleness off", FINGERPRINT, {"check_staleness": False}, False),
    ("a fingerprint that is not a dict", {"workspace_fingerprint": "digest"}, {"check_staleness": True}, False),
]


@pytest.mark.usefixtures("frozen_clock", "this_invocation")
@pytest.mark.parametrize(("state", "settings", "expected"), [row[1:] for row in GATES], ids=[row[0] for row in GATES])
def test_gates_may_stop(state: dict[str, Any], settings: dict[str, Any], expected: bool) -> None:
    base = {"step_approval": "off", "max_tokens": 0, "max_cost": 0.0}
    assert gates_may_stop(state, PlanModeContext(**{**base, **settings})) is expected  # type: ignore[arg-type]


# -- the routers -----------------------------------------------------------------------------------------------

PLAN_ROUTES: list[tuple[dict[str, Any], str]] = [
    ({"status": "model_unavailable"}, "model_unavailable"),
    ({"status": "failed"}, "finalize"),
    ({"status": "cancelled"}, "finalize"),
    ({"status": "planning"}, "approve"),
    ({"status": "awaiting_approval"}, "approve"),
    ({}, "approve"),
]


@pytest.mark.parametrize(("state", "route"), PLAN_ROUTES, ids=[str(s) for s, _ in PLAN_ROUTES])
def test_route_after_plan(state: dict[str, Any], route: str) -> None:
    assert route_after_plan(state) == route  # type: ignore[arg-type]


RESPOND_ROUTES: list[tuple[dict[str, Any], str]] = [
    ({"status": "model_unavailable"}, "model_unavailable"),
    ({"status": "completed"}, "__end__"),
    ({"status": "failed"}, "__end__"),
    ({}, "__end__"),
]


@pytest.mark.parametrize(("state", "route"), RESPOND_ROUTES, ids=[str(s) for s, _ in RESPOND_ROUTES])
def test_route_after_respond(state: dict[str, Any], route: str) -> None:
    assert route_after_respond(state) == route  # type: ignore[arg-type]


PATCH_ROUTES: list[tuple[dict[str, Any], str]] = [
    ({"status": "model_unavailable", "needs_approval": True}, "model_unavailable"),
    ({"status": "failed"}, "finalize"),
    ({"status": "cancelled", "needs_approval": True}, "finalize"),
    ({"status": "running", "needs_approval": True}, "approve"),
    ({"status": "running", "needs_approval": False}, "dispatch"),
    ({}, "dispatch"),
]


@pytest.mark.parametrize(("state", "route"), PATCH_ROUTES, ids=[str(s) for s, _ in PATCH_ROUTES])
def test_route_after_patch(state: dict[str, Any], route: str) -> None:
    assert route_after_patch(state) == route  # type: ignore[arg-type]


REFLECT_ROUTES: list[tuple[dict[str, Any], str]] = [
    ({"status": "model_unavailable", "reflection": {"assessment": "off_track"}}, "model_unavailable"),
    ({"status": "failed"}, "finalize"),
    ({"status": "completed", "reflection": {"assessment": "needs_adjustment"}}, "finalize"),
    ({"status": "cancelled"}, "finalize"),
    ({"status": "running", "reflection": {"assessment": "needs_adjustment"}}, "patch"),
    ({"status": "running", "reflection": {"assessment": "off_track"}}, "patch"),
    ({"status": "running", "reflection": {"assessment": "on_track"}}, "dispatch"),
    ({"status": "running", "reflection": {"assessment": "complete"}}, "dispatch"),
    ({"status": "running", "reflection": "off_track"}, "dispatch"),
    ({"status": "running"}, "dispatch"),
]


@pytest.mark.parametrize(("state", "route"), REFLECT_ROUTES, ids=[str(s) for s, _ in REFLECT_ROUTES])
def test_route_after_reflect(state: dict[str, Any], route: str) -> None:
    assert route_after_reflect(state) == route  # type: ignore[arg-type]


RUNNING_AB = plan(step("a", status=S.RUNNING, attempts=1), step("b", status=S.RUNNING, attempts=1), step("c", "a"))
TROUBLED = plan(step("a", status=S.FAILED, attempts=1, error="boom"))
DISPATCH_ROUTES: list[tuple[str, dict[str, Any], str | list[str]]] = [
    ("a lost model pauses first", {"unavailable": {"error": "down"}, "status": "cancelled"}, "model_unavailable"),
    ("stopped at the budget", {"status": "cancelled", "plan": RUNNING_AB}, "finalize"),
    ("no plan, failed", {"status": "failed"}, "finalize"),
    ("no plan yet", {"status": "running"}, "dispatch"),
    ("an invalid plan (version 0)", {"plan": plan(step("a"), version=0)}, "dispatch"),
    ("an approval pending", {"plan": RUNNING_AB, "needs_approval": True}, "approve"),
    ("an approval answer refused", {"plan": RUNNING_AB, "approval_error": "stale"}, "approve"),
    ("complete, dispatch said so", {"plan": plan(step("a", status=S.DONE)), "status": "completed"}, "finalize"),
    ("complete after an edit", {"plan": plan(step("a", status=S.DONE)), "status": "running"}, "dispatch"),
    ("trouble dispatch recorded", {"plan": TROUBLED, "trouble": find_trouble(TROUBLED)}, "reflect"),
    ("trouble dispatch has not seen", {"plan": TROUBLED, "trouble": "older trouble"}, "dispatch"),
    ("an outcome not judged yet", {"plan": RUNNING_AB, "step_outcomes": {"a": {"ok": True}}}, "verify"),
    ("the running steps", {"plan": RUNNING_AB}, ["a", "b"]),
    ("the running steps, bounded", {"plan": RUNNING_AB, "settings": {"max_parallel": 1}}, ["a"]),
    ("steps ready, none running", {"plan": plan(step("a"), step("b"))}, "dispatch"),
]


def _route(route: Any) -> str | list[str]:
    """A route, with a list of Sends as the ids of the steps sent to execute_step."""
    if isinstance(route, list):
        assert all(isinstance(s, Send) and s.node == "execute_step" for s in route)
        return [s.arg["step"].id for s in route]
    return str(route)


@pytest.mark.parametrize(
    ("state", "route"), [row[1:] for row in DISPATCH_ROUTES], ids=[row[0] for row in DISPATCH_ROUTES]
)
def test_route_after_dispatch(state: dict[str, Any], route: str | list[str]) -> None:
    assert _route(route_after_dispatch(state)) == route  # type: ignore[arg-type]


APPROVE_ROUTES: list[tuple[str, dict[str, Any], str | list[str]]] = [
    ("cancelled", {"status": "cancelled", "needs_approval": True}, "finalize"),
    ("rejected: plan again", {"status": "planning", "approval_error": "x"}, "plan"),
    ("an answer refused", {"status": "running", "approval_error": "stale"}, "approve"),
    ("still to approve", {"status": "running", "needs_approval": True}, "approve"),
    ("awaiting approval", {"status": "awaiting_approval"}, "approve"),
    ("a human approved: dispatch starts the batch", {"status": "running", "plan": plan(step("a"))}, "dispatch"),
    ("the policy approved and started the batch", {"status": "running", "plan": RUNNING_AB}, ["a", "b"]),
    (
        "the policy approved, the plan finished",
        {"status": "completed", "plan": plan(step("a", status=S.DONE))},
        "finalize",
    ),
]


@pytest.mark.parametrize(
    ("state", "route"), [row[1:] for row in APPROVE_ROUTES], ids=[row[0] for row in APPROVE_ROUTES]
)
def test_route_after_approve(state: dict[str, Any], route: str | list[str]) -> None:
    assert _route(route_after_approve(state)) == route  # type: ignore[arg-type]


# -- next_batch ------------------------------------------------------------------------------------------------
# next_batch starts only steps a grant of the run's approval record covers (`planmode.state.approvals`); the
# rows below give it a grant of the plan they run (`granted`), and one row none.


def granted(plan_: Plan, **state: Any) -> dict[str, Any]:
    """``state`` with an approval record whose grant covers ``plan_`` as it is."""
    log = add_approval_records(None, [new_run_record("run")])
    return {**state, "approvals": add_approval_records(log, [grant(log, "plan", plan_, policy="t", by="human")])}


def running(update: dict[str, Any]) -> list[tuple[str, int | None]]:
    """The (step, attempt) pairs a dispatch update marks running."""
    plan_update = update["plan"]
    assert isinstance(plan_update, PlanUpdate) and plan_update.source == PlanSource.DISPATCH
    assert all(t.status is S.RUNNING for t in plan_update.transitions)
    return [(t.id, t.attempts) for t in plan_update.transitions]


NO_APPROVAL_KEYS = {"needs_approval", "approval_error"}


def test_next_batch_pauses_when_the_model_was_lost() -> None:
    update = next_batch({"unavailable": {"error": "connection refused"}}, plan(step("a")), 2)
    assert update == {"status": "model_unavailable", "error": "connection refused"}


@pytest.mark.parametrize("plan_", [None, plan(step("a"), version=0)], ids=["no plan", "an invalid plan"])
def test_next_batch_fails_without_a_valid_plan(plan_: Plan | None) -> None:
    assert next_batch({}, plan_, 2) == {"status": "failed", "error": "there is no valid plan"}


def test_next_batch_finishes_a_complete_plan() -> None:
    update = next_batch({}, plan(step("a", status=S.DONE), step("b", status=S.SKIPPED)), 2)
    assert update["status"] == "completed"
    assert "plan" not in update and not NO_APPROVAL_KEYS & set(update)


def test_next_batch_records_the_trouble() -> None:
    troubled = plan(step("a", status=S.DONE), step("b", "a", status=S.FAILED, attempts=2, error="boom"))
    update = next_batch(granted(troubled), troubled, 2)
    assert update["trouble"] == find_trouble(troubled)
    assert "plan" not in update and "status" not in update


BATCHES: list[tuple[str, Plan, dict[str, Any], int, list[tuple[str, int]]]] = [
    (
        "the ready steps, next attempt",
        plan(step("a"), step("b", attempts=2), step("c", "a")),
        {},
        4,
        [("a", 1), ("b", 3)],
    ),
    ("bounded by max_parallel", plan(step("a"), step("b"), step("c")), {}, 2, [("a", 1), ("b", 1)]),
    ("max_parallel below 1 still starts one", plan(step("a"), step("b")), {}, 0, [("a", 1)]),
    (
        "a step left running without an outcome goes first, same attempt",
        plan(step("a"), step("r", status=S.RUNNING, attempts=3)),
        {},
        4,
        [("r", 3), ("a", 1)],
    ),
    (
        "a running step with an outcome is not sent again",
        plan(step("a"), step("r", status=S.RUNNING, attempts=1)),
        {"step_outcomes": {"r": {"ok": True}}},
        4,
        [("a", 1)],
    ),
    (
        "dependents wait for their dependencies",
        plan(step("a", status=S.DONE), step("b", "a"), step("c", "b")),
        {},
        4,
        [("b", 1)],
    ),
]


@pytest.mark.parametrize(
    ("plan_", "state", "max_parallel", "expected"), [row[1:] for row in BATCHES], ids=[row[0] for row in BATCHES]
)
def test_next_batch_marks_the_batch_running(
    plan_: Plan, state: dict[str, Any], max_parallel: int, expected: list[tuple[str, int]]
) -> None:
    update = next_batch(granted(plan_, **state), plan_, max_parallel)  # type: ignore[arg-type]
    assert running(update) == expected
    assert update["status"] == "running" and not NO_APPROVAL_KEYS & set(update)


def test_next_batch_starts_nothing_no_grant_covers() -> None:
    approved = plan(step("a"), step("b"))
    edited = plan(step("a"), Step(id="b", description="step b, edited after the approval"))
    assert next_batch(granted(approved), edited, 4) == {
        "needs_approval": True,
        "status": "awaiting_approval",
        "approval_error": "the plan changed after it was approved; review it again",
    }
    assert next_batch({}, approved, 4)["needs_approval"] is True  # no record at all


def test_a_send_carries_the_step_not_the_runs_settings_usage_or_budget() -> None:
    """execute_step reads the settings, the usage and the budget from the graph's channels (`trusted`), never
    from a Send, which anyone can send; a copy in every Send was saved twice (the task's write and the
    checkpoint's pending sends) for nothing: B5 counts those bytes."""
    state = {
        "plan": RUNNING_AB,
        "settings": {"max_parallel": 4},
        "usage": {"total": {"input_tokens": 5}, "models": {}},
        "budget": {"max_tokens": 100},
    }
    sends = route_after_dispatch(state)  # type: ignore[arg-type]
    assert isinstance(sends, list) and sends
    for send in sends:
        assert set(send.arg) == {"step", "goal", "plan_version", "dependencies", "durable"}
