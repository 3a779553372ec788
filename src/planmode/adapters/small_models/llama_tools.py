"""Real tool calls from llama-cpp-python's server for models that write their calls as text.

llama-cpp-python 0.3.16 formats a prompt with the GGUF's own chat template (which shows the model its tools,
e.g. Qwen 2.5's ``<tool_call>`` convention), but with ``tool_choice`` "auto" it returns what the model wrote
as text: the server parses no tool calls. Its function-calling chat formats do not help a model of another
family: ``chatml-function-calling`` answers "auto" with the tool's name as the message content (its message
grammar only allows ``functions.NAME:`` or the end) and drops tool results
from the prompt; ``functionary`` needs a functionary model and its Hugging Face tokenizer.

`tool_call_handler`, registered as the chat format `TOOL_CALL_FORMAT`, keeps the GGUF's template and turns a
reply that is wholly a tool call written as text (`text_calls`: nothing but ``<tool_call>``
blocks, or JSON with ``name`` and ``arguments``; a call inside prose is text) into OpenAI ``tool_calls`` when
every call names a tool of the request. It is part of the small-model adapter: only a server planmode starts for
a GGUF model (``--gguf``) uses it. Any other reply, a streamed reply and a request with a named or "none"
``tool_choice`` pass through unchanged. ``planmode run --gguf`` serves this format by default
(`planmode.local_server.DEFAULT_CHAT_FORMAT`).

`accept_null_content` makes the server take what OpenAI clients send after a tool call: an assistant message
with ``tool_calls`` and ``"content": null`` (LangChain's ``ChatOpenAI`` does), which llama-cpp-python 0.3.16's
request model refuses with HTTP 500 ("Input should be a valid string"). It rewrites such a content to ``""``
in the request before the server reads it.

Importing this module registers the format; it needs ``llama_cpp`` (the ``local`` extra).
"""

from __future__ import annotations

import importlib
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from planmode.adapters.small_models.text_calls import read_text_calls

__all__ = ["TOOL_CALL_FORMAT", "accept_null_content", "null_content_to_empty", "to_tool_calls", "tool_call_handler"]

TOOL_CALL_FORMAT = "planmode-tool-calls"

#: An ASGI message, and an ASGI application: ``await app(scope, receive, send)``.
Message = dict[str, Any]
ASGIApp = Callable[
    [dict[str, Any], Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]
]

# Imported by name: llama_cpp is an optional dependency without type information.
llama_chat_format: Any = importlib.import_module("llama_cpp.llama_chat_format")


def _base_handler(llama: Any) -> Callable[..., Any]:
    """The handler of the GGUF's own chat template, else llama-cpp-python's own fallback (``llama-2``): the
    prompt is what the server would build without this format."""
    handlers = getattr(llama, "_chat_handlers", {}) or {}
    handler = handlers.get("chat_template.default")
    chosen: Callable[..., Any] = handler or llama_chat_format.get_chat_completion_handler("llama-2")
    return chosen


def tool_call_handler(llama: Any, **kwargs: Any) -> Any:
    """A llama-cpp-python chat completion handler: the GGUF's template, then tool calls read from the text."""
    if isinstance(kwargs.get("messages"), list):
        kwargs["messages"] = [_arguments_as_objects(m) for m in kwargs["messages"]]
    response = _base_handler(llama)(llama=llama, **kwargs)
    tools = kwargs.get("tools") or []
    choice = kwargs.get("tool_choice")
    if kwargs.get("stream") or not tools or not (choice is None or choice in ("auto", "required")):
        return response
    names = {t.get("function", {}).get("name") for t in tools if isinstance(t, dict)}
    return to_tool_calls(response, names)


def _arguments_as_objects(message: Any) -> object:
    """``message`` with its tool calls' ``arguments`` (a JSON string in OpenAI's format) as objects: the form
    Hugging Face chat templates render (Qwen 2.5's ``tojson`` of a string shows the model an escaped string,
    and the model then writes its next call that way)."""
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if not isinstance(calls, list):
        return message
    fixed = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(arguments, str):
            try:
                value = json.loads(arguments)
            except (ValueError, RecursionError):
                value = None
            if isinstance(value, dict) and isinstance(function, dict):
                call = {**call, "function": {**function, "arguments": value}}
        fixed.append(call)
    return {**message, "tool_calls": fixed}


def to_tool_calls(response: Any, names: set[Any]) -> Any:
    """``response`` (an OpenAI chat completion) with a message that is a tool call written as text turned into
    ``tool_calls``, when every call names one of ``names``; otherwise ``response`` unchanged. Never raises."""
    try:
        choice = response["choices"][0]
        message = choice["message"]
        found = read_text_calls(message.get("content"))
    except (KeyError, IndexError, TypeError, AttributeError):
        return response
    if found is None or found.problem is not None or not found.calls:
        return response
    if any(call.name not in names for call in found.calls):
        return response  # planmode's tool loop tells the model that the tool does not exist
    message["content"] = None
    message["tool_calls"] = [
        {
            "id": "call_" + uuid.uuid4().hex[:24],
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.args)},
        }
        for call in found.calls
    ]
    choice["finish_reason"] = "tool_calls"
    return response


llama_chat_format.LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(
    TOOL_CALL_FORMAT, tool_call_handler, overwrite=True
)


def null_content_to_empty(body: bytes) -> bytes:
    """A chat request's JSON with every ``"content": null`` of a message set to ``""``; other bodies as they
    are. Never raises."""
    try:
        data = json.loads(body)
        messages = data.get("messages") if isinstance(data, dict) else None
        if not isinstance(messages, list):
            return body
        changed = False
        for message in messages:
            if isinstance(message, dict) and "content" in message and message["content"] is None:
                message["content"] = ""
                changed = True
        return json.dumps(data).encode() if changed else body
    except (ValueError, RecursionError):
        return body


def _null_content_middleware(app: ASGIApp) -> ASGIApp:
    """An ASGI wrapper of ``app`` that passes ``POST .../chat/completions`` bodies through
    `null_content_to_empty`."""

    async def wrapped(
        scope: dict[str, Any],
        receive: Callable[[], Awaitable[Message]],
        send: Callable[[Message], Awaitable[None]],
    ) -> None:
        if (
            scope.get("type") != "http"
            or scope.get("method") != "POST"
            or not scope.get("path", "").endswith("/chat/completions")
        ):
            await app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await app(scope, receive, send)  # the client went away: let the app see it
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = null_content_to_empty(b"".join(chunks))
        headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app({**scope, "headers": headers}, replay, send)

    return wrapped


def accept_null_content() -> None:
    """Make llama-cpp-python's ``create_app`` (imported by ``python -m llama_cpp.server`` afterwards) wrap its
    app with `_null_content_middleware`."""
    server_app: Any = importlib.import_module("llama_cpp.server.app")
    original = server_app.create_app
    if getattr(original, "_planmode_wrapped", False):
        return

    def create_app(*args: Any, **kwargs: Any) -> ASGIApp:
        return _null_content_middleware(original(*args, **kwargs))

    create_app._planmode_wrapped = True  # type: ignore[attr-defined]  # a marker on the function: not wrapped twice
    server_app.create_app = create_app
