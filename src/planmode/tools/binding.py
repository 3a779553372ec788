"""What a step runs with: the graph's read-only tools plus the write tools the step declares.

One rule, used by everything that judges or runs a step:

- `read_only_names`: a tool name is read-only when every tool of the graph with that name is marked
  read-only (`planmode.tools.read_only`);
- `step_writes`: a step's declared tool names that are not read-only change things (a declared name that is
  not a tool of the graph counts too: unknown means unsafe). The approval policy
  (`planmode.approval.policy.ApprovalRequest.writes`) and the per-step question (``step_approval="writes"``) judge
  these;
- `bind_step_tools`: the tools a step's executor is handed — every read-only tool of the graph, plus the
  graph's tools whose name the step declares. A declared name that is not a tool of the graph binds nothing.
  Every other tool of the graph is withheld: the tool loop answers a call to it with a refusal naming the step,
  the tool and what the step declared, and it never runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from langchain_core.tools import BaseTool

from planmode.tools.workspace import READ_ONLY_METADATA_KEY

__all__ = ["StepTools", "bind_step_tools", "is_read_only", "read_only_names", "step_writes"]


def is_read_only(tool: BaseTool) -> bool:
    """Whether ``tool`` is marked read-only. Unmarked tools are not (the safe default)."""
    return (tool.metadata or {}).get(READ_ONLY_METADATA_KEY) is True


def read_only_names(tools: Iterable[BaseTool]) -> frozenset[str]:
    """The names under which only read-only tools are found (a name shared by a read-only tool and one that
    writes is not read-only: the loop dispatches by name)."""
    marks: dict[str, bool] = {}
    for tool in tools:
        marks[tool.name] = marks.get(tool.name, True) and is_read_only(tool)
    return frozenset(name for name, ro in marks.items() if ro)


def step_writes(declared: Iterable[str], read_only: frozenset[str]) -> list[str]:
    """The declared tool names that change things: every one that is not read-only (unknown ones included),
    in declaration order, once each."""
    return list(dict.fromkeys(t for t in declared if t not in read_only))


@dataclass(frozen=True)
class StepTools:
    """The tools one step runs with, and what it may not call."""

    step_id: str
    declared: tuple[str, ...]
    """The tool names the step declares (as approved)."""
    tools: tuple[BaseTool, ...]
    """The bound tools: the graph's read-only tools plus its tools the step declares."""
    withheld: frozenset[str]
    """Names of the graph's tools that are not bound (write tools the step did not declare)."""

    @property
    def key(self) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        """A hashable summary (what a compiled loop's gate depends on besides the tools themselves)."""
        return self.step_id, self.declared, tuple(sorted(self.withheld))

    def binds(self, tool: BaseTool) -> bool:
        """Whether ``tool`` (this very object) is one the step runs with."""
        return any(tool is t for t in self.tools)

    def refusal(self, name: str) -> str:
        """The message a model gets for calling ``name``, a tool this step is not bound to."""
        declared = ", ".join(self.declared) or "none"
        available = ", ".join(dict.fromkeys(t.name for t in self.tools)) or "none"
        return (
            f"refused: step {self.step_id!r} may not call {name!r}: it changes things and the step does not "
            f"declare it (the step declares: {declared}). It was not run. Tools this step can use: {available}."
        )


def bind_step_tools(step_id: str, declared: Sequence[str], tools: Sequence[BaseTool]) -> StepTools:
    """The tools a step declaring ``declared`` runs with, among the graph's ``tools``."""
    read_only = read_only_names(tools)
    writes = set(step_writes(declared, read_only))
    bound = tuple(t for t in tools if t.name in read_only or t.name in writes)
    withheld = frozenset(t.name for t in tools) - {t.name for t in bound}
    return StepTools(step_id=step_id, declared=tuple(declared), tools=bound, withheld=withheld)
