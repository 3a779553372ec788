"""Deterministic scenarios from a seeded generator: a task, a plan of N steps whose dependencies form a DAG
of chosen (or varying) width, and failures injected at chosen steps.

A step that is set to fail fails its first attempt(s) until a "fix" step for it has run; every system
repairs it the way it repairs things (planmode: a patch that adds the fix step; the tutorial: a rewritten
remaining plan; full replanning: the whole plan re-emitted).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

__all__ = ["Scenario", "StepSpec", "make_scenario"]

_VERBS = [
    "Collect",
    "Normalise",
    "Validate",
    "Aggregate",
    "Compare",
    "Summarise",
    "Extract",
    "Reconcile",
    "Index",
    "Render",
    "Audit",
    "Merge",
    "Filter",
    "Annotate",
    "Export",
    "Review",
    "Profile",
    "Draft",
]
_OBJECTS = [
    "the quarterly sales ledger",
    "the supplier cost sheets",
    "the regional headcount table",
    "the customer churn records",
    "the warehouse stock levels",
    "the marketing spend report",
    "the support ticket backlog",
    "the payroll export",
    "the product catalogue",
    "the invoice archive",
    "the shipping delay log",
    "the budget forecast",
    "the pricing history",
    "the contract register",
    "the incident postmortems",
    "the survey responses",
    "the energy usage meters",
    "the fleet logs",
]
_HOW = [
    "into a clean CSV table with one row per month",
    "and flag every value outside the expected range",
    "by region and product line, keeping the totals",
    "against last year's figures and note the gaps",
    "into a short paragraph for the executive summary",
    "and record the source of every figure",
    "so that the downstream steps can join on the account id",
    "and write the result to the shared folder",
    "with the currency converted to euros at the month-end rate",
    "and keep a checksum of the input file",
]
_ACCEPT = [
    "the output file exists and has a header row",
    "every month of the quarter is present",
    "the totals match the source to the cent",
    "no value is missing or negative",
    "the summary names the three largest changes",
    "each figure cites its source",
]
_WORDS = [
    "revenue",
    "margin",
    "region",
    "quarter",
    "supplier",
    "invoice",
    "forecast",
    "variance",
    "total",
    "account",
    "ledger",
    "month",
    "customer",
    "product",
    "volume",
    "churn",
    "budget",
    "cost",
    "price",
    "order",
    "delivery",
    "backlog",
    "ticket",
    "audit",
]


@dataclass(frozen=True)
class StepSpec:
    """One step of a scenario's plan."""

    id: str
    description: str
    dependencies: tuple[str, ...]
    acceptance: str
    layer: int

    def definition(self) -> dict[str, Any]:
        """The step as a planner writes it (planmode's `StepDefinition` fields)."""
        return {
            "id": self.id,
            "description": self.description,
            "dependencies": list(self.dependencies),
            "complexity": "medium",
            "acceptance": self.acceptance,
        }


@dataclass(frozen=True)
class Scenario:
    """A task, its plan and the steps that fail until fixed."""

    name: str
    seed: int
    task: str
    title: str
    steps: tuple[StepSpec, ...]
    failing: frozenset[str] = frozenset()
    output_chars: int = 400
    """Characters of each step's output."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.steps)

    @cached_property
    def by_id(self) -> dict[str, StepSpec]:
        return {s.id: s for s in self.steps}

    @property
    def depth(self) -> int:
        """Steps on the longest dependency chain (the critical path, in steps)."""
        longest: dict[str, int] = {}
        for s in self.steps:  # steps are in topological order
            longest[s.id] = 1 + max((longest[d] for d in s.dependencies), default=0)
        return max(longest.values(), default=0)

    @property
    def max_width(self) -> int:
        layers: dict[int, int] = {}
        for s in self.steps:
            layers[s.layer] = layers.get(s.layer, 0) + 1
        return max(layers.values(), default=0)

    def plan_json(self) -> dict[str, Any]:
        """The plan as planmode's planner emits it (a `PlanDraft`)."""
        return {"title": self.title, "steps": [s.definition() for s in self.steps]}

    def fix_step(self, step_id: str) -> StepSpec:
        """The step that repairs a failing step (it runs after the failing step's dependencies)."""
        s = self.by_id[step_id]
        return StepSpec(
            id=f"fix_{step_id}",
            description=f"Install the missing toolchain that {s.id} needs",
            dependencies=s.dependencies,
            acceptance="the toolchain runs",
            layer=s.layer,
        )

    def output(self, step_id: str, chars: int | None = None) -> str:
        """The deterministic output of a step (``chars`` long)."""
        rng = random.Random(f"{self.seed}:{step_id}")
        size = self.output_chars if chars is None else chars
        words: list[str] = [f"Result of {step_id}:"]
        length = len(words[0])
        while length < size:
            w = rng.choice(_WORDS) if rng.random() < 0.8 else str(rng.randint(10, 99999))
            words.append(w)
            length += len(w) + 1
        return " ".join(words)[:size]


def make_scenario(
    n: int,
    *,
    width: int = 4,
    varying: bool = False,
    failures: int | tuple[int, ...] = 0,
    seed: int = 7,
    output_chars: int = 400,
    name: str | None = None,
) -> Scenario:
    """A scenario of ``n`` steps in layers of ``width`` (or of 1..width when ``varying``).

    Each step past the first layer depends on one or two steps of the layer before (so the critical path
    has one step per layer). ``failures`` is a count (spread evenly over the plan) or the indexes of the
    steps that fail until fixed.
    """
    rng = random.Random(seed * 1_000_003 + n * 31 + width)
    steps: list[StepSpec] = []
    layers: list[list[str]] = []
    used: set[str] = set()
    idx = 0
    while idx < n:
        size = rng.randint(1, width) if varying else width
        size = min(size, n - idx)
        layer: list[str] = []
        for _ in range(size):
            idx += 1
            sid = f"s{idx:03d}"
            deps: tuple[str, ...] = ()
            if layers:
                prev = layers[-1]
                k = min(len(prev), rng.choice((1, 2)))
                deps = tuple(sorted(rng.sample(prev, k)))
            desc = _description(rng, used)
            steps.append(StepSpec(sid, desc, deps, rng.choice(_ACCEPT), len(layers)))
            layer.append(sid)
        layers.append(layer)
    if isinstance(failures, int):
        picks = tuple(round((i + 1) * n / (failures + 1)) - 1 for i in range(failures)) if failures else ()
    else:
        picks = failures
    failing = frozenset(steps[i].id for i in picks)
    task = (
        f"Prepare the operations review: {n} tasks over the ledgers, the cost sheets and the logs, "
        "then write the summary for the board"
    )
    return Scenario(
        name=name or f"n{n}-w{width}{'v' if varying else ''}-f{len(failing)}",
        seed=seed,
        task=task,
        title=f"Operations review ({n} steps)",
        steps=tuple(steps),
        failing=failing,
        output_chars=output_chars,
    )


def _description(rng: random.Random, used: set[str]) -> str:
    while True:
        text = f"{rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_HOW)}"
        if text not in used:
            used.add(text)
            return text
        text = f"{text} (part {len(used)})"
        if text not in used:
            used.add(text)
            return text
