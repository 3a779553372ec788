"""Property-based tests of the patch logic and the plan reducer over random plans and patches.

Plans are random DAGs in a random order with random statuses; a done step's dependencies are done. Patches
are either arbitrary (ops naming existing and unknown ids, edits to done steps, cycles, bad placements) or
built to be valid (which must then apply).

Every property runs twice: in the normal suite with a small number of examples (``SMALL_EXAMPLES``, so a
break in the patch logic fails the everyday run), and as a ``slow`` twin named ``..._long`` that runs with
the loaded Hypothesis profile. Run the twins long with ``HYPOTHESIS_PROFILE=long pytest -m slow``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from planmode.state import (
    Plan,
    PlanPatch,
    Step,
    StepStatus,
    StepTransition,
    apply_patch,
    apply_transitions,
    diff_to_patch,
    find_cycle,
    plan_reducer,
)

#: Examples per property in the normal suite (the slow twins use the loaded profile: 200, or 5000 when long).
SMALL_EXAMPLES = 25


def prop(*strategies: Any) -> Callable[[Callable[..., None]], Any]:
    """``@given(*strategies)`` with ``SMALL_EXAMPLES`` examples, plus a ``slow`` twin ``<name>_long`` on the
    loaded profile, registered in this module so pytest collects both."""

    def deco(body: Callable[..., None]) -> Any:
        long = pytest.mark.slow(given(*strategies)(body))
        long.__name__ = f"{body.__name__}_long"
        globals()[long.__name__] = long
        return settings(max_examples=SMALL_EXAMPLES)(given(*strategies)(body))

    return deco


S = StepStatus
POOL = [f"s{i}" for i in range(16)]
NOT_DONE = [S.PENDING, S.RUNNING, S.FAILED, S.BLOCKED, S.SKIPPED]
DEFINITION = ("id", "description", "dependencies", "tools", "complexity", "acceptance")

words = st.text(alphabet="abcdefgh xyz", min_size=1, max_size=12).filter(lambda t: t.strip() != "")
tools = st.lists(st.sampled_from(["shell", "web", "python", "files"]), max_size=2, unique=True)
complexity = st.sampled_from(["low", "medium", "high"])


# -- strategies -------------------------------------------------------------------------------------------


@st.composite
def plans(draw: st.DrawFn, *, min_steps: int = 1, max_steps: int = 10) -> Plan:
    ids = draw(st.lists(st.sampled_from(POOL), min_size=min_steps, max_size=max_steps, unique=True))
    steps: list[Step] = []
    done: set[str] = set()
    for i, sid in enumerate(ids):  # ``ids`` is a topological order: a step depends only on earlier ones
        deps = draw(st.lists(st.sampled_from(ids[:i]), unique=True, max_size=3)) if i else []
        if set(deps) <= done and draw(st.booleans()):
            status = S.DONE
            done.add(sid)
        else:
            status = draw(st.sampled_from(NOT_DONE))
        steps.append(
            Step(
                id=sid,
                description=draw(words),
                dependencies=deps,
                tools=draw(tools),
                complexity=draw(complexity),
                acceptance=draw(st.sampled_from(["", "it works"])),
                status=status,
                attempts=draw(st.integers(0, 3)),
                result=draw(st.none() | words) if status is not S.PENDING else None,
                error=draw(st.none() | words) if status in (S.FAILED, S.BLOCKED) else None,
            )
        )
    order = draw(st.permutations(steps))  # the plan's order need not be topological
    cap = draw(st.none() | st.integers(len(steps), len(steps) + 4))
    return Plan(
        goal="goal",
        title=draw(st.sampled_from(["", "T"])),
        steps=list(order),
        version=draw(st.integers(1, 5)),
        max_steps=cap,
    )


@st.composite
def any_patches(draw: st.DrawFn, plan: Plan) -> dict[str, Any]:
    """A patch (as JSON) whose ops name existing and unknown ids; often invalid."""
    ids = plan.ids()
    some_id = st.sampled_from(ids) | st.sampled_from(POOL)
    update = st.fixed_dictionaries(
        {"id": some_id},
        optional={
            "description": words,
            "dependencies": st.lists(some_id, max_size=3),
            "tools": tools,
            "complexity": complexity,
            "acceptance": words,
            "status": st.sampled_from(["pending", "skipped"]),
        },
    )
    add = st.fixed_dictionaries(
        {"id": st.sampled_from(POOL), "description": words},
        optional={
            "dependencies": st.lists(some_id, max_size=3),
            "after": some_id,
            "position": st.integers(0, len(ids) + 2),
            "status": st.sampled_from(["pending", "done"]),
        },
    )
    return draw(
        st.fixed_dictionaries(
            {"reason": words},
            optional={
                "title": words,
                "add_steps": st.lists(add, max_size=4),
                "update_steps": st.lists(update, max_size=3),
                "remove_steps": st.lists(some_id, max_size=3),
                "reorder": st.lists(some_id, max_size=len(ids) + 1),
            },
        )
    )


def _topo_rank(plan: Plan) -> dict[str, int]:
    """A topological rank of every step (dependencies rank lower)."""
    rank: dict[str, int] = {}
    by_id = {s.id: s for s in plan.steps}

    def visit(sid: str) -> int:
        if sid not in rank:
            rank[sid] = 1 + max((visit(d) for d in by_id[sid].dependencies), default=-1)
        return rank[sid]

    for s in plan.steps:
        visit(s.id)
    return {sid: r * 100 + plan.ids().index(sid) for sid, r in rank.items()}  # unique ranks


def _drawn_updates(draw: st.DrawFn, kept: list[Step], removed: list[str], rank: dict[str, int]) -> list[dict[str, Any]]:
    """Updates of open kept steps: each one that depended on a removed step is rewired to earlier steps only."""
    updates: list[dict[str, Any]] = []
    for s in kept:
        rewire = any(d in removed for d in s.dependencies)
        if s.status is S.DONE or not (rewire or draw(st.booleans())):
            continue
        upd: dict[str, Any] = {"id": s.id}
        earlier = [k.id for k in kept if rank[k.id] < rank[s.id]]  # keeps the graph acyclic
        if rewire or draw(st.booleans()):
            upd["dependencies"] = draw(st.lists(st.sampled_from(earlier), unique=True, max_size=3)) if earlier else []
        if draw(st.booleans()):
            upd["description"] = draw(words)
        if draw(st.booleans()):
            upd["complexity"] = draw(complexity)
        if draw(st.booleans()):
            upd["status"] = draw(st.sampled_from(["pending", "skipped"]))
        updates.append(upd)
    return updates


def _drawn_additions(draw: st.DrawFn, kept: list[Step], new_ids: list[str]) -> list[dict[str, Any]]:
    """New steps with the ids ``new_ids``, each depending only on kept steps and earlier additions."""
    adds: list[dict[str, Any]] = []
    for n, nid in enumerate(new_ids):
        known = [k.id for k in kept] + new_ids[:n]  # only earlier additions: truncation drops a tail
        add: dict[str, Any] = {"id": nid, "description": draw(words)}
        if known:
            add["dependencies"] = draw(st.lists(st.sampled_from(known), unique=True, max_size=3))
        place = draw(st.sampled_from(["end", "after", "position"]))
        if place == "after" and known:
            add["after"] = draw(st.sampled_from(known))
        elif place == "position":
            add["position"] = draw(st.integers(0, len(kept) + n + 1))
        adds.append(add)
    return adds


@st.composite
def valid_patches(draw: st.DrawFn, plan: Plan) -> dict[str, Any]:
    """A patch (as JSON) that must apply: it keeps done steps, ids unique, dependencies known, no cycles."""
    rank = _topo_rank(plan)
    open_ids = [s.id for s in plan.steps if s.status is not S.DONE]
    removed = draw(st.lists(st.sampled_from(open_ids), unique=True, max_size=3)) if open_ids else []
    kept = [s for s in plan.steps if s.id not in removed]
    patch: dict[str, Any] = {"reason": draw(words)}

    updates = _drawn_updates(draw, kept, removed, rank)
    if updates:
        patch["update_steps"] = updates

    free = [i for i in POOL if i not in plan.ids()]
    new_ids = draw(st.lists(st.sampled_from(free), unique=True, max_size=4)) if free else []
    adds = _drawn_additions(draw, kept, new_ids)
    if adds:
        patch["add_steps"] = adds

    movable = [k.id for k in kept if k.status is not S.DONE] + new_ids
    if movable and draw(st.booleans()):
        patch["reorder"] = draw(st.permutations(movable))
    if draw(st.booleans()) or not (removed or updates or adds or patch.get("reorder")):
        patch["title"] = draw(words)
    if len(kept) == 0 and not adds:  # a patch may not leave the plan empty
        patch["add_steps"] = [{"id": free[0], "description": "replacement"}]
    if removed:
        patch["remove_steps"] = removed
    return patch


def plan_and(patch_strategy: Any, **kw: Any) -> st.SearchStrategy[tuple[Plan, dict[str, Any]]]:
    return plans(**kw).flatmap(lambda p: st.tuples(st.just(p), patch_strategy(p)))


# -- invariants -----------------------------------------------------------------------------------------------


def assert_invariants(before: Plan, after: Plan, cap: int | None) -> None:
    ids = after.ids()
    assert len(ids) == len(set(ids)), "ids unique"
    known = set(ids)
    for s in after.steps:
        assert set(s.dependencies) <= known, "dependencies exist"
        assert s.id not in s.dependencies
    assert find_cycle(after.steps) is None, "acyclic"
    if cap is not None:
        assert len(after.steps) <= cap, "cap holds"
    done_before = [s for s in before.steps if s.status is S.DONE]
    done_after = [s for s in after.steps if s.id in {d.id for d in done_before}]
    assert done_after == done_before, "done steps identical, present and in the same relative order"


def effective_cap(plan: Plan, max_steps: int | None) -> int | None:
    caps = [c for c in (plan.max_steps, max_steps) if c is not None]
    return min(caps) if caps else None


def check_patch_result(plan: Plan, patch: PlanPatch, max_steps: int | None) -> bool:
    snapshot = plan.model_copy(deep=True)
    res = apply_patch(plan, patch, max_steps=max_steps)
    assert plan == snapshot, "the input plan is never mutated"
    if not res.applied:
        assert res.plan is plan, "a rejected patch returns the identical plan"
        assert res.reasons
        return False
    new = res.plan
    assert res.reasons == []
    assert_invariants(plan, new, effective_cap(plan, max_steps))
    assert new.version == plan.version + 1
    assert new.history == [*plan.history, new.history[-1]]
    record = new.history[-1]
    assert record.version == new.version and record.warnings == res.warnings
    old_ids, new_ids = set(plan.ids()), set(new.ids())
    assert new_ids == (old_ids - set(record.removed)) | set(record.added)
    old = {s.id: s for s in plan.steps}
    for s in new.steps:
        if s.id in record.added and s.id not in old:
            assert (s.status, s.attempts, s.result, s.error) == (S.PENDING, 0, None, None), "new steps pending"
        elif s.id not in record.updated and s.id not in record.added:
            assert s == old[s.id], "steps the patch does not touch keep their record"
    return True


# -- apply_patch ------------------------------------------------------------------------------------------------


@prop(plan_and(any_patches), st.none() | st.integers(0, 6))
def test_any_patch_keeps_the_invariants(case: tuple[Plan, dict[str, Any]], extra_room: int | None) -> None:
    plan, data = case
    max_steps = None if extra_room is None else len(plan.steps) + extra_room
    check_patch_result(plan, PlanPatch.model_validate(data), max_steps)


@prop(plan_and(valid_patches), st.none() | st.integers(0, 6))
def test_valid_patches_apply(case: tuple[Plan, dict[str, Any]], extra_room: int | None) -> None:
    plan, data = case
    max_steps = None if extra_room is None else len(plan.steps) + extra_room
    patch = PlanPatch.model_validate(data)
    res = apply_patch(plan, patch, max_steps=max_steps)
    if res.reasons == ["the patch changes nothing"]:
        # a valid no-op (a reorder into the same order, values equal to the current ones, additions all
        # truncated): refused so the version, and the revision a human approved, stay as they are
        assert res.plan is plan
        order = [i for i in (patch.reorder or []) if plan.get(i) is not None]
        assert order == [s.id for s in plan.steps if s.id in set(order)]
        return
    assert res.applied, (res.reasons, data)
    assert check_patch_result(plan, patch, max_steps)
    cap = effective_cap(plan, max_steps)
    kept = len(plan.steps) - len(patch.remove_steps)
    expected_added = len(patch.add_steps) if cap is None else min(len(patch.add_steps), max(0, cap - kept))
    assert len(res.plan.history[-1].added) == expected_added
    assert bool(res.warnings and any("truncated" in w for w in res.warnings)) == (expected_added < len(patch.add_steps))


@prop(plans(), st.data())
def test_edits_to_done_steps_are_always_rejected(plan: Plan, data: st.DataObject) -> None:
    done = [s.id for s in plan.steps if s.status is S.DONE]
    assume(done)
    sid = data.draw(st.sampled_from(done))
    op = data.draw(st.sampled_from(["description", "status", "remove", "dependencies"]))
    if op == "remove":
        patch = PlanPatch(remove_steps=[sid])
    elif op == "status":
        patch = PlanPatch.model_validate({"update_steps": [{"id": sid, "status": "pending"}]})
    elif op == "dependencies":
        others = [i for i in plan.ids() if i != sid]
        current = plan.get(sid).dependencies  # type: ignore[union-attr]
        new = (
            data.draw(st.lists(st.sampled_from(others), unique=True, max_size=3).filter(lambda d: d != current))
            if others
            else [sid]
        )
        patch = PlanPatch.model_validate({"update_steps": [{"id": sid, "dependencies": new}]})
    else:
        patch = PlanPatch.model_validate({"update_steps": [{"id": sid, "description": "changed " + sid}]})
    res = apply_patch(plan, patch)
    assert not res.applied and res.plan is plan
    assert any(repr(sid) in r for r in res.reasons)


@prop(plans(min_steps=2), st.data())
def test_patches_creating_a_cycle_are_rejected_with_the_cycle(plan: Plan, data: st.DataObject) -> None:
    rank = _topo_rank(plan)
    open_steps = [s for s in plan.steps if s.status is not S.DONE]
    assume(open_steps)
    s = data.draw(st.sampled_from(open_steps))
    # a step that (transitively) depends on ``s``, or ``s`` itself
    dependents = {s.id}
    for other in sorted(plan.steps, key=lambda x: rank[x.id]):
        if dependents & set(other.dependencies):
            dependents.add(other.id)
    target = data.draw(st.sampled_from(sorted(dependents)))
    res = apply_patch(
        plan, PlanPatch.model_validate({"update_steps": [{"id": s.id, "dependencies": [*s.dependencies, target]}]})
    )
    assert not res.applied and res.plan is plan
    if target == s.id:
        assert f"step {s.id!r} depends on itself" in res.reasons
    else:
        cycle = [r for r in res.reasons if r.startswith("dependency cycle: ")]
        assert len(cycle) == 1
        path = cycle[0].removeprefix("dependency cycle: ").split(" -> ")
        assert path[0] == path[-1] and len(path) >= 3


# -- transitions -----------------------------------------------------------------------------------------------


@prop(plans(), st.data())
def test_transitions_never_touch_done_steps(plan: Plan, data: st.DataObject) -> None:
    transitions = data.draw(
        st.lists(
            st.builds(
                StepTransition,
                id=st.sampled_from(plan.ids()) | st.sampled_from(POOL),
                status=st.sampled_from(list(S)),
                result=st.none() | words,
                attempts=st.none() | st.integers(0, 5),
            ),
            min_size=1,
            max_size=4,
        )
    )
    res = apply_transitions(plan, transitions)
    if not res.applied:
        assert res.plan is plan and res.reasons
        return
    assert res.plan.version == plan.version and res.plan.history == plan.history
    assert res.plan.ids() == plan.ids()
    for before, after in zip(plan.steps, res.plan.steps, strict=True):
        if before.status is S.DONE:
            assert after == before
    assert not any(t.id in {s.id for s in plan.by_status(S.DONE)} for t in transitions)


# -- the full-plan fallback ------------------------------------------------------------------------------------


@prop(plan_and(valid_patches))
def test_diff_of_a_patched_plan_reproduces_it(case: tuple[Plan, dict[str, Any]]) -> None:
    plan, data = case
    plan = plan.model_copy(update={"max_steps": None})
    target = apply_patch(plan, PlanPatch.model_validate(data)).plan

    def definitions(p: Plan) -> list[dict[str, Any]]:
        return [s.model_dump(include=set(DEFINITION)) for s in p.steps]

    patch = diff_to_patch(plan, target)
    if definitions(target) == definitions(plan) and target.title == plan.title:  # only statuses changed
        assert patch.is_empty()
        return
    res = apply_patch(plan, patch)
    assert res.applied, res.reasons
    assert res.plan.ids() == target.ids()
    for got, want in zip(res.plan.steps, target.steps, strict=True):
        assert got.model_dump(include=set(DEFINITION)) == want.model_dump(include=set(DEFINITION))
    assert_invariants(plan, res.plan, None)


@prop(plan_and(any_patches))
def test_diff_of_any_proposal_keeps_the_invariants(case: tuple[Plan, dict[str, Any]]) -> None:
    plan, data = case
    # a proposal as a model might write it: the plan's steps edited freely, statuses as given
    proposal_steps = [s.model_dump() for s in plan.steps]
    for upd in data.get("update_steps", []):
        for s in proposal_steps:
            if s["id"] == upd["id"]:
                s.update({k: v for k, v in upd.items() if k != "status"})
    proposal_steps = [s for s in proposal_steps if s["id"] not in data.get("remove_steps", [])]
    proposal_steps += [{k: v for k, v in a.items() if k in DEFINITION} for a in data.get("add_steps", [])]
    proposal = Plan.model_validate({"goal": "goal", "steps": proposal_steps})
    check_patch_result(plan, diff_to_patch(plan, proposal), None)


# -- the reducer ---------------------------------------------------------------------------------------------------


json_junk = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(max_size=8)
    | st.sampled_from([*POOL, "pending", "done", "steps", "add_steps"]),
    lambda children: (
        st.lists(children, max_size=4)
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
                    "kind",
                    "reset",
                    "patch",
                    "plan",
                    "transitions",
                    "description",
                    "dependencies",
                    "x",
                ]
            )
            | st.text(max_size=5),
            children,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@prop(st.none() | plans(), json_junk)
def test_reducer_never_raises_on_junk(current: Plan | None, update: Any) -> None:
    out = plan_reducer(current, update)
    assert out is None or isinstance(out, Plan)
    if current is not None and isinstance(out, Plan):
        assert out.version in (current.version, current.version + 1)
        assert_invariants(current, out, current.max_steps)


@prop(plan_and(any_patches) | plan_and(valid_patches))
def test_reducer_applies_or_records_every_patch(case: tuple[Plan, dict[str, Any]]) -> None:
    plan, data = case
    out = plan_reducer(plan, data)
    assert isinstance(out, Plan)
    res = apply_patch(plan, PlanPatch.model_validate(data), max_steps=plan.max_steps, source="unknown")
    if not ({"add_steps", "update_steps", "remove_steps", "reorder", "title"} & data.keys()):
        assert not res.applied
        assert out.steps == plan.steps and out.rejections[-1].kind == "unknown"
        return
    if res.applied:
        assert out == res.plan
        assert out.version == plan.version + 1 and len(out.history) == len(plan.history) + 1
        assert out.rejections == plan.rejections
        assert_invariants(plan, out, plan.max_steps)
    else:
        assert out.model_dump(exclude={"rejections"}) == plan.model_dump(exclude={"rejections"})
        assert out.rejections == [*plan.rejections, out.rejections[-1]]
        assert out.rejections[-1].reasons == res.reasons
        assert out.rejections[-1].kind == "patch"


@prop(
    plans(),
    st.lists(
        st.one_of(
            st.fixed_dictionaries({"id": st.sampled_from(POOL), "status": st.sampled_from([s.value for s in S])}),
            st.fixed_dictionaries({"remove_steps": st.lists(st.sampled_from(POOL), min_size=1, max_size=2)}),
            st.fixed_dictionaries(
                {
                    "add_steps": st.lists(
                        st.fixed_dictionaries(
                            {
                                "id": st.sampled_from(POOL),
                                "description": words,
                                "dependencies": st.lists(st.sampled_from(POOL), max_size=2),
                            }
                        ),
                        min_size=1,
                        max_size=2,
                    )
                }
            ),
            st.fixed_dictionaries(
                {
                    "update_steps": st.lists(
                        st.fixed_dictionaries({"id": st.sampled_from(POOL), "description": words}),
                        min_size=1,
                        max_size=2,
                    )
                }
            ),
            json_junk,
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_a_sequence_of_reducer_updates_keeps_the_invariants(plan: Plan, updates: list[Any]) -> None:
    current: Plan | None = plan
    for upd in updates:
        before = current
        current = plan_reducer(current, upd)
        if current is None:  # a reset ({"reset": true}) is a legitimate update
            return
        assert before is not None
        assert current.version in (before.version, before.version + 1)
        assert len(current.history) - len(before.history) == current.version - before.version
        assert_invariants(before, current, plan.max_steps)


def _fresh_view(plan: Plan) -> dict[str, Any]:
    """Every lookup of a plan's index, read from an index built from scratch (not handed on by a transition)."""
    from planmode.state.models import _PlanIndex

    index = _PlanIndex(plan.steps)
    return {
        "by_id": {k: id(v) for k, v in index.by_id.items()},
        "by_status": {st.value: [id(s) for s in index.by_status.get(st, ())] for st in S},
        "ready": [id(s) for s in index.ready()],
        "counts": {st.value: len(index.by_status.get(st, ())) for st in S},
    }


def _view(plan: Plan) -> dict[str, Any]:
    return {
        "by_id": {s.id: id(plan.get(s.id)) for s in plan.steps},
        "by_status": {st.value: [id(s) for s in plan.by_status(st)] for st in S},
        "ready": [id(s) for s in plan.ready_steps()],
        "counts": plan.counts(),
    }


@prop(plans(), st.data())
def test_an_index_handed_on_by_transitions_equals_one_built_from_scratch(plan: Plan, data: st.DataObject) -> None:
    """apply_transitions hands its plan an index made from the old one's (a few list edits, not a walk over
    the plan), and the checkpoint data likewise: after any run of transitions both are what a rebuild gives."""
    from planmode._packed import unpack_plan
    from planmode.state.channel import PlanChannel

    current = plan
    plan.ready_steps()  # the old index's ready set is known, so the handed-on one is derived from it too
    for _ in range(data.draw(st.integers(1, 6))):
        transitions = data.draw(
            st.lists(
                st.builds(
                    StepTransition,
                    id=st.sampled_from(current.ids()),
                    status=st.sampled_from(list(S)),
                    result=st.none() | words,
                ),
                min_size=1,
                max_size=4,
            )
        )
        res = apply_transitions(current, transitions)
        if not res.applied:
            continue
        channel = PlanChannel(Plan)
        channel.value = current
        channel.checkpoint()  # the old plan's data is remembered, so the new one's is made from it
        current = res.plan
        assert _view(current) == _fresh_view(current)
        assert current.is_complete == (
            bool(current.steps) and all(s.status in (S.DONE, S.SKIPPED) for s in current.steps)
        )
        channel.value = current
        assert unpack_plan(channel.checkpoint()) == current.model_dump(mode="json")


def test_an_index_handed_on_for_a_plan_holding_one_step_object_twice_equals_a_rebuild() -> None:
    """A hand-edited state can hold one step object at two places; the handed-on index then falls back to a
    rebuild rather than editing its lists by a position that is not the step's."""
    twice = Step(id="a", description="x")
    plan = Plan(goal="g", steps=[twice, Step(id="b", description="y"), twice], version=1)
    plan.ready_steps()
    moved = apply_transitions(plan, [StepTransition(id="a", status=S.RUNNING)])
    if moved.applied:
        assert _view(moved.plan) == _fresh_view(moved.plan)
