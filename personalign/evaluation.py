"""Score a stage's programs against its gold: :func:`stage_report`, :func:`paired_comparison`,
:func:`evaluate_stage` (run + score).

Running a program over examples -- retries, failures, LM calls, wall time -- is
:func:`personalign.programs.run.run_program` (re-exported here with :class:`EvalOutcome`,
:func:`evaluate_metric`, :func:`filled_predictions` and :func:`score_of`): a failed example is
recorded as ``None`` and scored as the wrong label, never stopping the run; configuration errors
(missing model file, unknown model) do stop it.
"""

from __future__ import annotations

import contextlib
from typing import Any, Sequence

from personalign.errors import ContextWindowError, PersonalignError, find_personalign_error
from personalign.lm.retry import fatal_lm_error
from personalign.programs.run import EvalOutcome, evaluate_metric, filled_predictions, run_program, score_of


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
