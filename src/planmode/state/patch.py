"""The pure plan logic: validation, patches, status transitions and the full-plan diff.

Every change to a plan goes through the functions here (the plan reducer calls them). They never raise for
bad *content* — the answer says why it was refused — and raise `TypeError` only for programmer errors.

Invariants held after every applied change:

- a ``done`` step is never modified, removed or moved (the order of done steps is kept);
- step ids are unique; every dependency exists; no step depends on itself; the graph is acyclic;
- the plan never exceeds the step cap (additions past it are truncated, with a warning);
- new steps start ``pending``; updating a failed or blocked step resets it (result, error, attempts);
- a patch applies completely or not at all; an applied patch bumps the version and is recorded.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from planmode.state.models import (
    DEFINITION_FIELDS,
    NewStep,
    PatchRecord,
    Plan,
    PlanPatch,
    Step,
    StepStatus,
    StepTransition,
    StepUpdate,
    plan_positions,
    same_definitions,
)

__all__ = [
    "ALLOWED_TRANSITIONS",
    "PatchResult",
    "TransitionResult",
    "apply_patch",
    "apply_transitions",
    "diff_to_patch",
    "find_cycle",
    "validate_plan",
    "validate_steps",
]

S = StepStatus

#: The status table. Staying in the same status (to update attempts or a result) is always allowed,
#: except for ``done``, which is terminal.
ALLOWED_TRANSITIONS: dict[StepStatus, frozenset[StepStatus]] = {
    S.PENDING: frozenset({S.RUNNING, S.BLOCKED, S.SKIPPED, S.FAILED}),
    S.RUNNING: frozenset({S.DONE, S.FAILED, S.PENDING, S.BLOCKED, S.SKIPPED}),
    S.FAILED: frozenset({S.PENDING, S.RUNNING, S.SKIPPED, S.BLOCKED}),
    S.BLOCKED: frozenset({S.PENDING, S.RUNNING, S.SKIPPED, S.FAILED}),
    S.SKIPPED: frozenset({S.PENDING}),
    S.DONE: frozenset(),
}


@dataclass(frozen=True)
class PatchResult:
    """The outcome of `apply_patch`: the plan to keep, whether the patch applied, and why not."""

    plan: Plan
    applied: bool
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TransitionResult:
    """The outcome of `apply_transitions` (all or nothing, like a patch)."""

    plan: Plan
    applied: bool
    reasons: list[str] = field(default_factory=list)


# -- validation ---------------------------------------------------------------------------------------


def find_cycle(steps: Sequence[Step]) -> list[str] | None:
    """A dependency cycle as a list of ids (first id repeated at the end), or None when acyclic.

    Dependencies on unknown ids are ignored here (`validate_steps` reports them).
    """
    deps = {s.id: [d for d in s.dependencies] for s in steps}
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(deps, white)
    for root in deps:
        if color[root] != white:
            continue
        # iterative DFS keeping the path, so deep plans do not hit the recursion limit
        stack: list[tuple[str, int]] = [(root, 0)]
        path: list[str] = [root]
        color[root] = grey
        while stack:
            node, i = stack[-1]
            children = [d for d in deps[node] if d in deps]
            if i < len(children):
                stack[-1] = (node, i + 1)
                child = children[i]
                if color[child] == grey:
                    return [*path[path.index(child) :], child]
                if color[child] == white:
                    color[child] = grey
                    stack.append((child, 0))
                    path.append(child)
            else:
                color[node] = black
                stack.pop()
                path.pop()
    return None


def validate_steps(steps: Sequence[Step], *, max_steps: int | None = None) -> list[str]:
    """Every reason this list of steps is not a valid plan (empty when valid)."""
    reasons: list[str] = []
    seen: set[str] = set()
    for s in steps:
        if s.id in seen:
            reasons.append(f"duplicate step id {s.id!r}")
        seen.add(s.id)
    for s in steps:
        if s.id in s.dependencies:
            reasons.append(f"step {s.id!r} depends on itself")
        for d in s.dependencies:
            if d not in seen:
                reasons.append(f"step {s.id!r} depends on unknown step {d!r}")
        if len(set(s.dependencies)) != len(s.dependencies):
            reasons.append(f"step {s.id!r} lists a dependency twice")
    cycle = find_cycle(steps)
    if cycle and len(cycle) > 2:  # self-dependencies are reported above
        reasons.append("dependency cycle: " + " -> ".join(cycle))
    if max_steps is not None and len(steps) > max_steps:
        reasons.append(f"the plan has {len(steps)} steps; at most {max_steps} are allowed")
    return reasons


def validate_plan(plan: Plan, *, max_steps: int | None = None) -> list[str]:
    """Every reason ``plan`` is invalid as a new plan (empty when valid)."""
    if not isinstance(plan, Plan):
        raise TypeError(f"validate_plan expects a Plan, got {type(plan).__name__}")
    reasons = validate_steps(plan.steps, max_steps=max_steps)
    if not plan.steps:
        reasons.insert(0, "the plan has no steps")
    return reasons


# -- patches ------------------------------------------------------------------------------------------


def _reject(plan: Plan, reasons: list[str], warnings: list[str]) -> PatchResult:
    return PatchResult(plan=plan, applied=False, reasons=reasons, warnings=warnings)


def _insert(steps: list[Step], new: NewStep, reasons: list[str], warnings: list[str]) -> None:
    step = Step(**new.model_dump(include={"id", *DEFINITION_FIELDS}))
    if new.status is not None and new.status is not S.PENDING:
        warnings.append(f"new step {new.id!r} was given status {new.status.value!r}; new steps start pending")
    if new.after is not None and new.position is not None:
        reasons.append(f"new step {new.id!r} gives both 'after' and 'position'; give one")
        return
    if new.after is not None:
        idx = next((i for i, s in enumerate(steps) if s.id == new.after), None)
        if idx is None:
            reasons.append(f"new step {new.id!r} is placed after unknown step {new.after!r}")
            return
        steps.insert(idx + 1, step)
    elif new.position is not None:
        if new.position > len(steps):
            warnings.append(f"position {new.position} of new step {new.id!r} is past the end; appended")
        steps.insert(min(new.position, len(steps)), step)
    else:
        steps.append(step)


def _update(step: Step, upd: StepUpdate, reasons: list[str]) -> tuple[Step, bool]:
    changes = upd.changes()
    differs = {k: v for k, v in changes.items() if k == "status" or getattr(step, k) != v}
    if "status" in differs and step.status.value == differs["status"]:
        differs.pop("status")
    if not differs:
        return step, False
    if step.status is S.DONE:
        reasons.append(f"step {step.id!r} is done and cannot be modified (fields: {', '.join(sorted(differs))})")
        return step, False
    data = step.model_dump()
    data.update(differs)
    reset = step.status in (S.FAILED, S.BLOCKED) and any(k in DEFINITION_FIELDS for k in differs)
    if reset or differs.get("status") == "pending":
        # an explicit skip in the same update wins over the reset to pending
        data.update(status=differs.get("status", S.PENDING), result=None, error=None, attempts=0, output_ref=None)
    new_status = S(data["status"])
    if new_status is not step.status and new_status not in ALLOWED_TRANSITIONS[step.status]:
        reasons.append(f"step {step.id!r} cannot go from {step.status.value} to {new_status.value}")
        return step, False
    return Step.model_validate(data), True


def _reorder(steps: list[Step], order: list[str], reasons: list[str]) -> list[Step]:
    ids = [s.id for s in steps]
    unknown = [i for i in order if i not in ids]
    if unknown:
        reasons.append(f"reorder names unknown steps: {', '.join(unknown)}")
        return steps
    if len(set(order)) != len(order):
        reasons.append("reorder names a step twice")
        return steps
    slots = sorted(ids.index(i) for i in order)
    by_id = {s.id: s for s in steps}
    out = list(steps)
    for slot, sid in zip(slots, order, strict=True):
        out[slot] = by_id[sid]
    return out


def _removed_ids(by_id: dict[str, Step], remove: Sequence[str], reasons: list[str]) -> list[str]:
    """The ids of ``remove`` that may go (known, not done, named once); a reason for each other one."""
    removed: list[str] = []
    for sid in remove:
        step = by_id.get(sid)
        if step is None:
            reasons.append(f"cannot remove unknown step {sid!r}")
        elif step.status is S.DONE:
            reasons.append(f"step {sid!r} is done and cannot be removed")
        elif sid in removed:
            reasons.append(f"step {sid!r} is removed twice")
        else:
            removed.append(sid)
    return removed


def _updated_ids(steps: list[Step], updates: Sequence[StepUpdate], removed: list[str], reasons: list[str]) -> list[str]:
    """The ids of the steps ``updates`` changed, each changed in place in ``steps``; a reason for each update
    refused (named twice, of a removed or unknown step, or refused by `_update`)."""
    updated: list[str] = []
    seen_updates: set[str] = set()
    for upd in updates:
        if upd.id in seen_updates:
            reasons.append(f"step {upd.id!r} is updated twice")
            continue
        seen_updates.add(upd.id)
        if upd.id in removed:
            reasons.append(f"step {upd.id!r} is both updated and removed")
            continue
        idx = next((i for i, s in enumerate(steps) if s.id == upd.id), None)
        if idx is None:
            reasons.append(f"cannot update unknown step {upd.id!r}")
            continue
        new_step, changed = _update(steps[idx], upd, reasons)
        if changed:
            steps[idx] = new_step
            updated.append(upd.id)
    return updated


def _additions_within_cap(
    count: int, additions: list[NewStep], cap: int | None, warnings: list[str]
) -> tuple[list[NewStep], list[str]]:
    """The additions that fit under ``cap`` next to ``count`` steps, and the ids of those truncated (with a
    warning when any are)."""
    if cap is None or count + len(additions) <= cap:
        return additions, []
    room = max(0, cap - count)
    dropped = [n.id for n in additions[room:]]
    warnings.append(f"step cap {cap} reached: {len(dropped)} added step(s) truncated ({', '.join(dropped)})")
    return additions[:room], dropped


def _added_ids(steps: list[Step], additions: list[NewStep], reasons: list[str], warnings: list[str]) -> list[str]:
    """The ids of the new steps inserted into ``steps``; a reason for each one refused (a duplicate id, or
    refused by `_insert`)."""
    added: list[str] = []
    existing = {s.id for s in steps}
    for new in additions:
        if new.id in existing:
            reasons.append(f"duplicate step id {new.id!r}: a step with that id already exists")
            continue
        before = len(steps)
        _insert(steps, new, reasons, warnings)
        if len(steps) > before:
            existing.add(new.id)
            added.append(new.id)
    return added


def _whole_plan_reasons(before: Plan, steps: list[Step], removed: list[str]) -> list[str]:
    """Why ``steps`` (the patched steps of ``before``) cannot be the plan: invalid steps, no steps, a dependency
    on a removed step, or a done step changed, removed or moved."""
    reasons = list(validate_steps(steps))
    if not steps:
        reasons.append("the patch would leave the plan without steps")
    if removed:
        left = {s.id for s in steps}
        for s in steps:
            for d in s.dependencies:
                if d in removed and d not in left:
                    reasons.append(f"step {s.id!r} still depends on removed step {d!r}; rewire it in the same patch")
    reasons.extend(_done_steps_intact(before.steps, steps))
    return reasons


def apply_patch(plan: Plan, patch: PlanPatch, *, max_steps: int | None = None, source: str = "patch") -> PatchResult:
    """Apply ``patch`` to ``plan`` completely or not at all.

    Order of operations: remove, update, add (each new step placed after a step, at a position, or at the
    end), reorder, retitle. Additions past the cap (the stricter of ``max_steps`` and ``plan.max_steps``) are
    truncated with a warning; a reorder ignores the truncated ids. Never raises for bad content: a refused
    patch returns the original plan with ``applied=False`` and the reasons.
    """
    if not isinstance(plan, Plan):
        raise TypeError(f"apply_patch expects a Plan, got {type(plan).__name__}")
    if not isinstance(patch, PlanPatch):
        raise TypeError(f"apply_patch expects a PlanPatch, got {type(patch).__name__}")
    reasons: list[str] = []
    warnings: list[str] = []
    if patch.is_empty():
        return _reject(plan, ["the patch changes nothing"], warnings)

    removed = _removed_ids({s.id: s for s in plan.steps}, patch.remove_steps, reasons)
    steps = [s for s in plan.steps if s.id not in removed]
    updated = _updated_ids(steps, patch.update_steps, removed, reasons)
    caps = [c for c in (max_steps, plan.max_steps) if c is not None]
    additions, dropped = _additions_within_cap(len(steps), list(patch.add_steps), min(caps) if caps else None, warnings)
    added = _added_ids(steps, additions, reasons, warnings)
    existing = {s.id for s in steps}
    order_before = [s.id for s in steps]
    if patch.reorder:
        steps = _reorder(steps, [i for i in patch.reorder if i not in dropped or i in existing], reasons)

    if not reasons:
        reasons.extend(_whole_plan_reasons(plan, steps, removed))
    retitled = patch.title is not None and patch.title != plan.title
    if not reasons and steps == list(plan.steps) and not retitled:
        # e.g. a reorder into the same order, or updates repeating current values: applying it would bump
        # the version (and so the revision a human approved) for nothing
        reasons.append("the patch changes nothing")
    if reasons:
        return _reject(plan, _dedupe(reasons), warnings)

    record = PatchRecord(
        version=plan.version + 1,
        reason=patch.reason,
        source=source,
        added=added,
        updated=updated,
        removed=removed,
        reordered=[s.id for s in steps] != order_before,
        retitled=retitled,
        warnings=warnings,
    )
    new_plan = plan.model_copy(
        update={
            "steps": steps,
            "title": patch.title if patch.title is not None else plan.title,
            "version": plan.version + 1,
            "history": [*plan.history, record],
        }
    )
    return PatchResult(plan=new_plan, applied=True, reasons=[], warnings=warnings)


def _done_steps_intact(before: Sequence[Step], after: Sequence[Step]) -> list[str]:
    """Reasons the done steps of ``before`` are not identical, present and in order in ``after``."""
    reasons: list[str] = []
    after_by_id = {s.id: s for s in after}
    for s in before:
        if s.status is S.DONE:
            other = after_by_id.get(s.id)
            if other is None:
                reasons.append(f"done step {s.id!r} would be removed")
            elif other != s:
                reasons.append(f"done step {s.id!r} would be modified")
    done_before = [s.id for s in before if s.status is S.DONE]
    done_after = [s.id for s in after if s.id in set(done_before)]
    if done_after != done_before and not reasons:
        reasons.append("done steps cannot be moved: " + ", ".join(done_before) + " must keep their order")
    return reasons


def _dedupe(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


# -- transitions --------------------------------------------------------------------------------------


def apply_transitions(plan: Plan, transitions: Sequence[StepTransition]) -> TransitionResult:
    """Apply execution updates (status, attempts, result, error) following `ALLOWED_TRANSITIONS`.

    All or nothing. Transitions do not bump the version (they record progress, not a change of plan).
    """
    if not isinstance(plan, Plan):
        raise TypeError(f"apply_transitions expects a Plan, got {type(plan).__name__}")
    reasons: list[str] = []
    steps = list(plan.steps)
    index = plan_positions(plan)
    changed: list[int] = []
    for t in transitions:
        if not isinstance(t, StepTransition):
            raise TypeError(f"apply_transitions expects StepTransition items, got {type(t).__name__}")
        i = index.get(t.id)
        if i is None:
            reasons.append(f"transition for unknown step {t.id!r}")
            continue
        cur = steps[i]
        if cur.status is S.DONE:
            reasons.append(f"step {t.id!r} is done; its status and record cannot change")
            continue
        if t.status is not cur.status and t.status not in ALLOWED_TRANSITIONS[cur.status]:
            reasons.append(f"step {t.id!r} cannot go from {cur.status.value} to {t.status.value}")
            continue
        upd: dict[str, object] = {"status": t.status}
        for name in ("result", "error", "output_ref"):
            value = getattr(t, name)
            if value is not None or t.clear:
                upd[name] = value
        if t.attempts is not None:
            upd["attempts"] = t.attempts
        steps[i] = cur.model_copy(update=upd)
        changed.append(i)
    if reasons:
        return TransitionResult(plan=plan, applied=False, reasons=reasons)
    moved = plan.model_copy(update={"steps": steps})
    same_definitions(plan, moved, changed)  # transitions change no definition: shape and index are handed on
    return TransitionResult(plan=moved, applied=True)


# -- the full-plan fallback ---------------------------------------------------------------------------


def diff_to_patch(current: Plan, proposed: Plan, *, reason: str = "") -> PlanPatch:
    """Convert a whole proposed plan into a patch against ``current``.

    Steps missing from ``proposed`` are removed, except done steps (omitting a done step keeps it).
    Statuses in ``proposed`` are ignored, except that a changed status of a done step becomes an update
    that `apply_patch` then refuses. A changed definition of a done step is likewise kept so it is refused.
    """
    if not isinstance(current, Plan) or not isinstance(proposed, Plan):
        raise TypeError("diff_to_patch expects two Plans")
    cur = {s.id: s for s in current.steps}
    new_ids = [s.id for s in proposed.steps]
    remove = [s.id for s in current.steps if s.id not in set(new_ids) and s.status is not S.DONE]
    adds: list[NewStep] = []
    updates: list[StepUpdate] = []
    prev: str | None = None
    for i, s in enumerate(proposed.steps):
        old = cur.get(s.id)
        if old is None:
            place = {"after": prev} if prev is not None else {"position": 0 if i == 0 else None}
            adds.append(NewStep(**s.model_dump(include={"id", *DEFINITION_FIELDS}), **place))
        else:
            changed = {k: getattr(s, k) for k in DEFINITION_FIELDS if getattr(s, k) != getattr(old, k)}
            if old.status is S.DONE and s.status is not S.DONE:
                changed["status"] = "pending"
            if changed:
                updates.append(StepUpdate(id=s.id, **changed))
        prev = s.id
    common_new = [i for i in new_ids if i in cur]
    common_old = [s.id for s in current.steps if s.id in set(common_new)]
    # The reorder runs after the additions, so it names the new steps too: they land where proposed.
    reorder = new_ids if common_new != common_old else None
    title = proposed.title if proposed.title and proposed.title != current.title else None
    return PlanPatch(
        reason=reason or "whole plan converted into a patch by diff",
        title=title,
        add_steps=adds,
        update_steps=updates,
        remove_steps=remove,
        reorder=reorder,
    )
