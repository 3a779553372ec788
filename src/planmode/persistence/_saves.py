"""Saved-checkpoint announcements: the async savers planmode makes say when each checkpoint is saved, so a node
waiting for the checkpoint it runs from to be durable (`planmode.persistence.await_until_durable`) wakes when it
is, instead of asking the database again and again.

Under LangGraph's default "async" durability a checkpoint is saved while the next super-step already runs;
execute_step waits for it before a step starts. `SqliteCheckpointSaver` (the sync saver of
`planmode.persistence.sqlite_checkpointer`) announces its saves too, and `planmode.persistence.wait_until_durable`
blocks on `Saves.wait_saved` until the save it waits for is announced: no query racing the save for the saver's
lock, no polling interval added to a chain step. With 50 runs on one LangGraph server, that wait asked the
database every few milliseconds (through the server's checkpointer adapter, a whole ``aget_tuple`` each
time), on the one connection that was busy saving the checkpoints waited for.

`Announcing` is a mixin for an async saver: after its ``aput`` returns (the row is committed) it announces the
checkpoint's key. `SAVES.watch` registers a waiter (or says the key was announced already); an announcement
wakes the waiters of its key on their own event loops. Nothing here replaces the database check: a checkpoint
saved by another process (a run resumed after a crash) is never announced here, and waiters still ask the
database, just rarely.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

__all__ = ["SAVES", "Announcing", "Key", "Saves", "saved_key"]

Key = tuple[str, str, str]
"""(thread id, checkpoint namespace, checkpoint id)."""


def saved_key(config: Any, checkpoint_id: str) -> Key:
    """The key of checkpoint ``checkpoint_id`` saved under ``config`` (the config given to ``aput``)."""
    conf = (config or {}).get("configurable") or {}
    return (str(conf.get("thread_id", "")), str(conf.get("checkpoint_ns") or ""), str(checkpoint_id))


class Saves:
    """The checkpoints announced in this process (the newest ``keep``), and the waiters for the others."""

    def __init__(self, keep: int = 8192) -> None:
        self._lock = threading.Lock()
        self._keep = keep
        self._recent: OrderedDict[Key, None] = OrderedDict()
        self._waiters: dict[Key, list[asyncio.Future[None]]] = {}
        self._saved = threading.Condition(self._lock)  # wakes the threads waiting in `wait_saved`

    def announce(self, key: Key) -> None:
        """Checkpoint ``key`` is saved: remember it and wake its waiters (from any thread or event loop)."""
        with self._lock:
            self._recent[key] = None
            if len(self._recent) > self._keep:
                self._recent.popitem(last=False)
            waiters = self._waiters.pop(key, [])
            self._saved.notify_all()
        for future in waiters:
            loop = future.get_loop()
            if not loop.is_closed():
                loop.call_soon_threadsafe(_settle, future)

    def watch(self, key: Key) -> asyncio.Future[None] | None:
        """A future set when ``key`` is announced, or None when it was announced already. Call `unwatch` after."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._lock:
            if key in self._recent:
                return None
            self._waiters.setdefault(key, []).append(future)
        return future

    def wait_saved(self, key: Key, timeout: float) -> bool:
        """Block the calling thread until ``key`` is announced (True), or ``timeout`` seconds (False)."""
        with self._saved:
            return self._saved.wait_for(lambda: key in self._recent, timeout)

    def unwatch(self, key: Key, future: asyncio.Future[None]) -> None:
        """Forget a waiter (announced or not)."""
        with self._lock:
            waiters = self._waiters.get(key)
            if waiters is not None and future in waiters:
                waiters.remove(future)
                if not waiters:
                    del self._waiters[key]

    def waiting(self) -> int:
        """How many waiters are registered (for tests)."""
        with self._lock:
            return sum(len(w) for w in self._waiters.values())


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


#: The announcements of this process.
SAVES = Saves()


class Announcing:
    """Mixin for an async checkpoint saver (put it first in the bases): announces each checkpoint it saves.

    ``announces_saves`` tells `planmode.persistence.await_until_durable` it can wait for announcements; a
    wrapper that forwards unknown attributes to the saver (the LangGraph server's checkpointer adapter does)
    passes it on."""

    announces_saves = True

    def announcing_saver(self) -> Self:
        """This saver (through a wrapper that forwards attributes: the saver it wraps)."""
        return self

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> RunnableConfig:
        saved: RunnableConfig = await super().aput(config, checkpoint, metadata, new_versions)  # type: ignore[misc]  # a mixin: the saver's own aput
        SAVES.announce(saved_key(config, checkpoint["id"]))
        return saved
