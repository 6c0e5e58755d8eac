"""The ``violation`` stage's per-example correctness (DSPy metric). Its set objective is the
generic ``kappa`` (:mod:`personalign.stages.objective`): Cohen's kappa of follows / violates."""

from __future__ import annotations

from typing import Sequence


def _get(obj, key):
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def violation_correct(example, pred, trace=None):
    """DSPy metric: 1.0 when ``pred.violates`` equals ``example.violates`` (a missing prediction
    is wrong); with a ``trace``, a bool."""
    got = None if pred is None else _get(pred, "violates")
    ok = got is not None and bool(got) == bool(example.violates)
    return ok if trace is not None else float(ok)


__all__ = ["violation_correct"]
