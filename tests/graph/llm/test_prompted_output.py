"""structured_output="prompted": the JSON shape stated in the system message, no response_format and no tools;
the answer's JSON read from its text (fenced, with prose around it) and checked by Pydantic; an invalid answer
asked again through the retry loop with the fields named. The default of ``--gguf`` (`settings_for`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_openai import ChatOpenAI

from planmode.context import PlanModeContext
from planmode.graph import build_graph
from planmode.llm import ask_until_valid, call_structured
from planmode.llm.structured import AUTO_ORDER, shape_hint
from planmode.local_server import LocalServer, settings_for
from planmode.persistence import sqlite_checkpointer
from planmode.state.draft import PlanDraft
from planmode.testing.openai_server import ScriptedOpenAIServer
from planmode.testing.scripted import ScriptedChatModel, ScriptRequest


def prompted() -> PlanModeContext:
    return PlanModeContext(structured_output="prompted", context_tokens=8192)


MESSAGES = [SystemMessage(content="planmode:plan Write a plan."), HumanMessage(content="Task: write hello.py")]
PLAN = {
    "title": "hello",
    "steps": [
        {
            "id": "write_hello",
            "description": "Write hello.py that prints Hello",
            "tools": ["write_file"],
            "acceptance": "`python hello.py` prints Hello",
        }
    ],
}
#: Every structured-output request a grammar-building server would get is refused: response_format and tools.
REFUSE_ALL = ("json_schema", "json_object", "tools")


def test_a_fenced_answer_with_prose_is_read_and_the_request_has_no_response_format_or_tools() -> None:
    """Over real HTTP (ChatOpenAI): the request carries neither response_format nor tools (a server refusing both
    still answers), the system message shows the shape, and the JSON in a fenced block among prose is the value."""
    answer = "Sure! Here is the plan:\n```json\n" + json.dumps(PLAN) + "\n```\nLet me know if it should change."
    with ScriptedOpenAIServer(lambda body: answer, refuse=REFUSE_ALL) as srv:
        model = ChatOpenAI(base_url=srv.base_url, api_key="test", model="scripted", max_retries=0)
        value, error, raw = call_structured(model, PlanDraft, MESSAGES, prompted())
        (body,) = srv.requests
    assert error is None and value is not None and raw is not None
    assert [s.id for s in value.steps] == ["write_hello"] and value.steps[0].acceptance.startswith("`python hello")
    assert "response_format" not in body and "tools" not in body and "tool_choice" not in body
    system = body["messages"][0]["content"]
    assert system.startswith("planmode:plan Write a plan.")  # the node's prompt first, then the shape
    assert '"steps": [{"id": "step_1", "description": "..."' in system
    assert "steps[].description (required)" in system


def test_an_invalid_answer_is_asked_again_with_the_field_named() -> None:
    """The retry loop gets the validation error naming the field and the fix; the second answer is taken. No
    request of the scripted model carries tools (the mode binds nothing)."""
    bad = {"steps": [{"id": "write_hello", "description": ""}]}
    answers = [json.dumps(bad), "```\n" + json.dumps(PLAN) + "\n```"]

    def respond(req: ScriptRequest) -> str:
        return answers[min(len(model.requests), len(answers)) - 1]

    model = ScriptedChatModel(responder=respond)
    asked = ask_until_valid(
        model,
        PlanDraft,
        MESSAGES,
        prompted(),
        attempts=2,
        accept=lambda draft: (draft, []),
        retry_prompt=lambda reasons: "That answer is invalid: " + "; ".join(reasons) + ". Answer again.",
    )
    assert asked.value is not None and [s.id for s in asked.value.steps] == ["write_hello"]
    assert len(asked.errors) == 1 and "steps.0.description" in asked.errors[0]
    first, second = model.requests
    assert first.tools == [] and second.tools == [] and first.schema is None
    retry = second.messages[-1]
    assert isinstance(retry, HumanMessage) and "steps.0.description" in str(retry.content)
    assert "at least 1 character" in str(retry.content)  # what to fix, not only where


def test_an_answer_without_json_says_to_answer_with_one_object() -> None:
    model = ScriptedChatModel(responder=lambda req: "I will write hello.py with a print call.")
    value, error, _ = call_structured(model, PlanDraft, MESSAGES, prompted())
    assert value is None and error is not None and "answer with one JSON object" in error


def test_the_shape_hint_is_one_example_and_a_line_per_field() -> None:
    hint = shape_hint(PlanDraft)
    example = json.loads(hint.split("\n")[1])
    # Optional lists are shown empty (an example dependency would be copied), text fields invite a value.
    assert example == {
        "title": "...",
        "steps": [
            {
                "id": "step_1",
                "description": "...",
                "dependencies": [],
                "tools": [],
                "complexity": "medium",
                "acceptance": "...",
                "checks": [],
            }
        ],
    }
    assert '- steps[].complexity: one of "low", "medium", "high"' in hint
    assert len(hint) < len(json.dumps(PlanDraft.model_json_schema())) + 400


def test_prompted_is_a_setting_and_auto_s_last_resort(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANMODE_STRUCTURED_OUTPUT", "prompted")
    assert PlanModeContext().structured_output == "prompted"
    assert AUTO_ORDER[-1] == "prompted"  # it asks the server for nothing it can refuse


def test_gguf_settings_default_to_prompted() -> None:
    server = LocalServer(base_url="http://127.0.0.1:1/v1", model="m", n_ctx=4096, pid=0)
    assert settings_for(server, PlanModeContext()).structured_output == "prompted"
    chosen = settings_for(server, PlanModeContext(structured_output="json_object"))
    assert chosen.structured_output == "json_object"  # a chosen mode stays
    assert settings_for(server, PlanModeContext()).retry_judged_failed is True
    assert settings_for(server, PlanModeContext(retry_judged_failed=False)).retry_judged_failed is False
    assert settings_for(server, PlanModeContext()).final_summary is False  # the record is the answer: no call
    assert settings_for(server, PlanModeContext(final_summary=True)).final_summary is True


def test_a_run_completes_on_a_server_that_refuses_response_format_and_tools(tmp_path: Path) -> None:
    """End to end: plan, verification and the final answer through a server that refuses every structured-output
    request; in prompted mode the planner's and verifier's JSON comes back as text."""

    def respond(body: dict[str, Any]) -> str:
        first = str(body["messages"][0].get("content") or "")
        if first.startswith("planmode:plan"):
            return "Here it is:\n```json\n" + json.dumps(PLAN) + "\n```"
        if first.startswith("planmode:verify"):
            return '{"passed": true, "reason": ""}'
        return "hello.py was written."

    with ScriptedOpenAIServer(respond, refuse=REFUSE_ALL) as srv:
        graph = build_graph(checkpointer=sqlite_checkpointer(tmp_path / "runs.sqlite"), executor=lambda s, c: "ok")
        config: RunnableConfig = {"configurable": {"thread_id": "t"}}
        graph.invoke(  # type: ignore[call-overload]  # the input as a tuple message, as users write it
            {"messages": [("user", "Write hello.py that prints Hello, then check it")]},
            config,
            context=PlanModeContext(
                mode="plan", approval="auto", base_url=srv.base_url, model="scripted", structured_output="prompted"
            ),
        )
        values = graph.get_state(config).values
        bodies = list(srv.requests)
    assert values["status"] == "completed", values.get("error")
    assert [s.id for s in values["plan"].steps] == ["write_hello"]
    assert bodies and all("response_format" not in b and "tools" not in b for b in bodies)
