"""Metrics of the ``violation`` stage: per-example correctness (DSPy metric) and the set
objective, Cohen's kappa (scikit-learn) of the judge's follows / violates against the labels."""

from __future__ import annotations

import math
from typing import Sequence


def _get(obj, key):
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def violation_correct(example, pred, trace=None):
    """DSPy metric: 1.0 when ``pred.violates`` equals ``example.violates`` (a missing prediction
    is wrong); with a ``trace``, a bool."""
    got = None if pred is None else _get(pred, "violates")
    ok = got is not None and bool(got) == bool(example.violates)
    return ok if trace is not None else float(ok)


def kappa(examples: Sequence, predictions: Sequence) -> float:
    """The stage's set objective: Cohen's kappa of the predicted ``violates`` against the labels.

    ``predictions``: one output per example (a bool, or an object / dict with ``violates``; None =
    a failed call, counted as the wrong label, so failing never pays). 0.0 when undefined (one
    class only on both sides)."""
    from personalign.metrics import cohen_kappa

    gold, pred = [], []
    for ex, p in zip(examples, predictions, strict=True):
        g = bool(_get(ex, "violates"))
        v = p if isinstance(p, bool) or p is None else _get(p, "violates")
        gold.append(g)
        pred.append((not g) if v is None else bool(v))
    if len(set(gold) | set(pred)) < 2:
        return 0.0
    value = cohen_kappa(gold, pred)
    return 0.0 if math.isnan(value) else float(value)


__all__ = ["kappa", "violation_correct"]
