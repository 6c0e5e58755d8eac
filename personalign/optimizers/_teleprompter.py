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
   score the input program on ``valset`` (metric mean and its 95% bootstrap CI), run the
   teleprompter on a deep copy, score the compiled program; inside the teleprompter a failed
   predictor call is retried (:class:`RetryingAdapter`), then scored as a failed example, up to
   :func:`error_budget` failures per pass instead of DSPy's 10; retried and failed predictor
   calls are counted (``details["teleprompter_failures"]``);
3. fill the :class:`~personalign.optimizers.base.CompileResult` and announce the actual calls
   (``on_event("actual", {...})``); when they exceed the projection,
   ``details["over_budget_reason"]`` says which phase overran and why.

Projection conventions (shared by every wrapper):

* one *program run* (a forward pass of the program on one example) costs at most
  ``calls_per_run = n_predictors x adapter_factor`` LM calls, where ``n_predictors =
  len(program.predictors())`` (each predictor called at most once per forward; pass
  ``calls_per_run=`` for programs that loop) and ``adapter_factor`` is 2 for DSPy's ChatAdapter
  (on a parse error it retries once with JSONAdapter) and 1 for JSONAdapter (embedded models);
* a prompt-model call (instruction proposal, reflection) costs ``adapter_factor`` calls;
* a ``dspy.Predict(..., n=k)`` call is one LM call (one request returning k completions);
* scoring before and after costs ``len(valset) x calls_per_run`` each.

Cache hits are not LM calls (``CallCounter`` counts calls that reached a model), so the actual
count of a repeated run is usually far below the projection.
"""

from __future__ import annotations

import abc
import logging
import random
import time
import warnings
from typing import Any, Callable, Sequence

from personalign.optimizers.base import CompileResult, Optimizer

logger = logging.getLogger("personalign.optimizers")

EventCallback = Callable[[str, dict], None]

# Attributes DSPy teleprompters attach to the returned program (candidate programs, trial logs):
# large, not part of the program's state, and they hold references to the LM. Summarized into
# ``details`` and removed from the compiled program.
_TELEPROMPTER_ATTRS = ("candidate_programs", "mb_candidate_programs", "trial_logs", "detailed_results",
                       "results_best", "results_latest", "prompt_model_total_calls", "total_calls", "score")


def metric_name(metric) -> str:
    return getattr(metric, "__name__", None) or type(metric).__name__


def score_of(value: Any) -> float:
    """A metric's value as a float: numbers, bools, or a Prediction/dict with a ``score``."""
    if value is None:
        return 0.0
    if isinstance(value, (bool, int, float)):
        return float(value)
    score = None
    try:
        score = value["score"]
    except Exception:  # noqa: BLE001
        score = getattr(value, "score", None)
    return float(score) if score is not None else 0.0


def adapter_factor(adapter) -> int:
    """LM calls one predictor call may cost with ``adapter``: 2 for ChatAdapter with its JSON
    fallback (a parse failure is retried once with JSONAdapter), 1 otherwise."""
    import dspy

    if adapter is None:
        adapter = dspy.settings.adapter or dspy.ChatAdapter()
    if isinstance(adapter, dspy.JSONAdapter):
        return 1
    if isinstance(adapter, dspy.ChatAdapter) and getattr(adapter, "use_json_adapter_fallback", True):
        return 2
    return 1


def count_demos(program) -> dict[str, int]:
    return {name: len(getattr(p, "demos", []) or []) for name, p in program.named_predictors()}


def evaluate_program(program, examples: Sequence, metric, *, seed: int = 0, n_boot: int = 1000,
                     label_field: str | None = None, lm=None) -> dict[str, Any]:
    """Run ``program`` on each example with :func:`personalign.evaluation.run_program` (the one
    runner: same retries and failure semantics as ``compare``/``eval``) and score it with ``metric``.

    Returns ``{"score", "score_ci", "n", "failures", "errors", "report", "predictions"}``: the mean
    metric, its 95% percentile-bootstrap CI (resampling examples with ``seed``), and -- when
    ``label_field`` is given and every example carries it -- the corpus
    :func:`personalign.metrics.evaluate_binary` report (F1 etc. with CIs). A failed example
    scores 0. Configuration errors (missing model file, unknown model) propagate.
    """
    import numpy as np

    from personalign.evaluation import run_program
    from personalign.metrics import bootstrap_ci, evaluate_binary

    examples = list(examples)
    inputs = list(examples[0].inputs().keys()) if examples else []
    outcome = run_program(program, examples, inputs=inputs, output=None, lm=lm, progress=False)
    preds = outcome.predictions
    errors = list(outcome.errors)
    scores: list[float] = []
    for i, (ex, pred) in enumerate(zip(examples, preds)):
        try:
            scores.append(score_of(metric(ex, pred)) if pred is not None else 0.0)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"example {i}: metric failed: {type(exc).__name__}")
            scores.append(0.0)
    out: dict[str, Any] = {"n": len(scores), "failures": outcome.failures, "errors": errors[:10],
                           "predictions": preds}
    if not scores:
        out.update(score=None, score_ci=None, report=None)
        return out
    arr = np.asarray(scores, dtype=float)
    out["score"] = float(arr.mean())
    out["score_ci"] = [float(x) for x in bootstrap_ci(np.mean, arr, n_boot=n_boot, seed=seed)]
    out["report"] = None
    if label_field and all(label_field in ex for ex in examples):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                out["report"] = evaluate_binary(examples, [p if p is not None else {} for p in preds],
                                                label_field=label_field, n_boot=n_boot, seed=seed)
            except Exception:  # noqa: BLE001 -- a non-boolean task: no binary report
                out["report"] = None
    return out


def error_budget(trainset: Sequence, valset: Sequence | None) -> int:
    """Errors a DSPy teleprompter may meet in one pass before it gives up: half of the larger of
    trainset and valset, and never fewer than ``dspy.settings.max_errors`` (DSPy's default, 10).

    DSPy stops a bootstrap pass, and *cancels* an evaluation (scoring the candidate 0 for the
    whole pass), after ``max_errors`` failed examples. With DSPy's 10, a few percent of failed LM
    calls on a valset of 100 silently zeroes MIPROv2 candidates; with this budget a failed example
    is scored as a failure (metric 0) and only an LM that fails on half of a pass stops the run."""
    import dspy

    return max(int(dspy.settings.max_errors or 10), (max(len(trainset), len(valset or ())) + 1) // 2)


class RetryingAdapter:
    """The active DSPy adapter, with the retry policy of :func:`personalign.evaluation.run_program`
    for every predictor call a teleprompter makes (task runs and instruction proposals alike).

    A failed call -- an LM error or timeout that outlived the LM's own retries, an empty or
    unparseable output -- is tried ``retries`` more times, each with a fresh ``rollout_id`` and
    temperature 0.7 (a new sample, not the cached failure), then raised to the teleprompter, which
    scores it as a failed example. Without this a single empty instruction proposal aborts
    MIPROv2 (DSPy does not guard its proposer). Configuration errors, fatal LM errors and prompts
    longer than the context window are raised at once. DSPy wraps adapters the same way
    (``dspy.adapters.decision.DecisionAdapter``); other attributes are the wrapped adapter's.
    """

    def __init__(self, adapter, retries: int = 2) -> None:
        import threading

        self.adapter = adapter
        self.retries = int(retries)
        self.retried = 0
        self._lock = threading.Lock()

    def __getattr__(self, name: str):
        return getattr(self.__dict__["adapter"], name)

    @staticmethod
    def _retryable(exc: BaseException) -> bool:
        from personalign.errors import find_personalign_error
        from personalign.evaluation import _provider_exception, fatal_lm_error

        if find_personalign_error(exc) is not None:  # configuration, context window: a retry cannot help
            return False
        return fatal_lm_error(exc) is None or _provider_exception(exc)

    def _kwargs(self, lm_kwargs: dict, attempt: int) -> dict:
        if attempt == 0:
            return lm_kwargs
        with self._lock:
            self.retried += 1
        import zlib

        # deterministic across processes (a retried call is a cache hit on a rerun with the same seed)
        rollout = zlib.crc32(f"retry:{lm_kwargs.get('rollout_id')}:{attempt}".encode())
        return {**lm_kwargs, "rollout_id": rollout, "temperature": 0.7}

    def __call__(self, lm, lm_kwargs, signature, demos, inputs):
        for attempt in range(self.retries + 1):
            try:
                return self.adapter(lm, lm_kwargs=self._kwargs(dict(lm_kwargs or {}), attempt), signature=signature,
                                    demos=demos, inputs=inputs)
            except Exception as exc:
                if attempt == self.retries or not self._retryable(exc):
                    raise

    async def acall(self, lm, lm_kwargs, signature, demos, inputs):
        for attempt in range(self.retries + 1):
            try:
                return await self.adapter.acall(lm, lm_kwargs=self._kwargs(dict(lm_kwargs or {}), attempt),
                                                signature=signature, demos=demos, inputs=inputs)
            except Exception as exc:
                if attempt == self.retries or not self._retryable(exc):
                    raise


def _failure_counter():
    """A DSPy callback counting ``dspy.Predict`` calls that raised -- after the LM's own retries --
    (LM errors, timeouts, empty or unparseable outputs), by exception type."""
    import threading
    from collections import Counter

    import dspy
    from dspy.utils.callback import BaseCallback

    class PredictorFailures(BaseCallback):
        def __init__(self) -> None:
            self.failures = 0
            self.by_type: Counter[str] = Counter()
            self._open: set[str] = set()
            self._lock = threading.Lock()

        def on_module_start(self, call_id, instance, inputs):
            if isinstance(instance, dspy.Predict):
                with self._lock:
                    self._open.add(call_id)

        def on_module_end(self, call_id, outputs, exception=None):
            with self._lock:
                if call_id in self._open:
                    self._open.discard(call_id)
                    if exception is not None:
                        self.failures += 1
                        self.by_type[type(exception).__name__] += 1

    return PredictorFailures()


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
        num_threads: threads of DSPy's parallel evaluation inside the teleprompter (default 1:
            the embedded models run one call at a time).
        calls_per_run: LM calls of one forward pass, for the projection (None:
            ``len(program.predictors())``).
        score: score the input and the compiled program on ``valset`` (before/after, with CIs).
        label_field: example field for the corpus report in ``details`` (None: no report).
        n_boot: bootstrap resamples of the CIs.
        on_event: ``callback(kind, payload)`` for ``"projected"`` (before running) and ``"actual"``
            (after); both are also logged at INFO on ``personalign.optimizers``.
    """

    name = "teleprompter"
    # how the wrapper honours the seed (recorded in details)
    seed_note = ""

    def __init__(self, *, metric=None, lm=None, seed: int = 0, num_threads: int = 1,
                 calls_per_run: int | None = None, score: bool = True, label_field: str | None = None,
                 n_boot: int = 1000, on_event: EventCallback | None = None) -> None:
        super().__init__(seed=seed)
        self.metric = metric
        self.lm = lm
        self.num_threads = int(num_threads)
        self.calls_per_run = None if calls_per_run is None else int(calls_per_run)
        self.score = bool(score)
        self.label_field = label_field
        self.n_boot = int(n_boot)
        self.on_event = on_event
        self._guards: list[str] = []
        self.alternatives: list = []

    # -- settings --------------------------------------------------------------------------
    def settings(self) -> dict[str, Any]:
        """The teleprompter's own settings (JSON-serializable); wrappers override."""
        return {}

    def config(self) -> dict[str, Any]:
        lm = self.lm
        return {
            "seed": self.seed,
            "metric": metric_name(self.metric) if self.metric is not None else None,
            "lm": getattr(lm, "model", None) if lm is not None else None,
            "num_threads": self.num_threads,
            "calls_per_run": self.calls_per_run,
            **self.settings(),
        }

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

    def _adapter_factor(self) -> int:
        import dspy

        try:
            from personalign.lm import adapter_for

            lm = self.lm if self.lm is not None else dspy.settings.lm
            adapter = adapter_for(lm.model) if lm is not None else None
        except Exception:  # noqa: BLE001
            adapter = None
        return adapter_factor(adapter)

    def _calls_per_run(self, program) -> int:
        if self.calls_per_run is not None:
            return self.calls_per_run
        return max(1, len(program.predictors())) * self._adapter_factor()

    def _prompt_call(self) -> int:
        """LM calls of one prompt-model call (proposal, reflection)."""
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
        "teleprompter_parts", "total"}``."""
        parts = {k: int(v) for k, v in self._projected_teleprompter_calls(program, list(trainset),
                                                                            list(valset or [])).items()}
        before = self._scoring_calls(program, valset)
        after = self._scoring_calls_after(program, valset)
        tele = sum(parts.values())
        return {"score_before": before, "teleprompter": tele, "score_after": after,
                "teleprompter_parts": parts, "total": before + tele + after}

    def projected_lm_calls(self, program, trainset: Sequence, valset: Sequence | None = None) -> int:
        """Upper bound of the LM calls of :meth:`compile` (scoring included)."""
        return self.projection(program, trainset, valset)["total"]

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
        return ("the program made more LM calls per forward pass than its predictor count (a predictor "
                "called in a loop, or retries); pass calls_per_run= to project it")

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

        from personalign.lm import CallCounter, use

        if self.metric is None:
            from personalign.errors import ConfigurationError

            raise ConfigurationError(f"optimizer '{self.name}' needs metric= (a stage's: "
                                     "Stage.teleprompter_kwargs())")
        trainset = list(trainset)
        valset = list(valset) if valset else []
        self._validate(trainset, valset)
        lm = self._resolve_lm()
        self._guards = []
        proj = self.projection(program, trainset, valset)
        self._emit("projected", {"optimizer": self.name, "projected_lm_calls": proj["total"],
                                 "breakdown": {"score_before": proj["score_before"],
                                               "teleprompter": proj["teleprompter"],
                                               "score_after": proj["score_after"]},
                                 "teleprompter_parts": proj["teleprompter_parts"]})
        start = time.perf_counter()
        before = after = None
        counter = CallCounter()
        with use(lm), counter:
            if self.score and valset:
                before = evaluate_program(program.deepcopy(), valset, self.metric, seed=self.seed,
                                          n_boot=self.n_boot, label_field=self.label_field, lm=lm)
            calls_before = counter.snapshot()
            student = program.deepcopy()
            if getattr(student, "_compiled", False):
                # BootstrapFewShot asserts an uncompiled student; our private copy may be re-compiled
                student._compiled = False
            # LM failures inside the teleprompter are scored as failures, not fatal (see error_budget),
            # and counted for the report
            failures = _failure_counter()
            budget = error_budget(trainset, valset)
            retrying = RetryingAdapter(dspy.settings.adapter or dspy.ChatAdapter())
            with dspy.context(max_errors=budget, callbacks=[*(dspy.settings.callbacks or []), failures],
                              adapter=retrying):
                compiled = self._run(student, trainset, valset or None)
            calls_tele = counter.snapshot() - calls_before
            self.alternatives = self._alternatives(compiled, program)
            stripped = self._strip(compiled, program)
            if self.score and valset:
                after = evaluate_program(compiled, valset, self.metric, seed=self.seed, n_boot=self.n_boot,
                                         label_field=self.label_field, lm=lm)
        actual = counter.calls
        calls_after = actual - calls_before - calls_tele
        seconds = time.perf_counter() - start
        phases = {"score_before": calls_before, "teleprompter": calls_tele, "score_after": calls_after}
        details: dict[str, Any] = {
            "n_train": len(trainset), "n_val": len(valset),
            "projected_breakdown": {k: proj[k] for k in ("score_before", "teleprompter", "score_after")},
            "projected_teleprompter_parts": proj["teleprompter_parts"],
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
        if actual > proj["total"]:
            over = [f"{k}: {phases[k]} calls > {proj[k]} projected" for k in phases if phases[k] > proj[k]]
            details["over_budget_reason"] = "; ".join(over) + "; " + self._budget_note()
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
            projected_lm_calls=proj["total"],
            actual_lm_calls=actual,
            seed=self.seed,
        )
        self._emit("actual", {"optimizer": self.name, "actual_lm_calls": actual,
                              "projected_lm_calls": proj["total"], "by_phase": phases,
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


__all__ = ["TeleprompterOptimizer", "adapter_factor", "evaluate_program", "score_of", "seeded_shuffle", "logger"]
