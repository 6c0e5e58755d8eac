"""Run a program over examples: predictions, failures, LM calls and wall time, with a progress bar.

The one runner of programs: ``evaluation``, the compile service, the sweep, the teleprompters'
before/after scores and the judge validation all use it, so a failure means the same everywhere.

LM failures (timeouts, provider errors, unparseable output) are retried ``retries`` times under
:class:`personalign.lm.retry.RetryPolicy` -- each retry with a fresh ``rollout_id`` and temperature
0.7 so it is a new sample, not a cache hit -- then counted in ``failures`` and scored as failures:
the prediction is recorded as ``None`` and classification metrics count it as the wrong label (see
:func:`filled_predictions`). A failure never stops the run. Configuration errors (missing model
file, unknown model) do stop it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from personalign.lm.flight import map_in_flight
from personalign.lm.retry import DEFAULT_POLICY, RetryPolicy
from personalign.redaction import redact


@dataclass
class EvalOutcome:
    """Per-example outputs of one program on one example list.

    Attributes:
        predictions: one per example: the predicted label, or None for a failure.
        scores: one per example: the strategy's score when it has one, else None.
        failures: number of examples that failed after all retries.
        errors: one line per failure (example index and error).
        lm_calls: model calls that reached a model: DSPy LM calls and forward passes
            (:class:`personalign.lm.CallCounter`).
        cached_calls: model calls a cache answered instead (DSPy's cache, a forward-pass cache).
        seconds: wall time of the run.
        error_at: the failures' errors by example index.
    """

    predictions: list[Any]
    scores: list[float | None]
    failures: int = 0
    errors: list[str] = field(default_factory=list)
    lm_calls: int = 0
    seconds: float = 0.0
    error_at: dict[int, str] = field(default_factory=dict)
    cached_calls: int = 0


def filled_predictions(gold: Sequence[bool], predictions: Sequence[bool | None]) -> list[bool]:
    """Replace failed predictions (None) by the wrong label, so a failure always costs the score."""
    return [(not g) if p is None else bool(p) for g, p in zip(gold, predictions)]


def progress_bar(description: str, total: int, enabled: bool):
    """The run's rich progress display on stderr (``--json`` output on stdout stays one JSON
    object): description, bar, done/total, elapsed and remaining time; ``enabled`` False: silent.
    Evaluation's bars (here) and fitting and compiling's (counted in model calls) look alike."""
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TimeRemainingColumn(), console=Console(stderr=True), disable=not enabled, transient=False,
    )


def run_program(
    program,
    examples: Sequence,
    *,
    inputs: Sequence[str],
    output: str | None,
    lm=None,
    retries: int = 2,
    description: str = "predict",
    progress: bool = True,
    on_example: Callable[[int], None] | None = None,
    concurrency: int | None = None,
) -> EvalOutcome:
    """Run ``program`` on each example (or ``program.predict_batch`` when it has one).

    Args:
        program: a dspy.Module returning a Prediction with field ``output``.
        examples: dspy.Example-like objects carrying the ``inputs`` fields.
        output: the Prediction field kept per example; None keeps the whole Prediction (for
            DSPy metrics that read several fields).
        lm: the dspy.LM to use (set with :func:`personalign.lm.use`); None: the model of the
            caller's context (the verb entered it), or none for an LM-free program.
        retries: extra attempts per failed example (:class:`personalign.lm.retry.RetryPolicy`).
        on_example: called with each example's index as it ends (in the calling thread; with
            calls in flight, in the order they end).
        concurrency: examples run at once (each on a worker thread carrying the caller's DSPy
            context); None: :func:`personalign.lm.concurrency` (the verb's ``--concurrency``; 1
            for the embedded engine, 32 for other models). Results are in input order and the
            same at any concurrency (same requests, same cache keys).

    This is the one runner of programs over examples: ``compare``, ``eval``, the sweep, the
    compile service's dev selection and the teleprompter wrappers' before/after scores
    (:func:`evaluate_metric`) all use it, so a failure means
    the same thing everywhere. A program deciding by a rule over a unit of examples
    (:class:`personalign.programs.decision.UnitRuleProgram`) over a program without
    ``predict_batch`` runs that program per example here (retried, in flight), then decides.
    """
    from personalign.lm import CallCounter, use
    from personalign.lm import concurrency as current_concurrency

    start = time.perf_counter()
    preds: list[Any] = [None] * len(examples)
    scores: list[float | None] = [None] * len(examples)
    error_at: dict[int, str] = {}
    counter = CallCounter()
    per_example, decide = _split(program)
    with counter, progress_bar(description, len(examples), progress) as bar, use(lm):
        task = bar.add_task(description, total=len(examples))
        if per_example is None:
            outs = program.predict_batch(examples)
            bar.update(task, advance=len(examples))
        else:
            one = _one(per_example, inputs, lm, RetryPolicy(retries=retries, temperature=DEFAULT_POLICY.temperature))

            def done(i: int) -> None:
                bar.update(task, advance=1)
                if on_example is not None:
                    on_example(i)

            ran = map_in_flight(one, list(examples), concurrency or current_concurrency(lm), on_done=done)
            outs = [out for out, _ in ran]
            error_at = {i: err for i, (_, err) in enumerate(ran) if err is not None}
            if decide is not None:
                outs = decide(examples, outs)
        for i, out in enumerate(outs):
            if out is not None:
                preds[i] = out if output is None else getattr(out, output)
                scores[i] = getattr(out, "score", None)
    errors = [f"example {i}: {msg}" for i, msg in sorted(error_at.items())]
    failures = sum(p is None for p in preds)
    return EvalOutcome(preds, scores, failures, errors, counter.calls, time.perf_counter() - start, error_at,
                       counter.cached)


def _split(program) -> tuple[Any, Callable | None]:
    """``(the program run per example, the batch decision after it)``: ``(None, None)`` for a
    program that predicts in bulk (``predict_batch``), ``(program, None)`` for one run per
    example, ``(inner, rule)`` for a unit rule over a program without ``predict_batch``."""
    inner = getattr(program, "undecided", None)
    if hasattr(program, "decide_predictions") and inner is not None and not hasattr(inner, "predict_batch"):
        return inner, program.decide_predictions
    if hasattr(program, "predict_batch"):
        return None, None
    return program, None


def _one(program, inputs: Sequence[str], lm, policy: RetryPolicy) -> Callable[[int, Any], tuple[Any, str | None]]:
    """One example's run under ``policy``: ``(prediction | None, error line | None)``; a
    configuration error raises (every example would fail alike)."""
    import dspy

    from personalign.lm import use

    def run(i: int, ex) -> tuple[Any, str | None]:
        kwargs = {k: getattr(ex, k) for k in inputs}
        base = lm if lm is not None else dspy.settings.lm
        for attempt in range(policy.retries + 1):
            try:
                if attempt == 0 or base is None:
                    return program(**kwargs), None
                with use(policy.retry_lm(base, attempt)) if lm is not None else \
                        dspy.context(lm=policy.retry_lm(base, attempt)):
                    return program(**kwargs), None
            except Exception as exc:  # noqa: BLE001 -- counted, reported, never fatal
                decision = policy.decide(exc)
                if decision.action == "raise":
                    raise decision.error from None
                if attempt == policy.retries or decision.action == "fail":
                    ours = decision.error
                    msg = redact(str(ours or exc).splitlines()[0])[:300] if str(ours or exc) else type(exc).__name__
                    return None, f"{type(ours or exc).__name__}: {msg}"
        return None, "no attempt"

    return run


def score_of(value: Any) -> float:
    """A DSPy metric's value as a float: numbers, bools, or a Prediction/dict with a ``score``
    (None and a missing score: 0.0)."""
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


def evaluate_metric(program, examples: Sequence, metric, *, seed: int = 0, n_boot: int = 1000,
                    label_field: str | None = None, lm=None) -> dict[str, Any]:
    """Run ``program`` on each example with :func:`run_program` and score every prediction with the
    DSPy ``metric`` ``(example, prediction) -> number | Prediction(score=...)``.

    Returns ``{"score", "score_ci", "n", "failures", "errors", "report", "predictions"}``: the mean
    metric, its 95% percentile-bootstrap CI (resampling examples with ``seed``), and -- when
    ``label_field`` is given and every example carries it -- the corpus
    :func:`personalign.metrics.evaluate_binary` report (F1 etc. with CIs). A failed example (or a
    metric that raises on it) scores 0. Configuration errors (missing model file, unknown model)
    propagate. ``score``/``score_ci``/``report`` are None for an empty example list.
    """
    import warnings

    import numpy as np

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


__all__ = ["EvalOutcome", "evaluate_metric", "filled_predictions", "progress_bar", "run_program", "score_of"]
