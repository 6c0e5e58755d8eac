"""Set-level objectives: what a compile maximizes, computed over a whole set of predictions.

DSPy teleprompters maximize the *mean* of a per-example metric. On a binary stage where 83% of
the labels are negative, "always no" is 83% accurate, so the mean rewards collapsing to one class.
F1, F-beta, Cohen's kappa and Spearman's rho are not means over examples. A stage therefore
declares its **objective** (``Stage.objective``), a spec string:

* ``"f1"`` -- F1 of the stage's positive class (binary stages; relevance: "relevant");
* ``"fbeta:B"`` -- F-beta of the positive class (verification: ``"fbeta:2"`` of "rejected",
  recall first);
* ``"mean"`` -- the mean of the stage's per-example metric (extraction recall, MCQ accuracy,
  perspectives win rate; for these the set objective *is* a mean);
* ``"module:function"`` -- ``function(examples, predictions[, scores]) -> float`` (the judge stage:
  Cohen's kappa of the verdicts of its unrounded scores over every rated attribute; the
  violation stage: Cohen's kappa of follows / violates).

A failed prediction (None) counts as the wrong label (binary) or scores 0 (mean), as in
:func:`personalign.evaluation.stage_report`.

:func:`balanced_metric` is the per-example side: it weights DSPy's metric so that the mean over
a set equals the class-balanced accuracy -- what the teleprompters' inner loops (bootstrap demo
filter, MIPROv2 minibatches, COPRO, SIMBA, GEPA) optimize instead of the raw mean, so none of
them can win by predicting one class.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, Callable, Sequence

from personalign.programs.stages import objective_spec, validate_spec  # noqa: F401  (defined with the Stage)


def objective_name(stage) -> str:
    """Display name of the objective: ``f1``, ``f2``, the metric name for ``mean`` (``recall``,
    ``accuracy``, ``win_rate``), or the function name."""
    spec = objective_spec(stage)
    if spec == "f1":
        return "f1"
    if spec.startswith("fbeta:"):
        return f"f{float(spec.split(':', 1)[1]):g}"
    if spec == "mean":
        return stage.metric_name
    return spec.rpartition(":")[2]


def binary_labels(stage, examples: Sequence, predictions: Sequence) -> tuple[list[bool], list[bool]]:
    """``(gold, predicted)`` as the stage's positive class; a failure (None) is the wrong label."""
    from personalign.evaluation import filled_predictions

    gold = [bool(stage.is_positive(stage.gold(ex))) for ex in examples]
    return gold, filled_predictions(gold, [stage.is_positive(p) for p in predictions])


def objective_score(stage, examples: Sequence, predictions: Sequence, *, scores: Sequence | None = None,
                    lm=None) -> float:
    """The stage's set objective of ``predictions`` (one raw output per example, None = failure).

    Returns a float (nan when undefined, e.g. kappa of constant ratings); 0.0 for an empty set.
    ``scores``: the programs' per-example ``score`` (:class:`personalign.programs.run.EvalOutcome`
    ``.scores``), passed to a ``module:function`` objective that takes a ``scores`` argument (the
    judge's unrounded debiased score, which its integer rating hides).
    ``lm``: for ``mean`` objectives whose metric calls an LM (a judge).
    """
    if not examples:
        return 0.0
    spec = objective_spec(stage)
    if spec == "f1" or spec.startswith("fbeta:"):
        from sklearn.metrics import fbeta_score

        gold, pred = binary_labels(stage, examples, predictions)
        beta = 1.0 if spec == "f1" else float(spec.split(":", 1)[1])
        return float(fbeta_score(gold, pred, beta=beta, zero_division=0))
    if spec == "mean":
        from personalign.evaluation import stage_report

        return float(stage_report(stage, examples, predictions, n_boot=1, lm=lm)[stage.metric_name])
    from personalign.registry import resolve

    fn = resolve(spec)
    params = inspect.signature(fn).parameters
    kwargs = {"scores": scores} if scores is not None and "scores" in params else {}
    if "stage" in params:  # declared stages' objectives read the label and positive class from it
        kwargs["stage"] = stage
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(fn(examples, predictions, **kwargs))


def is_constant(stage, predictions: Sequence) -> bool:
    """True when a binary stage's predictions (failures aside) are all one class (or all failed);
    always False for scored stages."""
    if stage.kind != "binary":
        return False
    seen = {stage.is_positive(p) for p in predictions} - {None}
    return len(seen) < 2


def class_weights(stage, examples: Sequence) -> dict[bool, float]:
    """Per-gold-class weights ``n / (k * n_c)`` (k = classes present) so that a weighted mean of
    per-example correctness equals balanced accuracy; ``{}`` when unweighted (scored stage, or
    a single class present)."""
    if stage.kind != "binary" or not examples:
        return {}
    gold = [bool(stage.is_positive(stage.gold(ex))) for ex in examples]
    counts = {c: gold.count(c) for c in (True, False) if gold.count(c)}
    if len(counts) < 2:
        return {}
    return {c: len(gold) / (len(counts) * n) for c, n in counts.items()}


def balanced_metric(stage, metric: Callable, examples: Sequence) -> Callable:
    """``metric`` weighted by :func:`class_weights` of ``examples`` (the teleprompters' fit set).

    ``wrapped(example, pred, trace=None)``: with a trace (bootstrap's demo filter) the metric's own
    pass/fail is returned unchanged; otherwise the score times the weight of the example's gold
    class (a ``dspy.Prediction`` with ``score`` and ``feedback``, as GEPA's feedback metrics
    return, keeps its feedback). The mean of ``wrapped`` over a set with the fit set's class
    shares is the balanced accuracy. Returns ``metric`` itself when there is nothing to weight.
    """
    weights = class_weights(stage, examples)
    if not weights:
        return metric

    def wrapped(example, pred, trace=None, *args: Any, **kwargs: Any):
        value = metric(example, pred, trace, *args, **kwargs)
        if trace is not None and isinstance(value, bool):
            return value
        w = weights.get(bool(stage.is_positive(stage.gold(example))), 1.0)
        if isinstance(value, (bool, int, float)):
            return float(value) * w
        score = getattr(value, "score", None)
        if score is None:
            return value
        import dspy

        return dspy.Prediction(score=float(score) * w, feedback=getattr(value, "feedback", None))

    wrapped.__name__ = f"balanced_{getattr(metric, '__name__', 'metric')}"
    wrapped.weights = weights  # type: ignore[attr-defined]
    return wrapped


__all__ = ["objective_spec", "objective_name", "objective_score", "is_constant", "class_weights",
           "balanced_metric", "binary_labels", "validate_spec"]
