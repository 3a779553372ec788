"""The small-model adapter's reading of a repair: a patch as small models write it, where the meaning is not in
doubt, and the fixes a full plan from the repair's fallback gets (as a first plan does)."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.tools import BaseTool

from planmode.adapters.small_models.coverage import (
    kept_runs,
    mend_acceptance,
    mend_data_runs,
    mend_dependencies,
    mend_kept_runs,
    mend_module_runs,
    mend_runs,
    mend_tools,
    tool_meant,
)
from planmode.adapters.small_models.evidence import preferred_write, write_tool_names
from planmode.adapters.small_models.files import produced_file
from planmode.state.models import NewStep, Plan, PlanPatch, StepStatus, StepUpdate

__all__ = ["as_meant", "mend_repair"]


def mend_repair(plan: Plan, proposed: Plan, tools: Sequence[BaseTool], open_ids: list[str]) -> tuple[Plan, list[str]]:
    """The repair's whole plan ``proposed`` (for ``plan``) with the fixes a first plan gets, and what changed."""
    proposed, named = mend_tools(proposed, tools, open_ids)
    proposed, untied = mend_dependencies(proposed, tools, open_ids)
    proposed, data_runs = mend_data_runs(proposed, open_ids)
    proposed, mended = mend_acceptance(proposed, tools, open_ids)
    proposed, modules = mend_module_runs(proposed, tools, open_ids)
    proposed, runs = mend_runs(proposed, tools, open_ids)
    proposed, kept_commands = mend_kept_runs(plan, proposed, open_ids)
    return proposed, [*named, *untied, *data_runs, *mended, *modules, *runs, *kept_commands]


def as_meant(candidate: PlanPatch, plan: Plan, tools: Sequence[BaseTool]) -> PlanPatch:
    """``candidate`` read as small models write patches, where the meaning is not in doubt:

    - a step "added" with the id of a step of the plan that is not done is that step's update (the reducer refuses
      a duplicate id). A done step's id stays an add, and is refused: done steps never change;
    - a dependency that names a tool of the graph and no step is dropped (``"dependencies": ["write_file"]``); an
      update left with no dependency changes none (it does not clear the step's own);
    - a new step with no tools that produces one file ("Fix the syntax of util.py") is given the graph's write
      tool, said in the patch's reason: the reflection's compact steps have no tools, and a step that declares no
      write tool has every write refused;
    - an update of a step the plan does not have is a new step when it gives a description (else dropped), and the
      removal of one is dropped (removing it changes nothing), so neither refuses the whole patch;
    - an update that takes away a failed write step's write tools keeps them."""
    notes: list[str] = []
    candidate = _unknown_targets_resolved(candidate, plan, notes)
    added, updates = _open_step_adds_as_updates(candidate, plan)
    names = {t.name for t in tools} - {s.id for s in plan.steps} - {a.id for a in added}
    added = [a.model_copy(update={"dependencies": [d for d in a.dependencies if d not in names]}) for a in added]
    writes = write_tool_names(tools)
    added = _new_writers_given_write_tool(added, writes, notes)
    known = {t.name for t in tools}
    fixed = [_update_as_meant(u, plan, writes, known, names, notes) for u in updates]
    reason = candidate.reason + (f" ({'; '.join(notes)})" if notes else "")
    return candidate.model_copy(update={"add_steps": added, "update_steps": fixed, "reason": reason})


def _unknown_targets_resolved(candidate: PlanPatch, plan: Plan, notes: list[str]) -> PlanPatch:
    """``candidate`` with each update of a step the plan does not have turned into a new step (when it gives a
    description) or dropped, and each removal of one dropped; what changed is added to ``notes``."""
    known_ids = {s.id for s in plan.steps} | {a.id for a in candidate.add_steps}
    updates = []
    as_new: list[NewStep] = []
    for u in candidate.update_steps:  # an update of a step the plan does not have is a new step, if it says one
        if u.id in known_ids:
            updates.append(u)
        elif u.description:
            fields = u.model_dump(include={"description", "dependencies", "tools", "acceptance"}, exclude_none=True)
            as_new.append(NewStep(id=u.id, **fields))
            notes.append(f"step {u.id!r} is not in the plan: added as a new step")
        else:
            notes.append(f"the update of {u.id!r}, a step not in the plan, was dropped")
    unknown_removals = [r for r in candidate.remove_steps if r not in known_ids]
    if unknown_removals:
        notes.append(f"removing {', '.join(map(repr, unknown_removals))}, not in the plan, changes nothing: dropped")
    return candidate.model_copy(
        update={
            "add_steps": [*candidate.add_steps, *as_new],
            "update_steps": updates,
            "remove_steps": [r for r in candidate.remove_steps if r in known_ids],
        }
    )


def _open_step_adds_as_updates(candidate: PlanPatch, plan: Plan) -> tuple[list[NewStep], list[StepUpdate]]:
    """``candidate``'s new steps and updates, with each step "added" under the id of a step of the plan that is not
    done (and not updated in the same patch) turned into that step's update."""
    updated_ids = {u.id for u in candidate.update_steps}
    added: list[NewStep] = []
    updates = list(candidate.update_steps)
    for a in candidate.add_steps:
        old = plan.get(a.id)
        if old is None or old.status == StepStatus.DONE or a.id in updated_ids:
            added.append(a)
            continue
        # what the add says and the step does not (an empty field, as in a step change, leaves it as it is)
        fields = a.model_dump(include={"description", "dependencies", "tools", "acceptance"})
        updates.append(StepUpdate(id=a.id, **{k: v for k, v in fields.items() if v and v != getattr(old, k)}))
    return added, updates


def _new_writers_given_write_tool(added: list[NewStep], writes: frozenset[str], notes: list[str]) -> list[NewStep]:
    """``added`` with each new step that names no tools and produces one file given the preferred write tool of
    ``writes``, said in ``notes``."""
    out = list(added)
    for i, a in enumerate(out):  # the reflection's compact steps name no tools
        made = produced_file(a.description, a.acceptance) if writes and not a.tools else None
        if made is not None:
            out[i] = a.model_copy(update={"tools": [preferred_write(writes)]})
            notes.append(f"new step {a.id!r} writes {made}: given {preferred_write(writes)}")
    return out


def _update_as_meant(
    u: StepUpdate, plan: Plan, writes: frozenset[str], known: set[str], names: set[str], notes: list[str]
) -> StepUpdate:
    """The update ``u`` with the write tools and the commands its open step had kept, and the dependencies on the
    tools ``names`` dropped (none left: the dependencies are not changed); what was kept goes to ``notes``."""
    old = plan.get(u.id)
    if u.tools is not None and old is not None and old.status != StepStatus.DONE and known:
        # a repair changes how a step does its work, not whether it can: an update that gives a failed write
        # step only tools that do not write (["python"]) keeps its write tools
        meant = [tool_meant(t, known) for t in u.tools]
        had = [t for t in old.tools if t in writes]
        if had and not writes.intersection(meant):
            meant = [*had, *meant]
            notes.append(f"step {u.id!r} keeps {', '.join(had)}: a repair does not take away the write it does")
        if meant != list(u.tools):
            u = u.model_copy(update={"tools": list(dict.fromkeys(meant))})
    if u.acceptance is not None and old is not None:
        acceptance, lost = kept_runs(old.acceptance or "", u.acceptance)
        if lost:  # a repair rewords what a step must meet, never drops what it ran
            u = u.model_copy(update={"acceptance": acceptance})
            notes.append(f"step {u.id!r} keeps {', '.join(f'`{c}`' for c in lost)} in its acceptance")
    if u.dependencies is None or not names.intersection(u.dependencies):
        return u
    remaining = [d for d in u.dependencies if d not in names]
    return u.model_copy(update={"dependencies": remaining or None})
