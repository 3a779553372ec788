"""Asking until the answer is valid: the one loop behind plan, patch and reflect.

Each attempt is a structured call (or a given first answer); a parsed value goes through the caller's
``accept`` check; a failed attempt shows the model its answer and the reasons, and asks again, until
``attempts`` run out. The loop is written once (a generator) and driven by `ask_until_valid` (``invoke``) or
`aask_until_valid` (``ainvoke``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel

from planmode._drive import adrive, drive
from planmode.context import PlanModeContext
from planmode.llm.structured import Structured, structured_steps
from planmode.text import clip

__all__ = ["Asked", "aask_until_valid", "ask_until_valid", "asking", "show_json"]

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


def asking(
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
) -> Generator[Any, Any, Asked[R]]:
    """`ask_until_valid` as a loop for a driver (`planmode._drive`): each attempt is a structured call's loop
    (`structured_steps`, composed with ``yield from``); returns what was accepted. A node body composes it with
    ``yield from``, so the node's driver makes the calls."""
    errors: list[str] = []
    msgs = list(messages)
    for attempt in range(max(1, attempts)):
        if attempt == 0 and first is not None:
            value, err, raw = first
        else:
            value, err, raw = yield from structured_steps(model, schema, msgs, settings)
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
    loop = asking(
        model,
        schema,
        messages,
        settings,
        attempts=attempts,
        accept=accept,
        retry_prompt=retry_prompt,
        show=show,
        show_chars=show_chars,
        first=first,
        on_reject=on_reject,
    )
    return drive(loop)


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
    loop = asking(
        model,
        schema,
        messages,
        settings,
        attempts=attempts,
        accept=accept,
        retry_prompt=retry_prompt,
        show=show,
        show_chars=show_chars,
        first=first,
        on_reject=on_reject,
    )
    return await adrive(loop)
