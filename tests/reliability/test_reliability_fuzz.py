"""Reliability: fuzzing the patch function and the plan reducer as the graph uses them.

Where ``test_state_properties.py`` checks the patch logic's properties, this file fuzzes the path a write
takes in a running graph: valid patches with one mutation (the neighbourhood models land in), long sequences
of mixed writes (plans, patches, transitions, junk JSON, ``Overwrite`` wrappers, resets) through
`PlanChannel`, with a round trip through planmode's checkpoint serializer after every write — the thread
must stay readable and the invariants must hold at every point.

Each property runs twice: with the suite's hypothesis profile (``tests/conftest.py``: 200 derandomized
examples; at most 60 for the write sequences) in the normal suite, and with the ``long`` profile (5000
examples, or more) under ``slow``::

    .venv/bin/python -m pytest -q -m slow tests/reliability/test_reliability_fuzz.py
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.types import Overwrite

from planmode.persistence import planmode_serializer
from planmode.state import Plan, PlanPatch, Step, StepStatus, apply_patch, find_cycle, plan_reducer
from planmode.state.channel import PlanChannel
from planmode.state.models import MAX_REJECTIONS_KEPT

S = StepStatus
IDS = [f"s{i}" for i in range(12)]
LONG = settings(settings.get_profile("long"), max_examples=max(5000, settings.get_profile("long").max_examples))
#: The write sequences are the slow property (a serializer round trip per write): fewer examples normally.
SHORT = settings(max_examples=min(60, settings.default.max_examples))
SERDE = planmode_serializer()

# -- strategies ------------------------------------------------------------------------------------------------

junk = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 10**12)
    | st.floats()
    | st.text(max_size=6)
    | st.sampled_from([*IDS, "done", "pending", "running", "skipped", "", " ", "../x", "a b"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "id",
                    "status",
                    "steps",
                    "goal",
                    "add_steps",
                    "update_steps",
                    "remove_steps",
                    "reorder",
                    "after",
                    "position",
                    "dependencies",
                    "description",
                    "title",
                    "kind",
                    "source",
                    "reset",
                    "version",
                    "attempts",
                    "result",
                    "clear",
                    "__overwrite__",
                    "type",
                    "value",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    """A valid plan in some state of execution: a DAG, done steps only on done dependencies."""
    ids = draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=8, unique=True))
    steps, done = [], set()
    for i, sid in enumerate(ids):
        deps = draw(st.lists(st.sampled_from(ids[:i]), unique=True, max_size=2)) if i else []
        status = (
            S.DONE
            if set(deps) <= done and draw(st.booleans())
            else draw(st.sampled_from([S.PENDING, S.RUNNING, S.FAILED, S.BLOCKED, S.SKIPPED]))
        )
        if status is S.DONE:
            done.add(sid)
        steps.append(
            Step(
                id=sid,
                description=f"do {sid}",
                dependencies=deps,
                status=status,
                result="ok" if status is S.DONE else None,
            )
        )
    return Plan(goal="fuzz", steps=steps, version=draw(st.integers(1, 5)), max_steps=draw(st.sampled_from([None, 10])))


def _valid_patch(plan: Plan, draw: st.DrawFn) -> dict[str, Any]:
    """A patch that applies: add a step on done/pending ones, re-describe a step that is not done."""
    free = [i for i in IDS if plan.get(i) is None]
    patch: dict[str, Any] = {"reason": "fuzz"}
    if free:
        new = draw(st.sampled_from(free))
        deps = draw(st.lists(st.sampled_from(plan.ids()), unique=True, max_size=2))
        patch["add_steps"] = [{"id": new, "description": f"new {new}", "dependencies": deps}]
    open_steps = [s.id for s in plan.steps if s.status is not S.DONE]
    if open_steps:
        patch["update_steps"] = [{"id": draw(st.sampled_from(open_steps)), "description": "changed"}]
    if len(patch) == 1:
        patch["title"] = "retitled"
    return patch


@st.composite
def mutated_patches(draw: st.DrawFn) -> tuple[Plan, dict[str, Any]]:
    """A valid patch with one field replaced, removed or duplicated (or left as it is)."""
    plan = draw(plans())
    patch = _valid_patch(plan, draw)
    mutation = draw(
        st.sampled_from(
            [
                "none",
                "junk_value",
                "drop_key",
                "dup_add",
                "dep_cycle",
                "edit_done",
                "remove_done",
                "unknown_dep",
                "bad_after",
                "reorder_junk",
            ]
        )
    )
    done = [s.id for s in plan.steps if s.status is S.DONE]
    if mutation == "junk_value":
        key = draw(st.sampled_from(sorted(patch)))
        patch[key] = draw(junk)
    elif mutation == "drop_key" and len(patch) > 1:
        patch.pop(draw(st.sampled_from(sorted(k for k in patch if k != "reason"))))
    elif mutation == "dup_add" and patch.get("add_steps"):
        patch["add_steps"] = patch["add_steps"] * 2
    elif mutation == "dep_cycle" and len(plan.steps) >= 2:
        a, b = plan.steps[0].id, plan.steps[-1].id
        patch["update_steps"] = [{"id": a, "dependencies": [b]}]
    elif mutation == "edit_done" and done:
        patch["update_steps"] = [{"id": draw(st.sampled_from(done)), "description": "rewrite history"}]
    elif mutation == "remove_done" and done:
        patch["remove_steps"] = [draw(st.sampled_from(done))]
    elif mutation == "unknown_dep" and patch.get("add_steps"):
        patch["add_steps"][0]["dependencies"] = ["nowhere"]
    elif mutation == "bad_after" and patch.get("add_steps"):
        patch["add_steps"][0]["after"] = draw(st.sampled_from(["nowhere", *IDS]))
    elif mutation == "reorder_junk":
        patch["reorder"] = draw(st.lists(st.sampled_from([*IDS, "zz"]), max_size=5))
    return plan, patch


def writes(plan: Plan) -> st.SearchStrategy[Any]:
    """One write to the plan channel, as nodes, humans, Studio or a broken client send it."""
    ids = plan.ids() or ["s0"]
    transition = st.fixed_dictionaries(
        {
            "id": st.sampled_from([*ids, "zz"]),
            "status": st.sampled_from(["pending", "running", "done", "failed", "blocked", "skipped", "weird"]),
        },
        optional={"result": st.text(max_size=5), "attempts": st.integers(-1, 3), "clear": st.booleans()},
    )
    patchish = st.builds(
        lambda p: p,
        st.fixed_dictionaries(
            {},
            optional={
                "add_steps": st.lists(
                    st.fixed_dictionaries(
                        {"id": st.sampled_from(IDS), "description": st.just("x")},
                        optional={"dependencies": st.lists(st.sampled_from(IDS), max_size=2)},
                    ),
                    max_size=2,
                ),
                "update_steps": st.lists(
                    st.fixed_dictionaries(
                        {"id": st.sampled_from(ids)},
                        optional={
                            "description": st.just("y"),
                            "status": st.sampled_from(["pending", "skipped", "done"]),
                            "dependencies": st.lists(st.sampled_from(IDS), max_size=2),
                        },
                    ),
                    max_size=2,
                ),
                "remove_steps": st.lists(st.sampled_from(ids), max_size=2, unique=True),
                "reorder": st.permutations(ids).map(list),
            },
        ),
    )
    whole = st.builds(
        lambda keep: {"goal": "fuzz", "steps": [{"id": s, "description": f"d {s}"} for s in keep]},
        st.lists(st.sampled_from(IDS), min_size=0, max_size=6, unique=True),
    )
    plain = st.one_of(
        transition, st.lists(transition, max_size=3), patchish, whole, junk, st.just({"reset": True}), st.none()
    )
    return st.one_of(plain, plain.map(Overwrite), plain.map(lambda v: {"__overwrite__": v}))


# -- invariants ------------------------------------------------------------------------------------------------


def assert_valid(plan: Plan) -> None:
    ids = plan.ids()
    assert len(ids) == len(set(ids)), ids
    for s in plan.steps:
        assert set(s.dependencies) <= set(ids) and s.id not in s.dependencies, s
    assert find_cycle(plan.steps) is None
    if plan.max_steps is not None:
        assert len(plan.steps) <= plan.max_steps
    assert len(plan.rejections) <= MAX_REJECTIONS_KEPT


def assert_done_kept(before: Plan, after: Plan) -> None:
    """Every done step of ``before`` is in ``after``, identical, in the same relative order."""
    after_by_id = {s.id: s for s in after.steps}
    done = [s for s in before.steps if s.status is S.DONE]
    for s in done:
        assert after_by_id.get(s.id) == s, (s, after_by_id.get(s.id))
    order = [s.id for s in after.steps if s.id in {d.id for d in done}]
    assert order == [s.id for s in done]


def roundtrip(value: Plan | None) -> Plan | None:
    """The value as a checkpoint stores and restores it, read back through the reducer as LangGraph does."""
    restored = SERDE.loads_typed(SERDE.dumps_typed(value))
    assert restored is None or isinstance(restored, Plan)
    return restored


# -- the properties --------------------------------------------------------------------------------------------


def check_mutated_patch(case: tuple[Plan, dict[str, Any]]) -> None:
    plan, raw = case
    before = copy.deepcopy(plan)
    try:
        patch = PlanPatch.model_validate(raw)
    except ValueError:
        patch = None
    if patch is not None:
        res = apply_patch(plan, patch, max_steps=plan.max_steps)
        assert plan == before  # pure: the input is never changed
        if res.applied:
            assert res.plan.version == plan.version + 1 and res.plan.history[-1:] != []
            assert_valid(res.plan)
            assert_done_kept(plan, res.plan)
        else:
            assert res.plan == plan and res.reasons
    out = plan_reducer(plan, raw)  # the same write as a JSON dict straight into the reducer
    assert isinstance(out, Plan)
    assert out.version in (plan.version, plan.version + 1)
    assert_valid(out)
    assert_done_kept(plan, out)
    if out.version == plan.version:
        assert out.model_copy(update={"rejections": plan.rejections}) == plan
    assert roundtrip(out) == out


def check_write_sequence(first: Plan, data: st.DataObject) -> None:
    channel = PlanChannel(Plan)
    channel.update([first])
    current = channel.get()
    for _ in range(data.draw(st.integers(1, 12), label="writes")):
        assert current is None or isinstance(current, Plan)
        write = data.draw(writes(current) if current is not None else writes(first), label="write")
        channel.update([write])
        after = channel.get()
        assert after is None or isinstance(after, Plan)
        if after is not None:
            assert_valid(after)
            if isinstance(current, Plan) and current.version > 0 and after.version >= current.version:
                assert_done_kept(current, after)  # only a reset (a new run) clears done steps
        # a checkpoint, then a restart: the restored channel holds the same value and takes more writes
        channel = PlanChannel(Plan)
        restored = roundtrip(after)
        channel.value = restored
        assert restored == after
        current = after


@given(mutated_patches())
def test_mutated_patches_apply_whole_or_not_at_all(case: tuple[Plan, dict[str, Any]]) -> None:
    check_mutated_patch(case)


@pytest.mark.slow
@LONG
@given(mutated_patches())
def test_mutated_patches_apply_whole_or_not_at_all_long(case: tuple[Plan, dict[str, Any]]) -> None:
    check_mutated_patch(case)


@SHORT
@given(plans(), st.data())
def test_write_sequences_through_the_channel_keep_the_thread_readable(first: Plan, data: st.DataObject) -> None:
    check_write_sequence(first, data)


@pytest.mark.slow
@LONG
@given(plans(), st.data())
def test_write_sequences_through_the_channel_keep_the_thread_readable_long(first: Plan, data: st.DataObject) -> None:
    check_write_sequence(first, data)
