"""Where planmode's server CPU goes: the server-load graphs run in this process, profiled.

    python -m bench.server_profile [--n 20] [--batches 3] [--delay 0.05] [--top 25] [--graph planmode minimal]

The set-up of ``bench/server_load.py`` without the HTTP server: the same two graphs (planmode's studio graph,
``bench/server/minimal_graph.py``), the same scripted OpenAI-compatible server and 5-step plan, the same async
SQLite checkpointer as ``langgraph dev`` gets (`planmode.persistence.async_sqlite_checkpointer`); the minimal
graph runs with ``durability="sync"``, planmode's durability, as in the server figure. N runs start
at once with ``ainvoke`` on one event loop, ``--batches`` times. It prints, per graph, the event-loop thread's
CPU per run (``time.thread_time``: the thread ``langgraph dev`` runs every async node on, the one that
saturates at N=50; the scripted model server and aiosqlite's worker threads are not in it) and cProfile's
top functions on that thread, by own time and by cumulative time. The figure is a profile, not a benchmark:
cProfile slows Python-heavy code more than C-heavy code, so read the shares, and the CPU per run measured
with ``--no-profile`` (the same runs without the profiler).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.server_load import CONFIG_DIR, MINIMAL_DURABILITY, PLAN, TASK
from planmode.testing.openai_server import ScriptedOpenAIServer
from planmode.testing.responders import PlanResponder

__all__ = ["by_package", "profile_graph"]

#: Where a profiled function's file lives -> the name it is reported under (first match wins).
_PACKAGES = (
    ("/planmode/", "planmode"),
    ("/openai/", "openai"),
    ("/langchain_openai/", "langchain_openai"),
    ("/langchain_core/", "langchain_core"),
    ("/langgraph/checkpoint/", "langgraph checkpoint (savers, serializer)"),
    ("/langgraph/", "langgraph"),
    ("/httpx", "HTTP client (httpx, httpcore, h11, anyio)"),
    ("/httpcore", "HTTP client (httpx, httpcore, h11, anyio)"),
    ("/h11/", "HTTP client (httpx, httpcore, h11, anyio)"),
    ("/anyio/", "HTTP client (httpx, httpcore, h11, anyio)"),
    ("/sniffio/", "HTTP client (httpx, httpcore, h11, anyio)"),
    ("/pydantic", "pydantic"),
    ("/aiosqlite/", "aiosqlite"),
    ("/ormsgpack", "serializer (ormsgpack)"),
    ("/asyncio/", "asyncio event loop"),
    ("selectors.py", "asyncio event loop"),
    ("/typing.py", "typing (introspection)"),
)


def by_package(stats: pstats.Stats) -> list[tuple[str, float]]:
    """Own CPU time per package (the profile's ``tottime`` summed by where each function lives), largest first;
    built-ins (``{method ...}``) are counted under "built-ins (C)"."""
    totals: dict[str, float] = {}
    for (filename, _line, _name), (_cc, _nc, tottime, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if filename == "~":
            key = "built-ins (C)"
        else:
            key = next((label for needle, label in _PACKAGES if needle in filename), "other Python")
        totals[key] = totals.get(key, 0.0) + tottime
    return sorted(totals.items(), key=lambda kv: -kv[1])


def _graph(name: str, saver: Any) -> Any:
    if name == "planmode":
        from planmode.graph.builder import build_graph

        return build_graph(checkpointer=saver)
    sys.path.insert(0, str(CONFIG_DIR))
    import minimal_graph  # type: ignore[import-not-found]

    return minimal_graph.graph.copy(update={"checkpointer": saver})


async def _batch(graph: Any, name: str, n: int, tag: str) -> list[str]:
    context = {"mode": "plan", "approval": "auto", "model": "scripted-model"} if name == "planmode" else None
    # the minimal graph is saved as planmode's runs are (bench.server_load.MINIMAL_DURABILITY)
    extra = {} if name == "planmode" else {"durability": MINIMAL_DURABILITY}

    async def one(i: int) -> str:
        config = {"configurable": {"thread_id": f"{tag}-{i}"}}
        out = await graph.ainvoke({"messages": [{"role": "user", "content": TASK}]}, config, context=context, **extra)
        if name == "planmode":
            return str(out.get("status"))
        return "completed" if sorted(out.get("done") or []) == ["a", "b", "c", "d", "e"] else "incomplete"

    return list(await asyncio.gather(*(one(i) for i in range(n))))


async def _run(name: str, n: int, batches: int, db: Path, profiler: cProfile.Profile | None) -> dict[str, Any]:
    from planmode.persistence import async_sqlite_checkpointer

    async with async_sqlite_checkpointer(db) as saver:
        graph = _graph(name, saver)
        await _batch(graph, name, 1, "warm")  # imports, first connections, caches
        statuses: list[str] = []
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        if profiler is not None:
            profiler.enable()
        for b in range(batches):
            statuses += await _batch(graph, name, n, f"b{b}")
        if profiler is not None:
            profiler.disable()
        cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
    done = sum(s == "completed" for s in statuses)
    return {
        "graph": name,
        "runs": len(statuses),
        "completed": done,
        "loop_thread_cpu_ms_per_run": round(1000 * cpu / max(1, done), 1),
        "wall_s": round(wall, 2),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def profile_graph(
    name: str, *, n: int = 20, batches: int = 3, delay: float = 0.05, profile: bool = True, top: int = 25
) -> tuple[dict[str, Any], str]:
    """Run ``name`` (planmode or minimal) N at once, ``batches`` times: its loop-thread CPU per run and the
    profile's top ``top`` functions (by own time, then by cumulative time) as text."""
    responder = PlanResponder(plan=PLAN, final="Released.", delay=delay)
    # timed by the thread's CPU clock: time blocked in epoll or waiting for the GIL is not counted
    profiler = cProfile.Profile(time.thread_time) if profile else None
    with ScriptedOpenAIServer(responder) as llm, tempfile.TemporaryDirectory(prefix="planmode-profile-") as tmp:
        os.environ.update({"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "bench", "LANGSMITH_TRACING": "false"})
        result = asyncio.run(_run(name, n, batches, Path(tmp) / "server.sqlite", profiler))
    text = ""
    if profiler is not None:
        buf = io.StringIO()
        stats = pstats.Stats(profiler, stream=buf)
        total = sum(t for _, t in by_package(stats)) or 1.0
        buf.write(f"Own CPU time by package ({result['runs']} runs, {total:.2f} s under the profiler):\n")
        for label, seconds in by_package(stats):
            buf.write(f"  {label:45} {seconds:7.2f} s  {100 * seconds / total:5.1f}%\n")
        buf.write("\n")
        stats.sort_stats("tottime").print_stats(top)
        buf.write("planmode's own functions, by own time:\n")
        stats.sort_stats("tottime").print_stats("/planmode/", top)
        stats.sort_stats("cumulative").print_stats(top)
        text = buf.getvalue()
    return result, text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.server_profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20, help="concurrent runs per batch (default 20)")
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.05, help="seconds per model call (default 0.05)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--graph", nargs="+", default=["planmode", "minimal"], choices=["planmode", "minimal"])
    parser.add_argument("--no-profile", action="store_true", help="CPU per run only, without cProfile")
    args = parser.parse_args(argv)
    for name in args.graph:
        result, text = profile_graph(
            name, n=args.n, batches=args.batches, delay=args.delay, profile=not args.no_profile, top=args.top
        )
        print(f"[server_profile] {result}", flush=True)
        if text:
            print(text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
