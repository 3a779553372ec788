"""The model layer (planmode.llm, the tool loop, executors): runnables built once, and the async twins of every
model-facing function, through the scripted chat model and the scripted OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from planmode.context import PlanModeContext
from planmode.llm import acall_structured, call_structured, structured_runnable
from planmode.llm.structured import RUNNABLES
from planmode.testing.openai_server import ScriptedOpenAIServer, queue_responder
from planmode.testing.scripted import ScriptedChatModel


class Answer(BaseModel):
    """An answer."""

    value: int
    note: str = ""


class Other(BaseModel):
    """Another schema."""

    name: str


MESSAGES = [SystemMessage(content="planmode:verify judge"), HumanMessage(content="Step `s1`: judge it")]


class CountingModel(ScriptedChatModel):
    """A scripted model that counts how often a structured-output runnable is built from it."""

    builds: int = 0

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Runnable[LanguageModelInput, Any]:
        self.builds += 1
        return super().with_structured_output(schema, **kwargs)

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return super().bind_tools(tools, tool_choice=tool_choice, **kwargs)


def answering(value: dict[str, Any]) -> CountingModel:
    return CountingModel(responder=lambda req: value)


def test_the_structured_runnable_is_built_once_per_model_and_schema() -> None:
    settings = PlanModeContext()
    model = answering({"value": 7})
    before = RUNNABLES.builds
    for _ in range(5):
        value, error, _raw = call_structured(model, Answer, MESSAGES, settings)
        assert error is None and value == Answer(value=7)
    assert model.builds == 1
    assert RUNNABLES.builds == before + 1
    call_structured(model, Other, MESSAGES, settings)  # another schema: its own runnable
    assert model.builds == 2
    other = answering({"value": 1})  # another model object: its own runnables
    call_structured(other, Answer, MESSAGES, settings)
    assert (model.builds, other.builds) == (2, 1)
    assert structured_runnable(model, Answer, "tool_calling") is structured_runnable(model, Answer, "tool_calling")
    assert len(model.requests) == 6  # every call still reached the model


class SchemaRenders:
    """Counts how often `Answer`'s JSON schema is rendered, once `start` patched it in."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch
        self.count = 0

    def start(self) -> None:
        original = Answer.model_json_schema.__func__  # type: ignore[attr-defined]  # a classmethod's function

        def counting(cls: type[BaseModel], *args: Any, **kwargs: Any) -> dict[str, Any]:
            self.count += 1
            return original(cls, *args, **kwargs)  # type: ignore[no-any-return]  # pydantic's own return type

        self.monkeypatch.setattr(Answer, "model_json_schema", classmethod(counting))


def test_json_object_mode_renders_the_schema_once_over_http(monkeypatch: pytest.MonkeyPatch) -> None:
    """json_object sends the schema in the request and the prompt: it is rendered on the first call only."""
    renders = SchemaRenders(monkeypatch)
    renders.start()
    settings = PlanModeContext(structured_output="json_object", context_tokens=8192)
    with ScriptedOpenAIServer(queue_responder([f'{{"value": {i}}}' for i in range(4)])) as srv:
        model = ChatOpenAI(base_url=srv.base_url, api_key="test", model="scripted", max_retries=0)
        values = [call_structured(model, Answer, MESSAGES, settings)[0] for _ in range(4)]
        bodies = list(srv.requests)
    assert values == [Answer(value=i) for i in range(4)]
    assert renders.count == 1
    assert all(b["response_format"]["type"] == "json_object" for b in bodies)
    assert all("matches this JSON schema" in b["messages"][0]["content"] for b in bodies)


def test_json_schema_mode_sends_what_langchain_openai_sends_and_renders_the_schema_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """json_schema mode binds the response_format rendered once: the body is the one
    ``with_structured_output(schema, method="json_schema")`` sends, the schema is not rendered per call (openai's
    parse() rendered it on every call when given the class), and sync and async calls read the same values."""
    renders = SchemaRenders(monkeypatch)
    settings = PlanModeContext(structured_output="json_schema", context_tokens=8192)
    replies = ['{"value": 0}', '{"value": 1, "note": "n"}', '{"value": 2}', '{"value": 3}', '{"value": 4}']
    with ScriptedOpenAIServer(queue_responder(replies)) as srv:
        model = ChatOpenAI(base_url=srv.base_url, api_key="test", model="scripted", max_retries=0)
        reference = model.with_structured_output(Answer, method="json_schema", include_raw=True)
        assert reference.invoke(MESSAGES)["parsed"] == Answer(value=0)
        renders.start()
        values = [call_structured(model, Answer, MESSAGES, settings)[0] for _ in range(2)]
        values += [asyncio.run(acall_structured(model, Answer, MESSAGES, settings))[0] for _ in range(2)]
        bodies = list(srv.requests)
    assert values == [Answer(value=1, note="n"), Answer(value=2), Answer(value=3), Answer(value=4)]
    assert renders.count <= 1  # rendered when the runnable was built (or not at all: the client renders it itself)
    assert len(bodies) == 5
    assert all(body == bodies[0] for body in bodies[1:])
    assert bodies[0]["response_format"]["type"] == "json_schema"
    assert bodies[0]["response_format"]["json_schema"]["name"] == "Answer"


def test_json_schema_mode_reads_a_refusal_as_an_error_to_feed_back() -> None:
    """A model that refuses (the ``refusal`` field of an OpenAI answer) gives an error value, not an exception."""
    refusal = {"content": None, "refusal": "I can't help with [red]that[/red]."}
    settings = PlanModeContext(structured_output="json_schema", context_tokens=8192)
    with ScriptedOpenAIServer(queue_responder([refusal])) as srv:
        model = ChatOpenAI(base_url=srv.base_url, api_key="test", model="scripted", max_retries=0)
        value, error, raw = call_structured(model, Answer, MESSAGES, settings)
    assert value is None and raw is not None
    assert error is not None and "refused" in error and "[red]that[/red]" in error


# -- one helper per job: clip, ask_until_valid -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "limit", "kwargs", "expected"),
    [
        ("short", 10, {}, "short"),
        ("a  b\n\tc", 10, {}, "a b c"),
        ("abcdefghij", 5, {}, "abcd…"),
        ("abcdefghij", 5, {"marker": ""}, "abcde"),
        ("a  b  c  d", 5, {"fold": False}, "a  b…"),
        ("x" * 30, 20, {"marker": " …[truncated]"}, "xxxxxxx …[truncated]"),
        ("abc", 2, {"marker": " …[truncated]"}, " …[truncated]"),
        (None, 5, {}, ""),
        ("\ud800 lone surrogate and more", 6, {}, "\ud800 lon…"),
    ],
)
def test_clip(text: str | None, limit: int, kwargs: dict[str, Any], expected: str) -> None:
    from planmode.text import clip

    assert clip(text, limit, **kwargs) == expected


def test_ask_until_valid_shows_each_refused_answer_and_its_reasons() -> None:
    from planmode.llm import ask_until_valid

    answers: list[Any] = ["not json at all", {"value": 3}, {"value": 12, "note": "{braces} %s"}]
    model = ScriptedChatModel(responder=lambda req: answers[len(model.requests) - 1])
    rejected: list[list[str]] = []

    def accept(a: Answer) -> tuple[int | None, list[str]]:
        return (a.value, []) if a.value > 10 else (None, [f"value {a.value} is too small"])

    asked = ask_until_valid(
        model,
        Answer,
        MESSAGES,
        PlanModeContext(),
        attempts=3,
        accept=accept,
        retry_prompt=lambda reasons: "Fix: " + " / ".join(reasons),
        on_reject=rejected.append,
    )
    assert asked.value == 12
    assert len(asked.errors) == 2 and asked.errors[1] == "value 3 is too small"
    assert rejected[1] == ["value 3 is too small"]
    last = model.requests[-1].messages
    assert [m.type for m in last] == ["system", "human", "ai", "human", "ai", "human"]
    assert last[2].content == "not json at all"  # an unreadable answer is shown as the model wrote it
    assert last[4].content == '{"value": 3, "note": ""}'
    assert last[5].content == "Fix: value 3 is too small"


def test_ask_until_valid_tries_a_given_first_answer_without_a_call_and_gives_up_after_its_attempts() -> None:
    from planmode.llm import ask_until_valid

    model = ScriptedChatModel(responder=lambda req: {"value": 1})
    asked = ask_until_valid(
        model,
        Answer,
        MESSAGES,
        PlanModeContext(),
        attempts=2,
        accept=lambda a: (None, ["never"]),
        retry_prompt=lambda reasons: "again",
        first=(Answer(value=0), None, None),
    )
    assert asked.value is None and asked.errors == ["never", "never"]
    assert len(model.requests) == 1  # the first attempt was the given answer


# -- the async twins ---------------------------------------------------------------------------------------


def test_the_scripted_model_answers_ainvoke_on_the_event_loop_and_awaits_an_async_responder() -> None:
    import asyncio
    import threading

    threads: list[int] = []

    async def slow(req: Any) -> dict[str, Any]:
        threads.append(threading.get_ident())
        await asyncio.sleep(0.2)
        return {"value": len(threads)}

    model = ScriptedChatModel(responder=slow)

    async def main() -> tuple[list[Any], float, int]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        out = await asyncio.gather(*(acall_structured(model, Answer, MESSAGES, PlanModeContext()) for _ in range(5)))
        return out, loop.time() - start, threading.get_ident()

    out, took, loop_thread = asyncio.run(main())
    assert sorted(v.value for v, _e, _r in out) == [5, 5, 5, 5, 5]
    assert took < 0.8, f"5 calls of 0.2 s took {took:.2f} s: not concurrent"
    assert set(threads) == {loop_thread}  # no worker thread
    with pytest.raises(TypeError, match="ainvoke"):
        model.invoke("hi")  # an async responder cannot answer a sync call


def test_the_async_ask_loop_sends_exactly_what_the_sync_one_sends() -> None:
    import asyncio

    from planmode.llm import aask_until_valid, ask_until_valid

    def script() -> ScriptedChatModel:
        answers: list[Any] = ["{", {"value": 2}, {"value": 20}]
        holder: list[ScriptedChatModel] = []
        holder.append(ScriptedChatModel(responder=lambda req: answers[len(holder[0].requests) - 1]))
        return holder[0]

    kwargs: dict[str, Any] = {
        "attempts": 3,
        "accept": lambda a: (a, []) if a.value > 10 else (None, ["too small"]),
        "retry_prompt": lambda reasons: "again: " + "; ".join(reasons),
    }
    sync_model, async_model = script(), script()
    sync = ask_until_valid(sync_model, Answer, MESSAGES, PlanModeContext(), **kwargs)
    asyn = asyncio.run(aask_until_valid(async_model, Answer, MESSAGES, PlanModeContext(), **kwargs))
    assert sync == asyn and sync.value == Answer(value=20) and len(sync.errors) == 2
    sent = [[(m.type, m.content) for m in r.messages] for r in sync_model.requests]
    assert sent == [[(m.type, m.content) for m in r.messages] for r in async_model.requests]


@pytest.mark.integration
def test_acall_structured_negotiates_over_http_and_runs_concurrently() -> None:
    """Through the real ``ChatOpenAI`` async client: json_schema refused, json_object kept; 5 calls of 0.3 s
    overlap on one event loop."""
    import asyncio

    from planmode.llm import negotiated_mode
    from planmode.testing.openai_server import Fault

    def respond(body: dict[str, Any]) -> Any:
        return Fault(delay=0.3, then='{"value": 4}')

    with ScriptedOpenAIServer(respond, refuse=("json_schema",), context_tokens=8192) as srv:
        model = ChatOpenAI(base_url=srv.base_url, api_key="test", model="scripted", max_retries=0)
        settings = PlanModeContext()

        async def main() -> tuple[Any, list[Any], float]:
            first = await acall_structured(model, Answer, MESSAGES, settings)
            loop = asyncio.get_running_loop()
            start = loop.time()
            rest = await asyncio.gather(*(acall_structured(model, Answer, MESSAGES, settings) for _ in range(5)))
            return first, rest, loop.time() - start

        first, rest, took = asyncio.run(main())
        kinds = [(b.get("response_format") or {}).get("type") for b in srv.requests]
    assert first[0] == Answer(value=4) and all(v == Answer(value=4) for v, _e, _r in rest)
    assert kinds[:2] == ["json_schema", "json_object"] and set(kinds[2:]) == {"json_object"}
    assert negotiated_mode(model) == "json_object"
    assert took < 1.2, f"5 calls of 0.3 s took {took:.2f} s: not concurrent"


@pytest.mark.integration
def test_an_unreachable_model_raises_model_unavailable_from_the_async_twins_and_async_nodes_pause() -> None:
    import asyncio
    import socket

    from planmode.errors import ModelUnavailableError
    from planmode.graph.pipeline import pipeline

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = ChatOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="test", model="m", max_retries=0)
    settings = PlanModeContext(context_tokens=4096)
    with pytest.raises(ModelUnavailableError):
        asyncio.run(acall_structured(model, Answer, MESSAGES, settings))

    async def node(state: Any, runtime: Any) -> dict[str, Any]:
        await acall_structured(model, Answer, MESSAGES, settings)
        return {"status": "never"}

    wrapped = pipeline("plan", node)  # as the graph builder wraps plan: pausable among its parts
    assert wrapped.afunc is not None and inspect.iscoroutinefunction(wrapped.afunc)
    update = asyncio.run(wrapped.afunc({"settings": {"base_url": "x", "model": "m"}}, None))
    assert update["status"] == "model_unavailable" and update["unavailable"]["node"] == "plan"
    assert "Connection" in update["error"] or "connect" in update["error"].lower()


def test_the_pipeline_pauses_both_paths_of_a_node_with_a_sync_and_an_async_function() -> None:
    import asyncio

    from planmode._compat import RunnableCallable
    from planmode.errors import ModelUnavailableError
    from planmode.graph.pipeline import pipeline

    def down(state: Any, runtime: Any) -> dict[str, Any]:
        raise ModelUnavailableError("down", base_url="http://x", model="m")

    async def adown(state: Any, runtime: Any) -> dict[str, Any]:
        raise ModelUnavailableError("down", base_url="http://x", model="m")

    node = pipeline("reflect", RunnableCallable(down, adown, name="reflect", trace=False))
    assert isinstance(node, RunnableCallable) and node.func is not None and node.afunc is not None
    assert node.func({}, None)["status"] == "model_unavailable"
    assert asyncio.run(node.afunc({}, None))["status"] == "model_unavailable"


def _loop_model(calls_before_answer: list[Any]) -> ScriptedChatModel:
    def respond(req: Any) -> Any:
        done = len(req.tool_results())
        return calls_before_answer[done] if done < len(calls_before_answer) else f"answer after {done} tools"

    return ScriptedChatModel(responder=respond)


def test_arun_tool_loop_awaits_async_tools_and_gates_writes_like_the_sync_loop() -> None:
    import asyncio

    from langchain_core.tools import tool

    from planmode.testing.scripted import tool_call
    from planmode.tools import read_only
    from planmode.tools.loop import arun_tool_loop, run_tool_loop

    ran: list[str] = []

    @tool
    async def look(path: str) -> str:
        """Look at a path."""
        await asyncio.sleep(0)
        ran.append(f"look {path}")
        return f"{path}: fine"

    @tool
    def write(text: str) -> str:
        """Write text."""
        ran.append(f"write {text}")
        return "written"

    tools = [read_only(look), write]
    script = [{"tool_calls": [tool_call("look", path="a.py"), tool_call("write", text="x")]}]
    settings = PlanModeContext()
    msgs = [SystemMessage(content="planmode:explore"), HumanMessage(content="go")]
    res = asyncio.run(arun_tool_loop(_loop_model(script), tools, msgs, settings, allow_writes=False, max_iterations=4))
    assert res.error is None and res.text == "answer after 2 tools" and res.tool_calls == 2
    assert ran == ["look a.py"]  # the write was refused at dispatch
    refused = [m for m in res.messages if getattr(m, "status", None) == "error"]
    assert len(refused) == 1 and "changes the world" in str(refused[0].content)
    sync = run_tool_loop(_loop_model(script), [write], msgs, settings, allow_writes=True, max_iterations=4)
    assert sync.tool_calls == 2 and ran[-1] == "write x"  # the sync loop cannot await look: it is not given it


def test_arun_tool_loop_without_tools_and_its_bound() -> None:
    import asyncio

    from planmode.testing.scripted import tool_call
    from planmode.tools.loop import arun_tool_loop, run_tool_loop

    forever = ScriptedChatModel(responder=lambda req: {"tool_calls": [tool_call("ghost")]})
    msgs = [SystemMessage(content="planmode:respond"), HumanMessage(content="hi")]
    settings = PlanModeContext()
    a = asyncio.run(arun_tool_loop(forever, [], msgs, settings, allow_writes=False, max_iterations=3))
    s = run_tool_loop(forever, [], msgs, settings, allow_writes=False, max_iterations=3)
    assert a.error == s.error == "no final answer after 3 model turns"
    assert [m.type for m in a.messages] == [m.type for m in s.messages]


@pytest.mark.integration
def test_arun_tool_loop_over_http_with_the_real_client() -> None:
    import asyncio

    from langchain_core.tools import tool

    from planmode.tools.loop import arun_tool_loop

    @tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    replies: list[Any] = [{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}, "the sum is 5"]
    with ScriptedOpenAIServer(queue_responder(replies)) as srv:
        model = ChatOpenAI(base_url=srv.base_url, api_key="test", model="scripted", max_retries=0)
        settings = PlanModeContext(context_tokens=8192)
        msgs = [SystemMessage(content="planmode:execute"), HumanMessage(content="add 2 and 3")]
        res = asyncio.run(arun_tool_loop(model, [add], msgs, settings, allow_writes=True, max_iterations=3))
        second = srv.requests[1]
    assert res.error is None and res.text == "the sum is 5" and res.tool_calls == 1
    assert second["messages"][-1]["role"] == "tool" and second["messages"][-1]["content"] == "5"


# -- executors and verifiers given as coroutines ------------------------------------------------------------


def _ctx(model: Any = None) -> Any:
    from planmode.executors import StepContext

    return StepContext(
        goal="g", dependencies={}, attempt=1, previous_error=None, settings=PlanModeContext(), model=model
    )


def test_async_executors_and_verifiers_are_awaited_on_the_async_path() -> None:
    import asyncio
    import threading

    from langchain_core.runnables import RunnableLambda

    from planmode.executors import Verdict, arun_executor, arun_verifier
    from planmode.state.models import Step

    step = Step(id="s1", description="do it", acceptance="it is done")
    where: list[int] = []

    async def aexec(step: Step, ctx: Any) -> str:
        await asyncio.sleep(0)
        return f"async did {step.id}"

    def sexec(step: Step, ctx: Any) -> dict[str, Any]:
        where.append(threading.get_ident())
        return {"output": "sync did it"}

    async def bad(step: Step, ctx: Any) -> str:
        raise RuntimeError("boom")

    class CallableObject:
        async def __call__(self, step: Step, output: str, ctx: Any) -> tuple[bool, str]:
            return (False, f"not convinced by {output}")

    async def main() -> list[Any]:
        return [
            await arun_executor(aexec, step, _ctx()),
            await arun_executor(sexec, step, _ctx()),
            await arun_executor(RunnableLambda(lambda d: "runnable", afunc=_arunnable), step, _ctx()),
            await arun_executor(bad, step, _ctx()),
            await arun_verifier(CallableObject(), step, "the output", _ctx()),
            await arun_verifier(lambda s, o, c: True, step, "out", _ctx()),
            threading.get_ident(),
        ]

    a, s, r, b, v, v2, loop_thread = asyncio.run(main())
    assert (a.ok, a.output) == (True, "async did s1")
    assert (s.ok, s.output) == (True, "sync did it") and where and where[0] != loop_thread  # a worker thread
    assert r.output == "async runnable"
    assert (b.ok, b.error) == (False, "RuntimeError: boom")
    assert v == Verdict(passed=False, reason="not convinced by the output") and v2.passed


async def _arunnable(d: dict[str, Any]) -> str:
    return "async runnable"


def test_the_sync_path_refuses_an_async_executor_or_verifier_with_the_fix() -> None:
    """Regression: an ``async def`` executor used to 'succeed' on invoke with the text of an un-awaited
    coroutine as the step's output."""
    import functools
    import warnings

    from planmode.errors import ConfigurationError
    from planmode.executors import run_executor, run_verifier
    from planmode.state.models import Step

    step = Step(id="s1", description="do it")

    async def aexec(step: Step, ctx: Any) -> str:
        return "never"

    async def averify(step: Step, output: str, ctx: Any) -> bool:
        return True

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine was never awaited"
        for executor in (aexec, functools.partial(aexec), lambda s, c: aexec(s, c)):
            with pytest.raises(ConfigurationError, match="ainvoke"):
                run_executor(executor, step, _ctx())
        with pytest.raises(ConfigurationError, match="verifier"):
            run_verifier(averify, step, "out", _ctx())


def test_the_default_executor_and_judge_have_async_twins() -> None:
    import asyncio

    from planmode.executors import Verdict, adefault_executor, allm_verifier, default_executor, llm_verifier
    from planmode.state.models import Step

    def respond(req: Any) -> Any:
        if req.purpose == "verify":
            return {"passed": "result 42" in req.text(), "reason": "needs 42"}
        return f"result 42 for {req.step_id}"

    step = Step(id="s1", description="compute", acceptance="mentions 42")
    model = ScriptedChatModel(responder=respond)
    out = asyncio.run(adefault_executor(step, _ctx(model)))
    assert out == default_executor(step, _ctx(model))
    assert out.ok and out.output == "result 42 for s1"
    verdict = asyncio.run(allm_verifier(step, out.output, _ctx(model)))
    assert verdict == llm_verifier(step, out.output, _ctx(model)) == Verdict(passed=True, reason="needs 42")
    assert asyncio.run(allm_verifier(step, "nothing", _ctx(model))).passed is False
