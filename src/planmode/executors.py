"""Executors run one step; verifiers judge its outcome. Defaults use the chat model; users can pass their own.

An executor is any callable ``(step, context) -> str | dict | StepOutcome`` or a runnable invoked with
``{"step": step, "context": context}``. A dict may say ``{"blocked": True, "error": "why"}`` when the step
cannot proceed as planned: the step becomes ``blocked`` and reflect decides what happens.

A verifier is any callable ``(step, output, context) -> bool |
Verdict | tuple[bool, str]`` (or a runnable invoked with ``{"step", "output", "context"}``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from pydantic import BaseModel, Field

from planmode import prompts
from planmode._agent import run_tool_loop
from planmode.context import PlanModeContext
from planmode.errors import ModelUnavailableError
from planmode.llm import call_structured
from planmode.state.graph_state import StepOutcome
from planmode.state.models import Step

__all__ = [
    "Executor",
    "StepContext",
    "Verdict",
    "Verifier",
    "default_executor",
    "llm_verifier",
    "run_executor",
    "run_verifier",
]


@dataclass
class StepContext:
    """What an executor or verifier knows about the run around its step."""

    goal: str
    dependencies: dict[str, str]
    attempt: int
    previous_error: str | None
    settings: PlanModeContext
    tools: Sequence[BaseTool] = field(default_factory=tuple)
    model: BaseChatModel | None = None


class Verdict(BaseModel):
    """A verifier's judgement of one step's outcome."""

    passed: bool = Field(description="True when the outcome meets the acceptance criteria.")
    reason: str = Field(default="", description="What is missing, when it did not pass.")


Executor = Callable[[Step, StepContext], Any] | Runnable[Any, Any]
Verifier = Callable[[Step, str, StepContext], Any] | Runnable[Any, Any]


def default_executor(step: Step, ctx: StepContext) -> StepOutcome:
    """A bounded tool-calling agent over the user's tools (writes allowed: the plan is approved)."""
    if ctx.model is None:
        raise ValueError("default_executor needs a model in the step context")
    deps = "\n".join(f"- {k}: {v}" for k, v in ctx.dependencies.items()) or "(none)"
    prev = f"The previous attempt failed: {ctx.previous_error}" if ctx.previous_error else ""
    messages = [
        SystemMessage(content=prompts.EXECUTE_SYSTEM),
        HumanMessage(
            content=prompts.EXECUTE_USER.format(
                goal=ctx.goal,
                step_id=step.id,
                description=step.description,
                acceptance=step.acceptance or "(none given)",
                context=deps,
                previous_error=prev,
            ).rstrip()
        ),
    ]
    res = run_tool_loop(
        ctx.model,
        ctx.tools,
        messages,
        ctx.settings,
        allow_writes=True,
        max_iterations=ctx.settings.max_executor_iterations,
    )
    if res.error:
        return StepOutcome(step_id=step.id, ok=False, output=res.text, error=res.error, tool_calls=res.tool_calls)
    return StepOutcome(step_id=step.id, ok=True, output=res.text, tool_calls=res.tool_calls)


def run_executor(executor: Executor, step: Step, ctx: StepContext) -> StepOutcome:
    """Run any executor and normalise its answer; an exception becomes a failed attempt."""
    try:
        out = executor.invoke({"step": step, "context": ctx}) if isinstance(executor, Runnable) else executor(step, ctx)
    except GraphBubbleUp:
        raise  # an interrupt() in a tool or in the executor pauses the run: the node runs again on resume
    except ModelUnavailableError:
        raise  # not a verdict on the step: the run pauses (planmode.nodes.model_unavailable)
    except Exception as exc:  # an executor that raises is a failed attempt, recorded with its error
        return StepOutcome(step_id=step.id, ok=False, error=f"{type(exc).__name__}: {exc}")
    if isinstance(out, StepOutcome):
        return out
    if isinstance(out, dict):
        data = {"step_id": step.id, "ok": True, **out}
        try:
            return StepOutcome.model_validate(data)
        except ValueError as exc:
            return StepOutcome(step_id=step.id, ok=False, error=f"executor returned an invalid dict: {exc}")
    if hasattr(out, "content"):
        out = out.content
    return StepOutcome(step_id=step.id, ok=True, output=str(out))


def llm_verifier(step: Step, output: str, ctx: StepContext) -> Verdict:
    """The default LLM judge; a judge that cannot answer fails the attempt with that reason."""
    if not step.acceptance:
        return Verdict(passed=bool(output.strip()), reason="" if output.strip() else "the step produced no output")
    if ctx.model is None:
        raise ValueError("llm_verifier needs a model in the step context")
    messages = [
        SystemMessage(content=prompts.VERIFY_SYSTEM),
        HumanMessage(
            content=prompts.VERIFY_USER.format(
                step_id=step.id, description=step.description, acceptance=step.acceptance, output=output[:4000]
            )
        ),
    ]
    verdict, error, _ = call_structured(ctx.model, Verdict, messages, ctx.settings)
    if verdict is None:
        verdict, error, _ = call_structured(ctx.model, Verdict, messages, ctx.settings)
    return verdict if verdict is not None else Verdict(passed=False, reason=f"verifier gave no verdict: {error}")


def run_verifier(verifier: Verifier, step: Step, output: str, ctx: StepContext) -> Verdict:
    """Run any verifier and normalise its answer; an exception fails the attempt with the error."""
    try:
        if isinstance(verifier, Runnable):
            out = verifier.invoke({"step": step, "output": output, "context": ctx})
        else:
            out = verifier(step, output, ctx)
    except GraphBubbleUp:
        raise  # a verifier may ask a human too
    except ModelUnavailableError:
        raise  # not a verdict on the step: the run pauses (planmode.nodes.model_unavailable)
    except Exception as exc:  # a raising verifier fails the attempt; the run goes on within its bounds
        return Verdict(passed=False, reason=f"verifier raised {type(exc).__name__}: {exc}")
    if isinstance(out, Verdict):
        return out
    if isinstance(out, bool):
        return Verdict(passed=out, reason="" if out else "the verifier rejected the outcome")
    if isinstance(out, tuple) and len(out) == 2:
        return Verdict(passed=bool(out[0]), reason=str(out[1]))
    if isinstance(out, dict):
        return Verdict.model_validate(out)
    return Verdict(passed=False, reason=f"the verifier returned {type(out).__name__}, expected bool or Verdict")
