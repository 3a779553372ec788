"""What planmode assumes of LangGraph's and openai's private names (`planmode._compat`), pinned.

Each test states one assumption the code relies on. When a LangGraph or openai release breaks one, the test
that fails names it, and `planmode/_compat.py` is the one module to adapt.
"""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt
from pydantic import BaseModel

from planmode import _compat
from planmode._compat import (
    CONFIG_KEY_CHECKPOINT_MAP,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_CHECKPOINTER,
    CONFIG_KEY_DURABILITY,
    CONFIG_KEY_READ,
    CONFIG_KEY_RESUMING,
    CONFIG_KEY_RUNTIME,
    INTERNAL_CHANNEL_PREFIXES,
    NS_SEP,
    RunnableCallable,
    type_to_response_format_param,
)


class _State(TypedDict):
    seen: Annotated[list[str], operator.add]


def test_every_name_of_the_seam_is_exported() -> None:
    assert sorted(_compat.__all__) == sorted(
        name
        for name in vars(_compat)
        if not name.startswith("_") and name not in {"annotations", "Any", "Callable", "TypeAlias"}
    )


def test_a_runnable_callable_runs_its_sync_function_on_invoke_and_its_async_one_on_ainvoke() -> None:
    """Every planmode node is a RunnableCallable(func, afunc, name=, trace=); the wrappers read .func, .afunc,
    .name and .trace back to rebuild one around each path."""
    node = RunnableCallable(lambda x: f"sync {x}", _async_echo, name="probe", trace=False)
    assert node.invoke("a") == "sync a"
    assert asyncio.run(node.ainvoke("b")) == "async b"
    assert (node.name, node.trace) == ("probe", False)
    assert node.func is not None and node.afunc is not None
    assert node.func("c") == "sync c"


async def _async_echo(x: str) -> str:
    return f"async {x}"


def test_a_runnable_callable_is_a_graph_node_with_both_paths() -> None:
    def sync_node(state: _State) -> dict[str, Any]:
        return {"seen": ["sync"]}

    async def async_node(state: _State) -> dict[str, Any]:
        return {"seen": ["async"]}

    builder = StateGraph(_State)
    builder.add_node("n", RunnableCallable(sync_node, async_node, name="n", trace=False))
    builder.add_edge(START, "n")
    graph = builder.compile()
    assert graph.invoke({"seen": []})["seen"] == ["sync"]
    assert asyncio.run(graph.ainvoke({"seen": []}))["seen"] == ["async"]


def test_a_task_finds_the_checkpointer_its_namespace_and_its_checkpoint_in_its_config() -> None:
    """The durability wait (`planmode.persistence`) reads these keys: the saver, the task's namespace (its
    graph's namespace, NS_SEP, the task; a root task has no NS_SEP), the id of the checkpoint the task runs
    from keyed by its graph's namespace, and the run's durability. Checked in a subgraph (planmode nested in a
    parent) and at the root."""
    found: list[dict[str, Any]] = []

    def node(state: _State) -> dict[str, Any]:
        conf = get_config()["configurable"]
        found.append(
            {
                "saver": conf.get(CONFIG_KEY_CHECKPOINTER),
                "ns": conf.get(CONFIG_KEY_CHECKPOINT_NS),
                "map": conf.get(CONFIG_KEY_CHECKPOINT_MAP),
                "durability": conf.get(CONFIG_KEY_DURABILITY),
            }
        )
        return {"seen": ["n"]}

    inner = StateGraph(_State)
    inner.add_node("n", node)
    inner.add_edge(START, "n")
    saver = InMemorySaver()
    outer = StateGraph(_State)
    outer.add_node("outer", inner.compile())
    outer.add_node("n", node)
    outer.add_edge(START, "outer")
    outer.add_edge("outer", "n")
    graph = outer.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t"}}
    graph.invoke({"seen": []}, cfg, durability="sync")

    nested, root = found
    assert nested["saver"] is saver and root["saver"] is saver
    assert nested["durability"] == root["durability"] == "sync"
    graph_ns, sep, task = str(nested["ns"]).rpartition(NS_SEP)
    assert sep == NS_SEP and graph_ns.startswith("outer:") and task.startswith("n:")
    assert nested["map"][graph_ns] in {
        c.config["configurable"]["checkpoint_id"]
        for c in saver.list({"configurable": {"thread_id": "t", "checkpoint_ns": graph_ns}})
    }
    graph_ns, sep, task = str(root["ns"]).rpartition(NS_SEP)
    assert (graph_ns, sep) == ("", "") and task.startswith("n:")
    assert root["map"][""] in {c.config["configurable"]["checkpoint_id"] for c in saver.list(cfg)}


def test_the_resuming_flag_is_set_only_while_a_run_resumes() -> None:
    """`_batch` reads CONFIG_KEY_RESUMING to tell a resumed super-step from a fresh one."""
    flags: list[Any] = []

    def ask(state: _State) -> dict[str, Any]:
        flags.append(get_config()["configurable"].get(CONFIG_KEY_RESUMING))
        return {"seen": [str(interrupt("go?"))]}

    builder = StateGraph(_State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    graph = builder.compile(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "t"}}
    graph.invoke({"seen": []}, cfg)
    assert graph.invoke(Command(resume="yes"), cfg)["seen"] == ["yes"]
    assert CONFIG_KEY_RESUMING == "__pregel_resuming"
    assert [bool(f) for f in flags] == [False, True]


def test_a_running_node_reads_the_channels_and_the_runtime_under_the_private_keys() -> None:
    """execute_step reads the graph's channels through CONFIG_KEY_READ (``read(keys, fresh)``, a mapping), and
    `_batch` tells one invocation from another by the ``stream_writer`` of the CONFIG_KEY_RUNTIME runtime."""
    found: list[Any] = []

    def node(state: _State) -> dict[str, Any]:
        conf = get_config()["configurable"]
        found.append((conf[CONFIG_KEY_READ](("seen",), False), conf[CONFIG_KEY_RUNTIME].stream_writer))
        return {"seen": ["n"]}

    builder = StateGraph(_State)
    builder.add_node("n", node)
    builder.add_edge(START, "n")
    graph = builder.compile()
    graph.invoke({"seen": ["given"]})
    graph.invoke({"seen": ["again"]})
    (read, writer), (read_again, writer_again) = found
    assert dict(read) == {"seen": ["given"]} and dict(read_again) == {"seen": ["again"]}
    assert callable(writer) and writer is not writer_again


def test_langgraph_names_its_own_channels_with_the_internal_prefixes() -> None:
    """The SQLite saver skips the fsync of a checkpoint that changed only LangGraph's own channels: every
    channel that is not a state key (nor the input channel) starts with one of INTERNAL_CHANNEL_PREFIXES."""

    def fan_out(state: _State) -> list[Send]:
        return [Send("b", state)]

    builder = StateGraph(_State)
    builder.add_node("a", lambda s: {"seen": ["a"]})
    builder.add_node("b", lambda s: {"seen": ["b"]})
    builder.add_node("c", lambda s: {"seen": ["c"]})
    builder.add_edge(START, "a")
    builder.add_conditional_edges("a", fan_out, ["b"])
    builder.add_edge("b", "c")
    builder.add_edge("c", END)
    graph = builder.compile()
    own = set(graph.channels) - set(_State.__annotations__) - {START}
    assert own, "the graph has channels of LangGraph's own"
    assert all(name.startswith(INTERNAL_CHANNEL_PREFIXES) for name in own), own
    assert any(name.startswith("branch:") for name in own) and any(name.startswith("__pregel_") for name in own)
    assert not any(key.startswith(INTERNAL_CHANNEL_PREFIXES) for key in _State.__annotations__)


class _Answer(BaseModel):
    verdict: str
    score: int


def test_openai_renders_a_pydantic_class_as_a_strict_json_schema_response_format() -> None:
    """`planmode.llm.structured` sends this as ``response_format`` to servers that take json_schema."""
    rendered = type_to_response_format_param(_Answer)
    assert isinstance(rendered, dict)
    assert rendered["type"] == "json_schema"
    spec = rendered["json_schema"]
    assert spec["name"] == "_Answer" and spec["strict"] is True
    assert set(spec["schema"]["properties"]) == {"verdict", "score"}
    assert spec["schema"]["additionalProperties"] is False
