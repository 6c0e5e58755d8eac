"""Set-level objectives: what compile and sweep maximize, computed over a whole set of predictions.

DSPy teleprompters maximize the *mean* of a per-example metric. On a binary stage where 83% of the
labels are negative, "always no" is 83% accurate, so the mean rewards collapsing to one class. F1,
F-beta and Cohen's kappa are not means over examples. A stage therefore declares its
**objective**, parsed once into an :class:`Objective` (as scikit-learn's ``get_scorer`` parses a
scoring name, and lm-eval's ``MetricSpec(compute, aggregate, higher_is_better)``):

========================  ========================================================================
spec                      the objective
========================  ========================================================================
``f1``                    F1 of the stage's positive class (binary stages)
``fbeta:B``               F-beta of the positive class, 0 < B < 1e6 (verification: ``fbeta:2``)
``kappa``                 Cohen's kappa of the predicted labels (binary and multiclass stages)
``accuracy``              share of predictions equal to the gold label
``macro_f1``              unweighted mean of the per-label F1 over the gold labels present
``mean``                  mean of the stage's per-example metric (scored stages: extraction recall)
a registered name         :data:`OBJECTIVES` (``verdict_kappa``: the judge's kappa of verdicts)
``file.py:fn``            a function ``fn(examples, predictions, stage[, scores])`` -> float
========================  ========================================================================

**A failed prediction (None) counts as the wrong label** (:func:`labels`, the one place this rule
is written): failing never pays. An undefined value (kappa of one label on both sides) is NaN.

Sources: scikit-learn's ``fbeta_score``, ``f1_score(average="macro")``; Cohen's kappa through
:func:`personalign.metrics.cohen_kappa`.
"""

from __future__ import annotations

import inspect
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from personalign.registry import Entry, Registry, resolve, resolve_callable

FAILED = "\x00failed"
LABEL_KINDS = frozenset({"binary", "multiclass"})


def labels(stage, examples: Sequence, predictions: Sequence) -> tuple[list, list]:
    """``(gold, predicted)`` as comparable labels: the positive class (bool) for binary stages, the
    label as a string otherwise; **a failure (None) becomes the wrong label** (binary: the opposite
    class; otherwise a label no gold has)."""
    if stage.kind == "binary":
        gold = [bool(stage.is_positive(stage.gold(ex))) for ex in examples]
        pred = [stage.is_positive(p) for p in predictions]
        return gold, [(not g) if p is None else bool(p) for g, p in zip(gold, pred)]
    gold = [str(stage.gold(ex)) for ex in examples]
    return gold, [FAILED if p is None else str(p) for p in predictions]


def _fbeta(beta: float) -> Callable:
    def compute(gold: list, pred: list) -> float:
        from sklearn.metrics import fbeta_score

        return float(fbeta_score(gold, pred, beta=beta, zero_division=0))

    return compute


def _kappa(gold: list, pred: list) -> float:
    from personalign.metrics import cohen_kappa

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cohen_kappa(gold, pred)


def _accuracy(gold: list, pred: list) -> float:
    return sum(g == p for g, p in zip(gold, pred)) / max(1, len(gold))


def _macro_f1(gold: list, pred: list) -> float:
    from sklearn.metrics import f1_score

    return float(f1_score(gold, pred, labels=sorted(set(gold), key=str), average="macro", zero_division=0))


@dataclass(frozen=True)
class Objective:
    """A set objective (see the module docstring), parsed once by :func:`get_objective`.

    Attributes:
        name: what tables, JSON and Optuna call it: ``f1``, ``f2``, ``kappa``, ``accuracy``,
            ``macro_f1``, the stage metric's name for ``mean`` (``recall``), or the function's name.
        spec: the canonical spec it was parsed from (``"fbeta:2"``).
        compute: over labels, ``(gold, predicted) -> float`` (after :func:`labels`); over
            examples, ``(examples, predictions, stage=..., scores=...) -> float`` (``on="examples"``).
        on: ``"labels"``, ``"examples"`` or ``"metric"`` (the mean of the per-example metric).
        greater_is_better: always True for the built-in objectives.
        needs_scores: the function reads the programs' per-example ``score`` (the judge's unrounded rating).
        kinds: the stage kinds it applies to.
    """

    name: str
    spec: str
    compute: Any = field(repr=False)
    on: str = "labels"
    greater_is_better: bool = True
    needs_scores: bool = False
    kinds: frozenset = LABEL_KINDS

    def __call__(self, stage, examples: Sequence, predictions: Sequence, *, scores: Sequence | None = None,
                 lm=None) -> float:
        """The objective of ``predictions`` (one raw output per example, None = failure) against
        the gold of ``examples``: a float, NaN when undefined, 0.0 for an empty set. ``lm``: for a
        ``mean`` whose metric calls an LM (a judge)."""
        if not examples:
            return 0.0
        if self.on == "labels":
            return float(self.compute(*labels(stage, examples, predictions)))
        if self.on == "metric":
            from personalign.stages.scoring import per_example_scores

            values = per_example_scores(stage, examples, predictions, lm=lm)[0]
            return float(sum(values) / len(values))
        fn = resolve_callable(self.compute, "objective")
        params = inspect.signature(fn).parameters
        kwargs: dict[str, Any] = {}
        if "scores" in params and scores is not None:
            kwargs["scores"] = scores
        if "stage" in params:
            kwargs["stage"] = stage
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return float(fn(examples, predictions, **kwargs))

    def value_or_none(self, value: float | None) -> float | None:
        """``value`` for JSON: None when undefined (NaN) or missing."""
        return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


@dataclass(frozen=True)
class ObjectiveInfo(Entry):
    """A registered objective: ``target`` is an :class:`Objective` or its ``"module:attr"``."""


OBJECTIVES: Registry = Registry("objective", [
    ObjectiveInfo("f1", Objective("f1", "f1", _fbeta(1.0), kinds=frozenset({"binary"})),
                  "F1 of the positive class"),
    ObjectiveInfo("kappa", Objective("kappa", "kappa", _kappa), "Cohen's kappa of the labels"),
    ObjectiveInfo("accuracy", Objective("accuracy", "accuracy", _accuracy), "share of exact labels"),
    ObjectiveInfo("macro_f1", Objective("macro_f1", "macro_f1", _macro_f1), "mean per-label F1"),
    ObjectiveInfo("verdict_kappa", "personalign.programs.judge.metrics:VERDICT_KAPPA",
                  "judge: Cohen's kappa of A-better / tie / B-better verdicts of the unrounded scores"),
])


def fbeta_beta(spec: str) -> float:
    """B of ``"fbeta:B"``.

    Raises:
        ValueError: B is not a finite number in (0, 1e6)."""
    try:
        beta = float(spec.split(":", 1)[1])
    except (ValueError, IndexError):
        raise ValueError(f"objective {spec!r}: beta must be a number > 0") from None
    if not (math.isfinite(beta) and 0 < beta < 1e6):
        raise ValueError(f"objective {spec!r}: beta must be a finite number in (0, 1e6)")
    return beta


def fbeta_of(stage) -> float | None:
    """β of a binary stage's F-beta objective (``f1``: 1, ``fbeta:2``: 2); None for another objective."""
    spec = stage.objective.spec
    if stage.kind != "binary":
        return None
    return 1.0 if spec == "f1" else fbeta_beta(spec) if spec.startswith("fbeta:") else None


def get_objective(spec: str | None, kind: str, *, metric_name: str | None = None) -> Objective:
    """The :class:`Objective` a stage of ``kind`` declares with ``spec`` (None: the kind's default,
    ``f1`` for binary, ``macro_f1`` for multiclass, ``mean`` for scored). ``metric_name`` names a
    ``mean`` objective. A ``"module:attr"`` / ``"/abs/file.py:fn"`` spec (a checked reference,
    :func:`personalign.stages.ref.check_ref`) is an examples-objective imported on first use.

    Raises:
        ValueError: an unknown name, or an objective the kind cannot have (``f1`` of a scored stage).
    """
    if spec is None:
        spec = {"binary": "f1", "multiclass": "macro_f1"}.get(kind, "mean")
    if spec.startswith("fbeta:"):
        if kind != "binary":
            raise ValueError(f"objective {spec!r} needs kind 'binary'")
        beta = fbeta_beta(spec)
        return Objective(f"f{beta:g}", spec, _fbeta(beta), kinds=frozenset({"binary"}))
    if spec == "mean":
        if kind in LABEL_KINDS and metric_name is None:
            raise ValueError("objective 'mean' needs kind 'scored'")
        return Objective(metric_name or "mean", "mean", None, on="metric", kinds=frozenset({kind}))
    if spec in OBJECTIVES:
        obj = resolve(OBJECTIVES.info(spec).target)
        if obj.on == "labels" and kind not in obj.kinds:
            raise ValueError(f"objective {spec!r} needs kind {' or '.join(sorted(obj.kinds))}")
        return obj
    if ":" in spec and all(spec.rpartition(":")[::2]):
        return Objective(spec.rpartition(":")[2], spec, spec, on="examples", kinds=frozenset({kind}))
    raise ValueError(f"unknown objective {spec!r}; use f1, fbeta:B, kappa, accuracy, macro_f1, mean, "
                     f"{', '.join(n for n in OBJECTIVES.names() if n not in ('f1', 'kappa', 'accuracy', 'macro_f1'))} "
                     "or file.py:function")


def is_constant(stage, predictions: Sequence) -> bool:
    """True when a binary stage's predictions (failures aside) are all one class (or all failed);
    always False for other stages."""
    if stage.kind != "binary":
        return False
    return len({stage.is_positive(p) for p in predictions} - {None}) < 2


def class_weights(stage, examples: Sequence) -> dict[bool, float]:
    """Per-gold-class weights ``n / (k * n_c)`` (k = classes present) so that a weighted mean of
    per-example correctness equals balanced accuracy; ``{}`` when unweighted (not binary, or a
    single class present)."""
    if stage.kind != "binary" or not examples:
        return {}
    gold = [bool(stage.is_positive(stage.gold(ex))) for ex in examples]
    counts = {c: gold.count(c) for c in (True, False) if gold.count(c)}
    if len(counts) < 2:
        return {}
    return {c: len(gold) / (len(counts) * n) for c, n in counts.items()}


def balanced_metric(stage, metric: Callable, examples: Sequence) -> Callable:
    """The per-example side of the objective: ``metric`` weighted by :func:`class_weights` of
    ``examples`` (the teleprompters' fit set), so that DSPy's mean over a set with the fit set's
    class shares is the balanced accuracy and no teleprompter can win by predicting one class.

    ``wrapped(example, pred, trace=None)``: with a trace (bootstrap's demo filter) the metric's own
    pass/fail is returned unchanged; otherwise the score times the weight of the example's gold
    class (a ``dspy.Prediction`` with ``score`` and ``feedback``, as GEPA's feedback metrics return,
    keeps its feedback). Returns ``metric`` itself when there is nothing to weight.
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


__all__ = ["FAILED", "OBJECTIVES", "Objective", "ObjectiveInfo", "fbeta_beta", "fbeta_of", "get_objective", "labels", "balanced_metric", "class_weights",
           "is_constant"]
