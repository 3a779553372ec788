"""Observability: readable run names per node, and LangSmith tracing through its usual environment variables.

- Run names, offline: a LangChain callback handler records every run of a graph run (chains, chat models,
  tools) with its parent. The graph run is named ``planmode``, each node run is named after its node, and
  every model and tool call sits under the node that made it.
- Off by default: nothing in planmode turns tracing on (no code touches the LangSmith settings), and a run
  without ``LANGSMITH_TRACING`` has no LangSmith tracer among its callbacks.
- On through the environment: with ``LANGSMITH_TRACING=true``, ``LANGSMITH_API_KEY`` and ``LANGSMITH_PROJECT``
  (and ``LANGSMITH_ENDPOINT`` pointing at a fake LangSmith on 127.0.0.1 started by the test), the runs arrive
  at the endpoint in that project, with the same names.
"""

from __future__ import annotations

import email
import email.policy
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.tools import tool
from langchain_core.tracers.langchain import LangChainTracer, wait_for_all_tracers
from langgraph.config import get_config
from langsmith import run_trees
from langsmith import utils as ls_utils

from planmode.graph.builder import NODE_NAMES, build_graph
from planmode.state.models import Step
from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest, tool_call
from planmode.tools import read_only

SRC = Path(__file__).resolve().parents[2] / "src" / "planmode"
TASK = "Collect the changes, then write the notes and the docs"
PLAN = {
    "title": "Release",
    "steps": [
        {"id": "collect", "description": "Collect the changes", "tools": ["list_changes"]},
        {
            "id": "notes",
            "description": "Write the notes",
            "dependencies": ["collect"],
            "acceptance": "mentions every change",
        },
        {"id": "docs", "description": "Write the docs", "dependencies": ["collect"]},
    ],
}


@tool
def list_changes() -> str:
    """List the changes since the last release."""
    return "faster start-up; a --quiet flag"


# it only reads: marked so (issue 24 sends back a plan whose write steps have no acceptance, and an unmarked tool
# counts as a write)
read_only(list_changes)


def _execute(req: ScriptRequest) -> Any:
    if req.step_id == "collect" and not req.tool_results():
        return {"tool_calls": [tool_call("list_changes")]}
    return f"Step {req.step_id} done."


def _model() -> ScriptedChatModel:
    """Plans, executes (``collect`` calls a tool), fails the first verification of ``notes`` (with one attempt per
    step, so reflect runs and says retry), and writes the final answer. Run it with `CONTEXT`."""
    verdicts = iter([{"passed": False, "reason": "the flag is missing"}])
    return ScriptedChatModel(
        responder=PurposeScript(
            plan=PLAN,
            execute=_execute,
            verify=lambda req: next(verdicts, {"passed": True, "reason": ""}),
            reflect={"assessment": "on_track", "reasoning": "retry it", "guidance": "mention the flag"},
        )
    )


CONTEXT = {"approval": "auto", "max_attempts": 1}


@dataclass
class Run:
    kind: str  # chain, chat_model, tool
    name: str
    parent: UUID | None
    node: str | None  # LangGraph's ``langgraph_node`` metadata
    purpose: str | None = None  # for chat models: the ``planmode:<purpose>`` of the system prompt
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] | None = None


class RunRecorder(BaseCallbackHandler):
    """Records every run started during a graph run (thread-safe: steps run in parallel)."""

    def __init__(self) -> None:
        self.runs: dict[UUID, Run] = {}
        self._lock = threading.Lock()

    def _add(self, run_id: UUID, run: Run) -> None:
        with self._lock:
            self.runs[run_id] = run

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        name = kwargs.get("name") or (serialized or {}).get("name") or "?"
        node = (metadata or {}).get("langgraph_node")
        self._add(run_id, Run("chain", name, parent_run_id, node, tags=tuple(tags or ()), metadata=metadata))

    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        name = kwargs.get("name") or (serialized or {}).get("name") or "?"
        first = str(messages[0][0].content) if messages and messages[0] else ""
        match = re.match(r"planmode:(\w+)", first)
        self._add(
            run_id,
            Run(
                "chat_model",
                name,
                parent_run_id,
                (metadata or {}).get("langgraph_node"),
                match.group(1) if match else None,
            ),
        )

    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        name = kwargs.get("name") or (serialized or {}).get("name") or "?"
        self._add(run_id, Run("tool", name, parent_run_id, (metadata or {}).get("langgraph_node")))

    def roots(self) -> list[Run]:
        return [r for r in self.runs.values() if r.parent is None]

    def children(self, parent: Run) -> list[Run]:
        ids = [i for i, r in self.runs.items() if r is parent]
        return [r for r in self.runs.values() if r.parent in ids]

    def node_of(self, run: Run) -> str | None:
        """The name of the node run ``run`` sits under (the graph's direct child on its path)."""
        path = [run]
        while path[-1].parent is not None and path[-1].parent in self.runs:
            path.append(self.runs[path[-1].parent])
        return path[-2].name if len(path) >= 2 and path[-1].name == "planmode" else None


# -- readable run names (offline) -----------------------------------------------------------------------------


def test_the_graph_run_is_planmode_and_each_node_run_is_named_after_its_node() -> None:
    recorder = RunRecorder()
    graph = build_graph(_model(), tools=[list_changes])
    out = graph.invoke({"messages": [("user", TASK)]}, {"callbacks": [recorder]}, context=CONTEXT)
    assert out["status"] == "completed"

    (root,) = recorder.roots()
    assert (root.kind, root.name) == ("chain", "planmode")
    nodes = recorder.children(root)
    # Every direct child of the graph run is a node run, named after the node (no anonymous runnables).
    assert {r.name for r in nodes} <= set(NODE_NAMES)
    assert {r.name for r in nodes} == {
        "detect",
        "plan",
        "approve",
        "dispatch",
        "execute_step",
        "verify",
        "reflect",
        "finalize",
    }
    assert all(r.node == r.name for r in nodes)  # LangGraph's metadata agrees with the name
    assert sum(r.name == "execute_step" for r in nodes) == 4  # collect, notes twice (retried), docs


EXPECTED_NODE = {
    "detect": "detect",
    "explore": "plan",
    "plan": "plan",
    "execute": "execute_step",
    "verify": "verify",
    "reflect": "reflect",
    "patch": "patch",
    "final": "finalize",
}


def _model_runs(recorder: RunRecorder) -> list[tuple[str | None, str | None]]:
    """(purpose, node it sits under) of every chat model run, for a run of `_model`."""
    graph = build_graph(_model(), tools=[list_changes])
    graph.invoke({"messages": [("user", TASK)]}, {"callbacks": [recorder]}, context=CONTEXT)
    models = [r for r in recorder.runs.values() if r.kind == "chat_model"]
    assert models and all(r.name == "ScriptedChatModel" for r in models)
    return [(r.purpose, recorder.node_of(r)) for r in models]


def test_model_and_tool_calls_appear_under_the_node_that_made_them() -> None:
    recorder = RunRecorder()
    seen = _model_runs(recorder)
    assert {p for p, _ in seen} >= {"detect", "explore", "plan", "execute", "reflect", "final"}
    for purpose, node in seen:
        assert purpose is not None and node == EXPECTED_NODE[purpose], (purpose, node)
    (tool_run,) = [r for r in recorder.runs.values() if r.kind == "tool"]
    assert (tool_run.name, recorder.node_of(tool_run)) == ("list_changes", "execute_step")


def test_the_verifiers_model_calls_appear_under_verify() -> None:
    recorder = RunRecorder()
    seen = _model_runs(recorder)
    assert [node for purpose, node in seen if purpose == "verify"] == ["verify", "verify"]


def test_a_simple_request_runs_under_detect_and_respond() -> None:
    recorder = RunRecorder()
    model = ScriptedChatModel(responder=PurposeScript(respond="Paris."))
    graph = build_graph(model)
    out = graph.invoke(
        {"messages": [("user", "What is the capital of France?")]},
        {"callbacks": [recorder]},
        context={"mode": "direct"},
    )
    assert out["messages"][-1].content == "Paris."
    (root,) = recorder.roots()
    assert root.name == "planmode"
    assert [r.name for r in recorder.children(root)] == ["detect", "respond"]
    (answer,) = [r for r in recorder.runs.values() if r.kind == "chat_model"]
    assert recorder.node_of(answer) == "respond"


def test_the_run_name_follows_the_graph_name() -> None:
    recorder = RunRecorder()
    graph = build_graph(ScriptedChatModel(responder=PurposeScript(respond="ok")), name="release_planner")
    graph.invoke({"messages": [("user", "hi")]}, {"callbacks": [recorder]}, context={"mode": "direct"})
    assert [r.name for r in recorder.roots()] == ["release_planner"]


def test_run_name_tags_and_metadata_from_the_config_reach_every_node_run() -> None:
    recorder = RunRecorder()
    graph = build_graph(ScriptedChatModel(responder=PurposeScript(respond="ok")))
    config = {"callbacks": [recorder], "run_name": "ticket-42", "tags": ["release"], "metadata": {"ticket": 42}}
    graph.invoke({"messages": [("user", "hi")]}, config, context={"mode": "direct"})
    (root,) = recorder.roots()
    assert root.name == "ticket-42"
    nodes = recorder.children(root)
    assert [r.name for r in nodes] == ["detect", "respond"]
    assert all("release" in r.tags and (r.metadata or {}).get("ticket") == 42 for r in [root, *nodes])


# -- LangSmith: off by default, on through the environment ------------------------------------------------------


def test_no_planmode_code_turns_tracing_on() -> None:
    pattern = re.compile(
        r"LANGSMITH_|LANGCHAIN_TRACING|LANGCHAIN_API_KEY|tracing_v2_enabled|tracing_context|"
        r"LangChainTracer|langsmith"
    )
    offenders = [
        f"{p.relative_to(SRC)}:{n}"
        for p in sorted(SRC.rglob("*.py"))
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []


@pytest.fixture
def fresh_langsmith(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """LangSmith re-reads the environment: its cached settings and cached client are reset before and after."""
    ls_utils.get_env_var.cache_clear()
    ls_utils.get_tracer_project.cache_clear()
    monkeypatch.setattr(run_trees, "_CLIENT", None)
    yield monkeypatch
    client = run_trees._CLIENT
    if client is not None:
        client.cleanup()
    monkeypatch.undo()
    ls_utils.get_env_var.cache_clear()
    ls_utils.get_tracer_project.cache_clear()


def _handlers_seen_by_nodes(*callbacks: BaseCallbackHandler) -> list[Any]:
    """Run the graph with an executor that records the callback handlers a node sees."""
    seen: list[Any] = []

    def executor(step: Step, ctx: Any) -> str:
        seen.extend(get_config()["callbacks"].handlers)
        return "done"

    graph = build_graph(ScriptedChatModel(responder=PurposeScript(plan=PLAN)), executor=executor)
    graph.invoke({"messages": [("user", TASK)]}, {"callbacks": list(callbacks)}, context={"approval": "auto"})
    return seen


def test_tracing_is_off_by_default(fresh_langsmith: pytest.MonkeyPatch) -> None:
    # conftest's network guard has unset LANGSMITH_TRACING, LANGSMITH_API_KEY and their LANGCHAIN_ aliases.
    assert not ls_utils.tracing_is_enabled()
    mine = RunRecorder()
    handlers = _handlers_seen_by_nodes(mine)
    assert mine in handlers  # the nodes see the run's callbacks ...
    assert not any(isinstance(h, LangChainTracer) for h in handlers)  # ... and no LangSmith tracer
    assert run_trees._CLIENT is None  # no LangSmith client was even created


class FakeLangSmith:
    """A LangSmith API stand-in on 127.0.0.1 that keeps the runs posted to it."""

    def __init__(self) -> None:
        self.posted: list[dict[str, Any]] = []
        self.api_keys: set[str] = set()
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                fake._record(self.path, self.headers.get("content-type") or "", body, self.headers.get("x-api-key"))
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            do_GET = do_POST = do_PATCH = _answer

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def _record(self, path: str, content_type: str, body: bytes, api_key: str | None) -> None:
        runs: list[dict[str, Any]] = []
        if path.endswith("/runs/multipart") and content_type.startswith("multipart/"):
            message = email.message_from_bytes(
                f"Content-Type: {content_type}\r\n\r\n".encode() + body, policy=email.policy.HTTP
            )
            # with an email policy the message is an EmailMessage (typeshed says Message)
            for part in message.iter_parts():  # type: ignore[attr-defined]
                name = part.get_param("name", header="content-disposition") or ""
                if re.fullmatch(r"post\.[0-9a-f-]+", name):  # the run itself (inputs/outputs are other parts)
                    runs.append(json.loads(part.get_payload(decode=True)))
        elif path.endswith("/runs/batch"):
            runs.extend(json.loads(body).get("post", []))
        elif path.endswith("/runs") and body:
            runs.append(json.loads(body))
        with self._lock:
            self.posted.extend(runs)
            if api_key:
                self.api_keys.add(api_key)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)


@pytest.fixture
def fake_langsmith() -> Iterator[FakeLangSmith]:
    server = FakeLangSmith()
    yield server
    server.close()


@pytest.mark.integration
def test_langsmith_tracing_is_turned_on_by_its_environment_variables(
    fresh_langsmith: pytest.MonkeyPatch, fake_langsmith: FakeLangSmith
) -> None:
    fresh_langsmith.setenv("LANGSMITH_TRACING", "true")
    fresh_langsmith.setenv("LANGSMITH_API_KEY", "lsv2-test-key")
    fresh_langsmith.setenv("LANGSMITH_PROJECT", "planmode-observability")
    fresh_langsmith.setenv("LANGSMITH_ENDPOINT", fake_langsmith.url)

    graph = build_graph(_model(), tools=[list_changes])
    out = graph.invoke({"messages": [("user", TASK)]}, context=CONTEXT)
    assert out["status"] == "completed"
    wait_for_all_tracers()

    runs = fake_langsmith.posted
    assert runs, "no run reached the LangSmith endpoint"
    assert fake_langsmith.api_keys == {"lsv2-test-key"}
    assert {r.get("session_name") for r in runs} == {"planmode-observability"}
    by_id = {r["id"]: r for r in runs}
    (root,) = [r for r in runs if r.get("parent_run_id") is None and r["name"] == "planmode"]
    assert (root["name"], root["run_type"]) == ("planmode", "chain")
    node_runs = [r for r in runs if r.get("parent_run_id") == root["id"]]
    assert {r["name"] for r in node_runs} == {
        "detect",
        "plan",
        "approve",
        "dispatch",
        "execute_step",
        "verify",
        "reflect",
        "finalize",
    }
    llm_runs = [r for r in runs if r["run_type"] == "llm"]
    assert llm_runs and all(r["name"] == "ScriptedChatModel" for r in llm_runs)
    # Every model call sits inside a node run of the one planmode trace (the verifier's too).
    assert all(r["trace_id"] == root["trace_id"] for r in llm_runs)
    for run in llm_runs:
        parent = by_id[run["parent_run_id"]]
        while parent.get("parent_run_id") != root["id"]:
            parent = by_id[parent["parent_run_id"]]
        assert parent["name"] in NODE_NAMES
    (tool_run,) = [r for r in runs if r["run_type"] == "tool"]
    assert tool_run["name"] == "list_changes"
    # The step's tool loop is a subgraph whose ToolNode runs the tool, inside the execute_step node run.
    chain = [by_id[tool_run["parent_run_id"]]]
    while chain[-1].get("parent_run_id") != root["id"]:
        chain.append(by_id[chain[-1]["parent_run_id"]])
    assert [r["name"] for r in chain] == ["tools", "planmode_tool_loop", "execute_step"]
