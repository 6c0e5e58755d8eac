"""Tokens and dollars: projected before a run, counted after it, and held to ``--max-cost``.

* **Projected** (:func:`sample_tokens`): the prompts a program sends for a small sample of rows,
  rendered as its adapter renders them (each predictor's signature, demos and the row's inputs;
  a forward pass's own messages), counted in tokens (:func:`personalign.lm.prices.prompt_tokens`);
  the output at most ``max_tokens`` per call (:func:`output_bound`), one token for a forward pass.
* **Spent** (:func:`spent`): the ``usage`` of the responses that reached a model (DSPy's usage
  tracker, read by :class:`personalign.lm.CallCounter`: a cached response is not there, so it
  costs nothing), priced by :mod:`personalign.lm.prices`.
* **Held** (:class:`Budget`, :func:`budget`): inside ``with budget(max_usd, model)`` every call
  that would reach the model (not one a cache answers) first reserves the projected dollars of
  one call (:meth:`Budget.arm`, from the cost line); a call that would pass the budget is not
  made: :class:`~personalign.errors.BudgetExceeded` stops the run, saying how far it got. A
  response's own usage then replaces its reservation.
"""

from __future__ import annotations

import contextlib
import math
import threading
from typing import Any, Iterator, Sequence

BUDGET_KEY = "personalign_budget"  # the dspy.context key holding the run's Budget
SAMPLE_ROWS = 5  # rows whose prompts are rendered and counted
DEFAULT_MAX_TOKENS = 4000  # DSPy's own max_tokens when the model has none set


def check_max_cost(value: Any) -> float | None:
    """``value`` as dollars (a finite number >= 0), or None for no budget.

    Raises:
        ArgumentError: negative, NaN, infinite, or not a number."""
    from personalign.errors import ArgumentError

    if value is None:
        return None
    if isinstance(value, bool):
        raise ArgumentError("max_cost", f"must be a number of dollars >= 0, got {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ArgumentError("max_cost", f"must be a number of dollars >= 0, got {str(value)[:40]!r}") from None
    if not math.isfinite(out) or out < 0:
        raise ArgumentError("max_cost", f"must be a finite number of dollars >= 0, got {str(value)[:40]!r}")
    return out


def output_bound(lm) -> int:
    """The output tokens a call may take at most: the model's ``max_tokens`` (or
    ``max_completion_tokens``), else DSPy's default."""
    kw = getattr(lm, "kwargs", None) or {}
    value = kw.get("max_completion_tokens") or kw.get("max_tokens")
    return int(value) if isinstance(value, (int, float)) and value > 0 else DEFAULT_MAX_TOKENS


def _inner(program):
    while getattr(program, "undecided", None) is not None:
        program = program.undecided
    return program


def _row(example) -> dict:
    return dict(example.toDict()) if hasattr(example, "toDict") else dict(example)


def rendered(program, example, model: str | None) -> list[list[dict]]:
    """The chat requests ``program`` sends for ``example``, as far as they are known before a
    call: a forward pass's messages, else each predictor's prompt rendered by the model's adapter
    (an input a step produces from an earlier one's answer is rendered empty)."""
    from personalign.lm import adapter_for

    inner = _inner(program)
    if getattr(inner, "needs_logprobs", False) and callable(getattr(inner, "messages", None)):
        return [list(inner.messages(example))]
    predictors = getattr(inner, "named_predictors", None)
    if not callable(predictors):
        return []
    adapter, row, out = adapter_for(model or ""), _row(example), []
    for _, pred in predictors():
        sig = pred.signature
        inputs = {k: row.get(k, "") for k in sig.input_fields}
        out.append(adapter.format(sig, list(getattr(pred, "demos", None) or []), inputs))
    return out


def sample_tokens(program, examples: Sequence, model: str | None, lm, mean_output: float | None = None) -> dict:
    """``{"input", "output", "exact", "bound", "rows"}``: the mean input tokens of one call of
    ``program`` over the first :data:`SAMPLE_ROWS` of ``examples`` (:func:`rendered`); the output
    tokens of one: ``mean_output`` (measured by an earlier run: ``bound`` False), else at most
    :func:`output_bound` (1 for a forward pass); whether the count is the model's own tokenizer's
    (``exact``); the rows counted. ``input`` None when nothing could be rendered."""
    from personalign.lm.prices import prompt_tokens

    counts, exact, rows, forward = [], True, 0, getattr(_inner(program), "needs_logprobs", False)
    for ex in list(examples)[:SAMPLE_ROWS]:
        try:
            requests = rendered(program, ex, model)
        except Exception:  # noqa: BLE001 -- a prompt that cannot be rendered before the run: not counted
            continue
        rows += 1
        for messages in requests:
            n, own = prompt_tokens(model, messages)
            counts.append(n)
            exact = exact and own
    measured = not forward and mean_output is not None
    return {"input": sum(counts) / len(counts) if counts else None,
            "output": 1 if forward else mean_output if measured else output_bound(lm),
            "exact": exact and bool(counts), "bound": not measured, "rows": rows}


def spent(tokens: dict[str, dict[str, int]]) -> dict:
    """``{"input_tokens", "output_tokens", "dollars", "priced"}`` of a block's responses
    (:attr:`personalign.lm.CallCounter.tokens`: model -> usage), each model at its price."""
    from personalign.lm.prices import dollars, priced

    out = {"input_tokens": 0, "output_tokens": 0, "dollars": 0.0, "priced": False}
    for model, usage in (tokens or {}).items():
        p, c = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        out["input_tokens"] += p
        out["output_tokens"] += c
        out["dollars"] += dollars(model, p, c)
        out["priced"] = out["priced"] or priced(model)
    out["dollars"] = round(out["dollars"], 8)
    return out


def spent_fields(tokens: dict[str, dict[str, int]]) -> dict:
    """A result row's spend (:func:`spent`): ``spent_input_tokens``, ``spent_output_tokens``,
    ``spent_dollars`` (numbers: MLflow metrics too) and ``priced``."""
    out = spent(tokens)
    return {"spent_input_tokens": out["input_tokens"], "spent_output_tokens": out["output_tokens"],
            "spent_dollars": out["dollars"], "priced": out["priced"]}


def total_spent(rows: Sequence[dict]) -> dict:
    """The run's spend: ``{"input_tokens", "output_tokens", "dollars", "priced"}`` summed over
    ``rows`` (each with :func:`spent_fields`)."""
    return {"input_tokens": sum(int(r.get("spent_input_tokens") or 0) for r in rows),
            "output_tokens": sum(int(r.get("spent_output_tokens") or 0) for r in rows),
            "dollars": round(sum(float(r.get("spent_dollars") or 0.0) for r in rows), 8),
            "priced": any(r.get("priced") for r in rows)}


class Budget:
    """The dollars a run may spend (see the module docstring); shared by every worker thread."""

    def __init__(self, max_usd: float, model: str | None) -> None:
        self.max_usd, self.model = float(max_usd), model
        self.per_call, self.projected = 0.0, None
        self.spent, self.reserved, self.calls = 0.0, 0.0, 0
        self.dearest = 0.0  # the most one call has cost so far: a call reserves at least this
        self.started, self.flight = 0, 0  # calls sent to the model; sent and not yet ended
        self._lock = threading.Lock()

    def arm(self, per_call: float, projected: int | None) -> None:
        """The projected dollars of one call and the calls projected in all (from the cost line)."""
        self.per_call, self.projected = max(0.0, float(per_call)), projected

    def reserve(self) -> float:
        """Before a call reaches the model: its projected dollars, reserved.

        Raises:
            BudgetExceeded: the call would pass the budget."""
        from personalign.errors import BudgetExceeded

        with self._lock:
            per_call = max(self.per_call, self.dearest)
            if per_call > 0 and self.spent + self.reserved + per_call > self.max_usd + 1e-12:
                of = f" of {self.projected:,}" if self.projected is not None else ""
                d = 4 if self.max_usd >= 0.0001 or self.max_usd == 0 else 6  # $0.00004 is not $0.0000
                more = f" + up to ${self.reserved:.{d}f} for {self.flight:,} in flight" if self.flight else ""
                raise BudgetExceeded(f"--max-cost: stopped at ${self.spent:.{d}f}{more} of ${self.max_usd:.{d}f} "
                                     f"after {self.started:,}{of} calls sent (the next would pass it at "
                                     f"${per_call:.6f} a call); nothing written")
            self.reserved += per_call
            self.started, self.flight = self.started + 1, self.flight + 1
            return per_call

    def settle(self, reserved: float, usage: Any = None) -> None:
        """A call ended: its reservation released, its ``usage`` (None: answered by a cache, or
        failed) charged at the model's price."""
        from personalign.lm.prices import dollars

        cost = 0.0
        if usage:
            get = usage.get if isinstance(usage, dict) else (lambda k, d=None: getattr(usage, k, d))
            cost = dollars(self.model, int(get("prompt_tokens", 0) or 0), int(get("completion_tokens", 0) or 0))
        with self._lock:
            self.reserved = max(0.0, self.reserved - reserved)
            self.flight -= reserved > 0 and self.flight > 0
            self.spent += cost
            self.dearest = max(self.dearest, cost)
            self.calls += usage is not None and bool(usage)


_entered: list[Budget] = []  # the budgets entered in this process (threads a run starts read the last)


def current() -> Budget | None:
    """The run's :class:`Budget`: the block's (``dspy.context``), else the last one entered in the
    process -- a thread the run started without its context (an Optuna worker of ``sweep --n-jobs``)
    is held to it too; None without one."""
    import dspy

    return dspy.settings.get(BUDGET_KEY) or (_entered[-1] if _entered else None)


@contextlib.contextmanager
def budget(max_usd: float | None, model: str | None) -> Iterator[Budget | None]:
    """The block's calls held to ``max_usd`` dollars (None: no budget, nothing entered)."""
    if max_usd is None:
        yield None
        return
    import dspy

    held = Budget(max_usd, model)
    _entered.append(held)
    try:
        with dspy.context(**{BUDGET_KEY: held}):
            yield held
    finally:
        _entered.remove(held)


def arm(cost) -> None:
    """Give the run's budget (if any) the projected dollars of one call of ``cost``
    (:class:`personalign._verbs.cost.Cost`): the dearest strategy's projected dollars over its new
    calls (an average over strategies would let a generation reserve the price of a one-token
    forward pass and pass the budget)."""
    held = current()
    if held is not None:
        held.arm(max((d / n for d, n in cost.dollars_by_strategy() if n), default=0.0), cost.new)


class _Gate:
    """A cache watcher (:mod:`personalign.lm.ledger`) that reserves a call's dollars when the cache
    does not hold its key: the call will reach the model."""

    def __init__(self, held: Budget) -> None:
        self.held, self.reserved = held, 0.0

    def saw(self, key: str | None, cache) -> None:
        if key is None or not cache.holds(key):
            self.reserved += self.held.reserve()


class _Tap:
    """The usage tracker of one call: keeps the usage DSPy reports for it (none for a cache hit) and
    hands it on to the block's own tracker (:class:`personalign.lm.CallCounter`'s)."""

    def __init__(self, parent) -> None:
        self.parent, self.usage = parent, {"prompt_tokens": 0, "completion_tokens": 0}
        self.seen = False

    def add_usage(self, lm: str, usage_entry: dict) -> None:
        for key in self.usage:
            self.usage[key] += int((usage_entry or {}).get(key) or 0)
        self.seen = self.seen or bool(usage_entry)
        if self.parent is not None:
            self.parent.add_usage(lm, usage_entry)

    def __deepcopy__(self, memo) -> "_Tap":
        return self


def guarded(lm, call) -> Any:
    """``call()`` -- one request of ``lm`` through ``dspy.LM`` -- held to the run's budget (when one
    is entered): its dollars reserved at DSPy's cache lookup (a call the cache answers reserves
    nothing), or before the call when nothing is looked up; then charged at the usage DSPy reports
    for it."""
    held = current()
    if held is None:
        return call()
    import dspy

    from personalign.lm.ledger import STACK, checkable

    gate, tap = _Gate(held), _Tap(dspy.settings.usage_tracker)
    scope: dict = {"usage_tracker": tap}
    if checkable(lm):
        scope[STACK] = (*(dspy.settings.get(STACK) or ()), gate)
    else:
        gate.reserved = held.reserve()
    try:
        with dspy.context(**scope):
            return call()
    finally:
        held.settle(gate.reserved, tap.usage if tap.seen else None)


def charged(call) -> Any:
    """``call()`` -- one request sent outside ``dspy.LM.__call__`` (an endpoint's forward pass for a
    yes/no margin: :func:`personalign.lm.serving.yes_no_margin`) -- held to the run's budget (when
    one is entered): its projected dollars reserved before it is sent, then charged at the ``usage``
    of its response (nothing when it failed).

    Raises:
        BudgetExceeded: the call would pass the budget (nothing sent)."""
    held = current()
    if held is None:
        return call()
    reserved, resp = held.reserve(), None
    try:
        resp = call()
        return resp
    finally:
        held.settle(reserved, getattr(resp, "usage", None) if resp is not None else None)


__all__ = ["BUDGET_KEY", "Budget", "arm", "budget", "charged", "check_max_cost", "current", "guarded", "output_bound",
           "rendered", "sample_tokens", "spent", "spent_fields", "total_spent"]
