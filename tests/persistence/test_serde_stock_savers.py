"""planmode's checkpoints on every stock LangGraph saver, with ``LANGGRAPH_STRICT_MSGPACK`` off and on.

A run through approval, a failed step, a patch and execution to the end, resumed through a new saver, then
every checkpoint read back: no "unregistered type" (or "blocked") report from LangGraph's serializer, no
planmode object stored anywhere (channel values, pending writes, ``Send`` tasks), and the plan and step
outcomes read back equal to the values the run held. LangGraph reads the strict-mode variable once, when
it is imported, so each mode runs in its own process (``tests/persistence/serde_scenario.py``).

Also: checkpoints written before (``tests/persistence/data/old_checkpoints.sqlite``, planmode objects inside) still load
and resume; planmode embedded in a parent graph with a plain ``SqliteSaver`` reads back silently.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command

from planmode.graph import build_graph
from planmode.graph.pipeline import to_data
from planmode.state import Plan, Step, StepStatus, StepTransition
from planmode.state.channel import PlanChannel
from planmode.state.graph_state import StepOutcome, StepOutcomesChannel
from planmode.state.models import NewStep, PlanPatch
from planmode.state.reducer import PlanUpdate
from planmode.testing.scripted import PurposeScript, ScriptedChatModel
from tests.persistence.serde_scenario import planmode_objects

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "serde_scenario.py"
OLD_DB = HERE / "data" / "old_checkpoints.sqlite"

STRICT = {"off": "false", "on": "true"}
ALL_DONE = dict.fromkeys(["a", "fix_b", "c", "b", "d"], "done")


def scenario(kinds: str, target: str, strict: str) -> dict[str, dict[str, Any]]:
    """Run ``serde_scenario.py`` in a new process with the strict mode set; its JSON reports by kind."""
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": STRICT[strict]}
    proc = subprocess.run(
        [sys.executable, str(SCENARIO), kinds, target], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    reports: dict[str, dict[str, Any]] = json.loads(proc.stdout.strip().splitlines()[-1])
    for kind, report in reports.items():
        assert "error" not in report, f"{kind}: {report.get('traceback')}"
    return reports


class Reports:
    """The reports of one process per strict mode and group of savers (a process imports LangGraph once)."""

    def __init__(self, tmp: pytest.TempPathFactory) -> None:
        self.tmp = tmp
        self.done: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}

    def get(self, kinds: str, strict: str, url: str | None = None) -> dict[str, dict[str, Any]]:
        """The reports of ``kinds`` (SQLite files in a new folder, with a copy of the old database; or ``url``)."""
        if (kinds, strict) not in self.done:
            target = url
            if target is None:
                folder = self.tmp.mktemp(f"serde-{strict}")
                shutil.copyfile(OLD_DB, folder / "old.sqlite")
                target = str(folder)
            self.done[kinds, strict] = scenario(kinds, target, strict)
        return self.done[kinds, strict]


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Reports:
    return Reports(tmp_path_factory)


def check_round_trip(report: dict[str, Any], strict: str) -> None:
    assert report["strict"] is (strict == "on")  # the process really ran in that mode
    # nothing reported by LangGraph's serializer, logged or warned
    assert report["events"] == []
    assert report["logged"] == []
    assert report["warnings"] == []
    # plain data only, everywhere in every checkpoint and every pending write
    assert report["typed_in_checkpoints"] == []
    # every checkpoint reads back as the values the run held: the plan a Plan, the outcomes StepOutcomes
    assert report["checkpoints"] >= 20
    assert report["compared"] >= report["checkpoints"] - 1
    assert report["mismatched"] == 0
    assert report["outcomes_seen"] >= 3  # the attempts waiting for verify were checkpointed and compared
    # the run went through approval (resumed by a new saver), a failure, a patch, and to the end
    assert report["shown_steps"] == ["a", "c", "b", "d"]
    assert report["status"] == "completed" and report["plan_is_plan"]
    assert report["statuses"] == ALL_DONE and report["version"] == 2
    assert report["runs"] == {"a": 1, "c": 1, "b": 2, "fix_b": 1, "d": 1}
    # nothing of an update was lost on its way through a pending write: the patch's ignored status is recorded
    assert report["warnings_in_history"] == ["new step 'fix_b' was given status 'done'; new steps start pending"]


LOCAL = "memory,sqlite,async_sqlite,old"  # old last: LangGraph logs each type once per process
POSTGRES = "postgres,async_postgres"


@pytest.mark.parametrize("strict", ["off", "on"])
@pytest.mark.parametrize("kind", ["memory", "sqlite", "async_sqlite"])
def test_a_run_round_trips_through_a_stock_saver(kind: str, strict: str, reports: Reports) -> None:
    check_round_trip(reports.get(LOCAL, strict)[kind], strict)


@pytest.fixture(scope="module")
def fresh_pg_db(pg_url: str) -> Iterator[str]:
    """A new, empty database on the test server (LangGraph's stock savers create their own tables)."""
    import uuid

    import psycopg

    name = f"serde_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield pg_url.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.mark.parametrize("strict", ["off", "on"])
@pytest.mark.parametrize("kind", POSTGRES.split(","))
def test_a_run_round_trips_through_a_stock_postgres_saver(
    kind: str, strict: str, reports: Reports, fresh_pg_db: str
) -> None:
    check_round_trip(reports.get(POSTGRES, strict, fresh_pg_db)[kind], strict)


# -- checkpoints written before -------------------------------------------------------------------------------


@pytest.mark.parametrize("strict", ["off", "on"])
def test_old_checkpoints_with_planmode_objects_still_load_and_resume(strict: str, reports: Reports) -> None:
    report = reports.get(LOCAL, strict)["old"]
    for label in ("planmode_saver", "stock_saver"):
        read = report[label]
        assert read["checkpoints"] == 29, label  # every checkpoint of both threads is read
        assert read["not_typed"] == 0, label  # plans and outcomes come back as models
        assert read["done_statuses"] == ALL_DONE and read["done_version"] == 2, label
    # planmode's own saver knows the old objects: no report. (A plain saver reports them, as LangGraph does for
    # any object it does not know; the data is intact either way.)
    assert report["planmode_saver"]["events"] == []
    resumed = report["resumed"]
    assert resumed["status"] == "completed" and resumed["statuses"] == ALL_DONE
    assert resumed["runs"] == {"a": 1, "c": 1, "b": 2, "fix_b": 1, "d": 1}
    assert resumed["newest_checkpoint_typed"] == []  # what the new version writes is data


# -- planmode as a subgraph of a parent with a plain SqliteSaver ----------------------------------------------


@pytest.fixture
def serde_reports() -> Iterator[list[str]]:
    found: list[str] = []
    unregister = register_serde_event_listener(lambda e: found.append(f"{e.get('kind')} {e.get('name')}"))
    yield found
    unregister()


def test_embedded_in_a_parent_with_a_plain_sqlite_saver_reads_back_silently(
    tmp_path: Path, serde_reports: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    plan = {"title": "T", "steps": [{"id": "x", "description": "first"}, {"id": "y", "description": "then"}]}
    model = ScriptedChatModel(responder=PurposeScript(plan=plan, final="Done."))
    parent = StateGraph(MessagesState)
    parent.add_node("greet", lambda s: {"messages": [AIMessage(content="Planning.", id="greeting")]})
    parent.add_node("planmode", build_graph(model, executor=lambda s, c: f"{s.id} ok"))
    parent.add_edge(START, "greet")
    parent.add_edge("greet", "planmode")
    parent.add_edge("planmode", END)
    config: dict[str, Any] = {"configurable": {"thread_id": "parent"}}
    db = tmp_path / "p.sqlite"
    with caplog.at_level(logging.WARNING), closing(sqlite3.connect(db, check_same_thread=False)) as conn:
        app = parent.compile(checkpointer=SqliteSaver(conn))
        app.invoke({"messages": [HumanMessage(content="do x then y", id="task")]}, config)
        shown = app.get_state(config).interrupts[0].value
        app.invoke(Command(resume={"action": "approve", "revision": shown["revision"]}), config)
    with closing(sqlite3.connect(db, check_same_thread=False)) as conn:  # a new connection, as a new process
        saver = SqliteSaver(conn)
        app = parent.compile(checkpointer=saver)
        namespaces = {row[0] for row in conn.execute("SELECT DISTINCT checkpoint_ns FROM checkpoints")}
        sub = [ns for ns in namespaces if ns.startswith("planmode:")]
        assert sub, namespaces  # the subgraph's own checkpoints are in the parent's file
        for ns in sorted(namespaces):
            for t in saver.list({"configurable": {"thread_id": "parent", "checkpoint_ns": ns}}):
                assert planmode_objects(t.checkpoint["channel_values"]) == [], ns
                assert planmode_objects(list(t.pending_writes or [])) == [], ns
        for snap in app.get_state_history(config):
            assert "plan" not in snap.values  # a MessagesState parent keeps messages only
        history = list(app.get_state_history({"configurable": {"thread_id": "parent", "checkpoint_ns": sub[0]}}))
        plans = [s.values["plan"] for s in history if s.values.get("plan") is not None]
        assert plans and all(isinstance(p, Plan) for p in plans)
        assert {s.id: s.status for s in plans[0].steps} == {"x": StepStatus.DONE, "y": StepStatus.DONE}
        messages = app.get_state(config).values["messages"]
        assert [m.id for m in messages][:2] == ["task", "greeting"] and messages[-1].content == "Done."
    assert serde_reports == []
    assert not [r for r in caplog.records if "unregistered" in r.getMessage() or "Blocked" in r.getMessage()]


# -- the data form, in process --------------------------------------------------------------------------------


def test_to_data_is_lossless_and_leaves_other_objects_alone() -> None:
    patch = PlanPatch(
        reason="r",
        add_steps=[NewStep(id="n", description="new", status=StepStatus.DONE, after="a")],
    )
    update = PlanUpdate(patch=patch, transitions=[StepTransition(id="a", status=StepStatus.RUNNING)], source="s")
    data = to_data(update)
    assert planmode_objects(data) == []
    assert json.loads(json.dumps(data)) == data  # JSON all the way down
    assert PlanUpdate.model_validate(data) == update
    assert data["patch"]["add_steps"][0]["status"] == "done"  # an excluded field is kept too
    message = AIMessage(content="hi")
    assert to_data({"messages": [message]})["messages"][0] is message


def test_channels_checkpoint_data_and_read_old_values() -> None:
    plan = Plan.model_validate(
        {"goal": "g", "version": 1, "steps": [{"id": "a", "description": "A", "status": "done", "result": "ok"}]}
    )
    channel = PlanChannel(Plan)
    channel.value = plan
    assert planmode_objects(channel.checkpoint()) == []
    assert channel.from_checkpoint(channel.checkpoint()).get() == plan
    assert channel.from_checkpoint(plan).get() == plan  # an old checkpoint's Plan object
    assert channel.from_checkpoint(plan.model_dump()).get() == plan  # an old one read by a strict serializer
    assert channel.from_checkpoint(None).get() is None
    junk = {"version": "not a number"}
    assert channel.from_checkpoint(junk).get() == junk  # left for the reducer to record; reading never raises

    outcome = StepOutcome(step_id="a", ok=True, output="out", output_ref="a.1")
    outcomes = StepOutcomesChannel(dict)
    outcomes.update([{"a": outcome}])
    assert planmode_objects(outcomes.checkpoint()) == []
    assert outcomes.from_checkpoint(outcomes.checkpoint()).get() == {"a": outcome}
    assert outcomes.from_checkpoint({"a": outcome}).get() == {"a": outcome}  # old checkpoint
    assert outcomes.from_checkpoint({"a": 5}).get()["a"].ok is False  # unreadable, not an exception


def test_a_send_task_reaches_execute_step_as_a_step(tmp_path: Path) -> None:
    """The ``Send`` tasks carry their step as data; execute_step still gets a `Step` (also after a resume)."""
    seen: list[type] = []

    def executor(step: Any, ctx: Any) -> str:
        seen.append(type(step))
        return "ok"

    plan = {"title": "T", "steps": [{"id": "x", "description": "one"}]}
    graph = build_graph(
        ScriptedChatModel(responder=PurposeScript(plan=plan)), executor=executor, checkpointer=InMemorySaver()
    )
    config: dict[str, Any] = {"configurable": {"thread_id": "t"}}
    graph.invoke({"messages": [("user", "do x")]}, config, context={"mode": "plan", "approval": "auto"})
    assert graph.get_state(config).values["status"] == "completed"
    assert seen == [Step]
