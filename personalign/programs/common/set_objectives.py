"""Set objectives and the per-example metric of declared stages (stage files, signature stages).

Named in a stage's ``objective`` as ``"personalign.programs.common.set_objectives:NAME"`` (a stage
file writes just ``kappa``, ``accuracy`` or ``macro_f1``); each is
``fn(examples, predictions, stage) -> float`` (:func:`personalign.objectives.objective_score`
passes the stage). A failed prediction (None) is the wrong label. Sources: scikit-learn's
``cohen_kappa_score``, ``f1_score(average="macro")`` and ``accuracy_score``.
"""

from __future__ import annotations

from typing import Any, Sequence

FAILED = "\x00failed"


def _pairs(examples: Sequence, predictions: Sequence, stage) -> tuple[list, list]:
    """(gold, predicted) as comparable labels: the positive class (bool) for binary stages, the
    label as a string otherwise; a failure becomes the wrong label."""
    if stage.kind == "binary":
        gold = [bool(stage.is_positive(stage.gold(ex))) for ex in examples]
        pred = [stage.is_positive(p) for p in predictions]
        return gold, [(not g) if p is None else bool(p) for g, p in zip(gold, pred)]
    gold = [str(stage.gold(ex)) for ex in examples]
    return gold, [FAILED if p is None else str(p) for p in predictions]


def kappa(examples: Sequence, predictions: Sequence, stage) -> float:
    """Cohen's kappa of predictions against gold (nan when undefined: a single label in both)."""
    from sklearn.metrics import cohen_kappa_score

    gold, pred = _pairs(examples, predictions, stage)
    return float(cohen_kappa_score(gold, pred))


def macro_f1(examples: Sequence, predictions: Sequence, stage) -> float:
    """Unweighted mean of the per-label F1 over the gold labels present."""
    from sklearn.metrics import f1_score

    gold, pred = _pairs(examples, predictions, stage)
    return float(f1_score(gold, pred, labels=sorted(set(gold), key=str), average="macro", zero_division=0))


def accuracy(examples: Sequence, predictions: Sequence, stage) -> float:
    """Share of predictions equal to the gold label."""
    gold, pred = _pairs(examples, predictions, stage)
    return sum(g == p for g, p in zip(gold, pred)) / max(1, len(gold))


class ExactMatch:
    """DSPy metric ``(example, pred, trace=None)``: the prediction's ``output`` equals the
    example's ``label`` (bools compared after :func:`personalign.metrics.dspy_metrics.to_bool`).
    Returns a bool with a trace (bootstrap's demo filter), else 1.0 / 0.0."""

    def __init__(self, label: str, output: str, boolean: bool = False) -> None:
        self.label, self.output, self.boolean = label, output, boolean
        self.__name__ = f"exact_match_{label}"

    def __call__(self, example, pred, trace=None, *args: Any, **kwargs: Any):
        gold, got = getattr(example, self.label), getattr(pred, self.output, None)
        if self.boolean:
            from personalign.metrics.dspy_metrics import to_bool

            gold, got = to_bool(gold), to_bool(got)
        ok = got is not None and gold == got
        return ok if trace is not None else float(ok)


OBJECTIVES = {"kappa": kappa, "macro_f1": macro_f1, "accuracy": accuracy}

__all__ = ["ExactMatch", "OBJECTIVES", "accuracy", "kappa", "macro_f1"]
