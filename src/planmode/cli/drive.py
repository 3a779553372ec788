"""Driving a run from the terminal: stream progress events, answer approval interrupts, show the result.

The graph runs in a worker thread; the main thread shows what happens (a Rich live status line on a
terminal, plain lines otherwise) and stays responsive to Ctrl-C: the first one asks the run to stop at the
next super-step and waits a moment; if a model call is still in flight it gives up waiting (the run is
checkpointed and resumable), and a second Ctrl-C forces at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command
from rich.console import RenderableType
from rich.live import Live
from rich.text import Text

from planmode.cli.ui import console, error_text, plan_table, render_event, unicode_ok
from planmode.errors import ThreadNotFoundError
from planmode.persistence.lease import thread_lease
from planmode.state.models import Plan

if TYPE_CHECKING:
    from langgraph.pregel import Pregel
    from langgraph.types import StateSnapshot

__all__ = ["Interrupted", "Watcher", "drive", "emit_json", "once", "require_thread", "show_result"]

Approver = Callable[[dict[str, Any]], dict[str, Any] | None]

#: Seconds the first Ctrl-C waits for the run to reach a super-step boundary before leaving it there.
STOP_GRACE = 1.5

_WRITE_TOOLS = ("write_file", "edit_file")


class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run; ``hard`` when the worker was still busy (a model call in flight)."""

    def __init__(self, hard: bool) -> None:
        super().__init__("interrupted")
        self.hard = hard


def require_thread(graph: Pregel[Any, Any, Any, Any], cfg: RunnableConfig) -> StateSnapshot:
    """The thread's current state; `ThreadNotFoundError` when it has no checkpoint."""
    state = graph.get_state(cfg)
    if state.created_at is None:
        raise ThreadNotFoundError(f"no run with thread id {cfg['configurable']['thread_id']!r} in this database")
    return state


class Watcher(BaseCallbackHandler):
    """Collects what the run is doing from LangChain callbacks (model calls, tool calls), thread-safely."""

    raise_error = False

    def __init__(self, inbox: queue.Queue[tuple[str, Any]]) -> None:
        self.inbox = inbox
        self._calls: dict[UUID, tuple[str, dict[str, Any]]] = {}
        self.changed: list[str] = []

    def on_chat_model_start(
        self, serialized: Any, messages: Any, *, run_id: UUID, metadata: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        self.inbox.put(("model", (metadata or {}).get("langgraph_node", "")))

    def on_chain_start(
        self, serialized: Any, inputs: Any, *, run_id: UUID, metadata: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        node = (metadata or {}).get("langgraph_node")
        if node and kwargs.get("name") == node:  # a graph node starts (not a runnable inside it)
            self.inbox.put(("model", node))

    def on_tool_start(
        self,
        serialized: Any,
        input_str: str,
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        name = str((serialized or {}).get("name") or kwargs.get("name") or "tool")
        args = inputs if isinstance(inputs, dict) else {}
        self._calls[run_id] = (name, args)
        self.inbox.put(("tool", ((metadata or {}).get("langgraph_node", ""), name, args)))

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        name, args = self._calls.pop(run_id, ("", {}))
        if name in _WRITE_TOOLS and getattr(output, "status", "success") != "error":
            path = str(args.get("path", ""))
            if path and path not in self.changed:
                self.changed.append(path)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._calls.pop(run_id, None)


def _tool_line(node: str, name: str, args: Mapping[str, Any]) -> Text:
    where = "exploring" if node == "plan" else "tool"
    detail = str(args.get("path") or args.get("pattern") or "")
    text = Text(f"  {where}: ", style="dim")
    text.append(name, style="cyan")
    if detail:
        text.append(" ")
        text.append(detail)
    return text


_NODE_ACTIVITY = {
    "detect": "deciding whether the task needs a plan",
    "plan": "planning",
    "respond": "answering",
    "execute_step": "executing",
    "verify": "verifying",
    "reflect": "reflecting on what went wrong",
    "patch": "repairing the plan",
    "finalize": "writing the final answer",
}


class Progress:
    """What is happening now: a live status line on a terminal, plain lines without one (or with NO_COLOR, or
    on TERM=dumb)."""

    def __init__(self, graph: Any, cfg: RunnableConfig, mode: str = "auto", json_lines: bool = False) -> None:
        self.graph = graph
        self.cfg = cfg
        self.mode = mode  # a forced mode (plan, direct): nothing is decided at detect, so it is not said
        self.json_lines = json_lines  # each event also as a JSON line on stdout (`emit_json`)
        # TERM=dumb: rich draws no live line there (it cannot move the cursor), so plain lines, as without a terminal
        self.live_mode = (
            console.is_terminal and not console.is_dumb_terminal and not os.environ.get("NO_COLOR") and not json_lines
        )
        self.activity = "starting (loading the model client)"
        self.since = time.monotonic()
        self.started: dict[str, float] = {}
        self.total = 0
        self.done = 0
        self.live: Live | None = None
        self._last_plain = ""

    def __enter__(self) -> Progress:
        self._refresh_total()  # a resumed run has its plan already (no plan event comes): "step 2/3", not "2/?"
        if self.live_mode:
            self.live = Live(self._status(), console=console, transient=True, refresh_per_second=4)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)
            self.live = None

    def _status(self) -> Text:
        spin = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏" if unicode_ok() else "|/-\\"
        elapsed = time.monotonic() - self.since
        text = Text(f"{spin[int(elapsed * 8) % len(spin)]} ", style="cyan")
        text.append(self.activity)
        text.append(f"  {elapsed:.0f}s", style="dim")
        return text

    def tick(self) -> None:
        if self.live is not None:
            self.live.update(self._status())

    def set(self, activity: str) -> None:
        if activity == self.activity:
            return
        self.activity = activity
        self.since = time.monotonic()
        if self.live is not None:
            self.live.update(self._status())
        elif activity != self._last_plain and not activity.startswith(("executing", "exploring")):
            # plain lines: the events and tool lines already say what executes; only the silent phases are named
            self._last_plain = activity
            console.print(Text(f"... {activity}", style="dim"))

    def print(self, line: RenderableType) -> None:
        console.print(line)  # rich's Live keeps its status line below printed lines

    def _refresh_total(self) -> None:
        try:
            plan = self.graph.get_state(self.cfg).values.get("plan")
        except Exception:  # no checkpoint yet (a new thread): the plan event sets the total
            return
        if isinstance(plan, Plan):
            self.total = len(plan.steps)
            self.done = sum(1 for s in plan.steps if s.status.value in ("done", "skipped"))

    def event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if self.json_lines:
            emit_json({k: v for k, v in event.items() if k != "source"})
        if kind == "plan_approved" and event.get("message") == "approved automatically":
            plan = self.graph.get_state(self.cfg).values.get("plan")  # approved by the run's policy: show it first
            if isinstance(plan, Plan):
                self.print(plan_table(plan))
        if kind == "direct_answer":  # the answer itself is printed once, under "Answer", when the run ends
            self.print(render_event({**event, "message": "the task needs no plan (the answer follows)"}))
        else:
            self.print(render_event(event))
        if kind in ("plan_created", "plan_patched", "plan_approved"):
            self._refresh_total()
        step = str(event.get("step_id") or "")
        if kind == "step_started":
            self.started[step] = time.monotonic()
            running = ", ".join(self.started)
            self.set(f"executing step {min(self.done + 1, max(self.total, 1))}/{self.total or '?'}: {running}")
        elif kind in ("step_completed", "step_failed"):
            files = (event.get("data") or {}).get("files")
            if isinstance(files, list) and files:  # the files the step changed (planmode.persistence.changes)
                self.print(Text(f"  {step} changed: ", style="dim") + Text(", ".join(self._shown(files))))
            self.started.pop(step, None)
            if kind == "step_completed":
                self.done += 1
            running = ", ".join(self.started)
            self.set(f"executing ({self.done}/{self.total or '?'} done)" + (f": {running}" if running else ""))

    def _shown(self, files: list[Any]) -> list[str]:
        """Paths relative to the run's workspace (or the current folder) when inside it."""
        from planmode.context import settings_dict

        settings = settings_dict(self.graph.get_state(self.cfg).values.get("settings"))
        root = os.path.realpath(str(settings.get("workspace") or os.getcwd()))
        from planmode.cli.files import one_line

        return [one_line(os.path.relpath(str(f), root) if str(f).startswith(root + os.sep) else str(f)) for f in files]

    def model(self, node: str) -> None:
        if node == "execute_step" and self.started:
            return  # "executing step k/n" already says it
        if node == "detect" and self.mode != "auto":
            return  # --mode plan or direct: the node only passes the forced route on
        if node in _NODE_ACTIVITY:
            self.set(_NODE_ACTIVITY[node])

    def tool(self, node: str, name: str, args: Mapping[str, Any]) -> None:
        self.print(_tool_line(node, name, args))
        if node == "plan":
            self.set(f"exploring with {name}")


def emit_json(record: Mapping[str, Any]) -> None:
    """One JSON object on one line of stdout, flushed (``run --json``: a CI reads each event as it comes). Text
    from a model or a person is data in it (JSON-escaped)."""
    sys.stdout.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def _force_exit_on_sigint(hint: str | None) -> None:
    """From now on, Ctrl-C prints the resume command and ends the process at once (no clean-up, no waiting
    for a thread in a model call): the run is resumable from its last checkpoint."""

    def force(signum: int, frame: Any) -> None:
        msg = "\nInterrupted. The run is checkpointed" + (f"; continue it with: {hint}" if hint else ".") + "\n"
        encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
        with contextlib.suppress(OSError):
            sys.stdout.flush()
            os.write(sys.stdout.fileno(), msg.encode(encoding, "replace"))
        os._exit(130)

    with contextlib.suppress(ValueError):  # not the main thread (an embedding caller): keep their handler
        signal.signal(signal.SIGINT, force)


def _stream(
    graph: Any,
    inp: Any,
    cfg: RunnableConfig,
    context: Any,
    progress: Progress,
    watcher: Watcher,
    hint: str | None = None,
) -> None:
    inbox = watcher.inbox
    stop = threading.Event()
    run_cfg: RunnableConfig = {**cfg, "callbacks": [watcher]}

    def work() -> None:
        try:
            for mode, chunk in graph.stream(inp, run_cfg, context=context, stream_mode=["custom", "updates"]):
                if mode == "custom" and isinstance(chunk, dict) and chunk.get("source") == "planmode":
                    inbox.put(("event", chunk))
                if stop.is_set():
                    break
        except BaseException as exc:  # handed to the main thread, which raises it
            inbox.put(("error", exc))
        finally:
            inbox.put(("done", None))

    worker = threading.Thread(target=work, name="planmode-run", daemon=True)
    worker.start()
    try:
        while True:
            try:
                kind, item = inbox.get(timeout=0.25)
            except queue.Empty:
                progress.tick()
                continue
            if kind == "event":
                progress.event(item)
            elif kind == "tool":
                progress.tool(*item)
            elif kind == "model":
                progress.model(item)
            elif kind == "error":
                raise item
            elif kind == "done":
                return
    except KeyboardInterrupt:
        stop.set()
        _force_exit_on_sigint(hint)
        progress.__exit__()
        console.print(Text("\nStopping... (press Ctrl-C again to stop at once)", style="yellow"))
        worker.join(STOP_GRACE)
        raise Interrupted(hard=worker.is_alive()) from None


def drive(
    graph: Any,
    inp: Any,
    cfg: RunnableConfig,
    *,
    context: Any,
    approver: Approver,
    resume_hint: str | None = None,
    watcher: Watcher | None = None,
    json_lines: bool = False,
) -> str:
    """Run until the graph finishes or a human quits at the approval prompt; return the run status.

    ``resume_hint`` is the complete command that continues the run (printed when it is left for later).
    ``watcher`` collects the files the tools changed. ``json_lines``: each progress event is also written to
    stdout as a JSON line (`emit_json`). The thread's lease is held throughout: a second process on the same
    thread gets `ThreadBusyError`.
    """
    with thread_lease(graph.checkpointer, cfg["configurable"]["thread_id"]):
        return _drive(
            graph,
            inp,
            cfg,
            context=context,
            approver=approver,
            resume_hint=resume_hint,
            watcher=watcher or Watcher(queue.Queue()),
            json_lines=json_lines,
        )


def _mode_of(graph: Any, cfg: RunnableConfig, context: Any) -> str:
    """The run's mode setting (auto, plan, direct): this command's settings, else the thread's stored ones."""
    from planmode.context import settings_dict

    given = context.get("mode") if isinstance(context, Mapping) else getattr(context, "mode", None)
    if given is None:
        given = settings_dict(graph.get_state(cfg).values.get("settings")).get("mode")
    return str(given or "auto")


def _drive(
    graph: Any,
    inp: Any,
    cfg: RunnableConfig,
    *,
    context: Any,
    approver: Approver,
    resume_hint: str | None,
    watcher: Watcher,
    json_lines: bool = False,
) -> str:
    tid = cfg["configurable"]["thread_id"]
    if inp is None and _model_unavailable(graph.get_state(cfg)) is not None:
        inp = Command(resume={"action": "retry"})  # resuming a run paused for its model: try the model again
    mode = _mode_of(graph, cfg, context)
    while True:
        with Progress(graph, cfg, mode, json_lines) as progress:
            _stream(graph, inp, cfg, context, progress, watcher, resume_hint or f"planmode resume {tid}")
        state = graph.get_state(cfg)
        paused = _model_unavailable(state)
        if paused is not None:  # not an approval: stop, resumable
            _print_pause(paused, resume_hint or f"planmode resume {tid}")
            return "model_unavailable"
        if state.interrupts:
            payload = state.interrupts[0].value
            answer = approver(payload)
            if answer is None and isinstance(payload, dict) and payload.get("type") == "planmode.budget":
                console.print(Text.assemble(("Paused at the budget. Resume with: ", "yellow"), resume_hint or ""))
                return "over_budget"
            if answer is None:
                console.print(
                    Text.assemble(("Left for later. Resume with: ", "yellow"), resume_hint or f"planmode resume {tid}"),
                    soft_wrap=True,
                )
                return "awaiting_approval"
            inp = Command(resume=answer)
            continue
        return str(state.values.get("status") or "unknown")


def _print_pause(paused: Mapping[str, Any], hint: str) -> None:
    """Why the run paused for its model, and the command that resumes it."""
    if paused.get("reason") == "unauthorized":  # a bad API key: not the model's absence, and not the plan's fault
        console.print(Text(f"Not authorised: {paused.get('error')}", style="red"), soft_wrap=True)
        console.print(
            Text.assemble(
                "The run is paused (nothing was counted against the plan or its steps). Set a valid "
                "OPENAI_API_KEY, then resume with: ",
                hint,
            ),
            soft_wrap=True,
        )
        return
    console.print(Text(f"Model unavailable: {paused.get('error')}", style="red"))
    console.print(Text.assemble("The run is paused. Resume with: ", hint), soft_wrap=True)


def _model_unavailable(state: Any) -> dict[str, Any] | None:
    """The payload of a pending model_unavailable interrupt (planmode.nodes.model_unavailable), if any."""
    for item in state.interrupts:
        if isinstance(item.value, dict) and item.value.get("type") == "planmode.model_unavailable":
            return item.value
    return None


def once(error: str) -> str:
    """An error whose parts (planmode joins the error of each attempt with `` | ``, after ``what failed: ``) are
    each said once."""
    kept: list[str] = []
    for part in (p.strip() for p in error.split(" | ")):
        if not any(k == part or k.endswith(": " + part) for k in kept):
            kept.append(part)
    return " | ".join(kept)


def show_result(graph: Any, cfg: RunnableConfig, *, changed: list[str] | None = None) -> None:
    """Print the final plan, answer, report and changed files of a thread."""
    values = graph.get_state(cfg).values
    plan = values.get("plan")
    if isinstance(plan, Plan) and plan.version > 0:
        console.print(plan_table(plan))
    messages = values.get("messages") or []
    status = values.get("status")
    error = str(values.get("error") or "") if status == "failed" else ""
    if error:
        console.print(error_text(once(error), label="failed:"))
    if messages and status in ("completed", "answered", "failed", "cancelled"):
        content = messages[-1].content
        content = content if isinstance(content, str) else str(content)
        if not (error and error in content):  # a failed run's answer that only repeats the error: said once
            console.print(Text("\nAnswer", style="bold"))
            console.print(Text(content))
    report = values.get("report")
    if report:
        console.print(
            Text(
                f"\nReport: status={report.get('status')} done={len(report.get('done', []))} "
                f"failed={len(report.get('failed', []))} skipped={len(report.get('skipped', []))} "
                f"patches={len(report.get('patches', []))} edits={len(report.get('edits', []))} "
                f"replans={len(report.get('replans', []))} reflections={report.get('reflections')}"
            )
        )
    if values.get("usage"):
        from planmode.cli.budget import usage_line

        console.print(usage_line(values))
    if changed is None:
        return
    from planmode.cli.files import changed_by_step

    by_step = changed_by_step(graph, cfg)  # a line per step, from the recorded changes (a SQLite database)
    for step_id, files in by_step.items():
        console.print(Text(f"Files changed by step {step_id}: ", style="bold") + Text(", ".join(files)))
    if changed and not by_step:
        console.print(Text("Files changed: ", style="bold") + Text(", ".join(changed)))
