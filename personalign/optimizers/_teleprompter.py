"""The shared machinery of the DSPy teleprompter wrappers.

:class:`TeleprompterOptimizer` is the small base class every wrapper (one per file) derives from.
A wrapper implements two things:

* ``_projected_teleprompter_calls(program, trainset, valset) -> dict[str, int]`` -- an upper bound
  of the LM calls the teleprompter itself makes, computed from the wrapper's settings (the formula
  is documented on each wrapper);
* ``_run(student, trainset, valset) -> compiled`` -- build the DSPy teleprompter and compile.

:meth:`TeleprompterOptimizer.compile` does the rest, in this order:

1. announce the projected LM calls (``logging`` logger ``personalign.optimizers`` and the
   ``on_event`` callback: ``on_event("projected", {...})``);
2. inside :func:`personalign.lm.use` (``dspy.context`` with the LM and its adapter -- never
   ``dspy.configure``, so worker threads are safe) and a :class:`personalign.lm.CallCounter`:
   score the input program on ``valset`` (:func:`personalign.programs.run.evaluate_metric`: metric
   mean and its 95% bootstrap CI), run the
   teleprompter on a deep copy, score the compiled program; inside the teleprompter a failed
   predictor call is retried (:class:`RetryingAdapter`, :mod:`personalign.lm.retry`), then
   scored as a failed example, up to
   :func:`error_budget` failures per pass instead of DSPy's 10; retried and failed predictor
   calls are counted (``details["teleprompter_failures"]``);
3. fill the :class:`~personalign.optimizers.base.CompileResult` and announce the actual calls
   (``on_event("actual", {...})``); when they exceed the projection,
   ``details["over_budget_reason"]`` says which phase overran and why.

Projection conventions (calls per program run, prompt-model calls, scoring passes) are in
:mod:`personalign.optimizers.budget`; each wrapper documents its own formula in those terms.
"""

from __future__ import annotations

import abc
import logging
import math
import random
import time
from typing import Any, Callable, Sequence

from personalign.lm.retry import DEFAULT_POLICY, RetryPolicy
from personalign.optimizers.budget import Projection, adapter_factor, calls_per_run, lm_adapter_factor
from personalign.optimizers._failures import RetryingAdapter, Stopped, error_budget, failure_counter
from personalign.optimizers.base import CompileResult, Optimizer

logger = logging.getLogger("personalign.optimizers")

EXPECTED_PASS = 0.5  # the share of a bootstrap's program runs its metric keeps, expected before any run (chance
# for a binary stage): the expected calls of a bootstrap are those of demos / EXPECTED_PASS runs

EventCallback = Callable[[str, dict], None]

# Attributes DSPy teleprompters attach to the returned program (candidate programs, trial logs):
# large, not part of the program's state, and they hold references to the LM. Summarized into
# ``details`` and removed from the compiled program.
_TELEPROMPTER_ATTRS = ("candidate_programs", "mb_candidate_programs", "trial_logs", "detailed_results",
                       "results_best", "results_latest", "prompt_model_total_calls", "total_calls", "score")


def count_demos(program) -> dict[str, int]:
    return {name: len(getattr(p, "demos", []) or []) for name, p in program.named_predictors()}


def seeded_shuffle(examples: Sequence, seed: int) -> list:
    """A copy of ``examples`` shuffled by ``random.Random(seed)`` (seed 0 shuffles too)."""
    out = list(examples)
    random.Random(seed).shuffle(out)
    return out


class TeleprompterOptimizer(Optimizer):
    """Base of the DSPy teleprompter wrappers (see the module docstring for the flow).

    Args:
        metric: DSPy metric ``(example, pred, trace=None)``; required to compile (a stage's:
            ``Stage.teleprompter_kwargs()``; the compile service passes its class-balanced form).
        lm: the ``dspy.LM`` to compile with (None: the active one, ``dspy.settings.lm``).
        seed: every random choice of the wrapper and of the teleprompter (0 is honoured).
        num_threads: threads of DSPy's parallel evaluation inside the teleprompter; None (the
            default): the run's calls in flight (:func:`personalign.lm.concurrency`: the verb's
            ``--concurrency``; 1 for the embedded engine, 32 for a hosted or served model).
        calls_per_run: predictor calls of one forward pass, for the projection (None: the
            program's ``lm_calls_per_run``, else ``len(program.predictors())``; each costs up to the
            adapter factor in LM calls, :mod:`personalign.optimizers.budget`).
        score: score the input and the compiled program on ``valset`` (before/after, with CIs).
        label_field: example field for the corpus report in ``details`` (None: no report).
        n_boot: bootstrap resamples of the CIs.
        on_event: ``callback(kind, payload)`` for ``"projected"`` (before running) and ``"actual"``
            (after); both are also logged at INFO on ``personalign.optimizers``.
    """

    name = "teleprompter"
    # how the wrapper honours the seed (recorded in details)
    seed_note = ""
    # retries of failed predictor calls inside the teleprompter (the evaluator's policy)
    retry_policy: RetryPolicy = DEFAULT_POLICY

    def __init__(self, *, metric=None, lm=None, seed: int = 0, num_threads: int | None = None,
                 calls_per_run: int | None = None, score: bool = True, label_field: str | None = None,
                 n_boot: int = 1000, on_event: EventCallback | None = None) -> None:
        super().__init__(seed=seed)
        self.metric = metric
        self.lm = lm
        self.num_threads = None if num_threads is None else int(num_threads)
        self.calls_per_run = None if calls_per_run is None else int(calls_per_run)
        self.score = bool(score)
        self.label_field = label_field
        self.n_boot = int(n_boot)
        self.on_event = on_event
        self._guards: list[str] = []
        self._budget_examples: list = []
        self.alternatives: list = []

    # -- projection --------------------------------------------------------------------------
    def _resolve_lm(self):
        import dspy

        lm = self.lm if self.lm is not None else dspy.settings.lm
        if lm is None:
            from personalign.errors import ConfigurationError

            raise ConfigurationError(
                f"optimizer '{self.name}' needs an LM: pass lm=personalign.lm.make_lm(...) or run it "
                "inside personalign.lm.use(lm)")
        return lm

    # True while :meth:`expected_lm_calls` projects: no retry counted, bootstraps stop early
    expecting = False

    def _adapter_factor(self) -> int:
        return 1 if self.expecting else lm_adapter_factor(self.lm)

    def _bootstrap_tries(self, demos: int, n: int, rounds: int) -> int:
        """Program runs of bootstrapping ``demos`` traces from ``n`` examples in up to ``rounds``
        rounds each: all of them at most; expected (:attr:`expecting`), DSPy stopping once it has
        its demos, each run kept with probability :data:`EXPECTED_PASS` (``demos / p`` runs, at
        most what the rows allow)."""
        if demos <= 0:
            return 0
        if not self.expecting:
            return rounds * n
        per_row = (1 - (1 - EXPECTED_PASS) ** rounds) / EXPECTED_PASS  # runs of one row, in expectation
        return min(math.ceil(demos / EXPECTED_PASS), math.ceil(n * per_row))

    def _calls_per_run(self, program) -> int:
        """``c``: LM calls of one forward pass (:func:`personalign.optimizers.budget.calls_per_run`;
        a per-example declaration is maximized over the examples of the last projection)."""
        return calls_per_run(program, self._adapter_factor(), self.calls_per_run, self._budget_examples)

    def _prompt_call(self) -> int:
        """``p``: LM calls of one prompt-model call (proposal, reflection)."""
        return self._adapter_factor()

    def _scoring_calls(self, program, valset) -> int:
        """Calls of one scoring pass over ``valset`` with the *input* program."""
        if not self.score or not valset:
            return 0
        return len(valset) * self._calls_per_run(program)

    def _scoring_calls_after(self, program, valset) -> int:
        """Calls of scoring the *compiled* program (wrappers whose compiled program costs more
        per run, e.g. KNN with bootstrapping at inference, override)."""
        return self._scoring_calls(program, valset)

    @abc.abstractmethod
    def _projected_teleprompter_calls(self, program, trainset: Sequence, valset: Sequence | None) -> dict[str, int]:
        """Upper bound of the teleprompter's own LM calls, by part (e.g. bootstrap, proposals)."""

    def projection(self, program, trainset: Sequence, valset: Sequence | None = None) -> dict[str, Any]:
        """The projected LM calls by phase: ``{"score_before", "teleprompter", "score_after",
        "teleprompter_parts", "total"}`` (:class:`personalign.optimizers.budget.Projection`)."""
        return self._projection(program, trainset, valset).as_dict()

    def _projection(self, program, trainset: Sequence, valset: Sequence | None) -> Projection:
        self._budget_examples = [*trainset, *(valset or [])]
        parts = {k: int(v) for k, v in self._projected_teleprompter_calls(program, list(trainset),
                                                                            list(valset or [])).items()}
        return Projection(score_before=self._scoring_calls(program, valset),
                          score_after=self._scoring_calls_after(program, valset), teleprompter_parts=parts)

    def projected_lm_calls(self, program, trainset: Sequence, valset: Sequence | None = None) -> int:
        """Upper bound of the LM calls of :meth:`compile` (scoring included)."""
        return self.projection(program, trainset, valset)["total"]

    def expected_lm_calls(self, program, trainset: Sequence, valset: Sequence | None = None) -> int:
        """The LM calls :meth:`compile` is expected to make: the projection without retries (an
        adapter's fallback call is a retry) and with each bootstrap stopping once it has its demos
        (:meth:`_bootstrap_tries`)."""
        self.expecting = True
        try:
            return self.projection(program, trainset, valset)["total"]
        finally:
            self.expecting = False

    # -- running -----------------------------------------------------------------------------
    @abc.abstractmethod
    def _run(self, student, trainset: list, valset: list | None):
        """Compile ``student`` (a private deep copy) with the DSPy teleprompter; return the program."""

    def _emit(self, kind: str, payload: dict) -> None:
        if kind == "projected":
            logger.info("%s: projected LM calls <= %d (%s)", self.name, payload["projected_lm_calls"],
                        ", ".join(f"{k} {v}" for k, v in payload["breakdown"].items()))
        else:
            logger.info("%s: actual LM calls %d (projected <= %d)%s", self.name, payload["actual_lm_calls"],
                        payload["projected_lm_calls"],
                        f"; over budget: {payload['over_budget_reason']}" if payload.get("over_budget_reason") else "")
        if self.on_event is not None:
            self.on_event(kind, payload)

    def _budget_note(self) -> str:
        """Why this wrapper may exceed its projection (appended to ``over_budget_reason``)."""
        return ("the program made more LM calls per forward pass than projected (a predictor called in a "
                "loop): declare lm_calls_per_run on the program, or pass calls_per_run=")

    def _validate(self, trainset, valset) -> None:
        if not trainset:
            raise ValueError(f"optimizer '{self.name}' needs a non-empty trainset")

    def compile(self, program, *, trainset: Sequence, valset: Sequence | None = None):
        """Compile ``program`` on ``trainset`` (selection/scoring on ``valset``).

        Returns ``(compiled_program, CompileResult)``; ``program`` is not modified.

        Raises:
            ValueError: empty trainset (or a wrapper-specific invalid setting).
            ConfigurationError: no metric, or no LM given and none active.
        """
        import dspy

        from personalign.programs.run import evaluate_metric
        from personalign.lm import CallCounter, use

        if self.metric is None:
            from personalign.errors import ConfigurationError

            raise ConfigurationError(f"optimizer '{self.name}' needs metric= (a stage's: "
                                     "Stage.teleprompter_kwargs())")
        trainset = list(trainset)
        valset = list(valset) if valset else []
        self._validate(trainset, valset)
        lm = self._resolve_lm()
        if self.num_threads is None:
            from personalign.lm import concurrency

            self.num_threads = concurrency(lm)
        self._guards = []
        proj = self._projection(program, trainset, valset)
        self._emit("projected", {"optimizer": self.name, "projected_lm_calls": proj.total,
                                 "breakdown": proj.phases(), "teleprompter_parts": proj.teleprompter_parts})
        start = time.perf_counter()
        before = after = None
        counter = CallCounter()
        with use(lm), counter:
            if self.score and valset:
                before = evaluate_metric(program.deepcopy(), valset, self.metric, seed=self.seed,
                                         n_boot=self.n_boot, label_field=self.label_field, lm=lm)
            calls_before = counter.snapshot()
            student = program.deepcopy()
            if getattr(student, "_compiled", False):
                # BootstrapFewShot asserts an uncompiled student; our private copy may be re-compiled
                student._compiled = False
            # LM failures inside the teleprompter are scored as failures, not fatal (see error_budget),
            # and counted for the report
            failures = failure_counter()
            budget = error_budget(trainset, valset)
            retrying = RetryingAdapter(dspy.settings.adapter or dspy.ChatAdapter(), self.retry_policy)
            with dspy.context(max_errors=budget, callbacks=[*(dspy.settings.callbacks or []), failures],
                              adapter=retrying):
                try:
                    compiled = self._run(student, trainset, valset or None)
                except Stopped as stop:  # --max-cost: the run stops here, once
                    raise stop.error from None
            calls_tele = counter.snapshot() - calls_before
            self.alternatives = self._alternatives(compiled, program)
            stripped = self._strip(compiled, program)
            if self.score and valset:
                after = evaluate_metric(compiled, valset, self.metric, seed=self.seed, n_boot=self.n_boot,
                                        label_field=self.label_field, lm=lm)
        actual = counter.calls
        calls_after = actual - calls_before - calls_tele
        seconds = time.perf_counter() - start
        phases = {"score_before": calls_before, "teleprompter": calls_tele, "score_after": calls_after}
        details: dict[str, Any] = {
            "n_train": len(trainset), "n_val": len(valset),
            "projected_breakdown": proj.phases(),
            "projected_teleprompter_parts": proj.teleprompter_parts,
            "lm_calls_by_phase": phases,
            "demos": count_demos(compiled),
            "guards": list(self._guards),
            "teleprompter_failures": {"failed_predictor_calls": failures.failures,
                                      "by_type": dict(failures.by_type), "retried_calls": retrying.retried,
                                      "error_budget": budget},
            "seed_note": self.seed_note,
            "tokens": counter.tokens,
            **stripped,
        }
        if before is not None:
            details["val_before"] = {k: before[k] for k in ("n", "failures", "errors", "report")}
        if after is not None:
            details["val_after"] = {k: after[k] for k in ("n", "failures", "errors", "report")}
        if actual > proj.total:
            details["over_budget_reason"] = "; ".join(proj.overruns(phases)) + "; " + self._budget_note()
        result = CompileResult(
            optimizer=self.name,
            config=self.config(),
            val_score=after["score"] if after else None,
            lm_calls=actual,
            seconds=seconds,
            details=details,
            score_before=before["score"] if before else None,
            score_before_ci=before["score_ci"] if before else None,
            score_after=after["score"] if after else None,
            score_after_ci=after["score_ci"] if after else None,
            projected_lm_calls=proj.total,
            actual_lm_calls=actual,
            seed=self.seed,
        )
        self._emit("actual", {"optimizer": self.name, "actual_lm_calls": actual,
                              "projected_lm_calls": proj.total, "by_phase": phases,
                              "over_budget_reason": details.get("over_budget_reason")})
        return compiled, result

    # runner-up programs of the teleprompter's own search kept as alternatives for a final choice
    # on dev (personalign.compile_service); wrappers whose teleprompter ranks candidates set it
    max_alternatives = 0

    def _alternatives(self, compiled, original) -> list:
        """Up to :attr:`max_alternatives` runner-up programs from the teleprompter's public
        ``candidate_programs`` (best score first; the returned program itself excluded)."""
        import json

        cands = getattr(compiled, "candidate_programs", None)
        if not self.max_alternatives or not isinstance(cands, list):
            return []
        state = lambda p: json.dumps(p.dump_state(), sort_keys=True, default=str)  # noqa: E731
        seen = {state(compiled)}
        out = []
        ranked = sorted((c for c in cands if isinstance(c, dict) and c.get("program") is not None),
                        key=lambda c: -float(c.get("score") or 0.0))
        for c in ranked:
            prog = c["program"].deepcopy()
            self._strip(prog, original)
            key = state(prog)
            if key not in seen:
                seen.add(key)
                out.append(prog)
            if len(out) >= self.max_alternatives:
                break
        return out

    @staticmethod
    def _strip(compiled, original) -> dict[str, Any]:
        """Remove the teleprompter's bookkeeping attributes from ``compiled``; summarize scores."""
        out: dict[str, Any] = {}
        cands = getattr(compiled, "candidate_programs", None)
        if isinstance(cands, list):
            scores = [c.get("score") for c in cands if isinstance(c, dict)]
            out["candidate_scores"] = [float(s) if isinstance(s, (int, float)) else s for s in scores][:50]
        tscore = getattr(compiled, "score", None)
        if isinstance(tscore, (int, float)) and not hasattr(original, "score"):
            out["teleprompter_score"] = float(tscore)
        for attr in _TELEPROMPTER_ATTRS:
            if attr in getattr(compiled, "__dict__", {}) and attr not in getattr(original, "__dict__", {}):
                try:
                    delattr(compiled, attr)
                except AttributeError:
                    pass
        return out


__all__ = ["TeleprompterOptimizer", "RetryingAdapter", "adapter_factor", "seeded_shuffle", "logger"]
