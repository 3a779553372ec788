"""The model layer (planmode.llm, the tool loop, executors): runnables built once, and the async twins of every
model-facing function, through the scripted chat model and the scripted OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from planmode.context import PlanModeContext
from planmode.llm import call_structured, structured_runnable
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


def test_json_object_mode_renders_the_schema_once_over_http(monkeypatch: pytest.MonkeyPatch) -> None:
    """json_object sends the schema in the request and the prompt: it is rendered on the first call only."""
    renders = 0
    original = Answer.model_json_schema.__func__  # type: ignore[attr-defined]  # a classmethod's function

    def counting(cls: type[BaseModel], *args: Any, **kwargs: Any) -> dict[str, Any]:
        nonlocal renders
        renders += 1
        return original(cls, *args, **kwargs)  # type: ignore[no-any-return]  # pydantic's own return type

    monkeypatch.setattr(Answer, "model_json_schema", classmethod(counting))
    settings = PlanModeContext(structured_output="json_object", context_tokens=8192)
    with ScriptedOpenAIServer(queue_responder([f'{{"value": {i}}}' for i in range(4)])) as srv:
        model = ChatOpenAI(base_url=srv.base_url, api_key="test", model="scripted", max_retries=0)
        values = [call_structured(model, Answer, MESSAGES, settings)[0] for _ in range(4)]
        bodies = list(srv.requests)
    assert values == [Answer(value=i) for i in range(4)]
    assert renders == 1
    assert all(b["response_format"]["type"] == "json_object" for b in bodies)
    assert all("matches this JSON schema" in b["messages"][0]["content"] for b in bodies)


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
