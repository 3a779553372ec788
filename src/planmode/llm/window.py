"""The context budget: how many tokens a call may use, and a tool loop's messages trimmed to it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from planmode._cache import IdentityCache
from planmode.context import DEFAULT_CONTEXT_TOKENS, PlanModeContext
from planmode.llm._learnt import endpoint, is_openai, learn, learnt
from planmode.llm.trim import CHARS_PER_TOKEN, fit_messages

__all__ = [
    "acontext_budget",
    "afit_transcript",
    "context_budget",
    "discover_context_tokens",
    "fit_transcript",
    "get_json",
]


def context_budget(model: BaseChatModel, settings: PlanModeContext) -> int:
    """Tokens a call's prompt and answer may use: the context_tokens setting, else what the server reports
    (or named in an overflow error), else `DEFAULT_CONTEXT_TOKENS`."""
    if settings.context_tokens > 0:
        return settings.context_tokens
    base_url, _ = endpoint(model)
    if not base_url or not is_openai(model):
        return DEFAULT_CONTEXT_TOKENS
    known = learnt(model, "context")
    if known is None:
        known = learn(model, "context", discover_context_tokens(base_url) or 0)
    return int(known) or DEFAULT_CONTEXT_TOKENS


async def acontext_budget(model: BaseChatModel, settings: PlanModeContext) -> int:
    """`context_budget` without blocking the event loop: asking the server for its context size (once per model
    object) runs in a worker thread."""
    if settings.context_tokens <= 0 and endpoint(model)[0] and is_openai(model) and learnt(model, "context") is None:
        return await asyncio.to_thread(context_budget, model, settings)
    return context_budget(model, settings)


def fit_transcript(
    model: BaseChatModel, messages: Sequence[BaseMessage], settings: PlanModeContext, tools: Sequence[Any] = ()
) -> list[BaseMessage]:
    """A tool loop's messages trimmed to the context budget, leaving room for the answer and the tools'
    schemas (see `planmode.llm.trim`)."""
    return _fit(messages, settings, tools, context_budget(model, settings))


async def afit_transcript(
    model: BaseChatModel, messages: Sequence[BaseMessage], settings: PlanModeContext, tools: Sequence[Any] = ()
) -> list[BaseMessage]:
    """`fit_transcript` without blocking the event loop (see `acontext_budget`)."""
    return _fit(messages, settings, tools, await acontext_budget(model, settings))


def _fit(
    messages: Sequence[BaseMessage], settings: PlanModeContext, tools: Sequence[Any], budget: int
) -> list[BaseMessage]:
    reserve = max(0, settings.max_output_tokens) + (
        _TOOL_TOKENS.get(tuple(tools), (), lambda: _tool_tokens(tools)) if tools else 0
    )
    return fit_messages(messages, budget, reserve=reserve)


#: The tokens the tools' schemas take in a prompt, by tools (rendered once, not at every turn).
_TOOL_TOKENS: IdentityCache[int] = IdentityCache(size=64)


def _tool_tokens(tools: Sequence[Any]) -> int:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    try:
        specs = json.dumps([convert_to_openai_tool(t) for t in tools], default=str)
    except Exception:  # a tool whose schema cannot be rendered: count a generous fixed amount instead
        specs = "x" * 2000 * len(tools)
    return len(specs) // CHARS_PER_TOKEN


def discover_context_tokens(base_url: str, *, timeout: float = 2.0) -> int | None:
    """The context size an OpenAI-compatible server reports: llama.cpp's ``/props`` (``n_ctx``) or vLLM's
    ``/v1/models`` (``max_model_len``). None when it reports none (llama-cpp-python, Ollama) or cannot be
    asked. One short request each, no retries."""
    root = base_url.rstrip("/")
    root = root[: -len("/v1")] if root.endswith("/v1") else root
    props = get_json(root + "/props", timeout)
    if isinstance(props, dict):
        for holder in (props, props.get("default_generation_settings")):
            if isinstance(holder, dict) and isinstance(holder.get("n_ctx"), int) and holder["n_ctx"] > 0:
                return int(holder["n_ctx"])
    models = get_json(base_url.rstrip("/") + "/models", timeout)
    data = models.get("data") if isinstance(models, dict) else None
    for item in data if isinstance(data, list) else []:
        size = item.get("max_model_len") if isinstance(item, dict) else None
        if isinstance(size, int) and size > 0:
            return size
    return None


def get_json(url: str, timeout: float) -> object:
    """The JSON at ``url`` (http or https only), or None when it cannot be fetched or read: the request ends within
    ``timeout`` seconds, connect to last byte, and a reply past 1 MB is not read (`planmode.llm.http`)."""
    if not url.startswith(("http://", "https://")):
        return None
    import httpx

    from planmode.llm.http import ReplyTooLargeError, sync_client

    try:
        with sync_client(timeout, _PROBE_BYTES) as client:
            response = client.get(url)
        return json.loads(response.content) if response.status_code == 200 else None
    except (httpx.HTTPError, ReplyTooLargeError, ValueError):
        return None


#: The largest reply a probe of the server (its context size, its kind) reads.
_PROBE_BYTES = 1_000_000
