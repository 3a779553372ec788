"""``planmode demo``: the whole plan-mode loop offline, with a scripted model and real everything else.

The model's answers are pre-written (a `ScriptedChatModel`); the file tools, the workspace, the SQLite
checkpoints, the graph, the plan's declared checks (they really run the tests the agent wrote, in the sandbox)
and the rollback are real. It shows: read-only exploration, a plan with parallel steps, approval, a step that fails
verification, reflection and a patch, completion, then the snapshot history and a rollback.
"""

from __future__ import annotations

import shlex
import tempfile
import uuid
from pathlib import Path
from typing import Any

from rich.text import Text

from planmode.cli.approval import ask_approval
from planmode.cli.ask import interactive
from planmode.cli.drive import drive, show_result
from planmode.cli.ui import approval_screen, console, snapshot_table
from planmode.context import PlanModeContext
from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest, tool_call

__all__ = ["DEMO_TASK", "build_demo_model", "run_demo"]

DEMO_TASK = (
    "Create a small Python statistics module in the workspace: write stats.py with mean() and median(), "
    "write tests for it, write a README, then summarise the work."
)

_MEDIAN_BUGGY = """def median(xs):
    s = sorted(xs)
    return s[len(s) // 2]
"""

_MODULE_V1 = (
    '''"""Small statistics helpers."""


def mean(xs):
    return sum(xs) / len(xs)


'''
    + _MEDIAN_BUGGY
)

_MEDIAN_FIXED = """def median(xs):
    s = sorted(xs)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
"""

_TESTS = """from stats import mean, median

assert mean([1, 2, 3, 4]) == 2.5
assert median([3, 1, 2]) == 2
assert median([4, 1, 3, 2]) == 2.5, f"median of an even-length list: got {median([4, 1, 3, 2])}"
print("all tests passed")
"""

_README = "# stats\n\nSmall statistics helpers: `mean(xs)` and `median(xs)`. Run `python test_stats.py`.\n"

PLAN = {
    "title": "A tested statistics module",
    "steps": [
        {
            "id": "write_module",
            "description": "Write stats.py with mean() and median()",
            "tools": ["write_file"],
            "checks": [{"kind": "file", "path": "stats.py", "contains": ["def mean", "def median"]}],
        },
        {
            "id": "write_readme",
            "description": "Write README.md describing the module",
            "tools": ["write_file"],
            "complexity": "low",
            "checks": [{"kind": "file", "path": "README.md", "contains": ["median"]}],
        },
        {
            "id": "write_tests",
            "description": "Write test_stats.py covering mean and median (even-length lists too)",
            "dependencies": ["write_module"],
            "tools": ["write_file"],
            "checks": [{"kind": "run", "command": "python test_stats.py", "stdout": "all tests passed"}],
        },
        {
            "id": "summarise",
            "description": "Summarise what was built",
            "dependencies": ["write_tests", "write_readme"],
            "complexity": "low",
        },
    ],
}

PATCH = {
    "reason": "median() is wrong for even-length lists; fix it before the tests run again",
    "add_steps": [
        {
            "id": "fix_median",
            "description": "Fix median() in stats.py for even-length lists",
            "dependencies": ["write_module"],
            "tools": ["write_file"],
            "after": "write_module",
            "checks": [
                {"kind": "file", "path": "stats.py", "contains": ["def median"]},
                {
                    "kind": "run",
                    "command": 'python -c "from stats import median; print(median([4, 1, 3, 2]))"',
                    "stdout": "2.5",
                },
            ],
        }
    ],
    "update_steps": [{"id": "write_tests", "dependencies": ["write_module", "fix_median"]}],
}

_ACTIONS: dict[str, list[dict[str, Any]]] = {
    "write_module": [tool_call("write_file", path="stats.py", content=_MODULE_V1)],
    "write_readme": [tool_call("write_file", path="README.md", content=_README)],
    "write_tests": [tool_call("write_file", path="test_stats.py", content=_TESTS)],
    # the whole module written again: a re-run after the rollback writes the same file (an edit would find nothing
    # to replace, and a step whose only change failed is not done)
    "fix_median": [tool_call("write_file", path="stats.py", content=_MODULE_V1.replace(_MEDIAN_BUGGY, _MEDIAN_FIXED))],
}


def _execute(req: ScriptRequest) -> str | dict[str, Any]:
    step = req.step_id or ""
    results = req.tool_results()
    if not results and step in _ACTIONS:
        return {"tool_calls": _ACTIONS[step]}
    if step == "summarise":
        return "Built stats.py (mean, median), test_stats.py (passing) and README.md."
    last = str(results[-1].content)[:200] if results else ""
    return f"Step {step} done. Tool said: {last}"


def _explore(req: ScriptRequest) -> str | dict[str, Any]:
    if not req.tool_results():
        # the planner also tries a write tool: refused before approval, where tools are dispatched
        return {
            "tool_calls": [
                tool_call("list_files", path="."),
                tool_call("write_file", path="notes.txt", content="planning notes"),
            ]
        }
    return "The workspace is empty apart from a .keep file; nothing to reuse."


def build_demo_model() -> ScriptedChatModel:
    """The scripted model behind the demo."""
    script = PurposeScript(
        explore=_explore,
        plan=PLAN,
        execute=_execute,
        reflect={
            "assessment": "needs_adjustment",
            "reasoning": "the tests exposed a bug in median() for even-length lists",
            "guidance": "add a step that fixes median() and run the tests again after it",
        },
        patch=PATCH,
        final="stats.py now has mean() and a correct median(), test_stats.py passes, and README.md explains it.",
    )
    return ScriptedChatModel(responder=script)


def run_demo(db: Path | None = None) -> int:
    """Run the demo; returns the process exit code."""
    from planmode.graph import build_graph
    from planmode.persistence import sqlite_checkpointer
    from planmode.persistence.snapshots import list_snapshots, rollback
    from planmode.tools import workspace_tools

    tmp = Path(tempfile.mkdtemp(prefix="planmode-demo-"))
    workspace = tmp / "workspace"
    workspace.mkdir()
    (workspace / ".keep").write_text("")
    db_path = db or tmp / "planmode.sqlite"
    console.rule(Text("planmode demo", style="bold"))
    console.print(
        Text("This demo uses a scripted model", style="bold yellow"),
        Text(
            " (no API key, no network): its answers are "
            "pre-written.\nThe file tools, the workspace, the SQLite checkpoints, the graph, the "
            "checks the plan declares (they run the tests, in the sandbox) and the rollback are real."
        ),
        sep="",
    )
    console.print(f"workspace: {workspace}\ndatabase:  {db_path}\ntask:      {DEMO_TASK}\n")
    graph = build_graph(
        build_demo_model(),
        tools=workspace_tools(workspace),
        checkpointer=sqlite_checkpointer(db_path),
    )
    cfg: Any = {"configurable": {"thread_id": f"demo-{uuid.uuid4().hex[:8]}"}}
    ctx = PlanModeContext(mode="plan", approval="ask", max_attempts=1, max_parallel=4)

    def approver(payload: dict[str, Any]) -> dict[str, Any] | None:
        if interactive():
            return ask_approval(payload)
        console.print(approval_screen(payload))
        console.print(Text("stdin is not a terminal: approving this revision automatically", style="dim"))
        return {"action": "approve", "revision": payload["revision"]}

    status = drive(graph, {"messages": [("user", DEMO_TASK)]}, cfg, context=ctx, approver=approver)
    show_result(graph, cfg)
    if status != "completed":
        console.print(Text(f"The demo ended with status {status}.", style="red"))
        return 1
    console.rule(Text("Snapshots", style="bold"))
    snaps = list_snapshots(graph, cfg["configurable"]["thread_id"])
    console.print(snapshot_table(snaps[:25]))
    if len(snaps) > 25:
        console.print(Text(f"... and {len(snaps) - 25} older snapshots", style="dim"))
    patched = [s for s in reversed(snaps) if (s.plan_version or 0) >= 2]
    if not patched:
        console.print(Text("No snapshot after the patch was found.", style="red"))
        return 1
    target = patched[0]
    console.rule(Text("Rollback", style="bold"))
    console.print(
        Text.assemble(
            "Rolling back to ",
            (target.checkpoint_id, "cyan"),
            f" ({target.label}); the history is kept.\n",
            (
                "Checkpoints hold the run, not your files: the workspace keeps its "
                "current contents, so the re-run of fix_median writes the module it "
                "wrote before.",
                "dim",
            ),
        )
    )
    rollback(graph, cfg["configurable"]["thread_id"], target.checkpoint_id)
    show_result(graph, cfg)
    console.print("Continuing from the rolled-back snapshot:")
    status = drive(graph, None, cfg, context=None, approver=approver)
    show_result(graph, cfg)
    after = list_snapshots(graph, cfg["configurable"]["thread_id"])
    console.print(f"\nsnapshots before the rollback: {len(snaps)}, after continuing: {len(after)} (nothing deleted)")
    console.print(f"files in the workspace: {', '.join(sorted(p.name for p in workspace.iterdir()))}")
    _explore_hint(tmp, workspace, db_path, cfg["configurable"]["thread_id"])
    return 0 if status == "completed" else 1


def _explore_hint(tmp: Path, workspace: Path, db_path: Path, thread: str) -> None:
    """Where the demo left its files, and the commands that explore them (the folder is kept, not removed)."""
    db = shlex.quote(str(db_path))
    console.rule(Text("Explore it", style="bold"))
    console.print(
        Text("The demo's files are kept in ", style="bold") + Text(str(tmp)), soft_wrap=True
    )  # a path stays on one line: copied whole
    for line in (
        f"  the files it wrote:  ls {shlex.quote(str(workspace))}",
        f"  run their tests:     cd {shlex.quote(str(workspace))} && python test_stats.py",
        f"  the run:             planmode show {thread} --db {db}",
        f"  its snapshots:       planmode history {thread} --db {db}",
        f"  remove it all:       rm -r {shlex.quote(str(tmp))}",
    ):
        console.print(Text(line), soft_wrap=True)
