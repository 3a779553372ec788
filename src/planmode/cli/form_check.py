"""What is wrong with an edited plan, every problem at once and in the words of the form (`form_problems`).

The plan editor (`planmode.cli.approval.edit_plan`) checks the steps read from the form before the approval sees
them: ids given and unique, each tool one that exists, each ``after`` a step of the plan (not the step itself, no
cycle). The approval's own validation still runs after (`planmode.approval.parse_resume`); this says the common
mistakes the way the person wrote them ("two steps have id 'write'"), all in one go.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["form_problems"]

_COUNTS = {2: "two", 3: "three", 4: "four", 5: "five"}


def _names(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _cycle(after: Mapping[str, list[str]]) -> list[str] | None:
    """One cycle of the ``after`` graph (its ids in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in after.get(node, []):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep in after and dep not in state and (found := visit(dep)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in after:
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def form_problems(steps: Sequence[Mapping[str, Any]], tools: Iterable[str]) -> list[str]:
    """Every problem of the edited ``steps`` (as `planmode.cli.plan_form.read_form` gives them: ``id``,
    ``tools``, ``dependencies``), one sentence each; ``tools`` are the names of the tools that exist. Empty when
    there is none."""
    known = sorted(set(tools))
    problems: list[str] = []
    ids = [str(s.get("id") or "").strip() for s in steps]
    for n, sid in enumerate(ids, 1):
        if not sid:
            problems.append(f"step {n} has no id")
    for sid, count in Counter(i for i in ids if i).items():
        if count > 1:
            problems.append(f"{_COUNTS.get(count, str(count))} steps have id {sid!r}: each step needs its own id")
    present = set(ids)
    after: dict[str, list[str]] = {}
    for n, step in enumerate(steps, 1):
        name = repr(ids[n - 1]) if ids[n - 1] else str(n)
        unknown = [t for t in dict.fromkeys(_names(step.get("tools"))) if t not in known]
        if unknown:
            listed = ", ".join(repr(t) for t in unknown)
            problems.append(
                f"step {name} names {'a tool that does' if len(unknown) == 1 else 'tools that do'} not exist: "
                f"{listed} (the tools are: {', '.join(known) or 'none'})"
            )
        deps = _names(step.get("dependencies"))
        for dep in dict.fromkeys(deps):
            if dep == ids[n - 1]:
                problems.append(f"step {name} comes after itself")
            elif dep not in present:
                problems.append(f"step {name} comes after {dep!r}, which is not a step of the plan")
        if ids[n - 1]:
            after[ids[n - 1]] = [d for d in deps if d in present and d != ids[n - 1]]
    cycle = _cycle(after)
    if cycle is not None:
        problems.append(f"steps {' -> '.join(repr(c) for c in cycle)} come after each other in a circle")
    return problems
