"""Pluggable approval policies: who approves a plan, and (with ``step_approval="writes"``) each step that
uses a tool that changes things.

    from planmode import build_graph
    from planmode.approval.policy import read_only_auto

    graph = build_graph(model, tools=tools, checkpointer=saver, approval_policy=read_only_auto)

A policy is a callable that receives an `ApprovalRequest` (the plan, or the step about to run, the reason the
approval is asked, and which tools write) and answers a `Decision`: ``approve``, ``ask`` a human, or
``reject`` with a reason (the run is then cancelled with that reason: a policy that refuses a plan does not
send the planner round in circles). It may also answer the strings ``"approve"`` / ``"ask"``. A policy that
raises or answers something else is treated as ``ask`` (fail closed: a human decides), and the error is
recorded. Its name (``policy_name`` attribute, else ``__name__``) and the decision are recorded in the run's
``approvals`` log (a state channel, shown by ``planmode show``), beside who answered when it asked a human.

Built-ins: `ask_human`, `auto_approve`, `read_only_auto` (approve when every step, or the step, uses only
read-only tools; ask otherwise), and `from_settings` (the default: the ``approval`` run setting, ``auto`` or
``ask``, as a policy).

A tool is read-only when it is marked so (`planmode.tools.read_only`); a tool name in a plan that is not
among the graph's tools counts as one that writes (unknown means unsafe). What a policy judges is what runs:
a step is bound to the read-only tools plus the write tools it declares (`planmode.tools.bind_step_tools`,
the same rule as `ApprovalRequest.writes`), and any other call is refused where the tools are dispatched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.tools import BaseTool

from planmode.state.approvals import add_approval_records
from planmode.state.models import Plan, PlanPatch, Step, clean_text
from planmode.tools.binding import read_only_names, step_writes

__all__ = [
    "APPROVE",
    "ASK",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Decision",
    "add_approval_records",
    "ask_human",
    "auto_approve",
    "decide",
    "from_settings",
    "policy_name",
    "read_only_auto",
    "read_only_tools_of",
    "reject",
]


@dataclass(frozen=True)
class Decision:
    """A policy's answer."""

    action: Literal["approve", "ask", "reject"]
    reason: str = ""


APPROVE = Decision("approve")
ASK = Decision("ask")


def reject(reason: str) -> Decision:
    """A rejection with its reason."""
    return Decision("reject", reason)


@dataclass(frozen=True)
class ApprovalRequest:
    """What a policy decides on."""

    kind: Literal["plan", "step"]
    """``plan``: approve the plan (first version, or after a patch); ``step``: run this step."""
    subject: Plan | PlanPatch
    """The plan to approve (for a step, the plan it belongs to)."""
    reason: str
    """Why the approval is asked (e.g. "initial plan", "re-approval after a patch: ...", "step uses write_file")."""
    step: Step | None = None
    """The step about to run (kind ``step``)."""
    settings: Any = None
    """The run's settings (`planmode.context.PlanModeContext`)."""
    read_only_tools: frozenset[str] = field(default_factory=frozenset)
    """Names of the graph's tools marked read-only; any other tool name changes things."""

    def writes(self, step: Step) -> list[str]:
        """The tools of ``step`` that change things (or are unknown): exactly the write tools the step will be
        bound to when it runs (`planmode.tools.bind_step_tools`), plus declared names no tool has."""
        return step_writes(step.tools, self.read_only_tools)


ApprovalPolicy = Callable[[ApprovalRequest], "Decision | str"]


def ask_human(request: ApprovalRequest) -> Decision:
    """Always ask a human."""
    return ASK


def auto_approve(request: ApprovalRequest) -> Decision:
    """Approve everything (headless runs)."""
    return APPROVE


def read_only_auto(request: ApprovalRequest) -> Decision:
    """Approve a plan whose steps use only read-only tools (and a read-only step); ask a human otherwise."""
    if request.step is not None:
        return ASK if request.writes(request.step) else APPROVE
    if isinstance(request.subject, Plan) and not any(request.writes(s) for s in request.subject.steps):
        return APPROVE
    return ASK


def from_settings(request: ApprovalRequest) -> Decision:
    """The ``approval`` run setting as a policy: ``auto`` approves plans; ``ask`` asks a human. A step (with
    ``step_approval="writes"``, which is that very request) is always asked of a human: ``approval="auto"`` with
    ``step_approval="writes"`` approves plans by itself and asks before each write step."""
    if request.kind == "step":
        return ASK
    return APPROVE if getattr(request.settings, "approval", "ask") == "auto" else ASK


from_settings.policy_name = "settings"  # type: ignore[attr-defined]  # the name recorded in the approvals log


def policy_name(policy: Any) -> str:
    """The name recorded for ``policy``."""
    name = getattr(policy, "policy_name", None) or getattr(policy, "__name__", None) or type(policy).__name__
    return clean_text(str(name))[:80]


def decide(policy: Any, request: ApprovalRequest) -> tuple[Decision, str | None]:
    """The policy's decision and, when it failed (raised or answered junk), why (the decision is then ask)."""
    try:
        answer = policy(request)
    except Exception as exc:  # a user's policy is outside code: its failure must not end the run
        return ASK, clean_text(f"the approval policy {policy_name(policy)} raised {type(exc).__name__}: {exc}")[:500]
    if isinstance(answer, str) and answer in ("approve", "ask"):
        return Decision(answer), None  # type: ignore[arg-type]  # narrowed by the membership test
    if isinstance(answer, Decision) and answer.action in ("approve", "ask", "reject"):
        if answer.action == "reject":
            return Decision("reject", clean_text(str(answer.reason or "rejected by the approval policy"))), None
        return answer, None
    return ASK, clean_text(f"the approval policy {policy_name(policy)} answered {answer!r:.80}; expected a Decision")


def read_only_tools_of(tools: Sequence[BaseTool]) -> frozenset[str]:
    """The names of the read-only tools among ``tools`` (a name that a tool which writes shares is not one):
    the rule `planmode.tools.bind_step_tools` binds steps by."""
    return read_only_names(tools)
