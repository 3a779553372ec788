"""The plan data model: `Step`, `Plan`, `PlanPatch` and their parts.

Field names here are a public protocol: prompts, users, Studio and tests rely on them.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    StringConstraints,
    model_serializer,
    model_validator,
)

from planmode.state.checks import Check, FileCheck, RunCheck

__all__ = [
    "Check",
    "Complexity",
    "FileCheck",
    "NewStep",
    "PatchRecord",
    "Plan",
    "PlanPatch",
    "PlanSource",
    "Rejection",
    "ResetPlan",
    "RunCheck",
    "Step",
    "StepId",
    "StepStatus",
    "StepTransition",
    "StepUpdate",
    "as_step_id",
    "clean_text",
    "definition_values",
    "step_ids_read",
]

#: A step id: a short, safe identifier (letters, digits, ``_`` and ``-``; starts with a letter or ``_``).
StepId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$")]


_STEP_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]{0,63}")


def as_step_id(raw: str) -> str:
    """A step id as a small model writes it, made an id: a valid id is kept as it is; otherwise without
    surrounding quotes, backticks or spaces, other characters than letters, digits, ``_`` and ``-`` made ``_``
    (``"`write_util`"`` and ``write util.py`` name ``write_util`` and ``write_util_py``; ``1`` becomes
    ``_1``). What is still not an id (too long, empty) is refused by validation as before."""
    if _STEP_ID.fullmatch(raw):
        return raw
    text = raw.strip().strip("`'\"").strip()
    fixed = re.sub(r"[^A-Za-z0-9_\-]+", "_", text).strip("_") or text
    return "_" + fixed if fixed[:1].isdigit() or fixed[:1] == "-" else fixed


def step_ids_read(step: Any) -> Any:
    """A step (or step change) as a model wrote it, with its ``id``, ``after`` and ``dependencies`` read as ids
    (`as_step_id`; a number is read as its text); anything else is left to validation."""
    if not isinstance(step, dict):
        return step
    out = dict(step)
    for key in ("id", "after"):
        value = out.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool) and value != "":
            out[key] = as_step_id(str(value))
    deps = out.get("dependencies")
    if isinstance(deps, list):
        out["dependencies"] = [
            as_step_id(str(d)) if isinstance(d, str | int) and not isinstance(d, bool) else d for d in deps
        ]
    return out


#: How many rejected updates a plan keeps (oldest dropped first), so state size stays bounded.
MAX_REJECTIONS_KEPT = 50


class StepStatus(str, Enum):
    """Where a step is in its life. ``done`` is terminal; "ready" is derived, never stored."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    BLOCKED = "blocked"
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return self.value


class PlanSource(str, Enum):
    """Who made an update to the plan. Kept as its plain value in `PatchRecord.source` and
    `Rejection.source` (a custom source, e.g. a user name given to `planmode.edit_plan`, is any other text)."""

    PLANNER = "planner"
    """The planner's first plan."""
    HUMAN_FEEDBACK = "planner (revision)"
    """The planner's revision made from a human's feedback on a rejected plan."""
    PATCH = "patch"
    """A repair patch (reflect, then patch)."""
    DIFF = "diff"
    """The repair's full-plan fallback, converted into a patch by diff."""
    HUMAN_EDIT = "human"
    """A human's edit: at the approval, through `planmode.edit_plan`, or in Studio."""
    DISPATCH = "dispatch"
    """Execution: steps started."""
    VERIFY = "verify"
    """Execution: steps judged (done, retried, failed or blocked)."""
    REFLECT = "reflect"
    """Execution: steps re-opened or skipped by a reflection."""
    APPROVAL = "approval"
    """A human's approval of the plan as shown (a history record naming the approver; no step changes)."""
    UNKNOWN = "unknown"
    """An update that names no source (a raw plan, patch or transition sent through ``update_state``)."""

    def __str__(self) -> str:
        return self.value


class Complexity(str, Enum):
    """A rough size of a step, used by planners and for reporting."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"

    def __str__(self) -> str:
        return self.value


def clean_text(text: str) -> str:
    """``text`` made encodable: a lone surrogate (which UTF-8 cannot encode: a model's JSON escape such as
    ``"\\ud800"``, or bytes decoded with ``surrogateescape``) becomes U+FFFD; a surrogate *pair* becomes the
    character it encodes. Text that encodes already is returned as it is (the common, fast case).

    Every model below applies it to its text fields where text enters the state, once: a lone surrogate in
    a plan would otherwise make every checkpoint write and the approval payload raise, or be replaced by
    ``"?"`` on the way to the database, so that a human approves different text from what was shown."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def _needs_cleaning(value: Any) -> bool:
    """True when ``value`` is text (or a list holding text) that may not encode (ASCII always does: fast)."""
    if isinstance(value, str):
        return not value.isascii()
    if isinstance(value, list):
        return any(isinstance(v, str) and not v.isascii() for v in value)
    return False


def _clean_value(value: Any) -> object:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list) and any(isinstance(v, str) for v in value):
        return [clean_text(v) if isinstance(v, str) else v for v in value]
    return value


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", use_enum_values=False, validate_assignment=False)

    @model_validator(mode="before")
    @classmethod
    def _clean_text_fields(cls, data: Any) -> object:
        """Text fields (and lists of text) are cleaned with `clean_text`; nested models clean their own."""
        if isinstance(data, dict) and any(_needs_cleaning(v) for v in data.values()):
            return {k: _clean_value(v) for k, v in data.items()}
        return data


class StepDefinition(_Model):
    """The part of a step that a planner writes."""

    id: StepId = Field(description="Unique, short identifier, e.g. 'read_config'.")
    description: str = Field(min_length=1, description="What this step does, as an instruction.")
    dependencies: list[StepId] = Field(default_factory=list, description="Ids of steps that must be done first.")
    tools: list[str] = Field(default_factory=list, description="Names of the tools this step expects to use.")
    complexity: Complexity = Field(default=Complexity.MEDIUM, description="low, medium or high.")
    acceptance: str = Field(
        default="", description="What no check states: prose the judge decides, given the checks' results."
    )
    checks: list[Check] = Field(
        default_factory=list,
        description="How planmode checks the step: commands it runs, files it looks at.",
    )


#: The fields of a step that define it (as opposed to its execution record).
DEFINITION_FIELDS: tuple[str, ...] = ("description", "dependencies", "tools", "complexity", "acceptance", "checks")


def definition_values(step: StepDefinition) -> list[object]:
    """A step's definition as JSON data, in `DEFINITION_FIELDS` order, for the hashes that bind execution to what
    was approved (`Plan.shape`, `planmode.state.approvals.definition_digest`). A step without checks hashes as it
    did before checks existed, so plans approved then stay approved."""
    values: list[object] = [_json_value(getattr(step, f)) for f in DEFINITION_FIELDS[:-1]]
    if step.checks:
        values.append([c.model_dump(mode="json", by_alias=True) for c in step.checks])
    return values


class Step(StepDefinition):
    """One step of a plan: its definition plus its execution record."""

    status: StepStatus = Field(default=StepStatus.PENDING, description="pending/running/done/failed/blocked/skipped")
    attempts: int = Field(default=0, ge=0, description="How many times the step was executed.")
    result: str | None = Field(default=None, description="Short summary of the step's outcome.")
    error: str | None = Field(default=None, description="Why the last attempt failed.")
    output_ref: str | None = Field(default=None, description="Store key of the step's full output, if stored.")


class PatchRecord(_Model):
    """One applied change to a plan, as kept in `Plan.history`."""

    version: int = Field(description="The plan version this change produced.")
    reason: str = ""
    source: str = Field(default="patch", description="Who made it: planner, patch, human, diff, ...")
    added: list[str] = Field(default_factory=list)
    updated: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    reordered: bool = False
    retitled: bool = False
    warnings: list[str] = Field(default_factory=list)
    approved_by: str | None = Field(
        default=None,
        description="Who approved the plan with this change (source 'approval', or an edit given as the answer "
        "to the approval): the server's authenticated user, or the local user.",
    )


class Rejection(_Model):
    """An update to the plan channel that was refused; the plan was left unchanged."""

    version: int = Field(description="The plan version the update was refused against.")
    kind: str = Field(description="plan, patch, transition or unknown")
    source: str = "unknown"
    reasons: list[str] = Field(default_factory=list)


class Plan(_Model):
    """A validated, versioned plan. Change it only through `apply_patch` (and the plan reducer)."""

    goal: str = Field(description="The task the plan accomplishes.")
    title: str = Field(default="", description="A short title.")
    steps: list[Step] = Field(default_factory=list)
    version: int = Field(default=1, ge=0, description="Bumped by every applied patch. 0: no valid plan yet.")
    max_steps: int | None = Field(default=None, ge=1, description="The step cap this plan is held to.")
    history: list[PatchRecord] = Field(default_factory=list, description="Applied patches, oldest first.")
    rejections: list[Rejection] = Field(default_factory=list, description="Refused updates, oldest first.")

    @model_serializer(mode="wrap")
    def _plain_step_enums(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        """A python-mode dump of a plan has its steps' statuses and complexities as plain strings (they are
        str enums: equal either way, and validation turns them back into members). LangGraph's checkpoint
        serializer dumps the plan this way at every checkpoint and encodes each Enum member left in the dump
        through a Python callback: four times slower for a 400-step plan. A `Step`'s own dump is unchanged."""
        data = handler(self)
        if info.mode == "python" and isinstance(data, dict):
            for step in data.get("steps") or ():
                for key in ("status", "complexity"):
                    value = step.get(key)
                    if isinstance(value, Enum):
                        step[key] = value.value
        return data

    # -- lookups --------------------------------------------------------------------------------------
    # (each lookup reads the plan's index, `_index_of`: built once per plan object, so the few lookups execution
    # makes per step do not each walk the whole plan)
    def get(self, step_id: str) -> Step | None:
        """The step with this id, or None."""
        return _index_of(self).by_id.get(step_id)

    def ids(self) -> list[str]:
        """Step ids in plan order."""
        return [s.id for s in self.steps]

    def by_status(self, *statuses: StepStatus) -> list[Step]:
        """Steps whose status is one of ``statuses``, in plan order."""
        if len(statuses) == 1:
            return list(_index_of(self).by_status.get(statuses[0], ()))
        return [s for s in self.steps if s.status in statuses]

    def ready_steps(self) -> list[Step]:
        """Pending steps whose dependencies are all done (derived, never stored)."""
        return list(_index_of(self).ready())

    def counts(self) -> dict[str, int]:
        """How many steps have each status (every status present, zeros included)."""
        out = {st.value: 0 for st in StepStatus}
        for status, steps in _index_of(self).by_status.items():
            out[StepStatus(status).value] += len(steps)
        return out

    @property
    def is_complete(self) -> bool:
        """True when every step is done or skipped (and there is at least one step)."""
        found = _index_of(self).by_status
        ended = len(found.get(StepStatus.DONE, ())) + len(found.get(StepStatus.SKIPPED, ()))
        return bool(self.steps) and ended == len(self.steps)

    # -- identity -------------------------------------------------------------------------------------
    @property
    def revision(self) -> str:
        """A stable hash of what a human sees: goal, title, version and every step (not the logs)."""
        data = self.model_dump(mode="json", include={"goal", "title", "version", "steps"})
        for step in data["steps"]:  # a step without checks hashes as before checks existed: revisions shown stay
            if not step.get("checks"):
                step.pop("checks", None)
        return _digest(data)

    @property
    def shape(self) -> str:
        """A stable hash of what the plan asks to do: its goal and every step's id and definition (description,
        dependencies, tools, complexity, acceptance), not statuses, results, version or logs. Execution is bound
        to the shape approved (`planmode.nodes._batch.next_batch`): running steps change the revision, never
        the shape."""
        known = _known_shape(self)
        if known is not None:
            return known
        # by hand, not model_dump: this runs before every batch, and is 3x faster (0.55 ms at 400 steps)
        shape = _digest([self.goal, [[s.id, *definition_values(s)] for s in self.steps]])
        _remember_shape(self, shape)
        return shape

    # -- rendering ------------------------------------------------------------------------------------
    def to_markdown(self) -> str:
        """A human-readable rendering (for approval screens, reports and Studio)."""
        from planmode.state.render import plan_to_markdown

        return plan_to_markdown(self)

    def to_prompt(self) -> str:
        """A compact rendering for prompts: done steps take one short line each."""
        from planmode.state.render import plan_to_prompt

        return plan_to_prompt(self)


class NewStep(StepDefinition):
    """A step a patch adds. Placed ``after`` a step id, at ``position`` (an index), or appended."""

    after: StepId | None = Field(default=None, description="Insert right after this step id.")
    position: int | None = Field(default=None, ge=0, description="Insert at this index (0 = first).")
    # A model may send these; they are ignored (new steps always start pending) and a warning is recorded.
    status: StepStatus | None = Field(default=None, exclude=True)


class StepUpdate(_Model):
    """Changes to one existing step: its id plus only the fields that change."""

    id: StepId
    description: str | None = Field(default=None, min_length=1)
    dependencies: list[StepId] | None = None
    tools: list[str] | None = None
    complexity: Complexity | None = None
    acceptance: str | None = None
    checks: list[Check] | None = None
    status: Literal["pending", "skipped"] | None = Field(
        default=None, description="A patch may only re-open (pending) or skip a step."
    )

    def changes(self) -> dict[str, Any]:
        """The fields this update sets (those not None), without the id: the values themselves (checks stay
        `Check` models, so they compare equal to a step's own)."""
        return {k: v for k in type(self).model_fields if k != "id" and (v := getattr(self, k)) is not None}


class PlanPatch(_Model):
    """A minimal change to a plan, as a model or a human emits it (JSON)."""

    reason: str = Field(default="", description="Why the plan changes.")
    title: str | None = Field(default=None, description="A new title, if it changes.")
    add_steps: list[NewStep] = Field(default_factory=list)
    update_steps: list[StepUpdate] = Field(default_factory=list)
    remove_steps: list[StepId] = Field(default_factory=list)
    reorder: list[StepId] | None = Field(default=None, description="Ids in their new relative order.")

    def is_empty(self) -> bool:
        """True when the patch changes nothing."""
        return not (self.add_steps or self.update_steps or self.remove_steps or self.reorder or self.title)


class StepTransition(_Model):
    """An execution update to one step (nodes write these; they follow the status table)."""

    id: StepId
    status: StepStatus
    result: str | None = None
    error: str | None = None
    attempts: int | None = Field(default=None, ge=0)
    output_ref: str | None = None
    #: When True, ``result``/``error`` are written even when None (clears them).
    clear: bool = False


class ResetPlan(_Model):
    """Clears the plan channel (a new task on the same thread)."""

    reset: Literal[True] = True
    reason: str = ""


def _json_value(value: Any) -> object:
    """A step definition field as JSON data (an enum by its value)."""
    return value.value if isinstance(value, Enum) else value


class _PlanIndex:
    """A plan's steps by id (the first of an id) and by status (in plan order), and its ready steps once asked."""

    __slots__ = ("_done", "_ready", "by_id", "by_status", "origin", "place", "position", "size", "steps")

    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps
        self.size = len(steps)
        self.by_id: dict[str, Step] = {}
        self.position: dict[str, int] = {}
        self.place: dict[int, int] = {}  # a listed step object's position, by identity (kept in `moved`)
        self.by_status: dict[StepStatus, list[Step]] = {}
        for i, step in enumerate(steps):
            if step.id not in self.by_id:
                self.by_id[step.id] = step
            self.position[step.id] = i  # the last of an id, as `planmode.state.patch.apply_transitions` reads it
            self.place[id(step)] = i
            self.by_status.setdefault(step.status, []).append(step)
        self._ready: list[Step] | None = None
        self._done: frozenset[str] | None = None
        #: The plan this one was moved from and the positions that changed (`moved`), for the checkpoint
        #: encoding to reuse the other plan's data (`planmode.state.channel`); None for a plan indexed whole.
        self.origin: tuple[Plan, tuple[int, ...]] | None = None

    def ready(self) -> list[Step]:
        if self._ready is None:
            if self._done is None:
                self._done = frozenset(s.id for s in self.by_status.get(StepStatus.DONE, ()))
            done = self._done
            self._ready = [s for s in self.by_status.get(StepStatus.PENDING, ()) if done.issuperset(s.dependencies)]
        return self._ready

    def moved(self, plan: Plan, steps: list[Step], changed: Sequence[int]) -> _PlanIndex:
        """The index of ``steps``: these steps with the ones at the ``changed`` positions replaced (same ids, same
        order: `planmode.state.patch.apply_transitions`), made from this index in O(changes x log plan) Python
        steps (the maps are copied, at C speed) instead of a walk over every step (it was O(plan) per step)."""
        if len(self.place) != self.size or len(steps) != self.size:  # one step object at two places (a hand-edited
            whole = _PlanIndex(steps)  # state): positions by identity do not hold, so the index is made whole
            whole.origin = (plan, tuple(changed))
            return whole
        new = _PlanIndex.__new__(_PlanIndex)
        new.steps, new.size, new.position = steps, len(steps), self.position
        by_id, place, by_status = self.by_id, dict(self.place), dict(self.by_status)
        copied: set[StepStatus] = set()
        done, newly_done = self._done, []
        for i in dict.fromkeys(changed):
            old, cur = self.steps[i], steps[i]
            if old is cur:
                continue
            if by_id.get(old.id) is old:
                if by_id is self.by_id:
                    by_id = dict(by_id)
                by_id[old.id] = cur
            for status in (old.status, cur.status):
                if status not in copied:
                    by_status[status] = list(by_status.get(status, ()))
                    copied.add(status)
            listed = by_status[old.status]
            at = bisect.bisect_left(listed, i, key=lambda s: place[id(s)])
            del listed[at]  # ``old`` itself: the list is in plan order and ``old`` is at position i
            del place[id(old)]
            if id(cur) in place:  # ``cur`` is listed elsewhere too: not a transition's new step, made whole
                whole = _PlanIndex(steps)
                whole.origin = (plan, tuple(changed))
                return whole
            place[id(cur)] = i
            listed = by_status[cur.status]
            listed.insert(bisect.bisect_left(listed, i, key=lambda s: place[id(s)]), cur)
            if cur.status is StepStatus.DONE and old.status is not StepStatus.DONE:
                newly_done.append(cur.id)
        for status in copied:
            if not by_status[status]:
                del by_status[status]
        new.by_id, new.place, new.by_status, new._ready = by_id, place, by_status, None
        new._done = None if done is None else done.union(newly_done)
        new.origin = (plan, tuple(changed))
        return new


#: The indexes of the last plans looked up, by identity (with the list of steps they were made from). A plan and
#: its steps are never edited in place — every change makes a new plan, `apply_patch` and `apply_transitions` a
#: new list of steps — as the checkpoint encoding's caches assume too (`planmode.state.channel`).
_INDEXES: OrderedDict[int, tuple[Plan, _PlanIndex]] = OrderedDict()
_INDEXES_SIZE = 64


def _index_of(plan: Plan) -> _PlanIndex:
    """The index of ``plan`` (made once per plan object and list of steps)."""
    steps = plan.steps
    with _SHAPES_LOCK:
        hit = _INDEXES.get(id(plan))
    if hit is not None and hit[0] is plan and hit[1].steps is steps and hit[1].size == len(steps):
        return hit[1]
    index = _PlanIndex(steps)
    with _SHAPES_LOCK:
        _INDEXES[id(plan)] = (plan, index)
        _INDEXES.move_to_end(id(plan))
        while len(_INDEXES) > _INDEXES_SIZE:
            _INDEXES.popitem(last=False)
    return index


#: The shapes of the last plans asked, by identity (with the goal and the list of steps they were hashed from, so
#: a plan given other steps is hashed again): a plan is never edited in place (every change makes a new one), and
#: execution (`planmode.state.patch.apply_transitions`) hands the shape on to the plan it makes, whose definitions
#: are the same. So the shape of a running plan is hashed once, not before every batch (it was O(plan) per step).
_SHAPES: OrderedDict[int, tuple[Plan, str, list[Step], int, str]] = OrderedDict()
_SHAPES_SIZE = 64
_SHAPES_LOCK = threading.Lock()


def _known_shape(plan: Plan) -> str | None:
    """The remembered shape of ``plan`` (this very object, with the same goal and list of steps), or None."""
    with _SHAPES_LOCK:
        hit = _SHAPES.get(id(plan))
    if hit is None or hit[0] is not plan or hit[1] != plan.goal:
        return None
    if hit[2] is not plan.steps or hit[3] != len(plan.steps):
        return None
    return hit[4]


def _remember_shape(plan: Plan, shape: str) -> None:
    """Remember ``shape`` as the shape of ``plan`` (see `_SHAPES`)."""
    entry = (plan, plan.goal, plan.steps, len(plan.steps), shape)
    with _SHAPES_LOCK:
        _SHAPES[id(plan)] = entry
        _SHAPES.move_to_end(id(plan))
        while len(_SHAPES) > _SHAPES_SIZE:
            _SHAPES.popitem(last=False)


def plan_positions(plan: Plan) -> Mapping[str, int]:
    """Where each step id is in ``plan.steps`` (the last step of an id). Read only: it is the plan's index."""
    return _index_of(plan).position


def same_definitions(old: Plan, new: Plan, changed: Iterable[int] = ()) -> None:
    """Tell the shape cache that ``new`` has the goal and step definitions of ``old`` (its steps changed only their
    execution record: `planmode.state.patch.apply_transitions`), so its shape is ``old``'s; and, given the
    positions of the ``changed`` steps, index ``new`` from ``old``'s index instead of walking it again."""
    _remember_shape(new, old.shape)
    if len(new.steps) != len(old.steps):
        return
    index = _index_of(old).moved(old, new.steps, tuple(changed))
    with _SHAPES_LOCK:
        _INDEXES[id(new)] = (new, index)
        _INDEXES.move_to_end(id(new))
        while len(_INDEXES) > _INDEXES_SIZE:
            _INDEXES.popitem(last=False)


def _digest(content: Any) -> str:
    """A short stable hash of JSON data (`Plan.revision`, `Plan.shape`)."""
    blob = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def moved_from(plan: Plan) -> tuple[Plan, tuple[int, ...]] | None:
    """The plan ``plan`` was made from by execution updates and the positions of the steps they changed
    (`planmode.state.patch.apply_transitions`), while both are remembered; else None."""
    with _SHAPES_LOCK:
        hit = _INDEXES.get(id(plan))
    if hit is None or hit[0] is not plan or hit[1].steps is not plan.steps:
        return None
    return hit[1].origin
