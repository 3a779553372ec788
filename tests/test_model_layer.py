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
    with ScriptedOpenAIServer(queue_responder([f"{{\"value\": {i}}}" for i in range(4)])) as srv:
        model = ChatOpenAI(base_url=srv.base_url, api_key="test", model="scripted", max_retries=0)
        values = [call_structured(model, Answer, MESSAGES, settings)[0] for _ in range(4)]
        bodies = list(srv.requests)
    assert values == [Answer(value=i) for i in range(4)]
    assert renders == 1
    assert all(b["response_format"]["type"] == "json_object" for b in bodies)
    assert all("matches this JSON schema" in b["messages"][0]["content"] for b in bodies)
