"""Tracking is injected: a verb calls the hooks of the callbacks it was given, and never asks
whether it is tracked. The model is DSPy's ``BaseCallback`` and Optuna's
``study.optimize(callbacks=[...])``: a small class with a no-op default for every hook, and
implementations that do one thing each -- :class:`personalign.tracking.MLflowCallback` (an MLflow
run with child runs, datasets, traces, the prompt registry), :class:`personalign.tracking.RecordCallback`
(the run record of ``--results FILE``), :class:`personalign.tracking.ConfigureCache` (the LM cache,
once the inputs are valid).

The lifecycle of one verb call (``compile``, ``evaluate``, ``compare``, ``sweep``, ``predict``)::

    check()                      every input is valid; nothing written yet (a tracking store that
                                 cannot be reached fails here, in one line)
    on_run_start(run)            the work starts
      tracing(run, name)         around the evaluation of one candidate (LM traces)
      on_candidate_end(run, c)   a strategy (compare), the program (compile, eval), a trial (sweep)
      on_artifact(run, path)     a file the run wrote (result JSON, chart, program.json)
    on_run_end(run, result, status)   FINISHED, FAILED or KILLED (an interrupt)
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence


@dataclass
class RunInfo:
    """What a run is, for its callbacks.

    Attributes:
        command: ``compare``, ``compile``, ``eval``, ``sweep``, ``predict``, ``run <runner>``.
        stage: the :class:`~personalign.stages.Stage` (None for runners without one).
        params: the run's settings (stage, data, data_sha256, split, lm, seed, ...).
        tags: extra tags (``cv``, the run record's provenance).
        datasets: ``(examples, split, context)`` rows the run reads (``context``: ``evaluation`` or
            ``training``), with ``data`` and ``data_sha256`` naming the file.
        data: the data file (or ``"examples (a list of N)"``); data_sha256: its digest.
        lm: the model string (None when nothing calls a model).
        split: the split it scores (or compiles on); strategy: the one strategy of compile / eval.
        state: hooks keep per-run state here (an MLflow run id), keyed by their own name; on an
            interrupt, ``state["killed_runs"]`` lists the tracked runs a hook closed as KILLED.
    """

    command: str
    stage: Any
    params: dict = field(default_factory=dict)
    tags: dict = field(default_factory=dict)
    datasets: list = field(default_factory=list)
    data: Any = None
    data_sha256: str | None = None
    lm: str | None = None
    split: str | None = None
    strategy: str | None = None
    state: dict = field(default_factory=dict)


@dataclass
class Candidate:
    """One scored candidate of a run: a strategy of ``compare``, the program of ``compile`` /
    ``eval``, a trial of ``sweep``.

    Attributes:
        name: its name (``zero-shot@bootstrap``, ``trial-3``).
        params: what it is (strategy, summary, uses_lm, lm, compile settings).
        metrics: its figures (numbers and ``[low, high]`` intervals).
        row: its result row as the verb returns it.
        examples / report: the rows it was scored on and its report (predictions, correctness)
            -- None when it was not scored (compile).
        program: the compiled program (compile), for the prompt registry.
        traces: what :meth:`RunCallback.tracing` yielded around its evaluation.
        status: ``FINISHED``, ``FAILED`` (sweep trials), ``PRUNED``.
    """

    name: str
    params: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)
    row: dict = field(default_factory=dict)
    examples: Sequence | None = None
    report: dict | None = None
    program: Any = None
    traces: Any = None
    status: str = "FINISHED"


class RunCallback:
    """Hooks of a verb's run; every hook is a no-op here. Subclass and override what you need."""

    def check(self, run: RunInfo) -> None:
        """Every input is valid and nothing is written yet: fail now (one line) if this callback
        cannot do its work (an unreachable tracking store)."""

    def on_run_start(self, run: RunInfo) -> None:
        """The work starts."""

    @contextlib.contextmanager
    def tracing(self, run: RunInfo, candidate: str) -> Iterator[Any]:
        """Around the evaluation of ``candidate``: yields what :attr:`Candidate.traces` will hold."""
        yield None

    def on_candidate_end(self, run: RunInfo, candidate: Candidate) -> None:
        """A candidate was compiled and/or scored (or a trial ended)."""

    def on_trial_start(self, run: RunInfo, number: int, params: dict) -> dict | None:
        """A sweep trial starts (called from its worker thread). Returns attributes to record on the
        trial (its MLflow run id, so that another worker can close it), or None."""

    def on_artifact(self, run: RunInfo, path: Any) -> None:
        """The run wrote ``path``."""

    def on_partial(self, run: RunInfo, result: dict) -> None:
        """A long run's result so far (``"complete": false``), after each candidate."""

    def on_run_end(self, run: RunInfo, result: dict, status: str) -> None:
        """The run ended: ``FINISHED`` with its result; ``REFUSED`` (bad input found during the work: a
        :class:`~personalign.errors.PersonalignError`), ``FAILED`` or ``KILLED`` (an interrupt)."""


class Callbacks(RunCallback):
    """Several callbacks called in order; ``Callbacks([])`` is the untracked run (every hook a no-op).

    :meth:`run` is the lifecycle of one verb call: ``on_run_start``, the block, ``on_run_end`` with
    FINISHED, or REFUSED / FAILED / KILLED (``KeyboardInterrupt``) when the block raised.
    """

    def __init__(self, callbacks: Sequence[RunCallback] | RunCallback | None = ()) -> None:
        if isinstance(callbacks, RunCallback):
            callbacks = [callbacks]
        self.callbacks = [c for c in (callbacks or ()) if c is not None]
        for c in self.callbacks:
            if not isinstance(c, RunCallback):
                from personalign.errors import ConfigurationError

                raise ConfigurationError(f"callbacks: {type(c).__name__} is not a personalign RunCallback")

    def check(self, run: RunInfo) -> None:
        for c in self.callbacks:
            c.check(run)

    def on_run_start(self, run: RunInfo) -> None:
        for c in self.callbacks:
            c.on_run_start(run)

    @contextlib.contextmanager
    def tracing(self, run: RunInfo, candidate: str) -> Iterator[Any]:
        with contextlib.ExitStack() as stack:
            yielded = [stack.enter_context(c.tracing(run, candidate)) for c in self.callbacks]
            yield next((y for y in yielded if y is not None), None)

    def on_candidate_end(self, run: RunInfo, candidate: Candidate) -> None:
        for c in self.callbacks:
            c.on_candidate_end(run, candidate)

    def on_trial_start(self, run: RunInfo, number: int, params: dict) -> dict:
        attrs: dict = {}
        for c in self.callbacks:
            attrs.update(c.on_trial_start(run, number, params) or {})
        return attrs

    def on_artifact(self, run: RunInfo, path: Any) -> None:
        for c in self.callbacks:
            c.on_artifact(run, path)

    def on_partial(self, run: RunInfo, result: dict) -> None:
        for c in self.callbacks:
            c.on_partial(run, result)

    def on_run_end(self, run: RunInfo, result: dict, status: str) -> None:
        for c in self.callbacks:
            c.on_run_end(run, result, status)

    @contextlib.contextmanager
    def run(self, run: RunInfo, result: dict) -> Iterator[RunInfo]:
        """The lifecycle around the block; ``result`` (filled by the block) goes to ``on_run_end``."""
        self.on_run_start(run)
        try:
            yield run
        except BaseException as exc:
            from personalign.errors import PersonalignError, note_killed_runs

            status = "KILLED" if isinstance(exc, KeyboardInterrupt) else \
                "REFUSED" if isinstance(exc, PersonalignError) else "FAILED"
            try:
                self.on_run_end(run, result, status)
            finally:
                if status == "KILLED":  # the runs a hook closed as KILLED (``state["killed_runs"]``)
                    note_killed_runs(exc, *run.state.get("killed_runs", ()))
            raise
        self.on_run_end(run, result, "FINISHED")


__all__ = ["Callbacks", "Candidate", "RunCallback", "RunInfo"]
