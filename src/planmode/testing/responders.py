"""A responder for `ScriptedOpenAIServer` that answers planmode's calls by their purpose, for server tests and
the server load benchmark.

    with ScriptedOpenAIServer(PlanResponder(plan=PLAN, delay=0.2)) as llm: ...

Every planmode system prompt starts with ``planmode:<purpose>``; the responder answers detect (a plan is
needed), plan (``plan``), execute (a line naming the step), verify (passed) and final (``final``), each after
``delay`` seconds, and records what it was asked.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from planmode.testing.openai_server import Fault, Reply

__all__ = ["PlanResponder", "structured_reply"]

_PURPOSE = re.compile(r"^planmode:(\w+)")
_STEP = re.compile(r"Step `([^`]+)`")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def structured_reply(body: Mapping[str, Any], value: Mapping[str, Any]) -> Reply:
    """A structured answer in the form the request asked for: JSON content, or a call of the schema's tool."""
    if body.get("response_format") or not body.get("tools"):
        return json.dumps(value)
    return {"tool_calls": [{"name": body["tools"][0]["function"]["name"], "arguments": dict(value)}]}


@dataclass
class PlanResponder:
    """Answers each chat-completions request by the purpose its system prompt starts with."""

    plan: Mapping[str, Any]
    final: str = "All done."
    delay: float = 0.0
    seen: list[tuple[str, str | None]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        system = next((_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer")), "")
        match = _PURPOSE.match(system)
        purpose = match.group(1) if match else "unknown"
        found = _STEP.search("\n".join(_text(m.get("content")) for m in messages[:3]))
        step = found.group(1) if found else None
        with self._lock:
            self.seen.append((purpose, step))
        reply: Reply
        if purpose == "detect":
            reply = structured_reply(body, {"needs_plan": True, "reason": "several steps"})
        elif purpose == "plan":
            reply = structured_reply(body, self.plan)
        elif purpose == "verify":
            reply = structured_reply(body, {"passed": True, "reason": ""})
        elif purpose == "execute":
            reply = f"Step {step or '?'} is done."
        elif purpose == "final":
            reply = self.final
        else:
            raise AssertionError(f"unexpected {purpose!r} call")
        if self.delay > 0:
            then: str | Mapping[str, Any] = reply if isinstance(reply, str | Mapping) else ""
            return Fault(delay=self.delay, then=then)
        return reply

    def counts(self) -> Counter[str]:
        """How many calls of each purpose were answered."""
        with self._lock:
            return Counter(p for p, _ in self.seen)
