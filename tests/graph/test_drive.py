"""The one driver of a node (`planmode._drive`): loops run side by side (`together`, as verify's judges) get their
calls made together, bounded, answered in order, an exception thrown into the loop whose call raised it; an
interrupt stops them all (issue 22 §1: one driver answers every call of a node)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Generator
from typing import Any

import pytest
from langgraph.errors import GraphInterrupt

from planmode._drive import Call, adrive, drive, together


class Peak:
    def __init__(self) -> None:
        self.now = self.peak = 0
        self.lock = threading.Lock()

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        with self.lock:
            self.now -= 1


def _loop(i: int, peak: Peak) -> Generator[Any, Any, str]:
    def run() -> int:
        peak.enter()
        try:
            time.sleep(0.05)
            if i == 1:
                raise ValueError("refused")
            return i * 10
        finally:
            peak.leave()

    async def arun() -> int:
        peak.enter()
        try:
            await asyncio.sleep(0.05)
            if i == 1:
                raise ValueError("refused")
            return i * 10
        finally:
            peak.leave()

    try:
        first = yield Call(run, arun)
    except ValueError as exc:  # the call's exception comes back into its own loop
        return f"{i}: {exc}"
    second = yield Call(lambda: first + 1, lambda: asyncio.sleep(0, first + 1))
    return f"{i}: {second}"


def test_loops_run_side_by_side_bounded_and_answered_in_order() -> None:
    want = ["0: 1", "1: refused", "2: 21", "3: 31"]
    peak = Peak()
    assert drive(together([_loop(i, peak) for i in range(4)], 2)) == want
    assert peak.peak == 2
    apeak = Peak()
    assert asyncio.run(adrive(together([_loop(i, apeak) for i in range(4)], 3))) == want
    assert apeak.peak == 3


def test_an_interrupt_in_one_call_stops_the_others_on_the_event_loop() -> None:
    finished: list[int] = []

    def loop(i: int) -> Generator[Any, Any, int]:
        async def arun() -> int:
            if i == 0:
                await asyncio.sleep(0.01)
                raise GraphInterrupt(())
            await asyncio.sleep(1.0)
            finished.append(i)
            return i

        return (yield Call(lambda: i, arun))

    started = time.monotonic()
    with pytest.raises(GraphInterrupt):
        asyncio.run(adrive(together([loop(i) for i in range(3)], 3)))
    assert time.monotonic() - started < 0.5
    assert finished == []
