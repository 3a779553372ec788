"""A small bounded tool-calling loop, run as a LangGraph graph, with a dispatch-time gate for tools that change
the world.

The loop is a two-node graph (``model`` -> ``tools`` -> ``model`` ...), and its ``tools`` node is LangGraph's own
`ToolNode`, so tools behave as they do everywhere else in LangGraph:

- a tool that calls ``interrupt()`` pauses the run; the loop is invoked from inside a node (``execute_step``,
  ``plan``, ``respond``) without a checkpointer of its own, so it runs on the parent graph's checkpointer as a
  subgraph (its checkpoints sit under the calling task's namespace). On resume the node runs again from its
  start, the loop resumes from its own checkpoint — the model turns and the tools that already ran are not
  repeated — and the interrupting tool gets the human's answer;
- a tool that returns a `Command` updates the loop's state (e.g. its ``messages``);
- a tool error: invalid arguments come back to the model as an error tool message (`ToolNode`'s default);
  a tool built with ``handle_tool_error`` returns its own message; any other exception ends the loop with
  ``error`` set ("tool 'x' raised ..."), which fails the attempt.

`ToolGate` is the ``wrap_tool_call`` of that `ToolNode`: before approval it answers every call to a tool that
is not marked read-only (`planmode.tools.read_only`) with an error tool message instead of running it. When a
step runs, the loop is given the step's binding (`planmode.tools.StepTools`: the read-only tools plus the write
tools the step declares); only those tools are in the `ToolNode`, and a call to any other tool of the graph is
answered with a refusal naming the step, the tool and what the step declared, and recorded (``refused`` in the
`LoopResult`). The decision depends only on the tool the call resolves to (its read-only marking, its identity
among the bound tools, the withheld names) and on whether writes are allowed — never on anything else the
model sends, such as tool-call ids.

The small-model adapter's call repair (`planmode.adapters.small_models.calls`), loaded only when the caller says the
adapter is on (``text_calls=True``, or the run's ``model_profile="small"``; off by default): when a reply has no
tool calls but the whole reply, stripped, is a tool call written as text (JSON raw or fenced, one or a list, or
``<tool_call>`` blocks, and nothing else: a call inside prose is text), and every call names a tool the loop knows
(one it runs, or one of the graph the step is not bound to), the reply is given real tool calls (with fresh ids made
here, never ids from the text) and they go through the same `ToolNode` and the same `ToolGate` as any call. Only the
model's own reply is read, never what a tool returned. Text that is wholly call-shaped but names an unknown tool or
cannot be read is never the answer: the model is told to call the tool through the tool-calling interface and gets
another turn (within the turn bound); a loop that ends on such text ends with ``error`` set, naming it.

With the adapter on, a step's one file (`WholeFile`, given by the executor for a write step that declares one
file): a call named after the step with a ``content`` (small models call the step, not the tool) is a call of the
step's write tool, and, once the model has been told it may (``fenced``), a reply without tool calls whose text
holds the file's whole content in one fenced code block is too. Either goes through the same `ToolNode` and
`ToolGate`, on the file of the approved step. Without the adapter, a call is run as the model made it.

A call repeated with the same arguments after it succeeded, to a tool marked idempotent (the workspace's
``write_file``: the same content again changes nothing), is not run again: small models repeat a write turn after
turn. The reply is the loop's answer.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import operator
import posixpath
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import INVALID_TOOL_NAME_ERROR_TEMPLATE, ToolCallRequest
from langgraph.types import Command, Durability
from typing_extensions import TypedDict

from planmode._cache import IdentityCache

# The key under which a running graph hands its checkpointer to subgraphs (what Pregel itself reads).
# A node with a sync and an async function, as LangGraph's own prebuilt nodes (ToolNode) are built.
from planmode._compat import CONFIG_KEY_CHECKPOINTER, RunnableCallable
from planmode._drive import Call, adrive, drive
from planmode.adapters import adapter_for
from planmode.context import PlanModeContext
from planmode.llm import afit_transcript, fit_transcript, model_failure, normalize_messages, text_of
from planmode.tools import StepTools, is_read_only
from planmode.tools._writes import keeping, kept_name
from planmode.tools.workspace import IDEMPOTENT_METADATA_KEY

__all__ = [
    "LoopResult",
    "ToolGate",
    "ToolRaised",
    "WholeFile",
    "arun_tool_loop",
    "is_read_only",
    "run_tool_loop",
    "tool_loop_steps",
]

ToolResult = ToolMessage | Command[Any]


class ToolRaised(Exception):
    """A tool raised instead of returning; the loop ends and the step's attempt fails with this error."""


class ToolGate:
    """The ``wrap_tool_call`` of the loop's `ToolNode`: refuses world-changing tools unless writes are allowed
    (after approval), refuses every tool a step is not bound to (``binding``), and names the tool in the error
    of a tool that raised."""

    def __init__(
        self,
        *,
        allow_writes: bool,
        binding: StepTools | None = None,
        kept: frozenset[str] = frozenset(),
        root: str | None = None,
        step_file: tuple[str, str] | None = None,
    ) -> None:
        self.allow_writes = allow_writes
        self.binding = binding
        self.kept = kept
        self.root = root
        self.step_file = step_file
        """(the write tool, the path) of the one file the step writes whole, when it has one (`WholeFile`): a
        call of a tool that does not exist is told how to write it."""

    def refusal(self, request: ToolCallRequest) -> ToolResult | None:
        """The answer to a call that must not run now (an error tool message; for a tool the step is not bound
        to, a `Command` that also records it in ``refused``), or None when it may run."""
        tool = request.tool
        binding = self.binding
        unbound = _unbound(binding, request) if binding is not None else None
        if binding is not None and unbound is not None:
            return _refused(binding, unbound, request.tool_call.get("id") or "")
        if tool is not None and not is_read_only(tool) and (done := self._done_file(request)) is not None:
            return ToolMessage(
                content=f"refused: {done} is the work of a step that is done, or a file the task gives to read; "
                f"this step does not declare it (only a step with a file check on it may change it; "
                f"{_own_file(self.step_file)})",
                tool_call_id=request.tool_call.get("id") or "",
                name=request.tool_call["name"],
                status="error",
            )
        if tool is None and self.step_file is not None:  # an unknown tool in a write step: name the step's own call
            write, path = self.step_file
            name = request.tool_call["name"]
            return ToolMessage(
                # no placeholder to copy: the message names the content in words, so none can be written verbatim
                content=f"Error: {name} is not a tool. This step writes {path}: call {write} with path {path!r} "
                f"and, as content, the whole new text of {path}",
                tool_call_id=request.tool_call.get("id") or "",
                name=name,
                status="error",
            )
        if self.allow_writes or tool is None or is_read_only(tool):
            return None  # an unknown tool gets the ToolNode's own error message
        name = request.tool_call["name"]
        return ToolMessage(
            content=f"refused: {name!r} changes the world and may only run in an approved plan",
            tool_call_id=request.tool_call.get("id") or "",
            name=name,
            status="error",
        )

    def _done_file(self, request: ToolCallRequest) -> str | None:
        """The done step's file a call's ``path`` names, however it is spelled, or None: a later step does not
        change a file a done step wrote. A path is compared as the workspace tools resolve it (`kept_name`:
        ``../ws/data.txt``, a symlinked alias of the workspace); the workspace tools refuse the write again where it
        happens (`planmode.tools._writes.keeping`), whatever the call's arguments."""
        path = (request.tool_call.get("args") or {}).get("path") if self.kept else None
        if not isinstance(path, str) or not path.strip():
            return None
        given = PurePosixPath(path.replace("\\", "/"))
        if given.is_absolute() and self.root is not None:
            with contextlib.suppress(ValueError):
                given = given.relative_to(PurePosixPath(self.root))
        name = posixpath.normpath(given.as_posix())  # "x/../data.txt", "./data.txt": data.txt
        if name in self.kept:
            return name
        return kept_name(Path(self.root), path, self.kept) if self.root is not None else None

    def __call__(self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], ToolResult]) -> ToolResult:
        """The synchronous wrapper."""
        refused = self.refusal(request)
        if refused is not None:
            return refused
        try:
            with keeping(self.kept):  # the workspace tools refuse a kept file where they write
                return execute(request)
        except GraphBubbleUp:
            raise  # an interrupt (or a Command for a parent graph) travels on, as in every ToolNode
        except Exception as exc:
            raise _raised(request, exc) from exc

    async def awrap(
        self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Awaitable[ToolResult]]
    ) -> ToolResult:
        """The asynchronous wrapper."""
        refused = self.refusal(request)
        if refused is not None:
            return refused
        try:
            with keeping(self.kept):
                return await execute(request)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            raise _raised(request, exc) from exc


def _unbound(binding: StepTools, request: ToolCallRequest) -> str | None:
    """The name of the graph's tool that ``request`` calls when the step is not bound to it (None: it is bound,
    or it is no tool of the graph, which the ToolNode answers itself)."""
    tool = request.tool
    if tool is not None:
        return None if binding.binds(tool) else tool.name
    name = request.tool_call["name"]
    return name if name in binding.withheld else None


def _refusal_message(binding: StepTools, name: str, call_id: str) -> ToolMessage:
    return ToolMessage(content=binding.refusal(name), tool_call_id=call_id, name=name, status="error")


def _refused(binding: StepTools, name: str, call_id: str) -> Command[Any]:
    """The refusal of a call to ``name``, a tool the step is not bound to: the model gets the message, the loop
    records the name."""
    return Command(update={"messages": [_refusal_message(binding, name, call_id)], "refused": [name]})


def _own_file(step_file: tuple[str, str] | None) -> str:
    """What a step refused a write to a kept file is to write instead: its own file by name and its write tool,
    when it has one, so the refusal names the one write the step may make."""
    if step_file is None:
        return "write this step's own file"
    tool, path = step_file
    return f"write this step's own file, {path}, with {tool}"


def _raised(request: ToolCallRequest, exc: Exception) -> ToolRaised:
    return ToolRaised(f"tool {request.tool_call['name']!r} raised {type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class WholeFile:
    """The one file a write step produces (``path``, None when the step does not name exactly one) and the declared
    tool that writes it whole (``tool``, which takes ``path`` and ``content``): a call named ``alias`` (the step's
    id) with a string ``content`` is a call of ``tool`` (to ``path``, or, without one, to the path the call names);
    with ``fenced`` and a ``path``, so is a reply that is the file's whole content in one fenced block."""

    tool: str
    path: str | None
    alias: str | None = None
    fenced: bool = False
    root: str | None = None
    """The workspace's top folder, when known: a call of ``tool`` that puts ``path`` under a folder that neither
    exists there nor is named in ``named`` (the step's and the goal's text) writes ``path`` itself."""
    named: str = ""
    empty: bool = False
    """The step says its file is empty ("Write empty __init__.py"): a call named after the step with a path and no
    content writes it empty."""
    whole: bool = True
    """``tool`` writes a file whole (takes ``path`` and ``content``); False for a step that declares no such tool
    (only ``edit_file``, only tools that read): then only ``shapes`` applies."""
    kept: frozenset[str] = frozenset()
    """Files (relative to ``root``) that the plan's done steps produced and this step does not: a call of a tool
    that changes things whose ``path`` is one of them is refused (`ToolGate`)."""
    shapes: tuple[tuple[str, frozenset[str], frozenset[str]], ...] = ()
    """The step's declared tools as (name, required arguments, all arguments): a call named after the step whose
    arguments fit exactly one of them, and that is no whole-file write, is a call of that one."""


@dataclass
class LoopResult:
    """What a tool loop produced."""

    messages: list[BaseMessage]
    text: str = ""
    tool_calls: int = 0
    error: str | None = None
    tool_names: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    """The tools the model called that the step is not bound to (refused, not run), in order."""


class _LoopState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    """The transcript: the caller's messages, then model replies and tool results."""
    turns: int
    """Model calls so far."""
    tool_names: Annotated[list[str], operator.add]
    """The names of the tool calls dispatched so far, in order (their count is the tool-call budget used)."""
    refused: Annotated[list[str], operator.add]
    """The names of the calls refused because the step is not bound to the tool."""
    error: str | None
    """Why the loop ended without an answer (a failed model call, the turn bound)."""
    final: bool
    """The last model reply is the answer (no tool calls, or the tool-call budget is used up)."""
    text_call: str | None
    """Why the last reply, a tool call written as text, was not run (the model was told; not an answer)."""
    written: str | None
    """The result of the write of the step's one file, which ended the loop (`WholeFile`): the answer."""


def run_tool_loop(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    messages: Sequence[BaseMessage],
    settings: PlanModeContext,
    *,
    allow_writes: bool,
    max_iterations: int,
    max_tool_calls: int | None = None,
    binding: StepTools | None = None,
    whole_file: WholeFile | None = None,
    text_calls: bool = False,
) -> LoopResult:
    """Call the model, run its tool calls through LangGraph's `ToolNode` behind a `ToolGate`, repeat until it
    answers without tool calls or a bound is reached.

    Called inside a graph node, the loop runs as a subgraph on the graph's checkpointer, so an ``interrupt()``
    in a tool pauses the run (`GraphInterrupt` propagates: callers must let `GraphBubbleUp` through) and the
    loop resumes where it stopped. A failed model call, the turn bound and a raising tool end the loop with
    ``error`` set; the tool-call budget ends it with the last reply's text.

    With a ``binding`` (a step's `StepTools`), only the tools it binds are given to the model and run; a call to
    a tool it withholds is refused (the model gets the refusal) and recorded in the result's ``refused``. With a
    ``whole_file`` (`WholeFile`), a call named after the step, or a fenced file, is a call of the step's write tool.
    ``text_calls`` (the small-model adapter's switch, off by default): a reply that is wholly a tool call written
    as text is read as that call, and calls are repaired (`planmode.adapters.small_models.calls`).
    """
    return drive(
        tool_loop_steps(
            model,
            tools,
            messages,
            settings,
            allow_writes=allow_writes,
            max_iterations=max_iterations,
            max_tool_calls=max_tool_calls,
            binding=binding,
            whole_file=whole_file,
            text_calls=text_calls,
        )
    )


async def arun_tool_loop(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    messages: Sequence[BaseMessage],
    settings: PlanModeContext,
    *,
    allow_writes: bool,
    max_iterations: int,
    max_tool_calls: int | None = None,
    binding: StepTools | None = None,
    whole_file: WholeFile | None = None,
    text_calls: bool = False,
) -> LoopResult:
    """`run_tool_loop` on the event loop: the model is called with ``ainvoke`` and `ToolNode` runs the tools
    asynchronously (a tool's coroutine is awaited; a sync-only tool runs in a worker thread, as in every
    `ToolNode`). The same loop, bounds, gate and results."""
    return await adrive(
        tool_loop_steps(
            model,
            tools,
            messages,
            settings,
            allow_writes=allow_writes,
            max_iterations=max_iterations,
            max_tool_calls=max_tool_calls,
            binding=binding,
            whole_file=whole_file,
            text_calls=text_calls,
        )
    )


def tool_loop_steps(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    messages: Sequence[BaseMessage],
    settings: PlanModeContext,
    *,
    allow_writes: bool,
    max_iterations: int,
    max_tool_calls: int | None = None,
    binding: StepTools | None = None,
    whole_file: WholeFile | None = None,
    text_calls: bool = False,
) -> Generator[Call[Any], Any, LoopResult]:
    """`run_tool_loop` as a loop for a driver (`planmode._drive`): yields each call to make (a `Call`: a model
    turn, or the whole loop graph when there are tools), returns the result. A node body composes it with
    ``yield from``, so the node's driver makes the calls."""
    turns = max(1, max_iterations)
    result = LoopResult(messages=list(messages))
    tools = _bound(tools, binding)
    if whole_file is not None and whole_file.tool not in {t.name for t in tools}:
        whole_file = None  # a write tool the loop does not run: no reply is turned into a call of it
    if not tools:  # no tool can interrupt or return a Command: the model alone, without a subgraph's overhead
        call_model, acall_model = _model_turn(
            model, (), settings, max_tool_calls, _known((), binding), text_calls=text_calls
        )
        return _finish(result, (yield from _without_tools(messages, turns, call_model, acall_model, binding)))
    loop = _loop_for(
        model,
        tools,
        settings,
        allow_writes=allow_writes,
        max_iterations=turns,
        max_tool_calls=max_tool_calls,
        binding=binding,
        whole_file=whole_file,
        text_calls=text_calls,
    )
    config, durability = _run_args(turns)
    given = {"messages": list(messages)}
    try:
        out = yield Call(
            partial(loop.invoke, given, config, durability=durability),
            partial(loop.ainvoke, given, config, durability=durability),
        )
    except ToolRaised as exc:
        result.error = str(exc)
        return result
    return _finish(result, out)


def _bound(tools: Sequence[BaseTool], binding: StepTools | None) -> Sequence[BaseTool]:
    """The tools the loop may run: with a binding, only the ones it binds (the others are not even shown)."""
    return tools if binding is None else [t for t in tools if binding.binds(t)]


def _run_args(turns: int) -> tuple[RunnableConfig, Durability | None]:
    """The loop's config and durability.

    Two super-steps per turn, plus the entry: never the recursion limit of the graph around the loop.
    Durability "exit": the loop's checkpoint is written when it stops (an interrupt, or its end), not at every
    turn — what resuming an interrupt needs, at the cost of one write per loop. A crash in the middle re-runs
    the attempt's loop from its start, as a crash re-runs any unfinished step."""
    return {"recursion_limit": 2 * turns + 4}, "exit" if _has_checkpointer() else None


def _finish(result: LoopResult, out: dict[str, Any]) -> LoopResult:
    history: list[BaseMessage] = list(out.get("messages") or [])
    result.messages = history
    result.tool_names = list(out.get("tool_names") or [])
    result.tool_calls = len(result.tool_names)
    result.refused = list(out.get("refused") or [])
    result.error = out.get("error")
    last = history[-1] if history else None
    if out.get("written") is not None:  # the step's file written: its result is the answer
        result.text = str(out["written"])
    elif out.get("final") and isinstance(last, AIMessage):
        result.text = text_of(last)
    elif out.get("final"):  # the budget cut every call of the last reply: answer with that reply's text
        result.text = next((text_of(m) for m in reversed(history) if isinstance(m, AIMessage)), "")
    return result


#: Compiled loops, by model, tools and bounds (the newest 64 kept).
_LOOPS: IdentityCache[Any] = IdentityCache(size=64)


def _loop_for(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    settings: PlanModeContext,
    *,
    allow_writes: bool,
    max_iterations: int,
    max_tool_calls: int | None,
    binding: StepTools | None,
    whole_file: WholeFile | None = None,
    text_calls: bool = False,
) -> Any:
    """The compiled loop for these arguments, compiled once (a compile costs milliseconds, as much as the rest of
    a step's framework overhead). Text calls are read when the caller asks (``text_calls``) or the run's settings
    switch the small-model adapter on (``model_profile="small"``)."""
    text_calls = text_calls or adapter_for(settings) is not None
    return _LOOPS.get(
        (model, *tools, *(binding.tools if binding else ())),
        (
            len(tools),
            settings.normalize_messages,
            allow_writes,
            max_iterations,
            max_tool_calls,
            binding.key if binding else None,
            whole_file,
            text_calls,
        ),
        lambda: _build_loop(
            model,
            tools,
            settings,
            allow_writes=allow_writes,
            max_iterations=max_iterations,
            max_tool_calls=max_tool_calls,
            binding=binding,
            whole_file=whole_file,
            text_calls=text_calls,
        ),
    )


def _has_checkpointer() -> bool:
    """Whether the loop runs inside a graph with a checkpointer (which it then inherits as a subgraph)."""
    try:
        config = get_config()
    except RuntimeError:  # called outside a graph
        return False
    return config.get("configurable", {}).get(CONFIG_KEY_CHECKPOINTER) is not None


def _build_loop(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    settings: PlanModeContext,
    *,
    allow_writes: bool,
    max_iterations: int,
    max_tool_calls: int | None,
    binding: StepTools | None,
    whole_file: WholeFile | None = None,
    text_calls: bool = False,
) -> Any:
    call_model, acall_model = _model_turn(
        model, tools, settings, max_tool_calls, _known(tools, binding), whole_file, _changers(tools), text_calls
    )
    gate = ToolGate(
        allow_writes=allow_writes,
        binding=binding,
        kept=whole_file.kept if whole_file is not None else frozenset(),
        root=whole_file.root if whole_file is not None else None,
        step_file=(whole_file.tool, whole_file.path)
        if whole_file is not None and whole_file.whole and whole_file.path and allow_writes
        else None,
    )

    def after_model(state: _LoopState) -> Literal["tools", "model", "bound", "__end__"]:
        history = state.get("messages") or []
        last = history[-1] if history else None
        if state.get("error"):
            return "__end__"
        if state.get("text_call"):  # the model was told to call the tool properly: another turn, if any is left
            return "bound" if state.get("turns", 0) >= max_iterations else "model"
        if not (isinstance(last, AIMessage) and last.tool_calls):
            return "__end__"
        return "tools"

    def after_tools(state: _LoopState) -> Literal["model", "bound", "written", "__end__"]:
        if state.get("final"):
            return "__end__"
        if whole_file is not None and _step_file_written(state.get("messages") or [], whole_file) is not None:
            return "written"
        if _repeated_failure(state.get("messages") or []) is not None:
            return "bound"  # the same calls failed the same way twice: a third turn would send them again
        return "bound" if state.get("turns", 0) >= max_iterations else "model"

    def written(state: _LoopState) -> dict[str, Any]:
        return {"written": _step_file_written(state.get("messages") or [], whole_file) if whole_file else None}

    def bound_reached(state: _LoopState) -> dict[str, Any]:
        repeated = _repeated_failure(state.get("messages") or [])
        return {"error": _text_call_error(state) or repeated or _bound_error(max_iterations)}

    builder: StateGraph[_LoopState, None, _LoopState, _LoopState] = StateGraph(_LoopState)
    builder.add_node("model", RunnableCallable(call_model, acall_model, name="model", trace=False))
    builder.add_node("tools", ToolNode(list(tools), wrap_tool_call=gate, awrap_tool_call=gate.awrap))
    builder.add_node("bound", bound_reached)
    builder.add_node("written", written)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", after_model)
    builder.add_conditional_edges("tools", after_tools)
    builder.add_edge("bound", END)
    builder.add_edge("written", END)
    return builder.compile(name="planmode_tool_loop")


def _step_file_written(history: Sequence[BaseMessage], whole_file: WholeFile) -> str | None:
    """The result of a write of the step's one file by its write tool among the last tool results, when it
    succeeded, else None. The step's work is then done: the loop ends without another model turn, whose answer a
    write step's verification does not read (its evidence is the change), so no model time is spent on it."""
    if whole_file.path is None:
        return None
    made = {}
    for m in reversed(history):
        if isinstance(m, AIMessage):
            made = {c.get("id"): c for c in m.tool_calls}
            break
    target = PurePosixPath(whole_file.path)
    for m in reversed(history):
        if not isinstance(m, ToolMessage):
            break
        call = made.get(m.tool_call_id)
        if call is None or call["name"] != whole_file.tool or m.status == "error":
            continue
        path = (call.get("args") or {}).get("path")
        if isinstance(path, str) and PurePosixPath(path) == target:
            return text_of(m)
    return None


def _repeated_failure(history: Sequence[BaseMessage]) -> str | None:
    """Why the loop stops early when the model's last two turns made the same calls (names and arguments) and
    every one of them failed (None otherwise): a third identical turn would be told the same errors, so the
    step's attempt ends after the second rather than at its turn bound."""
    rounds: list[tuple[AIMessage, list[ToolMessage]]] = []
    results: list[ToolMessage] = []
    for message in reversed(history):
        if isinstance(message, ToolMessage):
            results.append(message)
        elif isinstance(message, AIMessage) and message.tool_calls:
            rounds.append((message, results))
            results = []
            if len(rounds) == 2:
                break
        else:
            break
    if len(rounds) < 2:
        return None

    def calls(m: AIMessage) -> list[tuple[str, str]]:
        return [(c["name"], json.dumps(c.get("args"), sort_keys=True, default=str)) for c in m.tool_calls]

    (last, last_results), (before, before_results) = rounds
    failed = all(r.status == "error" for r in (*last_results, *before_results)) and last_results and before_results
    if not failed or calls(last) != calls(before):
        return None
    errors = list(dict.fromkeys(text_of(r) for r in last_results))
    return f"the model sent the same failing call twice ({last.tool_calls[0]['name']}): {_excerpt(errors[0])}"


def _bound_error(max_iterations: int) -> str:
    return f"no final answer after {max_iterations} model turns"


def _text_call_error(state: Any) -> str | None:
    """The error of a loop that ended on a tool call written as text that was not run (None: it did not)."""
    why = state.get("text_call")
    if not why:
        return None
    history = state.get("messages") or []
    said = next((text_of(m) for m in reversed(history) if isinstance(m, AIMessage)), "")
    return f"the model's last reply was a tool call written as text, not run ({why}): {_excerpt(said)}"


def _known(tools: Sequence[BaseTool], binding: StepTools | None) -> frozenset[str]:
    """The tool names a call written as text may name: the tools the loop runs, and the graph's tools the step
    is not bound to (a call to one of those is refused by the gate, as a real call is)."""
    return frozenset(t.name for t in tools) | (binding.withheld if binding is not None else frozenset())


def _excerpt(text: str, limit: int = 200) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


@dataclass(frozen=True)
class _Changers:
    """The loop's tools that change things, and those of them marked idempotent."""

    changing: frozenset[str] = frozenset()
    idempotent: frozenset[str] = frozenset()


def _changers(tools: Sequence[BaseTool]) -> _Changers:
    changing = [t for t in tools if not is_read_only(t)]
    return _Changers(
        changing=frozenset(t.name for t in changing),
        idempotent=frozenset(t.name for t in changing if (t.metadata or {}).get(IDEMPOTENT_METADATA_KEY) is True),
    )


def _call_key(name: str, args: Any) -> str:
    return name + "\0" + json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)


def _all_repeated(state: _LoopState, calls: Sequence[ToolCall], changers: _Changers) -> bool:
    """Whether every call is to an idempotent tool and the same call, same arguments, as the last call that changed
    anything (any tool not marked read-only), which succeeded: running it again would change nothing."""
    if not all(c["name"] in changers.idempotent for c in calls):
        return False
    history = state.get("messages") or []
    made = {c.get("id"): c for m in history if isinstance(m, AIMessage) for c in m.tool_calls}
    last = None
    for m in history:
        if not isinstance(m, ToolMessage):
            continue
        call = made.get(m.tool_call_id)
        if call is not None and call["name"] in changers.changing:
            last = _call_key(call["name"], call.get("args")) if m.status != "error" else None
    return last is not None and all(_call_key(c["name"], c.get("args")) == last for c in calls)


def _call_repairs() -> Any:
    """The small-model adapter's call repair (`planmode.adapters.small_models.calls`), loaded when a loop with the
    adapter on first reads a reply: the core never imports it otherwise."""
    return importlib.import_module("planmode.adapters.small_models.calls")


def _nudge(problem: str, known: frozenset[str]) -> HumanMessage:
    tools = ", ".join(sorted(known)) or "none"
    return HumanMessage(
        content=(
            f"Your last reply looks like a tool call written as text; it was not run ({problem}). To use a tool, "
            f"call the tool through the tool-calling interface: do not write the call as text. Tools: {tools}. "
            "If you are done, answer in plain words."
        )
    )


_Update = dict[str, Any]


def _model_turn(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    settings: PlanModeContext,
    max_tool_calls: int | None,
    known: frozenset[str],
    whole_file: WholeFile | None = None,
    changers: _Changers = _Changers(),
    text_calls: bool = False,
) -> tuple[Callable[[Any], _Update], Callable[[Any], Awaitable[_Update]]]:
    """The loop's model turn, sync and async: call the model (with the tools bound); a failure sets ``error``;
    with ``text_calls``, a reply that is wholly a tool call written as text becomes a real call or a request to
    call properly (``known``: the tool names it may name); the tool-call budget cuts the reply's calls and marks
    it final."""
    bound = model.bind_tools(list(tools)) if tools else model

    def history(state: _LoopState) -> list[BaseMessage]:
        msgs: list[BaseMessage] = list(state.get("messages") or [])
        return normalize_messages(msgs) if settings.normalize_messages else msgs

    def call_model(state: _LoopState) -> _Update:
        msgs = fit_transcript(model, history(state), settings, tools)
        try:
            reply = bound.invoke(msgs)
        except GraphBubbleUp:  # a pause at the call's budget check (planmode.budget)
            raise
        except Exception as exc:  # the caller turns this into a failed attempt; an unreachable model raises
            return {"error": model_failure(exc, model, settings), "final": False}
        return _after_reply(state, reply, max_tool_calls, known, whole_file, changers, text_calls)

    async def acall_model(state: _LoopState) -> _Update:
        msgs = await afit_transcript(model, history(state), settings, tools)
        try:
            reply = await bound.ainvoke(msgs)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # as in call_model
            return {"error": model_failure(exc, model, settings), "final": False}
        return _after_reply(state, reply, max_tool_calls, known, whole_file, changers, text_calls)

    return call_model, acall_model


def _after_reply(
    state: _LoopState,
    reply: BaseMessage,
    max_tool_calls: int | None,
    known: frozenset[str] = frozenset(),
    whole_file: WholeFile | None = None,
    changers: _Changers = _Changers(),
    text_calls: bool = False,
) -> _Update:
    if not isinstance(reply, AIMessage):
        reply = AIMessage(content=text_of(reply))
    update: dict[str, Any] = {"turns": state.get("turns", 0) + 1, "final": False, "text_call": None}
    calls = list(reply.tool_calls or [])
    # Only the model's own reply, and only with the small-model adapter on (``text_calls``): never a tool's result.
    repairs = _call_repairs() if text_calls else None
    read = repairs.read_text_calls(text_of(reply)) if repairs is not None and not calls else None
    if whole_file is not None and repairs is not None:
        if calls:
            calls = [repairs.aliased(c, whole_file, known) for c in calls]
            reply = reply.model_copy(update={"tool_calls": calls})
        elif read is not None:
            read = replace(read, calls=[repairs.aliased_text(c, whole_file, known) for c in read.calls])
        elif whole_file.fenced and whole_file.path is not None:
            reply = cast(AIMessage, repairs.as_write(reply, whole_file))
            calls = list(reply.tool_calls)
    if read is not None and repairs is not None:
        reply, problem = cast(tuple[AIMessage, str | None], repairs.from_text(reply, read, known))
        if problem is not None:  # never the answer: the model is told to call the tool properly
            update.update(messages=[reply, _nudge(problem, known)], tool_names=[], text_call=problem)
            return update
        calls = list(reply.tool_calls)
    if calls and changers.idempotent and _all_repeated(state, calls, changers):
        reply = reply.model_copy(update={"tool_calls": [], "invalid_tool_calls": []})
        calls = []
    used = len(state.get("tool_names") or [])
    if max_tool_calls is not None and used + len(calls) >= max_tool_calls and calls:
        # The budget ends the loop after these calls: the calls past it are dropped from the reply (the
        # transcript is not sent to the model again) and the reply's text is the answer.
        kept = calls[: max(0, max_tool_calls - used)]
        reply = reply.model_copy(update={"tool_calls": kept})
        update["final"] = True
        calls = kept
    elif not calls:
        update["final"] = True
    update["messages"] = [reply]
    update["tool_names"] = [c["name"] for c in calls]
    return update


def _without_tools(
    messages: Sequence[BaseMessage],
    max_iterations: int,
    call_model: Callable[[Any], _Update],
    acall_model: Callable[[Any], Awaitable[_Update]],
    binding: StepTools | None = None,
) -> Generator[Call[_Update], _Update, _Update]:
    """The loop when there are no tools, run directly (yields each model turn, a `Call`, receives its update):
    the same turns, and a call the model makes anyway gets the `ToolNode`'s unknown-tool error, as in the graph
    (or, for a tool of the graph the step is not bound to, the same refusal, recorded)."""
    state: dict[str, Any] = {
        "messages": list(messages),
        "turns": 0,
        "tool_names": [],
        "refused": [],
        "error": None,
        "final": False,
        "text_call": None,
    }
    while True:
        update = yield Call(partial(call_model, state), partial(acall_model, state))
        state["messages"] += update.pop("messages", [])
        state["tool_names"] += update.pop("tool_names", [])
        state.update(update)
        last = state["messages"][-1]
        if state["text_call"] and not state["error"]:  # the model was told to call the tool properly
            if state["turns"] >= max_iterations:
                state["error"] = _text_call_error(state)
                return state
            continue
        if state["error"] or not (isinstance(last, AIMessage) and last.tool_calls):
            return state
        for c in last.tool_calls:
            if binding is not None and c["name"] in binding.withheld:
                state["messages"].append(_refusal_message(binding, c["name"], c.get("id") or ""))
                state["refused"].append(c["name"])
                continue
            state["messages"].append(
                ToolMessage(
                    content=INVALID_TOOL_NAME_ERROR_TEMPLATE.format(requested_tool=c["name"], available_tools=""),
                    tool_call_id=c.get("id") or "",
                    name=c["name"],
                    status="error",
                )
            )
        if state["final"]:
            return state
        if state["turns"] >= max_iterations:
            state["error"] = _bound_error(max_iterations)
            return state
