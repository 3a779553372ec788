"""The model factory: the chat model a run uses, passed to the builder or made from the run's settings."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from langchain_core.language_models import BaseChatModel

from planmode.context import PlanModeContext
from planmode.errors import ConfigurationError
from planmode.llm.structured import start_from_record

__all__ = ["ModelProvider"]


class ModelProvider:
    """Gives nodes the chat model: the one passed to the builder, or a ``ChatOpenAI`` made from settings."""

    def __init__(self, model: BaseChatModel | None = None) -> None:
        self._model = model
        self._cache: dict[tuple[Any, ...], BaseChatModel] = {}

    def get(self, settings: PlanModeContext, negotiated: str | None = None) -> BaseChatModel:
        """The chat model for a run; raises `ConfigurationError` naming the fix when it cannot be made.
        ``negotiated``: the run's ``negotiated_output`` (state), where structured output ``auto`` starts."""
        if self._model is not None:
            model = self._model
        else:
            key = _key(settings)
            if key not in self._cache:
                self._cache[key] = _openai_model(settings)
            model = self._cache[key]
        start_from_record(model, negotiated)
        return model

    async def aget(self, settings: PlanModeContext, negotiated: str | None = None) -> BaseChatModel:
        """`get` for async nodes: the first model of a key is made in a worker thread (importing langchain-openai
        and building its HTTP clients reads files, which must not block the event loop)."""
        made = self._model if self._model is not None else self._cache.get(_key(settings))
        if made is None:
            return await asyncio.to_thread(self.get, settings, negotiated)
        start_from_record(made, negotiated)
        return made


def _key(settings: PlanModeContext) -> tuple[Any, ...]:
    return (
        settings.model,
        settings.base_url,
        settings.request_timeout,
        settings.max_retries,
        settings.max_output_tokens,
        settings.max_reply_bytes,
    )


def _openai_model(settings: PlanModeContext) -> BaseChatModel:
    from langchain_openai import ChatOpenAI

    api_key = os.environ.get("OPENAI_API_KEY")
    if not api_key and not settings.base_url:
        raise ConfigurationError(
            "OPENAI_API_KEY is not set. Export it, set OPENAI_BASE_URL (or the base_url setting) for a local "
            "OpenAI-compatible server, or pass a chat model: build_graph(model=...)."
        )
    cap = settings.max_output_tokens if settings.max_output_tokens > 0 else None
    # ChatOpenAI sends its cap as max_completion_tokens, which llama-cpp-python's server (0.3.x) ignores: a
    # local server also gets the older max_tokens, which every OpenAI-compatible server reads.
    extra_body = {"max_tokens": cap} if cap and settings.base_url else None
    from planmode.llm.http import async_client, sync_client

    # Clients whose requests end within request_timeout, connect to last byte, and refuse a reply past
    # max_reply_bytes (planmode.llm.http); httpx's own timeouts bound each read, not the request.
    timeout, cap_bytes = settings.request_timeout, settings.max_reply_bytes
    return ChatOpenAI(
        http_client=sync_client(timeout, cap_bytes),
        http_async_client=async_client(timeout, cap_bytes),
        model=settings.model,
        base_url=settings.base_url,
        api_key=api_key or "not-needed",  # local servers ignore the key
        max_retries=settings.max_retries,
        timeout=settings.request_timeout,
        max_tokens=cap,
        extra_body=extra_body,
    )
