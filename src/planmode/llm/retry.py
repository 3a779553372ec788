"""Asking until the answer is valid: the one loop behind plan, patch and reflect.

Each attempt is a structured call (or a given first answer); a parsed value goes through the caller's
``accept`` check; a failed attempt shows the model its answer and the reasons, and asks again, until
``attempts`` run out. The loop is written once (a generator) and driven by `ask_until_valid` (``invoke``) or
`aask_until_valid` (``ainvoke``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel

from planmode._drive import adrive, drive
from planmode.context import PlanModeContext
from planmode.llm.structured import Structured, acall_structured, call_structured
from planmode.text import clip

__all__ = ["Asked", "aask_until_valid", "ask_until_valid", "show_json"]

T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")

Accept = Callable[[T], tuple[R | None, list[str]]]
"""Checks a parsed answer: ``(result, [])`` when it is valid, ``(None, reasons)`` when it is not."""


@dataclass
class Asked(Generic[R]):
    """What asking until valid produced: the accepted result, or None and every attempt's errors."""

    value: R | None
    errors: list[str] = field(default_factory=list)
    """One entry per failed attempt: its reasons, joined with "; "."""


def show_json(value: BaseModel) -> str:
    """A parsed answer shown back to the model as JSON (json.dumps escapes what model_dump_json refuses, such
    as a lone surrogate from a model)."""
    return json.dumps(value.model_dump(mode="json"))


def _asking(
    messages: Sequence[BaseMessage],
    *,
    attempts: int,
    accept: Accept[T, R],
    retry_prompt: Callable[[list[str]], str],
    show: Callable[[T], str],
    show_chars: int,
    first: Structured[T] | None,
    on_reject: Callable[[list[str]], None] | None,
) -> Generator[list[BaseMessage], Structured[T], Asked[R]]:
    """The loop: yields the messages of each structured call to make and receives its answer."""
    errors: list[str] = []
    msgs = list(messages)
    for attempt in range(max(1, attempts)):
        value, err, raw = first if attempt == 0 and first is not None else (yield msgs)
        reasons: list[str] = [err] if err else []
        if value is not None:
            result, reasons = accept(value)
            if result is not None and not reasons:
                return Asked(result, errors)
        errors.append("; ".join(reasons))
        if on_reject is not None:
            on_reject(reasons)
        shown = show(value) if value is not None else (str(raw.content) if raw is not None else "")
        msgs += [
            AIMessage(content=clip(shown, show_chars, marker="", fold=False) or "(no answer)"),
            HumanMessage(content=retry_prompt(reasons)),
        ]
    return Asked(None, errors)


def ask_until_valid(
    model: BaseChatModel,
    schema: type[T],
    messages: Sequence[BaseMessage],
    settings: PlanModeContext,
    *,
    attempts: int,
    accept: Accept[T, R],
    retry_prompt: Callable[[list[str]], str],
    show: Callable[[T], str] = show_json,
    show_chars: int = 4000,
    first: Structured[T] | None = None,
    on_reject: Callable[[list[str]], None] | None = None,
) -> Asked[R]:
    """Ask for a ``schema`` value until ``accept`` takes one or ``attempts`` run out.

    ``first``: an answer to try before asking (it counts as the first attempt). After a failed attempt
    ``on_reject(reasons)`` runs, and the model sees its answer (``show(value)``, or the raw text when it could
    not be read, cut to ``show_chars``) and ``retry_prompt(reasons)``. Raises what `call_structured` raises
    (`ModelUnavailableError`, `ConfigurationError`)."""
    loop = _asking(
        messages,
        attempts=attempts,
        accept=accept,
        retry_prompt=retry_prompt,
        show=show,
        show_chars=show_chars,
        first=first,
        on_reject=on_reject,
    )
    return drive(loop, lambda msgs: call_structured(model, schema, msgs, settings))


async def aask_until_valid(
    model: BaseChatModel,
    schema: type[T],
    messages: Sequence[BaseMessage],
    settings: PlanModeContext,
    *,
    attempts: int,
    accept: Accept[T, R],
    retry_prompt: Callable[[list[str]], str],
    show: Callable[[T], str] = show_json,
    show_chars: int = 4000,
    first: Structured[T] | None = None,
    on_reject: Callable[[list[str]], None] | None = None,
) -> Asked[R]:
    """`ask_until_valid` with ``ainvoke``: the same attempts, checks and messages."""
    loop = _asking(
        messages,
        attempts=attempts,
        accept=accept,
        retry_prompt=retry_prompt,
        show=show,
        show_chars=show_chars,
        first=first,
        on_reject=on_reject,
    )
    return await adrive(loop, lambda msgs: acall_structured(model, schema, msgs, settings))
