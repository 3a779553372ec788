"""``planmode run`` and ``planmode resume``: start a run or continue one, driving it in the terminal (registered in
`planmode.cli.app`). The settings options of ``run`` are generated from `PlanModeContext`'s fields
(`settings_options`): each field is an option with its type, its environment variable and its description.

Start-up: this module imports click, typer and rich (and the settings' dataclass) only; each command imports the
LangGraph stack when it runs.
"""

from __future__ import annotations

import os
import queue
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.text import Text

from planmode.cli.common import (
    DbOpt,
    cfg_of,
    complete_thread,
    database,
    database_of,
    exit_code,
    friendly,
    graph_on,
    remember_start,
    resume_command,
    session,
)
from planmode.cli.config import Config, load_config
from planmode.cli.ui import console
from planmode.errors import PlanModeError

if TYPE_CHECKING:
    import inspect

    from planmode.cli.drive import Watcher

_R = TypeVar("_R")

__all__ = ["resume", "run"]


def _approver(
    auto: bool, resume_hint: str, budget: dict[str, Any] | None = None, *, ask: bool = True
) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    flags = dict(budget or {"max_tokens": None, "max_cost": None, "stop": False})
    answered = [False]

    def approve(payload: dict[str, Any]) -> dict[str, Any] | None:
        from planmode.budget import INTERRUPT_TYPE as BUDGET_INTERRUPT
        from planmode.cli.approval import ask_approval
        from planmode.cli.ask import interactive
        from planmode.cli.budget import budget_answer
        from planmode.cli.gates import GATE_TYPES, answer_gate
        from planmode.cli.ui import approval_screen

        if payload.get("type") == BUDGET_INTERRUPT:  # a budget pause, not an approval (planmode.budget)
            # The command line's --max-tokens / --max-cost answer one pause: a pause that comes back (the value
            # was refused, or the raise ran out) is left paused with its reason (exit 6), never answered again.
            answer = budget_answer(payload, **flags, repeated=answered[0], ask=ask)
            answered[0] = answered[0] or any(flags.values())
            return answer
        if payload.get("type") in GATE_TYPES:  # planmode.stale, planmode.step_approval (cli/gates.py)
            return answer_gate(payload, auto, ask=ask)
        if auto:
            console.print(approval_screen(payload))
            console.print(
                Text(f"Approved automatically (--auto-approve), revision {payload['revision']}.", style="green")
            )
            return {"action": "approve", "revision": payload["revision"]}
        if not ask or not interactive():  # --json asks nothing: the question is left for later
            console.print(approval_screen(payload))
            console.print(
                Text(
                    "The plan needs approval and this is not a terminal: approve it from a terminal "
                    "with the command below, or pass --auto-approve.",
                    style="yellow",
                )
            )
            return None
        return ask_approval(payload)

    return approve


# -- run's settings options, generated from PlanModeContext's fields ------------------------------------------------

#: Fields of `PlanModeContext` that ``run`` does not offer as settings options: written by planmode, or given by
#: ``run``'s own options (``--workspace`` is a folder checked before the run; ``--approval`` has ``--auto-approve``).
_OWN_OPTIONS = frozenset({"workspace"})
#: The smallest value of a number setting on the command line (the settings accept 0 where 0 means "none").
_CLI_MIN = {"request_timeout": 0.001}


def _setting_fields() -> list[Any]:
    """The fields of `PlanModeContext` offered as ``run`` options, in declaration order (``metadata["cli"]`` False
    hides one)."""
    from dataclasses import fields

    from planmode.context import PlanModeContext

    return [f for f in fields(PlanModeContext) if f.metadata.get("cli", True) and f.name not in _OWN_OPTIONS]


def setting_env(f: Any) -> str:
    """The environment variable of a setting's option: ``metadata["env"]``, else ``PLANMODE_<NAME>``."""
    return str(f.metadata.get("env") or f"PLANMODE_{f.name.upper()}")


def _setting_default(f: Any) -> str | None:
    """The default shown in ``--help`` (a default that reads the environment is shown by its env var only)."""
    from dataclasses import MISSING

    if f.default is MISSING:
        return None
    return str(f.default).lower() if isinstance(f.default, bool) else str(f.default)


def _setting_parameter(f: Any, hints: dict[str, Any]) -> inspect.Parameter:
    """One ``run`` parameter for the settings field ``f``: its type (``dict`` settings are JSON text), its env var
    and its description; its default is None (not given: the settings' own default applies)."""
    import inspect
    import typing

    hint = hints[f.name]
    literal = [a for a in typing.get_args(hint) if typing.get_origin(a) is typing.Literal]
    hint = literal[0] if len(literal) == 1 else hint  # Literal[...] | None (model_profile): its choices
    if hint is bool or hint is int or hint is float or hint is str or typing.get_origin(hint) is typing.Literal:
        kind: Any = hint
    else:  # str | None, dict[str, Any] (prices: JSON text)
        kind = str
    extra: dict[str, Any] = {}
    if kind is int or kind is float:
        extra["min"] = _CLI_MIN.get(f.name, f.metadata.get("min", 0))
    default = _setting_default(f)
    help_text = str(f.metadata.get("description", "")) + (f" Default: {default}." if default else "")
    if f.name == "prices":
        help_text += " As JSON text."
    option = typer.Option(
        f"--{f.name.replace('_', '-')}"
        if kind is not bool
        else f"--{f.name.replace('_', '-')}/--no-{f.name.replace('_', '-')}",
        envvar=setting_env(f),
        help=help_text,
        show_default=False,
        **extra,
    )
    return inspect.Parameter(
        f.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[kind | None, option]
    )


def settings_options(fn: Callable[..., _R]) -> Callable[..., _R]:
    """``fn`` with one option per `PlanModeContext` field it does not declare itself, generated from the field
    (`_setting_parameter`); ``fn`` receives the options given (on the command line or by env var) as its
    ``settings`` dict, by field name."""
    import functools
    import inspect
    import typing

    from planmode.context import PlanModeContext

    hints = typing.get_type_hints(PlanModeContext)
    signature = inspect.signature(fn, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name != "settings"]
    names = {p.name for p in own}
    generated = [_setting_parameter(f, hints) for f in _setting_fields() if f.name not in names]

    @functools.wraps(fn)
    def with_settings(*args: Any, **kwargs: Any) -> _R:
        given = {p.name: kwargs.pop(p.name, None) for p in generated}
        return fn(*args, settings={k: v for k, v in given.items() if v is not None}, **kwargs)

    full = signature.replace(parameters=[*own, *generated])
    with_settings.__signature__ = full  # type: ignore[attr-defined]  # read by typer through inspect.signature
    with_settings.__annotations__ = {p.name: p.annotation for p in full.parameters.values()}
    return with_settings


JsonLines = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Write the run's progress events to stdout as JSON lines, the last one the result (status, exit "
        "code, resume command); everything else goes to stderr. Nothing is asked: a question is left for later "
        "(pass --auto-approve to approve plans).",
    ),
]


@friendly
@settings_options
def run(
    command: typer.Context,
    task: Annotated[str, typer.Argument(help="What to do; - reads it from stdin.", metavar="TASK")],
    workspace: Annotated[Path, typer.Option(envvar="PLANMODE_WORKSPACE", help="Folder the file tools work in.")] = Path(
        "."
    ),
    db: DbOpt = None,
    thread: Annotated[
        str | None, typer.Option(help="Thread id of the new run (default: a new one); an existing one is refused.")
    ] = None,
    follow_up: Annotated[
        str | None,
        typer.Option(
            "--follow-up",
            autocompletion=complete_thread,
            help="Run TASK as a follow-up of the finished run on this thread: a new thread that starts from its "
            "conversation and results; the earlier run stays as it is (in ls, show, history).",
        ),
    ] = None,
    auto_approve: Annotated[
        bool,
        typer.Option(
            "--auto-approve", help="Approve plans without asking (same as --approval auto); the plan is still shown."
        ),
    ] = False,
    gguf: Annotated[
        Path | None,
        typer.Option(
            help="Run this GGUF model offline: a llama.cpp server on 127.0.0.1 "
            "for the run (pip install 'planmode[local]')."
        ),
    ] = None,
    as_json: JsonLines = False,
    *,
    settings: dict[str, Any],
) -> None:
    """Plan TASK, ask for approval, execute it with live progress. Each setting of the run is an option (its
    environment variable in brackets)."""
    from planmode.cli.drive import Watcher, drive

    if as_json:
        _to_stderr()
    # Checked before anything is stored: a bad endpoint or an empty task is one line and exit 2, not a run.
    task, ws, config, ctx = _checked_run(task, workspace, settings, auto_approve=auto_approve)
    given_db = db  # --db or PLANMODE_DB; a run stored elsewhere (the workspace's, the file's) is remembered
    db = db if db is not None else config.db
    auto = ctx.approval == "auto"
    if gguf is not None:  # a local llama.cpp server for this run, stopped when the command ends (click closes it)
        from planmode.local_server import check_gguf, llama_server, settings_for

        check_gguf(gguf)  # a missing or non-GGUF file: one line and exit 2, before "starting" or the extra's check
        console.print(Text(f"starting a llama.cpp server for {gguf} ..."))
        ctx = settings_for(command.with_resource(llama_server(gguf)), ctx)
        why: str | None = "--gguf"
    else:
        from planmode.local_server import with_profile

        ctx, why = with_profile(ctx)  # a local llama.cpp or Ollama server at --base-url: the small profile
    if not ctx.base_url and not os.environ.get("OPENAI_API_KEY"):
        raise PlanModeError(
            "OPENAI_API_KEY is not set: export it, or pass --base-url for a local "
            "OpenAI-compatible server (try `planmode demo` to see planmode without a key)"
        )
    path = database(db, create=True, workspace=ws)  # the workspace's .planmode/ unless --db says otherwise
    if given_db is None:
        remember_start(path)  # found from this folder too (planmode.cli.common.databases)
    graph = graph_on(path, ws)
    if thread is not None:
        _refuse_an_existing_thread(graph, thread, path)
    tid = thread or uuid.uuid4().hex[:12]
    if follow_up is not None:
        _start_follow_up(graph, follow_up, tid, path)
    hint = session["resume"] = resume_command(tid, path)
    follows = f" · follows {follow_up}" if follow_up is not None else ""
    console.print(Text(f"thread {tid}{follows} · database {path} · workspace {ws}"), soft_wrap=True)
    console.print(Text(_profile_line(ctx, why)), soft_wrap=True)
    if config.path is not None and (config.settings or config.db):
        given = ", ".join(f"{k}={config.settings[k]!r}" for k in config.settings) or "db"
        console.print(Text(f"settings from {config.path}: {given}"), soft_wrap=True)
    watcher = Watcher(queue.Queue())
    status = drive(
        graph,
        {"messages": [("user", task)]},
        cfg_of(tid),
        context=ctx,
        approver=_approver(auto, hint, ask=not as_json),
        resume_hint=hint,
        watcher=watcher,
        json_lines=as_json,
    )
    _finish(graph, tid, status, watcher, path, as_json=as_json)


def _checked_run(
    task: str, workspace: Path, settings: dict[str, Any], *, auto_approve: bool
) -> tuple[str, Path, Config, Any]:
    """The task (``-``: read from stdin), the workspace, its configuration file and the run's settings (flags and
    environment variables over the file), each checked: `PlanModeError` on an empty task, a missing folder or a
    bad setting, before anything is stored."""
    from planmode.context import PlanModeContext

    if task == "-":
        task = sys.stdin.read()
    if not task.strip():
        raise PlanModeError("the task is empty: say what to do (or pass - to read it from stdin)")
    ws = workspace.expanduser().resolve()
    if not ws.is_dir():
        raise PlanModeError(f"workspace {str(ws)!r} is not a folder")
    config = load_config(ws)  # flags and environment variables beat the file (planmode.cli.config)
    settings = {**config.settings, **settings}
    if settings.get("base_url") is not None:
        _check_base_url(settings["base_url"])
    if not settings.get("base_url"):
        settings.pop("base_url", None)
    if not settings.get("model"):
        settings.pop("model", None)
    settings["approval"] = "auto" if auto_approve or settings.get("approval") == "auto" else "ask"
    if isinstance(settings.get("prices"), str):  # JSON text from the flag or PLANMODE_PRICES (a file: a table)
        settings["prices"] = _prices(settings["prices"])
    ctx = PlanModeContext(**settings, workspace=str(ws))
    if ctx.max_cost and not ctx.prices:
        raise PlanModeError('--max-cost needs --prices (e.g. --prices \'{"*": {"input": 0.15, "output": 0.6}}\')')
    return task, ws, config, ctx


_FINISHED = ("completed", "failed", "answered", "cancelled")


def _latest_unfinished(graph: Any, db: str, folder: Path) -> str:
    """The thread of the newest run in ``db`` that is not finished and not running now (it waits for approval, was
    interrupted, or is paused) and whose workspace is ``folder`` or holds it; `PlanModeError` when there is none."""
    from planmode.cli.inspect import _runs
    from planmode.context import settings_dict

    here = folder.resolve()
    for row in _runs(db, wanted=None, limit=None):  # newest first
        if row.checkpoint_ns or row.state in (*_FINISHED, "running"):
            continue
        settings = settings_dict(graph.get_state(cfg_of(row.thread_id)).values.get("settings"))
        workspace = settings.get("workspace")
        if workspace and (here == Path(workspace) or Path(workspace) in here.parents):
            console.print(
                Text(f"Resuming the latest unfinished run of this workspace: {row.thread_id} ({row.state})"),
                soft_wrap=True,
            )
            return str(row.thread_id)
    raise PlanModeError(
        f"no unfinished run of this workspace ({here}) in {db}: name the thread (see `planmode ls`), or "
        "run this in the run's workspace"
    )


def _finished(state: Any) -> bool:
    """Whether a thread's head is a finished run: a final status, nothing to run next, no question pending."""
    return state.values.get("status") in _FINISHED and not state.next and not state.interrupts


def _profile_line(ctx: Any, why: str | None) -> str:
    """The run header's second line: the model, the structured-output mode and the model profile in force (with
    why it was chosen and what it set)."""
    where = f" at {ctx.base_url}" if ctx.base_url else ""
    line = f"model {ctx.model}{where} · structured output {ctx.structured_output} · profile {ctx.model_profile}"
    if ctx.model_profile != "small":
        return line
    steps = "one step at a time" if ctx.max_parallel == 1 else f"{ctx.max_parallel} steps at a time"
    context = f"context {ctx.context_tokens} tokens" if ctx.context_tokens else "context as the server reports"
    return f"{line} ({why}: {steps}, {context}, normalised messages={ctx.normalize_messages})"


def _refuse_an_existing_thread(graph: Any, thread: str, db: str) -> None:
    """``run --thread T`` on a thread that has a run: refused (a new run there would replace it in ls and show),
    with the exact command that does what was meant: a follow-up of a finished run, a resume of another."""
    state = graph.get_state(cfg_of(thread))
    if state.created_at is None:
        return
    status = str(state.values.get("status"))
    if _finished(state):
        raise PlanModeError(
            f"thread {thread!r} already has a run ({status}); a new task there would replace it. Run the task as a "
            f"follow-up of that run (a new thread that starts from its conversation; {thread!r} stays as it is): "
            + _follow_up_argv(thread, db)
        )
    raise PlanModeError(
        f"thread {thread!r} has a run that is not finished ({status.replace('_', ' ')}); a new task there would "
        f"replace it. Continue it with: {resume_command(thread, db)} (or leave out --thread for a new run)"
    )


def _follow_up_argv(thread: str, db: str) -> str:
    """This ``planmode run`` command line with ``--thread T`` changed to ``--follow-up T`` (and ``--db`` added
    when the database was found rather than named)."""
    import shlex

    args = sys.argv[1:]
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--thread" and i + 1 < len(args):
            out += ["--follow-up", args[i + 1]]
            i += 2
            continue
        out.append("--follow-up=" + arg.removeprefix("--thread=") if arg.startswith("--thread=") else arg)
        i += 1
    if not out or out[0] != "run" or ("--follow-up" not in out and not any(a.startswith("--follow-up=") for a in out)):
        return resume_command(thread, db, "run TASK --follow-up")  # not called as `planmode run ...`
    command = shlex.join(["planmode", *out])
    if not any(a == "--db" or a.startswith("--db=") for a in out):  # found upward: named, so it works anywhere
        command += resume_command("x", db).removeprefix("planmode resume x")
    return command


def _start_follow_up(graph: Any, source: str, new_thread: str, db: str) -> None:
    """Copy the finished run on thread ``source`` into ``new_thread`` (a fork of its head: its conversation and
    results), where the new task starts as a new run; ``source`` is not changed."""
    from planmode.cli.drive import require_thread
    from planmode.persistence.snapshots import fork

    state = require_thread(graph, cfg_of(source))
    if not _finished(state):
        status = str(state.values.get("status")).replace("_", " ")
        raise PlanModeError(
            f"--follow-up {source}: that run is not finished ({status}); continue it first with: "
            f"{resume_command(source, db)}"
        )
    fork(graph, source, 0, new_thread)


def _check_base_url(url: str) -> None:
    """An OpenAI-compatible endpoint is an http(s) URL with a host; anything else is refused before a run starts."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        ok = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:  # an unclosed [IPv6 bracket, a bad port
        ok = False
    if not ok:
        raise PlanModeError(
            f"--base-url {url!r} is not an http(s) URL (e.g. http://127.0.0.1:11434/v1); "
            "it comes from --base-url or OPENAI_BASE_URL"
        )


def _prices(raw: str | None) -> dict[str, Any]:
    from planmode.cli.budget import parse_prices

    try:
        return parse_prices(raw)
    except ValueError as exc:
        raise PlanModeError(str(exc)) from None


#: What to try when the planner gave no plan the run could use.
_PLANNER_HINT = (
    "The planner gave no plan planmode could use. Try: a more capable model (--model); for a local server, "
    "--structured-output prompted or json_object; or say the task more concretely (the files to read and write)."
)


def _no_plan(values: Any) -> bool:
    """Whether the run ended without any plan (the planner failed)."""
    plan = values.get("plan")
    return plan is None or not getattr(plan, "steps", None)


def _to_stderr() -> None:
    """``--json``: every screen and message of the command goes to stderr; stdout holds only the JSON lines."""
    from planmode.cli.ui import console

    console.file = sys.stderr


def _result_line(tid: str, status: str, values: Any, db: str, watcher: Watcher) -> None:
    """The last JSON line of ``--json``: the run's outcome."""
    from planmode.cli.drive import emit_json

    finished = status in _FINISHED
    emit_json(
        {
            "type": "result",
            "thread_id": tid,
            "status": status,
            "exit_code": exit_code(status),
            "error": values.get("error") if status == "failed" else None,
            "files_changed": list(watcher.changed),
            "resume": None if finished else resume_command(tid, db),
        }
    )


def _finish(graph: Any, tid: str, status: str, watcher: Watcher, db: str, *, as_json: bool = False) -> None:
    from planmode.cli.drive import show_result

    values = graph.get_state(cfg_of(tid)).values
    if status not in ("awaiting_approval", "over_budget"):
        show_result(graph, cfg_of(tid), changed=watcher.changed)
    from planmode.context import settings_dict

    settings = settings_dict(values.get("settings"))
    if values.get("route") == "direct" and settings.get("mode") == "auto" and status == "answered":
        console.print(
            Text(
                "Answered directly: the task looked simple enough to need no plan. To plan it "
                "instead, run it again with --mode plan.",
                style="yellow",
            )
        )
    if status == "failed" and _no_plan(values):
        console.print(Text(_PLANNER_HINT, style="yellow"), soft_wrap=True)
    if status == "failed":
        console.print(
            Text(f"The run failed. Inspect it with: {resume_command(tid, db, 'show')}", style="red"), soft_wrap=True
        )
    from planmode.cli.undo import offer_undo

    offer_undo(graph, tid, db, status, ask=not as_json)  # failed or cancelled with changes: the undo offered
    if as_json:
        _result_line(tid, status, values, db, watcher)
    raise typer.Exit(exit_code(status))


@friendly
def resume(
    command: typer.Context,
    thread: Annotated[
        str | None,
        typer.Argument(
            help="Thread id (default: the latest unfinished run of this workspace, the current folder).",
            metavar="THREAD",
            show_default=False,
            autocompletion=complete_thread,
        ),
    ] = None,
    db: DbOpt = None,
    workspace: Annotated[
        Path | None, typer.Option(help="Folder the file tools work in (default: the run's own workspace).")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Another model for this resume (default: the run's).")] = None,
    base_url: Annotated[
        str | None,
        typer.Option(help="Another OpenAI-compatible base URL for this resume, e.g. a local server on a new port."),
    ] = None,
    auto_approve: Annotated[bool, typer.Option("--auto-approve", help="Approve plans without asking.")] = False,
    gguf: Annotated[
        Path | None, typer.Option(help="Serve this GGUF model for the resume, as `run --gguf` does.")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option(min=1, help="At a budget pause: raise the token budget to N.")
    ] = None,
    max_cost: Annotated[
        float | None, typer.Option(min=0.000001, help="At a budget pause: raise the cost budget to X dollars.")
    ] = None,
    prices: Annotated[
        str | None,
        typer.Option(
            help='Prices for a run without any (--max-cost needs them): {"model": {"input": $/1M, "output": $/1M}}.'
        ),
    ] = None,
    stop: Annotated[bool, typer.Option("--stop", help="At a budget pause: stop the run (status cancelled).")] = False,
    as_json: JsonLines = False,
) -> None:
    """Continue a run from its last checkpoint (after Ctrl-C, a crash, or a pending approval), in the run's own
    workspace and with its own model unless told otherwise."""
    from planmode.cli.drive import Watcher, drive, require_thread

    if as_json:
        _to_stderr()
    if base_url is not None:
        _check_base_url(base_url)
    path = database_of(db, thread)
    graph = graph_on(path, None)
    if thread is None:
        thread = _latest_unfinished(graph, path, Path.cwd())
    state = require_thread(graph, cfg_of(thread))
    if _finished(state):
        status = state.values.get("status")
        raise PlanModeError(
            f"the run on thread {thread!r} is finished ({status}): there is nothing to resume. See it with: "
            f"{resume_command(thread, path, 'show')}; give it a follow-up task with: "
            f"{resume_command(thread, path, 'run TASK --follow-up')}"
        )
    # The endpoint a run uses: its settings (an earlier `resume --model/--base-url/--workspace` wrote its choice
    # there), then this resume's options.
    from planmode.context import settings_dict

    settings = settings_dict(state.values.get("settings"))
    overrides: dict[str, Any] = {}
    if gguf is not None:  # a local llama.cpp server for this resume, stopped when the command ends
        from planmode.local_server import llama_server

        server = command.with_resource(llama_server(gguf))
        base_url, model = server.base_url, server.model
    if model:
        overrides["model"] = model
    if base_url:
        overrides["base_url"] = base_url
    if workspace is not None:
        overrides["workspace"] = str(workspace.expanduser().resolve())
    if prices:
        if settings.get("prices"):  # the run's prices stay (a resume may not loosen the budget)
            raise PlanModeError("--prices: this run has prices already; they cannot change on a resume")
        overrides["prices"] = _prices(prices)
    stored_ws = overrides.get("workspace") or settings.get("workspace")
    ws = Path(stored_ws) if stored_ws else Path(".").resolve()
    if not ws.is_dir():
        raise PlanModeError(f"workspace {str(ws)!r} is not a folder (pass --workspace)")
    graph = graph_on(path, ws)
    hint = session["resume"] = resume_command(thread, path)
    shown_model = overrides.get("model") or settings.get("model")
    shown_url = overrides.get("base_url") or settings.get("base_url")
    console.print(
        Text(
            f"thread {thread} · database {path} · workspace {ws}"
            + (f" · model {shown_model}" if shown_model else "")
            + (f" at {shown_url}" if shown_url else "")
        ),
        soft_wrap=True,
    )
    watcher = Watcher(queue.Queue())
    auto = auto_approve or settings.get("approval") == "auto"
    status = drive(
        graph,
        None,
        cfg_of(thread),
        context=overrides or None,
        approver=_approver(auto, hint, {"max_tokens": max_tokens, "max_cost": max_cost, "stop": stop}, ask=not as_json),
        resume_hint=hint,
        watcher=watcher,
        json_lines=as_json,
    )
    _finish(graph, thread, status, watcher, path, as_json=as_json)
