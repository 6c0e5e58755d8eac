"""The cost of a run, said before it is spent: the model calls each verb is expected to make --
evaluation, fitting and compiling, per strategy; new ones and those a cache already holds apart --
and, when the model's speed on this machine is known (:mod:`personalign.lm.speed`: ``personalign
doctor --bench``, or the calls of an earlier run), the time the new ones take. Every verb that
calls a model hands a :class:`Cost` (:mod:`personalign._verbs.projection` projects it) to its
``on_cost`` hook before the first call (default: the line on stderr when ``progress``);
:func:`personalign._verbs.cost_gate.cost_gate` is the command line's hook: the line, then a question when the estimate passes
``--confirm-over`` and stdin is a terminal (never otherwise: CI and pipes run on).

What counts as a call is what :class:`personalign.lm.CallCounter` counts (a DSPy LM call, a
forward pass); a forward pass several strategies read is counted once; retries are not counted up
front (they are in the upper bound, with a bootstrap that never stops early).
"""

from __future__ import annotations

import contextlib
import math
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

PHASES = ("fitting", "compiling", "evaluation")


@dataclass
class StrategyCost:
    """Projected model calls of one strategy: ``fitting`` (its own fit), ``compiling`` (a
    teleprompter, dev selection and decision rule included), ``evaluation`` -- the calls it is
    expected to make, those a cache answers included; ``kind``: what they are (``generation``: DSPy
    LM calls; ``forward``: forward passes).

    Attributes:
        cached: of those calls, the ones a cache holds now (looked up: :mod:`personalign.lm.ledger`,
            :func:`personalign.lm.forward.pass_lookup`).
        upper_bound: the calls it makes at most (retries, a bootstrap that never stops early, a
            sweep's most costly configuration); None: the same as :attr:`total`.
        shared: forward passes it reads that an earlier strategy of the run makes (not in its total).
        unchecked: generation calls no cache could be looked up for: new at most.
        speed: this strategy's own speed on the model, measured when it last ran
            (:func:`speed_key`); None: the model's.
    """

    name: str
    fitting: int = 0
    compiling: int = 0
    evaluation: int = 0
    kind: str = "generation"
    cached: int = 0
    upper_bound: int | None = None
    shared: int = 0
    unchecked: int = 0
    speed: dict | None = field(default=None, repr=False)
    tokens: dict | None = field(default=None, repr=False)  # per call: personalign.lm.spend.sample_tokens

    @property
    def total(self) -> int:
        return self.fitting + self.compiling + self.evaluation

    @property
    def input_tokens(self) -> int | None:
        """Input tokens of the new calls (each at the sampled prompts' mean), None: not counted."""
        per = (self.tokens or {}).get("input")
        return None if per is None else round(self.new * per)

    @property
    def output_tokens(self) -> int | None:
        """Output tokens of the new calls at most (``max_tokens`` each; 1 a forward pass)."""
        return None if self.input_tokens is None else round(self.new * float(self.tokens["output"]))

    @property
    def new(self) -> int:
        """The calls expected to reach the model."""
        return self.total - self.cached

    @property
    def bound(self) -> int:
        return max(self.total, self.upper_bound if self.upper_bound is not None else self.total)

    def add(self, other: "StrategyCost") -> "StrategyCost":
        """This strategy's cost plus ``other``'s (another fold, another trial), phase by phase."""
        out = StrategyCost(self.name, kind=self.kind, tokens=self.tokens or other.tokens)
        for f in (*PHASES, "cached", "shared", "unchecked"):
            setattr(out, f, getattr(self, f) + getattr(other, f))
        out.upper_bound = self.bound + other.bound if (self.upper_bound, other.upper_bound) != (None, None) else None
        return out

    def text(self, dollars: float | None = None) -> str:
        """``"yes-prob 531 (511 fitting + 20 evaluation)"``, ``"predict 20 evaluation, 20 cached"``,
        ``"predict@bootstrap 30 (24 compiling + 6 evaluation; up to 54)"``."""
        parts = [f"{getattr(self, p):,} {p}" for p in PHASES if getattr(self, p)]
        notes = [f"{self.cached:,} cached"] if self.cached else []
        if self.input_tokens is not None and self.new:
            notes.append(f"{self.input_tokens:,} in + {self.output_tokens:,} out tokens"
                         + (f", ${dollars:.4f}" if dollars is not None else ""))
        if self.bound > self.total:
            notes.append(f"up to {self.bound:,}")
        if self.shared:
            notes.append(f"{self.shared:,} passes shared")
        if len(parts) < 2:
            head = f"{self.name} {parts[0] if parts else 'none'}"
            return head + (f", {', '.join(notes)}" if notes else "")
        return f"{self.name} {self.total:,} ({' + '.join(parts)}{'; ' + ', '.join(notes) if notes else ''})"


@dataclass
class Cost:
    """The model calls a run is expected to make, projected before the first one: new ones and
    those a cache holds, each forward pass once however many strategies read it.

    Attributes:
        verb: ``compare``, ``compile``, ``eval``, ``predict``, ``sweep``.
        model: the model string (None: no strategy calls one).
        strategies: one :class:`StrategyCost` each (a sweep: each strategy's expected share of
            its ``trials``).
        trials: a sweep's trials to run.
        speed: the model's known speed (:func:`personalign.lm.speed.known_speed`), or None.
        upper_bound: the calls at most, when not the strategies' own (a sweep: ``trials`` x its
            most costly configuration); None: the sum of theirs.
        work: seconds of the run's work besides model calls (fitting, decision rules, intervals),
            as the same command took them when it last ran on this cache; None: not known.
        name: the command's fingerprint, under which :func:`measured` keeps that work.
        in_flight: the calls the run keeps in flight (:func:`personalign.lm.concurrency`; 1 for
            the embedded engine, which serves one call at a time): the time is the new calls in
            rounds of this many. Taken from the context the projection is made in when not given.
    """

    verb: str
    model: str | None
    strategies: list[StrategyCost] = field(default_factory=list)
    trials: int | None = None
    speed: dict | None = None
    upper_bound: int | None = None
    work: float | None = None
    name: str | None = None
    started: float | None = field(default=None, repr=False, compare=False)
    in_flight: int | None = None

    def __post_init__(self) -> None:
        if self.in_flight is None:
            from personalign.lm.flight import run_in_flight

            self.in_flight = run_in_flight(self.model)
        if self.speed is None and self.model:  # no run measured it yet: the capability check timed one call
            from personalign.lm.serving import probed_speed

            self.speed = probed_speed(self.model)

    @property
    def total(self) -> int:
        """Model calls expected in all, new and cached."""
        return sum(s.total for s in self.strategies)

    @property
    def cached(self) -> int:
        return sum(s.cached for s in self.strategies)

    @property
    def new(self) -> int:
        return self.total - self.cached

    @property
    def bound(self) -> int:
        own = sum(s.bound for s in self.strategies)
        return max(self.total, self.upper_bound if self.upper_bound is not None else own)

    @property
    def unchecked(self) -> int:
        return sum(s.unchecked for s in self.strategies)

    @property
    def input_tokens(self) -> int:
        """Input tokens of the new calls, projected (the strategies whose prompts were counted)."""
        return sum(s.input_tokens or 0 for s in self.strategies)

    @property
    def output_tokens(self) -> int:
        return sum(s.output_tokens or 0 for s in self.strategies)

    @property
    def priced(self) -> bool:
        """Whether the model has a price in litellm's bundled map (:mod:`personalign.lm.prices`)."""
        from personalign.lm.prices import priced

        return priced(self.model)

    @property
    def dollars(self) -> float:
        """The projected dollars of the new calls (0 without a price on file): the strategies' sum."""
        return sum(d for d, _ in self.dollars_by_strategy()) if self.new else 0.0

    def dollars_by_strategy(self) -> list[tuple[float, int]]:
        """(projected dollars, new calls) of each strategy (dollars 0 without a price on file)."""
        return [(_dollars(self.model, s) if self.priced else 0.0, s.new) for s in self.strategies]

    def money(self) -> str:
        """``"; 9,120 input + 24,576 output tokens at most, $0.0161 (litellm's price map)"``."""
        counted = [s for s in self.strategies if s.new and s.tokens and s.tokens.get("input") is not None]
        if not counted:
            return ""
        how = "" if all(s.tokens.get("exact") for s in counted) else " (cl100k count: approximate)"
        most = " at most" if any(s.tokens.get("bound", True) for s in counted) else " (output as measured)"
        if self.priced:
            paid = f"${self.dollars:.4f}{most.split(' (')[0]} (litellm's bundled price map)"
        else:
            from personalign.errors import printable

            paid = f"$0 (no price on file for {printable(str(self.model))})"
        return f"; {self.input_tokens:,} input + {self.output_tokens:,} output tokens{most}{how}, {paid}"

    def calls_by_kind(self) -> dict[str, int]:
        """New calls by kind (what the time is spent on)."""
        out: dict[str, int] = {}
        for s in self.strategies:
            if s.new:
                out[s.kind] = out.get(s.kind, 0) + s.new
        return out

    def per_call(self) -> dict[str, dict]:
        """The speed each kind of new call is timed at: its own measurement, else the other kind's
        (a forward pass timed as a generation: at most that; marked ``"as": KIND``)."""
        out: dict[str, dict] = {}
        for kind in self.calls_by_kind():
            if self.speed and kind in self.speed:
                out[kind] = self.speed[kind]
            elif self.speed:
                other = next(iter(sorted(self.speed)))
                out[kind] = {**self.speed[other], "as": other}
        return out

    @property
    def call_seconds(self) -> float | None:
        """The estimated time of the new calls (s): each strategy's new calls x the seconds per
        call of their kind -- the strategy's own when it ran on this model before (a call with
        demos takes longer than one without), else the model's (:meth:`per_call`); None when no
        speed of the model is known."""
        if not self.calls_by_kind():
            return 0.0
        speed = self.per_call()
        total = 0.0
        for s in self.strategies:
            if s.new:
                own = (s.speed or {}).get(s.kind) or speed.get(s.kind)
                if own is None:
                    return None
                total += math.ceil(s.new / max(1, self.in_flight or 1)) * float(own["seconds_per_call"])
        return total

    @property
    def seconds(self) -> float | None:
        """The estimated time of the run (s): :attr:`call_seconds`, plus :attr:`work` when the same
        command ran here before; None when the calls' time is unknown."""
        calls = self.call_seconds
        return None if calls is None else calls + (self.work or 0.0)

    def line(self) -> str:
        """The one line printed before the first call: ``cost: N new + M cached model calls on
        MODEL (...); about T at S per call``."""
        from personalign.errors import printable  # a model name or the speed file's text: never an escape code

        if not self.bound:
            return f"cost: no model calls ({self.verb})"
        shown = [s for s in self.strategies if s.total or s.shared]
        each = "; ".join(s.text(_dollars(self.model, s) if self.priced else None) for s in shown) or "none expected"
        count = f"{'at most ' if self.unchecked else ''}{self.new:,}{' new' if self.cached else ''}"
        count += f" + {self.cached:,} cached" if self.cached else ""
        up = f" (up to {self.bound:,})" if self.bound > self.total else ""
        trials = f"{self.trials} trials: " if self.trials is not None else ""
        head = f"cost: {count} model calls{up} on {printable(str(self.model))} ({trials}{each}){self.money()}"
        seconds = self.seconds
        if seconds is None:
            from personalign.lm import is_local

            how = "`personalign doctor --bench` measures" if is_local(str(self.model)) else "a first run measures"
            return head + f"; time unknown ({how} this model's speed)"
        work = f" + {duration(self.work)} of other work (as this command took it last)" if self.work else ""
        if not self.call_seconds:
            return head + f"; no new call{'; about ' + duration(self.work) + ' of other work (as this command took it last)' if self.work else ''}"
        noun = {"forward": "forward pass", "generation": "call"}
        how = ", ".join(f"{float(v['seconds_per_call']):.3g} s per {noun.get(k, k)} "
                        f"({'timed as a ' + noun.get(v['as'], v['as']) + ': not measured yet, ' if 'as' in v else ''}"
                        f"measured by {'a run' if v['source'] == 'run' else printable(str(v['source'])[:40])} "
                        f"on {printable(str(v['measured'])[:10])})"
                        for k, v in sorted(self.per_call().items()))
        own = "; a strategy that ran here before at its own speed" if any(s.new and s.speed for s in self.strategies) \
            else ""
        flight = f" with {self.in_flight} in flight" if (self.in_flight or 1) > 1 else ""
        return head + f"; about {duration(seconds)} at {how}{flight}{own}{work}"

    def to_dict(self) -> dict[str, Any]:
        """The projection as recorded in a result file (``projected_lm_calls``)."""
        return {"total": self.total, "new": self.new, "cached": self.cached, "upper_bound": self.bound,
                "unchecked": self.unchecked, "seconds": self.seconds, "work_seconds": self.work, "trials": self.trials,
                "model": self.model, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "dollars": round(self.dollars, 8), "priced": self.priced,
                "strategies": [{"name": s.name, "kind": s.kind, **{p: getattr(s, p) for p in PHASES},
                                "total": s.total, "new": s.new, "cached": s.cached, "upper_bound": s.bound,
                                "shared": s.shared, "unchecked": s.unchecked, "input_tokens": s.input_tokens,
                                "output_tokens": s.output_tokens,
                                "dollars": round(_dollars(self.model, s), 8)} for s in self.strategies]}


def _dollars(model: str | None, row: StrategyCost) -> float:
    from personalign.lm.prices import dollars

    return dollars(model, row.input_tokens or 0, row.output_tokens or 0) if row.new else 0.0


def speed_key(model: str | None, strategy: str) -> str | None:
    """The speed file's name for ``strategy``'s own calls on ``model`` (a model string has no space)."""
    return None if model is None else f"{model} {strategy}"


def duration(seconds: float) -> str:
    """``"40 s"``, ``"7 min"``, ``"2 h 05 min"`` (``"an unknown time"`` for an infinite or NaN ``seconds``)."""
    if not math.isfinite(seconds):
        return "an unknown time"
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 90 else f"{minutes // 60} h {minutes % 60:02d} min"


# --- before and after the run -------------------------------------------------------------------
def announce(cost: Cost, on_cost: Callable[[Cost], None] | None, progress: bool) -> None:
    """Hand ``cost`` to ``on_cost`` (before the first model call); without one, print its line on
    stderr when ``progress``."""
    import time

    from personalign.lm.spend import arm

    cost.started = time.perf_counter()
    arm(cost)  # the run's --max-cost learns the projected dollars of one call
    if on_cost is not None:
        on_cost(cost)
    elif progress:
        sys.stderr.write(cost.line() + "\n")
        sys.stderr.flush()


@contextlib.contextmanager
def measured(model: str | None, cost: list | None = None):
    """Count the block's model calls and keep ``model``'s speed from them
    (:func:`personalign.lm.speed.record_speed`, source ``run``), on success or not; when the block
    ends well, the seconds of its other work after the cost line (``cost``: a list the block puts
    its announced :class:`Cost` in) under the command's name (:func:`personalign.lm.ledger.keep_seconds`)."""
    import time

    from personalign.lm import CallCounter
    from personalign.lm.calls import FORWARD, GENERATION
    from personalign.lm.speed import record_speed

    counter = CallCounter()
    try:
        with counter:
            yield counter
        if cost and cost[0].name is not None and cost[0].started is not None:
            from personalign.lm.ledger import keep_seconds

            keep_seconds(cost[0].name, time.perf_counter() - cost[0].started - sum(counter.seconds.values()))
    finally:
        if isinstance(model, str):
            out = sum(t["completion_tokens"] for t in counter.tokens.values())  # the responses' usage
            record_speed(model, {GENERATION: (counter.seconds[GENERATION], counter.generations),
                                 FORWARD: (counter.seconds[FORWARD], counter.forward_passes)}, source="run",
                         output_tokens={GENERATION: out} if out else None)


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


__all__ = ["Cost", "StrategyCost", "announce", "calls_bar", "duration", "measured", "speed_key"]
