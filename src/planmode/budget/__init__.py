"""Token and cost budgets: an estimate of a plan's tokens, and a pause before the call that would overspend.

Settings (`planmode.context.PlanModeContext`): ``max_tokens`` (input plus output tokens of the whole run; 0 for
none), ``max_cost`` (dollars; 0 for none) with ``prices`` ``{model: {"input": $/1M, "output": $/1M, "cached":
$/1M}}`` (a model is matched exactly, then by the longest key it starts with, then ``"*"``).

The check. Before each node that calls the model (plan, dispatch for the batch of steps it starts and their
verification, reflect, patch, respond), `guarded` compares ``spent + expected > budget``, where ``expected``
is `expected_tokens` of what that node is about to do plus a `MARGIN` of 20%. When it does not fit, the run
pauses at an interrupt ``{"type": "planmode.budget", ...}`` before any of those calls, and the human answers:

- ``{"max_tokens": N}`` and/or ``{"max_cost": X}`` (positive numbers): the budget is raised; it is kept in
  state (``budget``), so it survives the interrupt and the rest of the run; a raise that still does not cover
  the next call is asked again, with the reason;
- ``{"action": "stop"}`` (or ``"stop"``): the run ends as ``cancelled`` with a report; done steps stay done.

Any other answer (negative, non-numeric, missing, unknown keys) is asked again with a clear error. The check
runs per node: a node's calls are one or a bounded few (the executor's turns, the planner's retries), so a node
that uses more than expected can end over the budget; the next check then pauses at once and says by how
much, so nothing is overspent silently. The final summary call is skipped (a plain summary is written) when
it does not fit. The detect classifier (one short call, unclear requests only) is counted but not checked.

The estimate shown in the approval payload (`approval_budget`) and the next node's estimate come from
`planmode.budget.estimate`: the plan's size and its steps' complexity, scaled by what the steps run so far used.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import threading
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tracers.context import register_configure_hook
from langgraph.types import interrupt

from planmode._compat import GraphNode
from planmode._drive import per_path
from planmode.budget.estimate import expected_tokens, plan_estimate, step_estimate
from planmode.context import MAX_DOLLARS, MAX_TOKENS, PlanModeContext, resolve_settings, settings_of
from planmode.errors import ConfigurationError, PlanModeError
from planmode.llm.trim import approx_tokens
from planmode.observability.events import emit
from planmode.observability.usage import (
    UsageRecorder,
    count_start,
    count_stop,
    counted,
    spent_usage,
    total_tokens,
)
from planmode.state.models import Plan, StepStatus

__all__ = [
    "CALL_OUTPUT",
    "INTERRUPT_TYPE",
    "Accounts",
    "BudgetSkipped",
    "BudgetStopped",
    "CallGuard",
    "Limits",
    "accounts_close",
    "accounts_failed",
    "accounts_open",
    "accounts_result",
    "approval_budget",
    "approval_markdown",
    "cost_of",
    "expected_tokens",
    "finalize_fits",
    "guarded",
    "limits_of",
    "parse_budget_answer",
    "plan_estimate",
    "price_of",
    "step_estimate",
]

#: The ``type`` of the budget interrupt's payload.
INTERRUPT_TYPE = "planmode.budget"

S = StepStatus
#: The check counts this much more than the estimate of the next call: an estimate can fall short, and the
#: budget must not be overspent because of it.
MARGIN = 1.2
#: Input share of an estimate whose split is unknown (for its cost).
_INPUT_SHARE = 0.8


@dataclass(frozen=True)
class Limits:
    """The budget in force: the settings' values, raised by a human's answer (kept in state)."""

    max_tokens: int = 0
    max_cost: float = 0.0

    @property
    def active(self) -> bool:
        return self.max_tokens > 0 or self.max_cost > 0

    def to_state(self, **extra: Any) -> dict[str, Any]:
        return {"max_tokens": self.max_tokens, "max_cost": self.max_cost, **extra}


def limits_of(settings: PlanModeContext, stored: Any) -> Limits:
    """The settings' budget, or the one a human raised it to (``state["budget"]``), whichever is set later:
    a raise is kept in state and wins over the settings it raised."""
    tokens, cost = settings.max_tokens, settings.max_cost
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise ConfigurationError(f"max_tokens must be a whole number of tokens (0 for none), got {tokens!r}")
    if isinstance(cost, bool) or not isinstance(cost, int | float) or not math.isfinite(cost) or cost < 0:
        raise ConfigurationError(f"max_cost must be a number of dollars (0 for none), got {cost!r}")
    if isinstance(stored, Mapping):
        raised_t, raised_c = stored.get("max_tokens"), stored.get("max_cost")
        if isinstance(raised_t, int) and not isinstance(raised_t, bool) and raised_t > 0:
            tokens = raised_t
        if isinstance(raised_c, int | float) and not isinstance(raised_c, bool) and raised_c > 0:
            cost = float(raised_c)
    return Limits(int(tokens), float(cost))


# -- prices and cost ---------------------------------------------------------------------------------------


def price_of(prices: Mapping[str, Any], model: str) -> dict[str, float] | None:
    """The price of ``model``: an exact key, else the longest key it starts with, else ``"*"``; None if none."""
    if not isinstance(prices, Mapping):
        return None
    entry = prices.get(model)
    if entry is None:
        keys = sorted((k for k in prices if k != "*" and model.startswith(k)), key=len, reverse=True)
        entry = prices[keys[0]] if keys else prices.get("*")
    if not isinstance(entry, Mapping):
        return None
    try:
        pin = float(entry.get("input", 0.0))
        out = {"input": pin, "output": float(entry.get("output", pin)), "cached": float(entry.get("cached", pin))}
    except (TypeError, ValueError):
        return None
    return out if all(math.isfinite(v) and v >= 0 for v in out.values()) else None


def _unpriced(settings: PlanModeContext, usage: Any) -> str | None:
    """Why a cost budget cannot be checked with these settings (a model without a price), or None."""
    model = _model_name(settings, usage)
    if price_of(settings.prices, model) is not None:
        return None
    return (
        f"max_cost needs a price for model {model!r}, and the run has none: resume with prices (planmode resume "
        f'--prices \'{{"*": {{"input": 0.15, "output": 0.6}}}}\', or the context\'s prices), or raise '
        "max_tokens, or stop"
    )


def _price_or_raise(prices: Mapping[str, Any], model: str) -> dict[str, float]:
    price = price_of(prices, model)
    if price is None:
        raise ConfigurationError(
            f"max_cost is set but there is no price for model {model!r}: set prices, e.g. "
            f'--prices \'{{"{model}": {{"input": 0.15, "output": 0.6}}}}\' (dollars per million tokens; "*" '
            "matches every model)"
        )
    return price


def cost_of(usage: Any, prices: Mapping[str, Any]) -> float | None:
    """The dollars of a run's usage at ``prices`` (per million tokens); None when a model has no price."""
    models = usage.get("models") if isinstance(usage, Mapping) else None
    total = 0.0
    for model, counters in (models or {}).items() if isinstance(models, Mapping) else ():
        price = price_of(prices, str(model))
        if price is None:
            return None
        if not isinstance(counters, Mapping):
            continue
        cached = _int(counters.get("cached"))
        fresh = max(0, _int(counters.get("input")) - cached)
        total += fresh * price["input"] + cached * price["cached"] + _int(counters.get("output")) * price["output"]
    return total / 1e6


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else 0


def _tokens_cost(tokens: int, price: Mapping[str, float]) -> float:
    return (tokens * _INPUT_SHARE * price["input"] + tokens * (1 - _INPUT_SHARE) * price["output"]) / 1e6


# -- the check ---------------------------------------------------------------------------------------------


def _model_name(settings: PlanModeContext, usage: Any) -> str:
    models = usage.get("models") if isinstance(usage, Mapping) else None
    if isinstance(models, Mapping) and len(models) == 1:
        return str(next(iter(models)))
    return settings.model


def _over(limits: Limits, spent: int, spent_cost: float, expected: int, next_cost: float) -> str | None:
    if limits.max_tokens > 0 and spent + expected > limits.max_tokens:
        return f"spent {spent} + next {expected} tokens > max_tokens {limits.max_tokens}"
    if limits.max_cost > 0 and spent_cost + next_cost > limits.max_cost:
        return f"spent ${spent_cost:.4f} + next ${next_cost:.4f} > max_cost ${limits.max_cost:.4f}"
    return None


@dataclass(frozen=True)
class _Stop:
    pass


def parse_budget_answer(answer: Any) -> Limits | _Stop:
    """A resume value of the budget pause: the new limits (0 for a limit not named) or a stop.

    Raises `ValueError` with the reason for anything else (the pause asks again)."""
    if answer == "stop":
        return _Stop()
    if not isinstance(answer, Mapping):
        raise ValueError(
            f"expected {{'max_tokens': N}}, {{'max_cost': X}} or {{'action': 'stop'}}, got {type(answer).__name__}"
        )
    values = dict(answer)
    action = values.pop("action", "raise")
    if action == "stop":
        return _Stop()
    if action != "raise":
        raise ValueError(f"unknown action {action!r}: 'raise' (with max_tokens / max_cost) or 'stop'")
    unknown = sorted(set(values) - {"max_tokens", "max_cost"})
    if unknown:
        raise ValueError(f"unknown keys {', '.join(map(repr, unknown))}: name max_tokens and/or max_cost")
    if not values:
        raise ValueError("name the new budget: {'max_tokens': N} and/or {'max_cost': X}, or {'action': 'stop'}")
    tokens, cost = 0, 0.0
    if "max_tokens" in values:
        raw = values["max_tokens"]
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw) or raw != int(raw):
            raise ValueError(f"max_tokens must be a whole number of tokens, got {raw!r}")
        if raw <= 0:
            raise ValueError(f"max_tokens must be positive, got {raw!r}")
        if raw > MAX_TOKENS:
            raise ValueError(f"max_tokens must be at most {MAX_TOKENS:,}, got {raw!r}")
        tokens = int(raw)
    if "max_cost" in values:
        raw = values["max_cost"]
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
            raise ValueError(f"max_cost must be a number of dollars, got {raw!r}")
        if raw <= 0:
            raise ValueError(f"max_cost must be positive, got {raw!r}")
        if raw > MAX_DOLLARS:
            raise ValueError(f"max_cost must be at most {MAX_DOLLARS:,} dollars, got {raw!r}")
        cost = float(raw)
    return Limits(tokens, cost)


def _stop_update(name: str, limits: Limits, spent: int, reason: str) -> dict[str, Any]:
    emit("budget_stopped", reason, node=name, spent=spent)
    update: dict[str, Any] = {
        "status": "cancelled",
        "error": None,
        "budget": limits.to_state(stopped=True, stopped_at=name, reason=reason),
    }
    if name == "respond":  # the direct path ends here (no finalize)
        text = f"Stopped at the budget before answering ({reason})."
        update["messages"] = [AIMessage(content=text, name="planmode")]
    return update


def guard_start(
    name: str, state: Any, runtime: Any, *, precheck: bool = True, skip: bool = False
) -> tuple[_Checked, CallGuard | None]:
    """Before node ``name``: the check of its estimate (``precheck``: pauses until it fits, or the human stops the
    run), then the `CallGuard` of its model calls (None when the run was stopped: ``checked.stop`` is the node's
    result, the node does not run)."""
    checked = _check(name, state, runtime) if precheck else _Checked()
    if checked.stop is not None:
        return checked, None
    return checked, CallGuard(name, state, runtime, checked.raised, skip=skip)


def guard_enter(guard: CallGuard) -> Token[CallGuard | None]:
    """Every model call started in this context until `guard_exit` goes through ``guard``."""
    return _guard.set(guard)


def guard_exit(token: Token[CallGuard | None]) -> None:
    _guard.reset(token)


def guard_stopped(guard: CallGuard | None) -> bool:
    """Whether the node raised because a human stopped the run at one of its calls' budget pauses (its result is
    then the stop)."""
    return guard is not None and guard.stop is not None


def guard_result(checked: _Checked, guard: CallGuard | None, result: Any) -> Any:
    """After the node: its result, the stop when the run was stopped, with a raised budget kept in state."""
    if guard is None:
        return checked.stop
    if guard.stop is not None:
        return guard.stop
    if guard.raised is not None:
        checked = _Checked(raised=guard.raised, prices=guard.settings.prices or None)
    return checked.apply(result)


def guarded(name: str, node: GraphNode, *, precheck: bool = True, skip: bool = False) -> GraphNode:
    """``node`` behind the budget check (see the module docstring): the check before the node (``precheck``),
    then the check before every model call the node makes (`CallGuard`; ``skip``: a call that does not fit
    raises `BudgetSkipped` instead of pausing). The graph's nodes get the same through their pipeline
    (`accounts_open` and the rest, called in its one frame)."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def awrapped(state: Any, runtime: Any) -> Any:
                checked, guard = guard_start(name, state, runtime, precheck=precheck, skip=skip)
                if guard is None:
                    return checked.stop
                token = guard_enter(guard)
                try:
                    result = await fn(state, runtime=runtime)
                except Exception:
                    if not guard_stopped(guard):
                        raise
                    result = None  # stopped at a call's budget pause: the stop is the node's result
                finally:
                    guard_exit(token)
                return guard_result(checked, guard, result)

            return awrapped

        @functools.wraps(fn)
        def wrapped(state: Any, runtime: Any) -> Any:
            checked, guard = guard_start(name, state, runtime, precheck=precheck, skip=skip)
            if guard is None:
                return checked.stop
            token = guard_enter(guard)
            try:
                result = fn(state, runtime=runtime)
            except Exception:
                if not guard_stopped(guard):
                    raise
                result = None
            finally:
                guard_exit(token)
            return guard_result(checked, guard, result)

        return wrapped

    return per_path(node, wrap)


class BudgetSkipped(PlanModeError):
    """A model call that does not fit the budget where the node does without it (the final summary, the detect
    classifier): the call is not made."""


class BudgetStopped(PlanModeError):
    """A human stopped the run at a model call's budget pause: the call is not made, the node ends the run."""


#: What `CallGuard` raises on purpose: a pause (LangGraph's interrupt), a skipped or a stopped call.
_INTENDED = ("GraphInterrupt(", "BudgetSkipped(", "BudgetStopped(")


class _IntendedStops(logging.Filter):
    """LangChain logs every exception a callback raises as "Error in <handler>.<event> callback: ..." before
    raising it on (``raise_error``). The budget's pause and skip are raised that way on purpose, so they are not
    logged: without this, a budget pause printed the whole interrupt payload to a CLI user's terminal as an
    error. Other handlers' errors, and CallGuard's unexpected ones (an unknown price), are logged as before."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if record.msg != "Error in %s.%s callback: %s" or not isinstance(args, tuple) or len(args) != 3:
            return True
        return not (args[0] == "CallGuard" and str(args[2]).startswith(_INTENDED))


logging.getLogger("langchain_core.callbacks.manager").addFilter(_IntendedStops())

#: The answer a call is expected to produce, in tokens, at most (``max_output_tokens`` when lower).
CALL_OUTPUT = 300

_guard: ContextVar[CallGuard | None] = ContextVar("planmode_budget_guard", default=None)
register_configure_hook(_guard, inheritable=True)


class CallGuard(BaseCallbackHandler):
    """The budget check before each model call of a node (a LangChain callback attached to every run started
    in the node's context, as `planmode.observability.usage.UsageRecorder` is): ``spent`` (the run's usage and this
    node's calls so far) plus this call's estimate (its prompt and `CALL_OUTPUT`) must fit, else the run pauses at the
    ``planmode.budget`` interrupt before the call (or, with ``skip``, the call is not made)."""

    raise_error = True
    run_inline = True

    def __init__(self, name: str, state: Any, runtime: Any, raised: Limits | None, *, skip: bool) -> None:
        new_run = name == "detect" or not isinstance(state, Mapping)  # detect starts a run: the context's settings
        stored = None if new_run else state.get("budget")
        settings = resolve_settings(getattr(runtime, "context", None), None) if new_run else settings_of(state, runtime)
        self.settings = with_budget_prices(settings, stored)
        stopped = isinstance(stored, Mapping) and bool(stored.get("stopped"))
        self.limits = Limits() if stopped else (raised or limits_of(self.settings, stored))
        self.name = name
        self.state = state
        self.skip = skip
        self.raised: Limits | None = None
        self.stop: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def on_chat_model_start(self, serialized: Any, messages: list[list[BaseMessage]], **kwargs: Any) -> None:
        if not self.limits.active:
            return
        with self._lock:  # one question at a time (verify's judges call the model concurrently)
            self._check(sum(approx_tokens(m) for batch in messages for m in batch))

    def _check(self, prompt: int) -> None:
        cap = self.settings.max_output_tokens
        expected = prompt + (min(cap, CALL_OUTPUT) if cap > 0 else CALL_OUTPUT)
        problem: str | None = None
        while True:
            if self.stop is not None:
                raise BudgetStopped("the run was stopped at its budget")
            usage = spent_usage()
            spent = total_tokens(usage)
            spent_cost = next_cost = 0.0
            reason = _unpriced(self.settings, usage) if self.limits.max_cost > 0 else None
            if self.limits.max_cost > 0 and reason is None:
                price = _price_or_raise(self.settings.prices, _model_name(self.settings, usage))
                spent_cost = cost_of(usage, self.settings.prices) or 0.0
                next_cost = _tokens_cost(expected, price)
            reason = reason or _over(self.limits, spent, spent_cost, expected, next_cost)
            if reason is None:
                return
            if self.skip:
                raise BudgetSkipped(reason)
            payload = _payload(
                self.name, self.state, self.settings, self.limits, reason, expected, [], spent, spent_cost, problem
            )
            emit("budget_paused", reason, node=self.name, spent=spent, expected=expected)
            answer = interrupt(payload)
            try:
                decision = parse_budget_answer(answer)
            except ValueError as exc:
                problem = str(exc)
                continue
            if isinstance(decision, _Stop):
                self.stop = _stop_update(self.name, self.limits, spent, reason)
                raise BudgetStopped(reason)
            unpriced = _unpriced(self.settings, usage) if decision.max_cost else None
            if unpriced is not None:
                problem = unpriced
                continue
            self.limits = Limits(
                decision.max_tokens or self.limits.max_tokens, decision.max_cost or self.limits.max_cost
            )
            self.raised = self.limits
            problem = f"the new budget does not cover the next call either ({reason})"


@dataclass(frozen=True)
class _Checked:
    stop: dict[str, Any] | None = None
    raised: Limits | None = None
    prices: dict[str, Any] | None = None

    def apply(self, result: Any) -> Any:
        """The node's result with the raised budget (and the prices it was raised at) kept in state."""
        if self.raised is not None and isinstance(result, dict):
            extra = {"prices": self.prices} if self.prices else {}
            return {**result, "budget": self.raised.to_state(**extra)}
        return result


def _check(name: str, state: Any, runtime: Any) -> _Checked:
    """The budget check before node ``name``: pauses (``interrupt``) until the budget covers the next call or
    the human stops the run."""
    stored = state.get("budget")
    settings = with_budget_prices(settings_of(state, runtime), stored)
    limits = limits_of(settings, stored)
    if isinstance(stored, Mapping) and stored.get("stopped"):
        limits = Limits()  # a stopped run only finishes
    raised = False
    problem: str | None = None
    while limits.active:
        usage = state.get("usage")
        estimate, steps = expected_tokens(name, state, settings)
        if estimate <= 0:
            break
        expected = math.ceil(estimate * MARGIN)
        spent = total_tokens(usage)
        spent_cost = next_cost = 0.0
        reason = _unpriced(settings, usage) if limits.max_cost > 0 else None  # asks for prices (or a stop)
        if limits.max_cost > 0 and reason is None:
            price = _price_or_raise(settings.prices, _model_name(settings, usage))
            spent_cost = cost_of(usage, settings.prices) or 0.0
            next_cost = _tokens_cost(expected, price)
        reason = reason or _over(limits, spent, spent_cost, expected, next_cost)
        if reason is None:
            break
        payload = _payload(name, state, settings, limits, reason, expected, steps, spent, spent_cost, problem)
        emit("budget_paused", reason, node=name, spent=spent, expected=expected)
        answer = interrupt(payload)
        try:
            decision = parse_budget_answer(answer)
        except ValueError as exc:
            problem = str(exc)
            continue
        if isinstance(decision, _Stop):
            return _Checked(stop=_stop_update(name, limits, spent, reason))
        unpriced = _unpriced(settings, usage) if decision.max_cost else None
        if unpriced is not None:  # a cost budget without a price cannot be checked: refused, asked again
            problem = unpriced
            continue
        limits = Limits(decision.max_tokens or limits.max_tokens, decision.max_cost or limits.max_cost)
        raised = True
        problem = f"the new budget does not cover the next call either ({reason})"
    return _Checked(raised=limits if raised else None, prices=settings.prices if raised else None)


def with_budget_prices(settings: PlanModeContext, stored: Any) -> PlanModeContext:
    """``settings`` with the prices a resume gave a run that had none (kept in ``state["budget"]`` beside the
    raised cost budget they price), so later resumes still have them."""
    prices = stored.get("prices") if isinstance(stored, Mapping) else None
    if settings.prices or not isinstance(prices, Mapping) or not prices:
        return settings
    import dataclasses

    try:
        return dataclasses.replace(settings, prices=dict(prices))
    except ConfigurationError:  # hand-edited junk in the budget key: the run's own (no) prices
        return settings


def _payload(
    name: str,
    state: Mapping[str, Any],
    settings: PlanModeContext,
    limits: Limits,
    reason: str,
    expected: int,
    steps: list[str],
    spent: int,
    spent_cost: float,
    problem: str | None,
) -> dict[str, Any]:
    plan = state.get("plan")
    estimate = plan_estimate(plan, state.get("usage"), settings) if isinstance(plan, Plan) else None
    need = max(spent + expected, estimate["total"] if estimate else 0)
    what = f"execute and verify step(s) {', '.join(steps)}" if steps else f"the {name} call"
    lines = [
        f"**Budget reached** before {what}: {reason}.",
        f"Spent {spent} tokens" + (f" (${spent_cost:.4f})" if limits.max_cost else "") + f"; next: ~{expected}.",
    ]
    if estimate:
        lines.append(f"Estimated to finish the plan: ~{estimate['remaining']} more tokens ({estimate['basis']}).")
    lines.append("Raise the budget ({'max_tokens': N} / {'max_cost': X}) or stop ({'action': 'stop'}).")
    return {
        "type": INTERRUPT_TYPE,
        "node": name,
        "steps": steps,
        "reason": reason,
        "spent": {"tokens": spent, "cost": round(spent_cost, 6) if limits.max_cost else None},
        "next": {"tokens": expected, "what": what},
        "budget": {"max_tokens": limits.max_tokens or None, "max_cost": limits.max_cost or None},
        "estimate": estimate,
        "suggested": {"max_tokens": need},
        "resume": "{'max_tokens': N} and/or {'max_cost': X} to raise the budget, {'action': 'stop'} to stop",
        "answer_error": problem,
        "markdown": "\n\n".join(lines),
    }


def finalize_fits(state: Mapping[str, Any], settings: PlanModeContext) -> bool:
    """True when the final summary call fits the budget (it is skipped otherwise)."""
    limits = limits_of(settings, state.get("budget"))
    if not limits.max_tokens:
        return True
    expected, _ = expected_tokens("finalize", state, settings)
    return total_tokens(state.get("usage")) + expected <= limits.max_tokens


def approval_budget(plan: Plan, state: Mapping[str, Any], settings: PlanModeContext) -> dict[str, Any]:
    """The approval payload's ``budget`` section: the plan's estimate beside the budget."""
    usage = state.get("usage")
    limits = limits_of(settings, state.get("budget"))
    estimate = plan_estimate(plan, usage, settings)
    out: dict[str, Any] = {
        "estimate": estimate,
        "max_tokens": limits.max_tokens or None,
        "max_cost": limits.max_cost or None,
        "fits": not limits.max_tokens or estimate["total"] <= limits.max_tokens,
    }
    price = price_of(settings.prices, _model_name(settings, usage)) if settings.prices else None
    if price is not None:
        spent = cost_of(usage, settings.prices) or 0.0
        out["estimated_cost"] = round(spent + _tokens_cost(estimate["remaining"], price), 6)
        if limits.max_cost:
            out["fits"] = out["fits"] and out["estimated_cost"] <= limits.max_cost
    return out


def approval_markdown(section: Mapping[str, Any]) -> str:
    """One line for the approval's markdown."""
    est = section["estimate"]
    text = f"Estimated tokens: ~{est['total']} ({est['basis']})"
    if section.get("estimated_cost") is not None:
        text += f", ~${section['estimated_cost']:.4f}"
    limits = [f"{section['max_tokens']} tokens" if section.get("max_tokens") else ""]
    limits.append(f"${section['max_cost']:.4f}" if section.get("max_cost") else "")
    named = " / ".join(x for x in limits if x)
    text += f"; budget: {named}" + ("" if section["fits"] else " (the estimate exceeds it)") if named else ""
    return text


def _report_after(state: Any, result: Any, delta: dict[str, Any]) -> Any:
    """finalize's report with the run's usage (its own call included) and budget."""
    from planmode.observability.usage import merge_usage

    if not isinstance(result, dict) or not isinstance(result.get("report"), dict):
        return result
    usage = merge_usage(state.get("usage"), delta)
    settings = with_budget_prices(settings_of(state, None), state.get("budget"))
    report = {**result["report"], "usage": usage}
    cost = cost_of(usage, settings.prices) if settings.prices else None
    if cost is not None:
        report["cost"] = round(cost, 6)
    budget = state.get("budget")
    limits = limits_of(settings, budget)
    if limits.active or isinstance(budget, Mapping):
        report["budget"] = {**limits.to_state(), **(dict(budget) if isinstance(budget, Mapping) else {})}
    return {**result, "report": report}


_GUARDED = frozenset({"plan", "dispatch", "reflect", "patch", "respond"})
#: Nodes that do without a call that does not fit (the final summary, the detect classifier) instead of pausing.
_SKIPPING = frozenset({"detect", "finalize"})


@dataclass
class Accounts:
    """A node's accounting while it runs: its usage count and its budget guard (`accounts_open`)."""

    name: str
    recorder: UsageRecorder
    counting: Token[UsageRecorder | None]
    checked: _Checked = field(default_factory=lambda: _Checked())
    guard: CallGuard | None = None
    guarding: Token[CallGuard | None] | None = None

    @property
    def runs(self) -> bool:
        """Whether the node runs (not when the run was stopped at the budget check before it)."""
        return self.guard is not None


def accounts_open(name: str, state: Any, runtime: Any) -> Accounts:
    """Before node ``name`` (the ``accounted`` part of its pipeline, `planmode.graph.pipeline`): its model calls
    counted from now on, the budget check of its estimate for the nodes that start model calls, then each call's
    check. Call `accounts_close` when the node ends, whatever happens; the check may pause the run (an interrupt).
    """
    recorder, counting = count_start(name, state, reset=name == "detect")
    try:
        checked, guard = guard_start(name, state, runtime, precheck=name in _GUARDED, skip=name in _SKIPPING)
    except BaseException:
        count_stop(counting)
        raise
    acc = Accounts(name, recorder, counting, checked, guard)
    if guard is not None:
        acc.guarding = guard_enter(guard)
    return acc


def accounts_close(acc: Accounts) -> None:
    """The node ended: its calls are no longer checked or counted."""
    try:
        if acc.guarding is not None:
            guard_exit(acc.guarding)
    finally:
        count_stop(acc.counting)


def accounts_failed(acc: Accounts) -> bool:
    """Whether a node that raised did so because a human stopped the run at a call's budget pause (its result is
    then the stop, `accounts_result`), rather than for a reason to raise on."""
    return guard_stopped(acc.guard)


def accounts_result(acc: Accounts, state: Any, result: Any) -> Any:
    """After the node: its result with the raised budget (or the stop), then its usage delta."""
    result = guard_result(acc.checked, acc.guard, result)
    return counted(state, result, acc.recorder, reset=acc.name == "detect", after=_AFTER.get(acc.name))


def _detect_after(result: Any) -> Any:
    import dataclasses

    from langgraph.types import Command

    if isinstance(result, Command) and isinstance(result.update, dict):
        return dataclasses.replace(result, update={**result.update, "budget": None})
    return result


#: What a node's accounting adds to its result after its usage is known.
_AFTER: dict[str, Callable[[Any, Any, dict[str, Any]], Any]] = {
    "detect": lambda s, r, d: _detect_after(r),
    "finalize": _report_after,
}
