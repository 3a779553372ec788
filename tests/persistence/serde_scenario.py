"""One planmode run on a stock LangGraph saver, and what the saver gives back (`test_serde_stock_savers`).

Run as a script so that ``LANGGRAPH_STRICT_MSGPACK`` is read when LangGraph is imported (it is read once, at
import, and the savers' default serializer is built then)::

    python tests/persistence/serde_scenario.py KIND[,KIND...] TARGET

KIND is memory, sqlite, async_sqlite, postgres, async_postgres or old; TARGET a folder for the SQLite files,
(old.sqlite in it: a copy of the old database), or a postgresql:// URL. The last line of stdout is the JSON reports.

The run: a four-step plan is approved by a human (the interrupt is answered through a *new* saver on the
same database, as a new process would), one step fails verification, reflect asks for a patch, the patch
adds a step (its ``status`` must be recorded as ignored: nothing of an update may be lost on the way through
a checkpoint), and every step ends done. Every checkpoint is then read back through a new stock saver: raw
(``list``: channel values and pending writes) and through the graph (``get_state_history``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import sys
import uuid
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

TASK = "Set up the service: write the config, then build it, then deploy it"
PLAN = {
    "title": "Service",
    "steps": [
        {"id": "a", "description": "write the config"},
        {"id": "c", "description": "write the docs"},
        {"id": "b", "description": "build the service", "dependencies": ["a"]},
        {"id": "d", "description": "deploy the service", "dependencies": ["b"]},
    ],
}
FIX_PATCH = {
    "reason": "b needs its toolchain installed first",
    "add_steps": [
        {"id": "fix_b", "description": "install the toolchain", "dependencies": ["a"], "after": "a", "status": "done"}
    ],
    "update_steps": [{"id": "b", "dependencies": ["a", "fix_b"]}],
}
NEEDS_ADJUSTMENT = {"assessment": "needs_adjustment", "reasoning": "b lacks a toolchain", "guidance": "add a step"}
KINDS = ("memory", "sqlite", "async_sqlite", "postgres", "async_postgres")


class Recorder(logging.Handler):
    """Every log record of level WARNING or above (LangGraph's serializer logs through ``logging``)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def stock_saver(kind: str, target: str, loop: asyncio.AbstractEventLoop, memory: list[Any]) -> Iterator[Any]:
    """A stock saver of ``kind`` on ``target``, with its default serializer (nothing of planmode's)."""
    if kind == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        if not memory:
            memory.append(InMemorySaver())
        yield memory[0]  # "reopening" memory is the same saver: there is nothing else to open
    elif kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(target, check_same_thread=False)
        try:
            yield SqliteSaver(conn)
        finally:
            conn.close()
    elif kind == "async_sqlite":
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async def open_() -> AsyncSqliteSaver:
            return AsyncSqliteSaver(await aiosqlite.connect(target))  # made in the loop it runs on

        asaver = loop.run_until_complete(open_())
        aconn = asaver.conn
        try:
            yield asaver
        finally:
            loop.run_until_complete(aconn.close())
    elif kind == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(target) as saver:
            saver.setup()
            yield saver
    elif kind == "async_postgres":
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        cm = AsyncPostgresSaver.from_conn_string(target)
        saver = loop.run_until_complete(cm.__aenter__())
        try:
            loop.run_until_complete(saver.setup())
            yield saver
        finally:
            loop.run_until_complete(cm.__aexit__(None, None, None))
    else:
        raise ValueError(f"unknown saver kind {kind!r}; one of {', '.join(KINDS)}")


def planmode_objects(value: Any, path: str = "") -> list[str]:
    """Where in ``value`` an object of a planmode class sits (an empty list: plain data only)."""
    if type(value).__module__.startswith("planmode"):
        return [f"{path}: {type(value).__module__}.{type(value).__name__}"]
    found: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            found += planmode_objects(v, f"{path}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            found += planmode_objects(v, f"{path}[{i}]")
    elif hasattr(value, "arg") and hasattr(value, "node"):  # a Send
        found += planmode_objects(value.arg, f"{path}<send {value.node}>")
    elif hasattr(value, "value") and hasattr(value, "id") and type(value).__name__ == "Interrupt":
        found += planmode_objects(value.value, f"{path}<interrupt>")
    elif hasattr(value, "update") and hasattr(value, "goto") and hasattr(value, "resume"):  # a Command
        found += planmode_objects([value.update, value.goto, value.resume], f"{path}<command>")
    return found


def compared_with_live(snapshots: list[Any], live: dict[str, dict[str, Any]]) -> tuple[int, int, int]:
    """How many of ``snapshots`` (read back) were compared with the values the run held (``live``, by checkpoint id),
    how many mismatched (or held a plan or an outcome of the wrong type), and how many of those compared held an
    outcome."""
    from planmode.state import Plan
    from planmode.state.graph_state import StepOutcome

    compared = mismatched = 0
    outcomes_seen = 0
    for snap in snapshots:
        plan = snap.values.get("plan")
        outcomes = snap.values.get("step_outcomes") or {}
        if plan is not None and not isinstance(plan, Plan):
            mismatched += 1
        if any(not isinstance(o, StepOutcome) for o in outcomes.values()):
            mismatched += 1
        original = live.get(snap.config["configurable"]["checkpoint_id"])
        if original is None:
            continue
        compared += 1
        outcomes_seen += bool(outcomes)
        if plan != original.get("plan") or outcomes != (original.get("step_outcomes") or {}):
            mismatched += 1
    return compared, mismatched, outcomes_seen


def typed_objects(tuples: list[Any]) -> list[str]:
    """Where a planmode object (not JSON data) sits in the channel values or the pending writes of ``tuples``."""
    typed = []
    for t in tuples:
        typed += planmode_objects(t.checkpoint["channel_values"], f"checkpoint {t.checkpoint['id']}")
        typed += planmode_objects(list(t.pending_writes or []), f"writes of {t.checkpoint['id']}")
    return typed


def run(kind: str, target: str) -> dict[str, Any]:
    """The scenario on ``kind``; the report the test checks."""
    from langgraph.checkpoint.serde import _msgpack
    from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener
    from langgraph.types import Command

    from planmode.graph import build_graph
    from planmode.state import Plan, Step
    from planmode.testing.scripted import PurposeScript, ScriptedChatModel

    events: list[str] = []
    unregister = register_serde_event_listener(
        lambda e: events.append(f"{e.get('kind')} {e.get('module')}.{e.get('name')}")
    )
    recorder = Recorder()
    logging.getLogger().addHandler(recorder)
    is_async = kind.startswith("async")
    loop = asyncio.new_event_loop()
    memory: list[Any] = []
    runs: dict[str, int] = {}

    def execute(step: Step, ctx: Any) -> str:
        runs[step.id] = runs.get(step.id, 0) + 1
        return f"{step.id} finished"

    def verify(step: Step, output: str, ctx: Any) -> tuple[bool, str]:
        if step.id == "b" and "fix_b" not in runs:
            return False, "the build failed: no toolchain"
        return True, ""

    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, reflect=NEEDS_ADJUSTMENT, patch=FIX_PATCH))

    def graph_on(saver: Any) -> Any:
        return build_graph(model, executor=execute, verifier=verify, checkpointer=saver)

    live: dict[str, dict[str, Any]] = {}  # checkpoint id -> the values as the run held them (never serialized)

    def drive(graph: Any, value: Any, config: dict[str, Any], **kwargs: Any) -> None:
        async def astream() -> None:
            async for part in graph.astream(value, config, stream_mode="checkpoints", **kwargs):
                live[part["config"]["configurable"]["checkpoint_id"]] = part["values"]

        if is_async:
            loop.run_until_complete(astream())
        else:
            for part in graph.stream(value, config, stream_mode="checkpoints", **kwargs):
                live[part["config"]["configurable"]["checkpoint_id"]] = part["values"]

    def state(graph: Any, config: dict[str, Any]) -> Any:
        return loop.run_until_complete(graph.aget_state(config)) if is_async else graph.get_state(config)

    def history(graph: Any, config: dict[str, Any]) -> list[Any]:
        async def collect() -> list[Any]:
            return [s async for s in graph.aget_state_history(config)]

        return loop.run_until_complete(collect()) if is_async else list(graph.get_state_history(config))

    def raw(saver: Any, config: dict[str, Any]) -> list[Any]:
        async def collect() -> list[Any]:
            return [t async for t in saver.alist(config)]

        return loop.run_until_complete(collect()) if is_async else list(saver.list(config))

    config: dict[str, Any] = {"configurable": {"thread_id": f"serde-{uuid.uuid4().hex[:8]}"}}
    report: dict[str, Any] = {"strict": _msgpack.STRICT_MSGPACK_ENABLED}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ExitStack() as stack:
            first = stack.enter_context(stock_saver(kind, target, loop, memory))
            drive(graph_on(first), {"messages": [("user", TASK)]}, config, context={"mode": "plan", "max_attempts": 1})
            shown = state(graph_on(first), config).interrupts[0].value
        # a new saver on the same database answers the approval and runs to the end (a resume)
        with ExitStack() as stack:
            second = stack.enter_context(stock_saver(kind, target, loop, memory))
            drive(graph_on(second), Command(resume={"action": "approve", "revision": shown["revision"]}), config)
            # the repair adds a step: the approval policy decides it (here a human, approving it; issue 43)
            again = state(graph_on(second), config).interrupts[0].value
            drive(graph_on(second), Command(resume={"action": "approve", "revision": again["revision"]}), config)
        # a third one reads every checkpoint back
        with ExitStack() as stack:
            reader = stack.enter_context(stock_saver(kind, target, loop, memory))
            snapshots = history(graph_on(reader), config)
            tuples = raw(reader, config)
            final = state(graph_on(reader), config).values
    logging.getLogger().removeHandler(recorder)
    unregister()
    loop.close()

    typed = typed_objects(tuples)
    compared, mismatched, outcomes_seen = compared_with_live(snapshots, live)
    plan = final["plan"]
    report.update(
        events=events,
        logged=[m for m in recorder.messages if "unregistered" in m or "Blocked" in m or "serializ" in m.lower()],
        warnings=[str(w.message) for w in caught],
        typed_in_checkpoints=typed[:20],
        checkpoints=len(snapshots),
        compared=compared,
        mismatched=mismatched,
        outcomes_seen=outcomes_seen,
        status=final["status"],
        plan_is_plan=isinstance(plan, Plan),
        statuses={s.id: s.status.value for s in plan.steps},
        version=plan.version,
        warnings_in_history=[w for r in plan.history for w in r.warnings],
        runs=runs,
        shown_steps=[s["id"] for s in shown["plan"]["steps"]],
    )
    return report


def run_old(path: str) -> dict[str, Any]:
    """Read and resume the threads of ``tests/persistence/data/old_checkpoints.sqlite`` (a copy at ``path``), written by
    planmode before its checkpoints were JSON data: through a plain stock `SqliteSaver` and through
    planmode's own `sqlite_checkpointer`."""
    from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.types import Command

    from planmode.graph import build_graph
    from planmode.persistence import sqlite_checkpointer
    from planmode.state import Plan
    from planmode.state.graph_state import StepOutcome
    from planmode.testing.scripted import PurposeScript, ScriptedChatModel

    events: list[str] = []
    unregister = register_serde_event_listener(lambda e: events.append(f"{e.get('kind')} {e.get('name')}"))
    runs: dict[str, int] = {}

    def execute(step: Any, ctx: Any) -> str:
        runs[step.id] = runs.get(step.id, 0) + 1
        return f"{step.id} finished"

    def verify(step: Any, output: str, ctx: Any) -> tuple[bool, str]:
        return (False, "no toolchain") if step.id == "b" and "fix_b" not in runs else (True, "")

    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, reflect=NEEDS_ADJUSTMENT, patch=FIX_PATCH))
    report: dict[str, Any] = {}

    def read_all(graph: Any, label: str) -> None:
        bad = 0
        count = 0
        for thread in ("old-awaiting", "old-done"):
            for snap in graph.get_state_history({"configurable": {"thread_id": thread}}):
                count += 1
                plan = snap.values.get("plan")
                outcomes = snap.values.get("step_outcomes") or {}
                bad += plan is not None and not isinstance(plan, Plan)
                bad += any(not isinstance(o, StepOutcome) for o in outcomes.values())
        done = graph.get_state({"configurable": {"thread_id": "old-done"}}).values["plan"]
        report[label] = {
            "checkpoints": count,
            "not_typed": bad,
            "done_statuses": {s.id: s.status.value for s in done.steps},
            "done_version": done.version,
        }

    def graph_on(saver: Any) -> Any:
        return build_graph(model, executor=execute, verifier=verify, checkpointer=saver)

    own = sqlite_checkpointer(path)
    read_all(graph_on(own), "planmode_saver")
    report["planmode_saver"]["events"] = list(events)
    own.conn.close()

    conn = sqlite3.connect(path, check_same_thread=False)
    stock = SqliteSaver(conn)
    read_all(graph_on(stock), "stock_saver")
    # resume the old thread that waits for its approval, with this version of planmode, on the stock saver
    config = {"configurable": {"thread_id": "old-awaiting"}}
    graph = graph_on(stock)
    shown = graph.get_state(config).interrupts[0].value
    events.clear()
    graph.invoke(Command(resume={"action": "approve", "revision": shown["revision"]}), config)
    again = graph.get_state(config).interrupts[0].value  # the repair adds a step: a human decides it (issue 43)
    graph.invoke(Command(resume={"action": "approve", "revision": again["revision"]}), config)
    after = graph.get_state(config).values
    newest = next(iter(stock.list(config)))
    report["resumed"] = {
        "status": after["status"],
        "statuses": {s.id: s.status.value for s in after["plan"].steps},
        "runs": runs,
        "newest_checkpoint_typed": planmode_objects(newest.checkpoint["channel_values"]),
    }
    conn.close()
    unregister()
    return report


def main(argv: list[str]) -> None:
    """``serde_scenario.py KIND[,KIND...] TARGET``: one report per kind, as a JSON object by kind.

    TARGET is a folder for the SQLite kinds (one file per kind in it; for ``old``, ``old.sqlite``: a copy of
    ``tests/persistence/data/old_checkpoints.sqlite``), or a postgresql:// URL for the PostgreSQL kinds."""
    kinds, target = argv[1].split(","), argv[2] if len(argv) > 2 else ""
    out: dict[str, Any] = {}
    for kind in kinds:
        where = f"{target}/{kind}.sqlite" if kind in ("sqlite", "async_sqlite", "old") else target
        try:
            out[kind] = run_old(where) if kind == "old" else run(kind, where)
        except Exception as exc:  # the test shows what went wrong instead of a bare exit code
            import traceback

            out[kind] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv)
