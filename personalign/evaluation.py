"""Run a program over examples: predictions, failures, LM calls and wall time, with a progress bar.

LM failures (timeouts, provider errors, unparseable output) are retried ``retries`` times under
:class:`personalign.lm.retry.RetryPolicy` -- each retry with a fresh ``rollout_id`` and temperature
0.7 so it is a new sample, not a cache hit -- then counted in ``failures`` and scored as failures:
the prediction is recorded as ``None`` and classification metrics count it as the wrong label (see
:func:`filled_predictions`). A failure never stops the run. Configuration errors (missing model
file, unknown model) do stop it.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from personalign.errors import ContextWindowError, PersonalignError, find_personalign_error
from personalign.lm.retry import DEFAULT_POLICY, RetryPolicy, fatal_lm_error


@dataclass
class EvalOutcome:
    """Per-example outputs of one program on one example list.

    Attributes:
        predictions: one per example: the predicted label, or None for a failure.
        scores: one per example: the strategy's score when it has one, else None.
        failures: number of examples that failed after all retries.
        errors: one line per failure (example index and error).
        lm_calls: LM calls that reached a model (cache hits excluded).
        seconds: wall time of the run.
    """

    predictions: list[Any]
    scores: list[float | None]
    failures: int = 0
    errors: list[str] = field(default_factory=list)
    lm_calls: int = 0
    seconds: float = 0.0


def filled_predictions(gold: Sequence[bool], predictions: Sequence[bool | None]) -> list[bool]:
    """Replace failed predictions (None) by the wrong label, so a failure always costs the score."""
    return [(not g) if p is None else bool(p) for g, p in zip(gold, predictions)]


def _progress(description: str, total: int, enabled: bool):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    # Progress goes to stderr so that --json output on stdout stays one JSON object.
    progress = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=Console(stderr=True), disable=not enabled, transient=False,
    )
    return progress


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
) -> EvalOutcome:
    """Run ``program`` on each example (or ``program.predict_batch`` when it has one).

    Args:
        program: a dspy.Module returning a Prediction with field ``output``.
        examples: dspy.Example-like objects carrying the ``inputs`` fields.
        output: the Prediction field kept per example; None keeps the whole Prediction (for
            DSPy metrics that read several fields).
        lm: the dspy.LM to use (set with :func:`personalign.lm.use`); None for LM-free programs
            (or for a program run inside an active ``use(lm)``: retries then repeat the same call).
        retries: extra attempts per failed example (:class:`personalign.lm.retry.RetryPolicy`).

    This is the one runner of programs over examples: ``compare``, ``eval``, the sweep, the
    compile service's dev selection and the teleprompter wrappers' before/after scores
    (:func:`evaluate_metric`) all use it, so a failure means
    the same thing everywhere.
    """
    from personalign.lm import CallCounter, use

    policy = RetryPolicy(retries=retries, temperature=DEFAULT_POLICY.temperature)
    start = time.perf_counter()
    preds: list[Any] = [None] * len(examples)
    scores: list[float | None] = [None] * len(examples)
    errors: list[str] = []
    counter = CallCounter()
    with counter, _progress(description, len(examples), progress) as bar:
        task = bar.add_task(description, total=len(examples))
        if hasattr(program, "predict_batch"):
            with use(lm) if lm is not None else contextlib.nullcontext():
                outs = program.predict_batch(examples)
            for i, out in enumerate(outs):
                preds[i] = out if output is None else getattr(out, output)
                scores[i] = getattr(out, "score", None)
            bar.update(task, advance=len(examples))
        else:
            for i, ex in enumerate(examples):
                kwargs = {k: getattr(ex, k) for k in inputs}
                for attempt in range(policy.retries + 1):
                    try:
                        if lm is None:
                            out = program(**kwargs)
                        else:
                            with use(policy.retry_lm(lm, attempt)):
                                out = program(**kwargs)
                        preds[i] = out if output is None else getattr(out, output)
                        scores[i] = getattr(out, "score", None)
                        break
                    except Exception as exc:  # noqa: BLE001 -- counted, reported, never fatal
                        decision = policy.decide(exc)
                        if decision.action == "raise":
                            raise decision.error from None
                        if attempt == policy.retries or decision.action == "fail":
                            ours = decision.error
                            msg = str(ours or exc).splitlines()[0][:300] if str(ours or exc) else type(exc).__name__
                            errors.append(f"example {i}: {type(ours or exc).__name__}: {msg}")
                            break
                bar.update(task, advance=1)
                if on_example is not None:
                    on_example(i)
    failures = sum(p is None for p in preds)
    return EvalOutcome(preds, scores, failures, errors, counter.calls, time.perf_counter() - start)


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


def stage_report(stage, examples: Sequence, predictions: Sequence[Any], *, n_boot: int = 1000,
                 seed: int = 0, lm=None) -> dict[str, Any]:
    """Score predictions of one stage against the gold of ``examples``.

    Binary stages (``stage.kind == "binary"``): gold and predictions are mapped to the stage's
    positive class (``stage.positive``), failures (None) become the wrong label, and the result
    is :func:`personalign.metrics.binary_report` (``n, f1, f1_ci, precision, recall, yes_rate``
    -- the predicted positive rate -- ``accuracy``, each with a 95% percentile-bootstrap CI, and
    ``gold_yes_rate``), plus ``correct`` (per-example 0/1).

    Scored stages: ``stage.metric(example, Prediction(**{stage.output: p}))`` per example (a
    failure scores 0), reported as ``{metric_name: mean, metric_name + "_ci": [low, high], "n",
    "correct"}`` where ``correct`` holds the per-example scores in [0, 1]. Metrics that call an LM
    (a judge) run inside :func:`personalign.lm.use` of ``lm``; their calls are counted in
    ``metric_lm_calls``.
    """
    import warnings

    import dspy
    import numpy as np

    from personalign.metrics import binary_report, bootstrap_ci

    if stage.kind == "binary":
        gold = [bool(stage.is_positive(stage.gold(ex))) for ex in examples]
        pred = [stage.is_positive(p) for p in predictions]
        filled = filled_predictions(gold, pred)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = binary_report(gold, filled, n_boot=n_boot, seed=seed)
        report["correct"] = [float(g == p) for g, p in zip(gold, filled)]
        report["gold_positive"] = gold
        report["predicted_positive"] = filled
        return report
    from personalign.lm import CallCounter, use

    metric = stage.metric_fn()
    scores = []
    counter = CallCounter()
    with counter, (use(lm) if lm is not None else contextlib.nullcontext()):
        for ex, p in zip(examples, predictions):
            if p is None:
                scores.append(0.0)
                continue
            try:
                value = metric(ex, dspy.Prediction(**{stage.output: p}))
                scores.append(float(getattr(value, "score", value)))
            except Exception as exc:  # noqa: BLE001 -- an unscorable prediction is a failure
                ours = find_personalign_error(exc)
                if ours is not None and not isinstance(ours, ContextWindowError):
                    raise ours from None
                fatal = fatal_lm_error(exc)
                if fatal is not None:
                    raise fatal from None
                scores.append(0.0)
    arr = np.asarray(scores, dtype=float)
    ci = bootstrap_ci(np.mean, arr, n_boot=n_boot, seed=seed) if arr.size else [float("nan")] * 2
    return {"n": int(arr.size), stage.metric_name: float(arr.mean()) if arr.size else float("nan"),
            f"{stage.metric_name}_ci": [float(x) for x in ci], "correct": scores, "metric_lm_calls": counter.calls}


def paired_comparison(stage, report_a: dict, report_b: dict, *, n_boot: int = 1000, seed: int = 0) -> dict:
    """System a minus system b on the same examples: the paired-bootstrap difference of the main
    metric with its 95% CI, and McNemar's exact test on per-example correctness (when 0/1).

    Returns ``{"metric", "diff": {"diff", "ci", ...}, "mcnemar": {"b", "c", "p_value"} | None}``.
    """
    import numpy as np

    from personalign.metrics import bootstrap_ci, mcnemar_exact, paired_bootstrap_diff

    ca = np.asarray(report_a["correct"], dtype=float)
    cb = np.asarray(report_b["correct"], dtype=float)
    binary01 = bool(np.isin(ca, (0.0, 1.0)).all() and np.isin(cb, (0.0, 1.0)).all())
    mcnemar = mcnemar_exact([True] * len(ca), ca.astype(bool), cb.astype(bool)) if binary01 else None
    if stage.kind == "binary":
        diff = paired_bootstrap_diff(report_a["gold_positive"], report_a["predicted_positive"],
                                     report_b["predicted_positive"], metric="f1", n_boot=n_boot, seed=seed)
        return {"metric": "f1", "diff": diff, "mcnemar": mcnemar}
    ci = bootstrap_ci(lambda a, b: float(np.mean(a) - np.mean(b)), ca, cb, n_boot=n_boot, seed=seed)
    diff = {"metric": stage.metric_name, "n": int(ca.size), "a": float(ca.mean()), "b": float(cb.mean()),
            "diff": float(ca.mean() - cb.mean()), "ci": [float(x) for x in ci]}
    return {"metric": stage.metric_name, "diff": diff, "mcnemar": mcnemar}


def evaluate_stage(stage, program, examples: Sequence, *, lm=None, n_boot: int = 1000, seed: int = 0,
                   progress: bool = True, description: str = "predict", retries: int = 2) -> dict[str, Any]:
    """Run ``program`` of ``stage`` on ``examples`` and score it (:func:`run_program` +
    :func:`stage_report`).

    Returns the report plus ``lm_calls, failures, errors (first 20), seconds, predictions``
    (JSON-friendly: booleans/None for binary stages, the raw outputs otherwise).
    """
    outcome = run_program(program, examples, inputs=stage.inputs, output=stage.output, lm=lm, retries=retries,
                          description=description, progress=progress)
    report = stage_report(stage, examples, outcome.predictions, n_boot=n_boot, seed=seed, lm=lm)
    if stage.kind == "binary":
        from personalign.metrics.dspy_metrics import to_bool

        preds: list[Any] = [None if p is None else to_bool(p) for p in outcome.predictions]
    else:
        preds = [_jsonable(p) for p in outcome.predictions]
    return {**report, "lm_calls": outcome.lm_calls, "failures": outcome.failures, "errors": outcome.errors[:20],
            "seconds": round(outcome.seconds, 3), "predictions": preds, "scores": outcome.scores}


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


__all__ = ["EvalOutcome", "run_program", "evaluate_metric", "score_of", "fatal_lm_error", "filled_predictions", "stage_report", "paired_comparison",
           "evaluate_stage", "PersonalignError"]
