"""An example parent agent that uses planmode as one node among others.

    START -> triage --(a request)--> planmode -> summarize -> END
                    \\--(nothing to do)----------^

- ``triage`` reads the last human message and decides whether there is work for plan mode. A real agent
  would route between several specialists here (with a model, or rules); this one stays deterministic.
- ``planmode`` is the compiled planmode graph, added as a node. It is compiled *without* a checkpointer, so
  it uses the parent's: its checkpoints live in the parent's thread (under their own namespace) and
  ``parent.get_state(config, subgraphs=True)`` shows them. Its approval interrupt surfaces at the parent
  and is answered through the parent: ``parent.invoke(Command(resume={...}), config)``.
- ``summarize`` adds one short AI message built from planmode's run report.

State: planmode's input schema takes ``messages`` (and ``task``); its output schema returns ``messages``,
``plan``, ``status`` and ``report``. The parent's ``messages`` use ``add_messages``, which merges by message
id, so the conversation planmode hands back (the parent's own messages plus its final answer) adds exactly
one message. The parent keeps ``plan`` as a plain value — a mirror of what the subgraph reported last. Do
not give it planmode's ``PlanChannel``: that channel treats a write as an *update* to validate (a first
write becomes a fresh, all-pending plan), while here the subgraph hands over a finished plan.

Run it offline with the scripted model::

    python examples/parent_agent.py

In LangGraph Studio the ``parent_agent`` graph of ``langgraph.json`` is this module's ``graph`` (the model is
then ``ChatOpenAI``, made at run time from ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` and the run settings).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

from planmode.context import PlanModeContext
from planmode.graph import build_graph
from planmode.state import Plan

__all__ = ["ParentState", "build_parent", "graph"]


class ParentState(TypedDict, total=False):
    """The parent agent's state."""

    messages: Annotated[list[AnyMessage], add_messages]
    """The conversation (shared with planmode: its input and output schemas both carry ``messages``)."""
    request: str | None
    """What triage passed on to plan mode (None when there was nothing to do)."""
    plan: Plan | None
    """planmode's plan as it last reported it (a plain value: the subgraph's own channel validates changes)."""
    status: str
    """planmode's run status (completed, failed, answered, ...)."""
    report: dict[str, Any] | None
    """planmode's run report."""


def triage(state: ParentState) -> Command[Literal["planmode", "summarize"]]:
    """Send the latest human request to plan mode; with none, go straight to the summary."""
    messages = state.get("messages") or []
    last = messages[-1] if messages else None
    if isinstance(last, HumanMessage) and str(last.content).strip():
        return Command(goto="planmode", update={"request": str(last.content).strip()})
    return Command(goto="summarize", update={"request": None})


def summarize(state: ParentState) -> dict[str, Any]:
    """One short AI message from planmode's report (no model call)."""
    report = state.get("report") or {}
    if not state.get("request"):
        text = "Nothing to do: send a request."
    elif report:
        done, failed = len(report.get("done", [])), len(report.get("failed", []))
        patches = len(report.get("patches", []))
        text = (
            f"Plan mode finished ({report.get('status')}): {done} step(s) done, {failed} failed, "
            f"{patches} change(s) to the plan after it was first written."
        )
    else:
        text = f"Plan mode finished ({state.get('status', 'unknown')})."
    return {"messages": [AIMessage(content=text, name="summarize")]}


def build_parent(
    model: BaseChatModel | None = None, checkpointer: BaseCheckpointSaver[Any] | None = None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The parent agent, compiled.

    Args:
        model: the chat model planmode uses (any LangChain chat model; ``None``: ``ChatOpenAI`` from the run
            settings and the environment).
        checkpointer: the parent's checkpointer (e.g. ``planmode.persistence.sqlite_checkpointer(path)``); it
            also keeps planmode's checkpoints. ``None`` under the LangGraph server, which brings its own.
    """
    planmode = build_graph(model)  # no checkpointer of its own: it inherits the parent's
    builder = StateGraph(ParentState, context_schema=PlanModeContext)
    builder.add_node("triage", triage)
    builder.add_node("planmode", planmode)
    builder.add_node("summarize", summarize)
    builder.add_edge(START, "triage")
    builder.add_edge("planmode", "summarize")
    builder.add_edge("summarize", END)
    return builder.compile(checkpointer=checkpointer, name="parent_agent")


#: For ``langgraph.json`` / LangGraph Studio (no checkpointer: the server brings its own).
graph = build_parent()


def _demo() -> None:
    """Ask, approve through the parent, print the conversation (offline: the scripted model)."""
    import tempfile
    from pathlib import Path

    from langchain_core.runnables import RunnableConfig

    from planmode.persistence import sqlite_checkpointer
    from planmode.testing.scripted import PurposeScript, ScriptedChatModel

    plan = {
        "title": "Release",
        "steps": [
            {"id": "changelog", "description": "Collect the changelog"},
            {"id": "notes", "description": "Write the release notes", "dependencies": ["changelog"]},
            {"id": "docs", "description": "Update the docs", "dependencies": ["changelog"]},
        ],
    }
    model = ScriptedChatModel(responder=PurposeScript(plan=plan))
    with tempfile.TemporaryDirectory() as tmp:
        parent = build_parent(model, checkpointer=sqlite_checkpointer(Path(tmp) / "parent.sqlite"))
        config: RunnableConfig = {"configurable": {"thread_id": "demo"}}
        out = parent.invoke({"messages": [HumanMessage("Write the release notes and then update the docs")]}, config)
        payload = out["__interrupt__"][0].value  # planmode's approval, surfaced at the parent
        print(payload["markdown"])
        out = parent.invoke(Command(resume={"action": "approve", "revision": payload["revision"]}), config)
        for message in out["messages"]:
            print(f"{message.type}: {message.content}")


if __name__ == "__main__":
    _demo()
