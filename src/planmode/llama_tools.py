"""Real tool calls from llama-cpp-python's server for models that write their calls as text.

llama-cpp-python 0.3.16 formats a prompt with the GGUF's own chat template (which shows the model its tools,
e.g. Qwen 2.5's ``<tool_call>`` convention), but with ``tool_choice`` "auto" it returns what the model wrote
as text: the server parses no tool calls. Its function-calling chat formats do not help a model of another
family: ``chatml-function-calling`` answers "auto" with the tool's name as the message content (its message
grammar only allows ``functions.NAME:`` or the end, measured on Qwen2.5-Coder 0.5B) and drops tool results
from the prompt; ``functionary`` needs a functionary model and its Hugging Face tokenizer.

`tool_call_handler`, registered as the chat format `TOOL_CALL_FORMAT`, keeps the GGUF's template and turns a
reply that is a tool call written as text (`planmode.tools.text_calls`: ``<tool_call>`` tags, or a whole reply
of JSON with ``name`` and ``arguments``) into OpenAI ``tool_calls`` when every call names a tool of the
request. Any other reply, a streamed reply and a request with a named or "none" ``tool_choice`` pass through
unchanged. ``planmode run --gguf`` serves this format by default (`planmode.local_server.DEFAULT_CHAT_FORMAT`).

Importing this module registers the format; it needs ``llama_cpp`` (the ``local`` extra).
"""

from __future__ import annotations

import importlib
import json
import uuid
from typing import Any

from planmode.tools.text_calls import read_text_calls

__all__ = ["TOOL_CALL_FORMAT", "to_tool_calls", "tool_call_handler"]

TOOL_CALL_FORMAT = "planmode-tool-calls"

# Imported by name: llama_cpp is an optional dependency without type information.
llama_chat_format: Any = importlib.import_module("llama_cpp.llama_chat_format")


def _base_handler(llama: Any) -> Any:
    """The handler of the GGUF's own chat template, else llama-cpp-python's own fallback (``llama-2``): the
    prompt is what the server would build without this format."""
    handlers = getattr(llama, "_chat_handlers", {}) or {}
    handler = handlers.get("chat_template.default")
    return handler or llama_chat_format.get_chat_completion_handler("llama-2")


def tool_call_handler(llama: Any, **kwargs: Any) -> Any:
    """A llama-cpp-python chat completion handler: the GGUF's template, then tool calls read from the text."""
    response = _base_handler(llama)(llama=llama, **kwargs)
    tools = kwargs.get("tools") or []
    choice = kwargs.get("tool_choice")
    if kwargs.get("stream") or not tools or not (choice is None or choice in ("auto", "required")):
        return response
    names = {t.get("function", {}).get("name") for t in tools if isinstance(t, dict)}
    return to_tool_calls(response, names)


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
