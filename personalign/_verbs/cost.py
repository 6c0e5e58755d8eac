"""The cost of a run, said before it is spent: the model calls each verb will make at most --
evaluation, fitting and compiling, per strategy -- and, when the model's speed on this machine is
known (:mod:`personalign.lm.speed`: ``personalign doctor --bench``, or the calls of an earlier
run), the time they take. Every verb that calls a model hands a :class:`Cost` to its ``on_cost``
hook before the first call (default: the line on stderr when ``progress``); :func:`cost_gate` is
the command line's hook: the line, then a question when the estimate passes ``--confirm-over``
and stdin is a terminal (never otherwise: CI and pipes run on).

What counts as a call is what :class:`personalign.lm.CallCounter` counts (a DSPy LM call, a
forward pass); the projection is an upper bound of calls made plus calls a cache answered, equal
to them for deterministic strategies on an embedded model.
"""

from __future__ import annotations

import contextlib
import math
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

PHASES = ("fitting", "compiling", "evaluation")


@dataclass
class StrategyCost:
    """Projected model calls of one strategy: ``fitting`` (its own fit), ``compiling`` (a
    teleprompter, dev selection and decision rule included), ``evaluation``; ``kind``: what they
    are (``generation``: DSPy LM calls; ``forward``: forward passes)."""

    name: str
    fitting: int = 0
    compiling: int = 0
    evaluation: int = 0
    kind: str = "generation"

    @property
    def total(self) -> int:
        return self.fitting + self.compiling + self.evaluation

    def text(self) -> str:
        """``"yes-prob 531 (511 fitting + 20 evaluation)"``, ``"predict 20 evaluation"``."""
        parts = [f"{getattr(self, p):,} {p}" for p in PHASES if getattr(self, p)]
        if len(parts) < 2:
            return f"{self.name} {parts[0] if parts else 'none'}"
        return f"{self.name} {self.total:,} ({' + '.join(parts)})"


@dataclass
class Cost:
    """The model calls a run will make at most, projected before the first one.

    Attributes:
        verb: ``compare``, ``compile``, ``eval``, ``predict``, ``sweep``.
        model: the model string (None: no strategy calls one).
        strategies: one :class:`StrategyCost` each (per trial for a sweep).
        trials: a sweep's trials to run (the total is ``trials`` x the most costly strategy).
        speed: the model's known speed (:func:`personalign.lm.speed.known_speed`), or None.
    """

    verb: str
    model: str | None
    strategies: list[StrategyCost] = field(default_factory=list)
    trials: int | None = None
    speed: dict | None = None

    @property
    def total(self) -> int:
        """Model calls in all, at most."""
        if self.trials is not None:
            return self.trials * max((s.total for s in self.strategies), default=0)
        return sum(s.total for s in self.strategies)

    def calls_by_kind(self) -> dict[str, int]:
        if self.trials is not None:
            worst = max(self.strategies, key=lambda s: s.total, default=None)
            return {worst.kind: self.total} if worst is not None and self.total else {}
        out: dict[str, int] = {}
        for s in self.strategies:
            if s.total:
                out[s.kind] = out.get(s.kind, 0) + s.total
        return out

    @property
    def seconds(self) -> float | None:
        """The estimated time of the calls (s), or None when a kind's speed is unknown."""
        kinds = self.calls_by_kind()
        if not kinds:
            return 0.0
        if not self.speed or any(k not in self.speed for k in kinds):
            return None
        return sum(n * float(self.speed[k]["seconds_per_call"]) for k, n in kinds.items())

    def line(self) -> str:
        """The one line printed before the first call."""
        from personalign.errors import printable  # a model name or the speed file's text: never an escape code

        if not self.total:
            return f"cost: no model calls ({self.verb})"
        shown = [s for s in self.strategies if s.total]
        each = "; ".join(s.text() for s in shown)
        if self.trials is not None:
            head = f"cost: at most {self.total:,} model calls on {printable(str(self.model))} ({self.trials} trials, " \
                   f"each at most {max(s.total for s in shown):,}: {each})"
        else:
            head = f"cost: at most {self.total:,} model calls on {printable(str(self.model))} ({each})"
        seconds = self.seconds
        if seconds is None:
            return head + "; time unknown (`personalign doctor --bench` measures this model's speed)"

        how = ", ".join(f"{float(v['seconds_per_call']):.3g} s per {'forward pass' if k == 'forward' else 'call'} "
                        f"(measured by {'a run' if v['source'] == 'run' else printable(str(v['source'])[:40])} "
                        f"on {printable(str(v['measured'])[:10])})"
                        for k, v in sorted(self.speed.items()) if k in self.calls_by_kind())
        return head + f"; about {duration(seconds)} at {how}"

    def to_dict(self) -> dict[str, Any]:
        """The projection as recorded in a result file (``projected_lm_calls``)."""
        return {"total": self.total, "seconds": self.seconds, "trials": self.trials, "model": self.model,
                "strategies": [{"name": s.name, "kind": s.kind, **{p: getattr(s, p) for p in PHASES},
                                "total": s.total} for s in self.strategies]}


def duration(seconds: float) -> str:
    """``"40 s"``, ``"7 min"``, ``"2 h 05 min"`` (``"an unknown time"`` for an infinite or NaN ``seconds``)."""
    if not math.isfinite(seconds):
        return "an unknown time"
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 90 else f"{minutes // 60} h {minutes % 60:02d} min"


# --- what a strategy costs per row --------------------------------------------------------------
def _inner(program):
    """A program under its decision rule (:class:`personalign.programs.decision.DecidedProgram`)."""
    while getattr(program, "undecided", None) is not None:
        program = program.undecided
    return program


def row_calls(program, lm, examples: Sequence = ()) -> tuple[int, str]:
    """``(calls per row, kind)`` of ``program`` (a class or an instance): a scorer reading
    next-token log-probabilities makes one forward pass; a DSPy program its predictor calls times
    the adapter's factor (:func:`personalign.optimizers.budget.calls_per_run`)."""
    from personalign.optimizers.budget import calls_per_run, lm_adapter_factor

    if getattr(_inner(program), "needs_logprobs", False):
        return 1, "forward"
    return calls_per_run(program, lm_adapter_factor(lm), examples=examples), "generation"


def _strategy(stage, name: str, optimizer: str | None, train: list, test: list, *, lm, seed: int, runs: int = 1,
              settings: dict | None = None) -> StrategyCost:
    from personalign.compile_service import projected_calls

    label = f"{name}@{optimizer}" if optimizer else name
    info = stage.registry.info(name)
    if not info.uses_lm:
        return StrategyCost(label)
    per_row, kind = row_calls(stage.registry.create(name), lm, test)
    out = StrategyCost(label, evaluation=len(test) * per_row * runs, kind=kind)
    before = projected_calls(stage, name, optimizer, train, lm=lm, seed=seed, optimizer_settings=settings) \
        if (optimizer or info.trainable) and train else 0
    if optimizer and not info.trainable:
        out.compiling = before
    else:
        out.fitting = before
    return out


def project_compare(stage, specs, folds, *, lm, model: str | None, seed: int, repeats: int = 1) -> Cost:
    """The calls of :func:`personalign.compare`: per strategy, each fold's fit or compile and its
    evaluation (``repeats`` runs when the LM samples). A forward-pass scorer's passes are kept in
    memory for the run, so across folds it needs each row once."""
    from personalign.lm.speed import known_speed

    temperature = float((getattr(lm, "kwargs", None) or {}).get("temperature") or 0.0)
    runs = repeats if temperature > 0 else 1
    rows = []
    for name, opt in specs:
        per_fold = [_strategy(stage, name, opt, f.train, f.test, lm=lm, seed=seed, runs=runs) for f in folds]
        first = per_fold[0]
        if first.kind == "forward":  # fold 1 passes over every row; later folds reuse them
            rows.append(first)
            continue
        rows.append(StrategyCost(first.name, sum(c.fitting for c in per_fold), sum(c.compiling for c in per_fold),
                                 sum(c.evaluation for c in per_fold), first.kind))
    return Cost("compare", model, rows, speed=known_speed(model))


def project_compile(stage, strategy: str, optimizer: str | None, trainset: list, *, lm, model: str | None,
                    seed: int) -> Cost:
    """The calls of :func:`personalign.compile`: the strategy's fit or its teleprompter's compile."""
    from personalign.lm.speed import known_speed

    return Cost("compile", model, [_strategy(stage, strategy, optimizer, trainset, [], lm=lm, seed=seed)],
                speed=known_speed(model))


def project_run(verb: str, label: str, program, examples: list, *, lm, model: str | None) -> Cost:
    """The calls of running a loaded ``program`` over ``examples`` (``eval``, ``predict``)."""
    from personalign.lm.speed import known_speed

    if model is None:
        return Cost(verb, None, [StrategyCost(label)])
    per_row, kind = row_calls(program, lm, examples)
    return Cost(verb, model, [StrategyCost(label, evaluation=len(examples) * per_row, kind=kind)],
                speed=known_speed(model))


def project_sweep(stage, space, trainset: list, evalset: list, trials: int, *, lm, model: str | None,
                  seed: int) -> Cost:
    """The calls of a sweep's ``trials``: each at most the most costly configuration of the space
    (every strategy, every optimizer choice, the ends of each setting's range)."""
    import itertools

    from personalign.lm.speed import known_speed

    rows = []
    for name in space.strategies:
        info = stage.registry.info(name)
        optimizers = [None]
        if info.uses_lm and not info.trainable and space.optimizers is not None:
            optimizers = [None if o in (None, "none") else str(o) for o in space.optimizers.candidates()]
        worst = StrategyCost(name)
        for opt in optimizers:
            dims = space.optimizer_settings.get(opt or "", [])
            for values in itertools.islice(itertools.product(*(d.candidates() for d in dims)), 64):
                settings = {d.name.split(".", 1)[1]: v for d, v in zip(dims, values)}
                c = _strategy(stage, name, opt, trainset, evalset, lm=lm, seed=seed, settings=settings)
                worst = c if c.total > worst.total else worst
        rows.append(worst)
    return Cost("sweep", model, rows, trials=trials, speed=known_speed(model))


# --- before and after the run -------------------------------------------------------------------
def announce(cost: Cost, on_cost: Callable[[Cost], None] | None, progress: bool) -> None:
    """Hand ``cost`` to ``on_cost`` (before the first model call); without one, print its line on
    stderr when ``progress``."""
    if on_cost is not None:
        on_cost(cost)
    elif progress:
        sys.stderr.write(cost.line() + "\n")
        sys.stderr.flush()


def cost_gate(confirm_over: float | None = None, *, assume_yes: bool = False, stream=None,
              stdin=None) -> Callable[[Cost], None]:
    """The command line's ``on_cost``: print :meth:`Cost.line` on ``stream`` (stderr); when the
    estimate passes ``confirm_over`` seconds and ``assume_yes`` is off, ask on a terminal and raise
    :class:`personalign.errors.Declined` unless the answer is yes. Never asks when ``stdin`` is not
    a terminal (CI, a pipe, a scheduler): it says so and the run goes on."""

    def on_cost(cost: Cost) -> None:
        from personalign.errors import Declined

        out, inp = stream or sys.stderr, stdin or sys.stdin
        out.write(cost.line() + "\n")
        seconds = cost.seconds
        if assume_yes or confirm_over is None or seconds is None or seconds <= confirm_over:
            out.flush()
            return
        over = f"the estimate ({duration(seconds)}) passes --confirm-over {confirm_over:g} s"
        if inp is None or not inp.isatty():
            out.write(f"note: {over}; not asking (stdin is not a terminal): running\n")
            out.flush()
            return
        out.write(f"{over}. Run it? [y/N] ")
        out.flush()
        if inp.readline().strip().lower() not in ("y", "yes"):
            raise Declined(f"not run: {over} and the answer was not yes (--yes skips the question)")

    return on_cost


@contextlib.contextmanager
def measured(model: str | None):
    """Count the block's model calls and keep ``model``'s speed from them
    (:func:`personalign.lm.speed.record_speed`, source ``run``), on success or not."""
    from personalign.lm import CallCounter
    from personalign.lm.calls import FORWARD, GENERATION
    from personalign.lm.speed import record_speed

    counter = CallCounter()
    try:
        with counter:
            yield counter
    finally:
        if isinstance(model, str):
            record_speed(model, {GENERATION: (counter.seconds[GENERATION], counter.generations),
                                 FORWARD: (counter.seconds[FORWARD], counter.forward_passes)}, source="run")


@contextlib.contextmanager
def calls_bar(description: str, total: int, enabled: bool):
    """A progress bar of ``total`` model calls (fitting, compiling) advanced by each call the
    block makes or a cache answers; at the end it shows the calls made."""
    from personalign.lm import CallCounter
    from personalign.programs.run import progress_bar

    if not enabled or total <= 0:
        yield None
        return
    with progress_bar(description, total, True) as bar:
        task = bar.add_task(description, total=total)
        counter = CallCounter(on_call=lambda: bar.advance(task))
        with counter:
            yield counter
        done = int(bar.tasks[0].completed)
        bar.update(task, total=max(done, 1), completed=max(done, 1))


__all__ = ["Cost", "StrategyCost", "announce", "calls_bar", "cost_gate", "duration", "measured", "project_compare",
           "project_compile", "project_run", "project_sweep", "row_calls"]
