"""The benchmark model: planmode's scripted chat model plus a simulated latency and exact token counts.

Every system (planmode and the baselines) talks to the same `BenchModel` with the same `bench.oracle`
responder, so differences in tokens, calls and time come from the systems, not from the answers.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatResult
from pydantic import PrivateAttr

from bench.tokens import input_tokens, output_tokens
from planmode.testing.scripted import ScriptedChatModel

__all__ = ["BenchModel", "CallRecord", "Usage", "classify"]

_ROLE = re.compile(r"^(?:planmode|bench):(\w+)")
#: Markers of the plan-and-execute tutorial's calls (its prompts are kept as the tutorial wrote them).
TUTORIAL_EXECUTE = "You are tasked with executing step"


def classify(messages: Sequence[BaseMessage], schema: str | None) -> str:
    """What a call is for: planmode's role line (``planmode:<purpose>``), a baseline's (``bench:<purpose>``),
    or the tutorial's calls recognised by their structured schema or prompt."""
    system = next((m for m in messages if isinstance(m, SystemMessage)), None)
    if system is not None:
        found = _ROLE.match(str(system.content))
        if found:
            return found.group(1)
    if schema == "Plan":
        return "tutorial_plan"
    if schema == "Act":
        return "tutorial_replan"
    if any(TUTORIAL_EXECUTE in str(m.content) for m in messages):
        return "tutorial_execute"
    return "unknown"


@dataclass(frozen=True)
class CallRecord:
    """One model call: what it was for, its tokens and when it ran (``time.perf_counter`` seconds)."""

    purpose: str
    input_tokens: int
    output_tokens: int
    start: float
    end: float
    prefix_tokens: int = 0
    """Input tokens before the first non-system message: the tool schemas and the system prompt, the part
    of the prompt that is the same for every call of this purpose (what a provider's prompt cache reuses)."""


@dataclass(frozen=True)
class Usage:
    """Totals over a run's calls."""

    calls: int
    input_tokens: int
    output_tokens: int
    by_purpose: dict[str, dict[str, int]]

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def output_of(self, *purposes: str) -> int:
        """Output tokens of the calls with these purposes."""
        return self.of("output", *purposes)

    def of(self, key: str, *purposes: str) -> int:
        """A total (``calls``, ``input``, ``output`` or ``prefix``) over the calls with these purposes."""
        return sum(self.by_purpose.get(p, {}).get(key, 0) for p in purposes)

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "by_purpose": self.by_purpose,
        }


class BenchModel(ScriptedChatModel):
    """`ScriptedChatModel` that sleeps ``latency`` seconds per call and counts each call's tokens."""

    latency: float = 0.0
    """Simulated latency of one call, in seconds (``time.sleep``: other threads run meanwhile)."""
    count_tokens: bool = True
    """Tokenize every call (off for the timing figures, so the tokenizer's CPU time is not measured)."""
    _records: list[CallRecord] = PrivateAttr(default_factory=list)
    _rec_lock: Any = PrivateAttr(default_factory=threading.Lock)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        start = time.perf_counter()
        result = super()._generate(messages, stop, run_manager, **kwargs)
        reply = result.generations[0].message
        purpose = classify(messages, kwargs.get("planmode_schema"))
        tokens_in = tokens_out = prefix = 0
        if self.count_tokens:
            tools = kwargs.get("tools") or []
            tokens_in = input_tokens(messages, tools)
            tokens_out = output_tokens(reply) if isinstance(reply, AIMessage) else 0
            head = [m for m in messages[:1] if isinstance(m, SystemMessage)]
            prefix = input_tokens(head, tools)
            if isinstance(reply, AIMessage):  # the exact counts are the usage planmode's accounting records
                usage = {"input_tokens": tokens_in, "output_tokens": tokens_out, "total_tokens": tokens_in + tokens_out}
                meta = {**(reply.response_metadata or {}), "model_name": "bench-oracle"}
                result.generations[0].message = reply.model_copy(
                    update={"usage_metadata": usage, "response_metadata": meta}
                )
        if self.latency > 0:
            time.sleep(self.latency)
        with self._rec_lock:
            self._records.append(CallRecord(purpose, tokens_in, tokens_out, start, time.perf_counter(), prefix))
        return result

    @property
    def records(self) -> list[CallRecord]:
        """Every call so far, in order of completion."""
        with self._rec_lock:
            return list(self._records)

    def usage(self) -> Usage:
        """Totals over every call so far."""
        recs = self.records
        by: dict[str, Counter[str]] = {}
        for r in recs:
            c = by.setdefault(r.purpose, Counter())
            c["calls"] += 1
            c["input"] += r.input_tokens
            c["output"] += r.output_tokens
            c["prefix"] += r.prefix_tokens
        return Usage(
            calls=len(recs),
            input_tokens=sum(r.input_tokens for r in recs),
            output_tokens=sum(r.output_tokens for r in recs),
            by_purpose={k: dict(v) for k, v in sorted(by.items())},
        )
