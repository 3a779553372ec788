"""The plan as a Mermaid flowchart: steps as nodes (text and status), dependencies as arrows.

``flowchart LR`` with one subgraph column per layer (a step's layer is the length of its longest dependency
chain), so the steps that can run at once stand in one column, left to right in the order they run.

Step text is data from a model or a human: it is never put into the diagram as markup. Ids are replaced by
``s0``, ``s1``... and labels are quoted strings in which every character that Mermaid or the Markdown/HTML it
renders through could read (quotes, brackets, ``<``, ``&``, ``#``, ``;``, backticks, ``|``, newlines...) is
written as a numeric entity ``#NNN;``; lone surrogates are replaced first (`clean_text`).
"""

from __future__ import annotations

from planmode.state.models import Plan, StepStatus, clean_text

__all__ = ["escape_label", "layers", "plan_to_mermaid"]

#: Characters kept as they are in a label; everything else becomes ``#NNN;``.
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,:-_/?!'")
#: Characters of a label at most (a long description is cut with an ellipsis).
MAX_LABEL = 80

_CLASS = {
    StepStatus.PENDING: ("pending", "fill:#eeeeee,stroke:#888888,color:#222222"),
    StepStatus.RUNNING: ("running", "fill:#fff3bf,stroke:#f08c00,color:#222222"),
    StepStatus.DONE: ("done", "fill:#d3f9d8,stroke:#2f9e44,color:#222222"),
    StepStatus.FAILED: ("failed", "fill:#ffe3e3,stroke:#e03131,color:#222222"),
    StepStatus.BLOCKED: ("blocked", "fill:#ffe8cc,stroke:#e8590c,color:#222222"),
    StepStatus.SKIPPED: ("skipped", "fill:#f1f3f5,stroke:#adb5bd,color:#868e96,stroke-dasharray:4 3"),
}


def escape_label(text: str, limit: int = MAX_LABEL) -> str:
    """``text`` as the inside of a quoted Mermaid label: whitespace runs folded to one space, cut to ``limit``
    characters, and every character outside a small safe set written as ``#NNN;`` (Mermaid's entity form)."""
    folded = " ".join(clean_text(text).split())
    if len(folded) > limit:
        folded = folded[: limit - 1] + "…"
    return "".join(c if c in _SAFE else f"#{ord(c)};" for c in folded)


def layers(plan: Plan) -> list[list[str]]:
    """Step ids by layer: layer 0 has no dependencies, layer n depends on layer n-1 at most (plan order kept).
    Unknown dependencies are ignored and a cycle (which a valid plan never has) is cut."""
    ids = {s.id for s in plan.steps}
    deps = {s.id: [d for d in s.dependencies if d in ids] for s in plan.steps}
    depth: dict[str, int] = {}

    def level(sid: str, seen: frozenset[str]) -> int:
        if sid in depth:
            return depth[sid]
        if sid in seen:
            return 0
        value = 1 + max((level(d, seen | {sid}) for d in deps[sid]), default=-1)
        depth[sid] = value
        return value

    for s in plan.steps:
        level(s.id, frozenset())
    out: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for s in plan.steps:
        out[depth[s.id]].append(s.id)
    return out


def plan_to_mermaid(plan: Plan, *, fenced: bool = False) -> str:
    """The plan's dependency graph as Mermaid ``flowchart LR`` text (in a ```` ```mermaid ```` fence when
    ``fenced``)."""
    alias = {s.id: f"s{i}" for i, s in enumerate(plan.steps)}
    lines = ["flowchart LR"]
    for n, layer in enumerate(layers(plan)):
        lines.append(f'  subgraph L{n}["{escape_label(f"layer {n + 1}")}"]')
        lines.append("    direction TB")
        for sid in layer:
            step = plan.get(sid)
            assert step is not None
            label = escape_label(f"{sid} [{step.status.value}]: {step.description}")
            lines.append(f'    {alias[sid]}["{label}"]:::{_CLASS[step.status][0]}')
        lines.append("  end")
    for s in plan.steps:
        for d in s.dependencies:
            if d in alias:
                lines.append(f"  {alias[d]} --> {alias[s.id]}")
    for cls, style in _CLASS.values():
        lines.append(f"  classDef {cls} {style}")
    text = "\n".join(lines)
    return f"```mermaid\n{text}\n```" if fenced else text
