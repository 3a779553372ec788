"""The caches kept for the benchmarks, each pinned (issue 22, section 5): what they save is measured by
``python -m bench.caches_bench`` and written in bench/NOTES.md ("Caches"). The structured-output runnables are
pinned in test_model_layer.py, the context schema of `PlanModeGraph` in test_settings_resolution.py."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

import planmode.state.channel as channel_module
from planmode.context import PlanModeContext
from planmode.llm.window import _TOOL_TOKENS, _fit
from planmode.state.channel import PlanChannel
from planmode.state.models import Plan, Step, StepStatus
from planmode.testing.scripted import ScriptedChatModel
from planmode.tools.loop import _LOOPS, _loop_for


@tool
def read_file(path: str) -> str:
    """Read a file of the workspace."""
    return path


def test_an_unchanged_plan_is_dumped_once_and_a_new_version_dumps_only_its_changed_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A checkpoint stores the plan's data at every super-step; most leave the plan unchanged (a 400-step plan's
    data took milliseconds to make, a hit about a microsecond)."""
    dumped: list[str] = []
    original = Step.model_dump

    def counting(self: Step, *args: Any, **kwargs: Any) -> Any:
        dumped.append(self.id)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Step, "model_dump", counting)
    monkeypatch.setattr(channel_module, "_DUMPED", type(channel_module._DUMPED)())
    monkeypatch.setattr(channel_module, "_STEPS", type(channel_module._STEPS)())
    monkeypatch.setattr(channel_module, "_PACKED", type(channel_module._PACKED)())
    plan = Plan(goal="g", version=1, steps=[Step(id=f"s{i}", description=f"step {i}") for i in range(3)])
    channel = PlanChannel(Any)
    channel.value = plan
    first = channel.checkpoint()
    assert sorted(dumped) == ["s0", "s1", "s2"]
    assert channel.checkpoint() == first and len(dumped) == 3  # the same plan: its data, not dumped again
    done = plan.steps[0].model_copy(update={"status": StepStatus.DONE})
    channel.value = plan.model_copy(update={"steps": [done, *plan.steps[1:]]})
    channel.checkpoint()
    assert dumped[3:] == ["s0"]  # a new version: only the step that changed


def test_a_tool_loop_is_compiled_once_per_model_tools_and_bounds() -> None:
    """The default executor runs a compiled loop per step (a compile took milliseconds, a hit microseconds)."""
    model, settings = ScriptedChatModel(responder=lambda *a: "ok"), PlanModeContext()
    args: dict[str, Any] = {"allow_writes": False, "max_iterations": 3, "max_tool_calls": None, "binding": None}
    before = _LOOPS.builds
    first = _loop_for(model, [read_file], settings, **args)
    assert _loop_for(model, [read_file], settings, **args) is first
    assert _LOOPS.builds == before + 1
    _loop_for(model, [read_file], settings, **{**args, "max_iterations": 4})  # other bounds: its own loop
    assert _LOOPS.builds == before + 2


def test_the_tools_schema_tokens_are_counted_once_per_tools() -> None:
    """Every model turn fits the prompt to the context window, counting the tools' schemas (rendered once)."""
    tools, settings, messages = [read_file], PlanModeContext(), [HumanMessage(content="hi")]
    before = _TOOL_TOKENS.builds
    for _ in range(3):
        assert _fit(messages, settings, tools, 100_000) == messages
    assert _TOOL_TOKENS.builds == before + 1
