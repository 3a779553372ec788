"""Executors run one step; verifiers judge its outcome. Defaults use the chat model; users can pass their own.

An executor is any callable ``(step, context) -> str | dict | StepOutcome`` (or an ``async def`` one, run on the
graph's async path: ``ainvoke``, ``astream``, the LangGraph server) or a runnable invoked with
``{"step": step, "context": context}``. A dict may say ``{"blocked": True, "error": "why"}`` when the step
cannot proceed as planned: the step becomes ``blocked`` and reflect decides what happens.

A verifier is any callable ``(step, output, context) -> bool |
Verdict | tuple[bool, str]`` (or a runnable invoked with ``{"step", "output", "context"}``).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.runnables.config import run_in_executor
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.errors import GraphBubbleUp
from pydantic import BaseModel, Field

from planmode import prompts
from planmode._drive import Call, adrive, drive
from planmode.adapters import adapter_for
from planmode.checks import checks_summary
from planmode.context import PlanModeContext
from planmode.errors import ConfigurationError, ModelUnavailableError
from planmode.llm.structured import structured_steps
from planmode.prompts import earlier_text
from planmode.state.checks import declared_files, empty_file
from planmode.state.graph_state import StepOutcome, ToolRun
from planmode.state.models import Step
from planmode.text import clip
from planmode.tools import StepTools, is_read_only
from planmode.tools._writes import recording
from planmode.tools.loop import LoopResult, WholeFile, tool_loop_steps
from planmode.tools.workspace import workspace_root

__all__ = [
    "Executor",
    "StepContext",
    "Verdict",
    "Verifier",
    "adefault_executor",
    "allm_verifier",
    "arun_executor",
    "arun_verifier",
    "default_execution",
    "default_executor",
    "is_async",
    "llm_verifier",
    "run_executor",
    "run_verifier",
    "verification",
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
    """The tools the step is bound to: the graph's read-only tools plus the write tools the step declares
    (`planmode.tools.bind_step_tools`). Only these are handed to an executor."""
    model: BaseChatModel | None = None
    binding: StepTools | None = None
    """The step's binding (its bound tools, what it declares, the graph's tools it may not call): the default
    executor's tool loop refuses, and records, a call to any of the withheld ones."""
    done_files: frozenset[str] = frozenset()
    """Files the plan's done steps declare they produced (their file checks, `planmode.state.checks.done_files`)
    that this step does not: the default executor's tool loop refuses a write to one (a done step's work is never
    redone by another step)."""
    evidence: str | None = None
    """For a verifier: the attempt's evidence as text (the tool calls that ran, the files written, the results of
    the step's declared checks, and the executor's report marked as a claim: `planmode.nodes._evidence`). The
    default judge reads this instead of the executor's report alone."""
    earlier: str | None = None
    """The summary of the earlier run this run follows on its thread (`planmode.state.earlier.earlier_summary`),
    None when it follows none: the default executor gives it to the model with the step."""


class Verdict(BaseModel):
    """A verifier's judgement of one step's outcome."""

    # The reason first: the field order is the order a model writes them in, so it states what the evidence
    # shows before it decides
    reason: str = Field(
        default="", description="What the evidence shows for each criterion and, when it did not pass, what is missing."
    )
    passed: bool = Field(description="True when the outcome meets the acceptance criteria.")


Executor = Callable[[Step, StepContext], Any] | Runnable[Any, Any]
Verifier = Callable[[Step, str, StepContext], Any] | Runnable[Any, Any]


def _execute_messages(step: Step, ctx: StepContext) -> list[BaseMessage]:
    deps = "\n".join(f"- {k}: {v}" for k, v in ctx.dependencies.items()) or "(none)"
    prev = f"The previous attempt failed: {ctx.previous_error}" if ctx.previous_error else ""
    return [
        SystemMessage(content=prompts.EXECUTE_SYSTEM),
        HumanMessage(
            content=prompts.EXECUTE_USER.format(
                goal=ctx.goal,
                step_id=step.id,
                description=step.description,
                acceptance=step.acceptance or "(none given)",
                checks=checks_summary(step.checks),
                context=deps,
                previous_error=prev,
            ).rstrip()
            + earlier_text(ctx.earlier)
        ),
    ]


def _loop_outcome(step: Step, res: LoopResult) -> StepOutcome:
    refused = _refusal_error(step, res.refused)
    error = "; ".join(e for e in (refused, res.error) if e) or None
    return StepOutcome(
        step_id=step.id,
        ok=error is None,
        output=res.text,
        error=error,
        tool_calls=res.tool_calls,
        refused_tools=list(res.refused),
        tool_runs=tool_runs(res.messages),
    )


def tool_runs(messages: Sequence[BaseMessage], result_chars: int = 300) -> list[ToolRun]:
    """The tool calls that ran in ``messages``, in order: each call a model made that got a tool result, with its
    arguments and the beginning of the result (the evidence verify judges)."""
    calls: dict[str, tuple[str, str]] = {}
    for m in messages:
        if isinstance(m, AIMessage):
            for c in m.tool_calls:
                args = json.dumps(c.get("args") or {}, ensure_ascii=False, default=str)
                calls[c.get("id") or ""] = (c["name"], clip(args, result_chars, marker="…", fold=False))
    out: list[ToolRun] = []
    for m in messages:
        if isinstance(m, ToolMessage):
            name, args = calls.get(m.tool_call_id, (m.name or "?", ""))
            text = clip(str(m.content), result_chars, marker="…", fold=False)
            out.append(ToolRun(name=name, args=args, ok=m.status != "error", result=text))
    return out


def _refusal_error(step: Step, refused: Sequence[str]) -> str | None:
    """Why an attempt that called tools the step is not bound to failed (None: it called none)."""
    if not refused:
        return None
    names = ", ".join(dict.fromkeys(refused))
    return (
        f"refused {len(refused)} call(s) to tools step {step.id!r} does not declare: {names} (the step declares: "
        f"{', '.join(step.tools) or 'none'}); they did not run. A step that needs them must declare them "
        "(a patch, approved again)."
    )


def _model_of(ctx: StepContext, who: str) -> BaseChatModel:
    if ctx.model is None:
        raise ValueError(f"{who} needs a model in the step context")
    return ctx.model


def default_executor(step: Step, ctx: StepContext) -> StepOutcome:
    """A bounded tool-calling agent over the step's bound tools (`StepContext.tools`: the read-only ones and the
    write tools the step declares; writes allowed, the plan is approved). A call to any other tool of the graph
    is refused to the model and fails the attempt (`StepOutcome.refused_tools` names them)."""
    return drive(_default_steps(step, ctx))


async def adefault_executor(step: Step, ctx: StepContext) -> StepOutcome:
    """`default_executor` on the event loop (`arun_tool_loop`)."""
    return await adrive(_default_steps(step, ctx))


def _default_steps(step: Step, ctx: StepContext) -> Generator[Any, Any, StepOutcome]:
    """`default_executor` as a loop for a driver (`planmode._drive`): the tool loop's, composed.

    A step that declares a write tool and whose model answered without one running (small models describe the
    call, or ask for the tool) is told once, within the same attempt and its turn bound, to call it: one more turn
    instead of a failed verification and a new attempt. With the small-model adapter on, when its write tool takes a
    path and a content, a call named after the step with a content is a call of that tool (on the step's declared
    file, or else on the path the call names); when the step declares one file, once told, the model may instead
    answer with the file's whole content in one fenced block. Either is written with that tool through the same
    gate (`planmode.tools.loop.WholeFile`)."""
    model = _model_of(ctx, "default_executor")
    turns = ctx.settings.max_executor_iterations
    writes = _declared_writes(step, ctx)
    whole = _whole_file(step, ctx, writes)
    res = yield from tool_loop_steps(
        model,
        ctx.tools,
        _execute_messages(step, ctx),
        ctx.settings,
        allow_writes=True,
        max_iterations=turns,
        binding=ctx.binding,
        whole_file=whole,
    )
    left = turns - sum(isinstance(m, AIMessage) for m in res.messages)
    if (
        writes
        and left > 0
        and res.error is None
        and not any(r.ok and r.name in writes for r in tool_runs(res.messages))
    ):
        text = prompts.EXECUTE_WRITE_NUDGE.format(tools=", ".join(writes), tool=writes[0])
        if whole is not None and whole.path is not None and adapter_for(ctx.settings) is not None:
            text += " " + prompts.EXECUTE_WHOLE_FILE.format(path=whole.path, tool=whole.tool)
        more = yield from tool_loop_steps(
            model,
            ctx.tools,
            [*res.messages, HumanMessage(content=text)],
            ctx.settings,
            allow_writes=True,
            max_iterations=left,
            binding=ctx.binding,
            whole_file=replace(whole, fenced=True) if whole is not None else None,
        )
        res = LoopResult(
            messages=more.messages,
            text=more.text,
            tool_calls=res.tool_calls + more.tool_calls,
            error=more.error,
            tool_names=[*res.tool_names, *more.tool_names],
            refused=[*res.refused, *more.refused],
        )
    return _loop_outcome(step, res)


def _whole_file(step: Step, ctx: StepContext, writes: Sequence[str]) -> WholeFile | None:
    """The declared write tool that writes a file whole (one that takes ``path`` and ``content``, ``write_file``
    first) and the file the step produces, or None when there is no such tool. The file is the one the step's file
    checks declare (`planmode.state.checks.declared_files`), None when they declare none or several; only the
    small-model adapter, when it is on, reads one from the step's prose."""
    declared = declared_files(step)
    adapter = adapter_for(ctx.settings)
    path: str | None = declared[0] if len(declared) == 1 else None
    if path is None and not declared and adapter is not None:
        path = adapter.produced_file(step)
    by_name = {t.name: t for t in ctx.tools}
    runnable = [by_name[n] for n in dict.fromkeys(step.tools) if n in by_name]
    shapes = tuple(_shape(t) for t in runnable if ctx.binding is None or ctx.binding.binds(t))
    for name in sorted(writes, key=lambda n: n != "write_file"):
        tool = by_name.get(name)
        if tool is not None and {"path", "content"} <= set(tool.args):
            named = "\n".join((step.description, step.acceptance or "", ctx.goal or ""))
            root = workspace_root(ctx.tools)
            top = str(root) if root is not None else None
            empty = path is not None and empty_file(step, path)
            if not empty and not declared and adapter is not None:
                empty = adapter.says_empty(step)
            return WholeFile(
                tool=name,
                path=path,
                alias=step.id,
                root=top,
                named=named,
                empty=empty,
                shapes=shapes,
                kept=ctx.done_files,
            )
    if shapes:  # no whole-file write (edit_file, read_file): a call named after the step may be one of its tools
        root = workspace_root(ctx.tools)
        top = str(root) if root is not None else None
        return WholeFile(
            tool=shapes[0][0], path=None, alias=step.id, root=top, whole=False, shapes=shapes, kept=ctx.done_files
        )
    return None


def _shape(tool: BaseTool) -> tuple[str, frozenset[str], frozenset[str]]:
    """A tool's name, required arguments and all its arguments."""
    try:
        required = list(convert_to_openai_tool(tool)["function"]["parameters"].get("required", []))
    except Exception:  # a schema that cannot be read: every argument is required
        required = list(tool.args)
    return tool.name, frozenset(required), frozenset(tool.args)


def _declared_writes(step: Step, ctx: StepContext) -> list[str]:
    """The tools that change things which ``step`` declares and may run, in its order."""
    runnable = {t.name for t in ctx.tools if not is_read_only(t) and (ctx.binding is None or ctx.binding.binds(t))}
    return [name for name in dict.fromkeys(step.tools) if name in runnable]


def default_execution(step: Step, ctx: StepContext) -> Generator[Any, Any, StepOutcome]:
    """``run_executor(default_executor, step, ctx)`` as a loop for a driver (`planmode._drive`): execute_step's
    body composes it, so its driver makes the executor's model calls. The same outcome, writes and errors."""
    with recording() as writes:  # the files the step's workspace tools write (planmode.tools._writes)
        try:
            out = yield from _default_steps(step, ctx)
        except GraphBubbleUp:
            raise  # an interrupt() in a tool pauses the run: the node runs again on resume
        except ModelUnavailableError:
            raise  # not a verdict on the step: the run pauses (planmode.nodes.model_unavailable)
        except Exception as exc:  # as in run_executor: a failed attempt, recorded with its error
            return _with_writes(StepOutcome(step_id=step.id, ok=False, error=f"{type(exc).__name__}: {exc}"), writes)
        return _with_writes(_outcome(step, out), writes)


def is_async(fn: Any) -> bool:
    """Whether calling ``fn`` gives a coroutine: an ``async def`` function, a partial of one, or an object whose
    ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


def _refuse_async(what: str, fn: Any, result: Any = None) -> ConfigurationError:
    if inspect.iscoroutine(result):
        result.close()  # never awaited: no "coroutine was never awaited" warning
    name = getattr(fn, "__name__", type(fn).__name__)
    return ConfigurationError(
        f"the {what} {name!r} is async (a coroutine function): run the graph with ainvoke, astream or the "
        f"LangGraph server, or pass a synchronous {what} to use invoke, stream and the planmode CLI"
    )


def run_executor(executor: Executor, step: Step, ctx: StepContext) -> StepOutcome:
    """Run any executor and normalise its answer; an exception becomes a failed attempt.

    An async executor (``async def``) cannot run here: `ConfigurationError` names the fix (`arun_executor`, the
    graph's async path, runs it), as LangGraph refuses an async-only node on ``invoke``."""
    if not isinstance(executor, Runnable) and is_async(executor):
        raise _refuse_async("executor", executor)
    with recording() as writes:  # the files the step's workspace tools write (planmode.tools._writes)
        try:
            out = (
                executor.invoke({"step": step, "context": ctx})
                if isinstance(executor, Runnable)
                else executor(step, ctx)
            )
        except GraphBubbleUp:
            raise  # an interrupt() in a tool or in the executor pauses the run: the node runs again on resume
        except ModelUnavailableError:
            raise  # not a verdict on the step: the run pauses (planmode.nodes.model_unavailable)
        except Exception as exc:  # an executor that raises is a failed attempt, recorded with its error
            return _with_writes(StepOutcome(step_id=step.id, ok=False, error=f"{type(exc).__name__}: {exc}"), writes)
        if inspect.isawaitable(out):  # a sync callable that returned a coroutine
            raise _refuse_async("executor", executor, out)
        return _with_writes(_outcome(step, out), writes)


async def arun_executor(executor: Executor, step: Step, ctx: StepContext) -> StepOutcome:
    """`run_executor` on the event loop: a runnable is ``ainvoke``d, a coroutine function awaited, and a sync
    callable runs in a worker thread (with the run's context, so ``interrupt()`` and the stream writer work)."""
    with recording() as writes:  # a worker thread or a task started here copies the context: the same recorder
        try:
            if isinstance(executor, Runnable):
                out = await executor.ainvoke({"step": step, "context": ctx})
            elif is_async(executor):
                out = await executor(step, ctx)
            else:
                out = await run_in_executor(None, executor, step, ctx)
            if inspect.isawaitable(out):
                out = await out
        except GraphBubbleUp:
            raise
        except ModelUnavailableError:
            raise
        except Exception as exc:  # as in run_executor
            return _with_writes(StepOutcome(step_id=step.id, ok=False, error=f"{type(exc).__name__}: {exc}"), writes)
        return _with_writes(_outcome(step, out), writes)


def _with_writes(outcome: StepOutcome, writes: dict[str, str]) -> StepOutcome:
    """The outcome with the files its attempt wrote through the workspace tools (what the executor reported and
    what the recorder saw)."""
    if not writes:
        return outcome
    return outcome.model_copy(update={"writes": {**outcome.writes, **writes}})


def _outcome(step: Step, out: Any) -> StepOutcome:
    """An executor's answer as a `StepOutcome`."""
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


def _verify_messages(step: Step, output: str, ctx: StepContext) -> list[BaseMessage]:
    evidence = ctx.evidence if ctx.evidence is not None else f"The executor's report:\n{output[:4000]}"
    return [
        SystemMessage(content=prompts.VERIFY_SYSTEM),
        HumanMessage(
            content=prompts.VERIFY_USER.format(
                step_id=step.id, description=step.description, acceptance=step.acceptance, output=evidence
            )
        ),
    ]


def _no_judge_needed(step: Step, output: str) -> Verdict | None:
    if step.acceptance:
        return None
    return Verdict(passed=bool(output.strip()), reason="" if output.strip() else "the step produced no output")


def llm_verifier(step: Step, output: str, ctx: StepContext) -> Verdict:
    """The default LLM judge; a judge that cannot answer fails the attempt with that reason."""
    return drive(_judge_steps(step, output, ctx))


async def allm_verifier(step: Step, output: str, ctx: StepContext) -> Verdict:
    """`llm_verifier` with ``ainvoke``."""
    return await adrive(_judge_steps(step, output, ctx))


def _judge_steps(step: Step, output: str, ctx: StepContext) -> Generator[Any, Any, Verdict]:
    """`llm_verifier` as a loop for a driver (`planmode._drive`): its structured calls, composed."""
    plain = _no_judge_needed(step, output)
    if plain is not None:
        return plain
    model, messages = _model_of(ctx, "llm_verifier"), _verify_messages(step, output, ctx)
    verdict, error, _ = yield from structured_steps(model, Verdict, messages, ctx.settings)
    if verdict is None:
        verdict, error, _ = yield from structured_steps(model, Verdict, messages, ctx.settings)
    return verdict if verdict is not None else Verdict(passed=False, reason=f"verifier gave no verdict: {error}")


def verification(verifier: Verifier | None, step: Step, output: str, ctx: StepContext) -> Generator[Any, Any, Verdict]:
    """``run_verifier(verifier or llm_verifier, ...)`` as a loop for a driver (`planmode._drive`): the default
    judge's structured calls composed (verify's body yields from it, so its driver makes them); a verifier of
    one's own is one call (`run_verifier` / `arun_verifier`). The same verdicts and errors."""
    if verifier is not None:
        given: Verdict = yield Call(
            partial(run_verifier, verifier, step, output, ctx), partial(arun_verifier, verifier, step, output, ctx)
        )
        return given
    try:
        out = yield from _judge_steps(step, output, ctx)
    except GraphBubbleUp:
        raise  # a verifier may ask a human too
    except ModelUnavailableError:
        raise  # not a verdict on the step: the run pauses (planmode.nodes.model_unavailable)
    except Exception as exc:  # as in run_verifier: a raising judge fails the attempt
        return Verdict(passed=False, reason=f"verifier raised {type(exc).__name__}: {exc}")
    return _verdict(out)


def run_verifier(verifier: Verifier, step: Step, output: str, ctx: StepContext) -> Verdict:
    """Run any verifier and normalise its answer; an exception fails the attempt with the error. An async
    verifier raises `ConfigurationError` here, as an async executor does in `run_executor`."""
    if not isinstance(verifier, Runnable) and is_async(verifier):
        raise _refuse_async("verifier", verifier)
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
    if inspect.isawaitable(out):
        raise _refuse_async("verifier", verifier, out)
    return _verdict(out)


async def arun_verifier(verifier: Verifier, step: Step, output: str, ctx: StepContext) -> Verdict:
    """`run_verifier` on the event loop (a coroutine verifier awaited, a sync one in a worker thread)."""
    try:
        if isinstance(verifier, Runnable):
            out = await verifier.ainvoke({"step": step, "output": output, "context": ctx})
        elif is_async(verifier):
            out = await verifier(step, output, ctx)
        else:
            out = await run_in_executor(None, verifier, step, output, ctx)
        if inspect.isawaitable(out):
            out = await out
    except GraphBubbleUp:
        raise
    except ModelUnavailableError:
        raise
    except Exception as exc:  # as in run_verifier
        return Verdict(passed=False, reason=f"verifier raised {type(exc).__name__}: {exc}")
    return _verdict(out)


def _verdict(out: Any) -> Verdict:
    """A verifier's answer as a `Verdict`."""
    if isinstance(out, Verdict):
        return out
    if isinstance(out, bool):
        return Verdict(passed=out, reason="" if out else "the verifier rejected the outcome")
    if isinstance(out, tuple) and len(out) == 2:
        return Verdict(passed=bool(out[0]), reason=str(out[1]))
    if isinstance(out, dict):
        return Verdict.model_validate(out)
    return Verdict(passed=False, reason=f"the verifier returned {type(out).__name__}, expected bool or Verdict")
