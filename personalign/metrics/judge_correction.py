"""Judge-corrected rates: what share of items a validated binary judge's verdicts imply, corrected
for the judge's measured errors.

When an LLM judge stands in for people (the respond stage's ``follow_rate`` from the violation
judge), its raw positive rate q is biased by its errors: with sensitivity Se = P(judge + | true +)
and specificity Sp = P(judge − | true −), E[q] = Se·π + (1 − Sp)·(1 − π). The Rogan–Gladen
estimator (Rogan & Gladen 1978) inverts it:

    π̂ = (q + Sp − 1) / (Se + Sp − 1), clipped to [0, 1].

Se and Sp are themselves estimates from the judge's validation labels (``judge_validation``), so
the interval resamples **both**: the judged items (by cluster when ``clusters`` is given,
:mod:`personalign.metrics.cluster`) and, independently, the validation items (by validation
cluster, e.g. labelled pairs), and takes the percentile interval of π̂ over the joint resamples
(a nonparametric version of the interval of Lang & Reiczigel 2014). A judge with Se + Sp <= 1
carries no information and is refused.

``ppi-python`` (prediction-powered inference) needs the judge's verdicts on the *same* population
as the human labels; here the labels (PrefEval's options) and the judged responses differ, which
is the Rogan–Gladen setting.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["rogan_gladen", "sensitivity_specificity", "corrected_rate"]


def rogan_gladen(observed, sensitivity, specificity):
    """π̂ = (q + Sp − 1) / (Se + Sp − 1) clipped to [0, 1]; arrays broadcast. NaN where Se + Sp <= 1."""
    q, se, sp = (np.asarray(x, dtype=float) for x in (observed, sensitivity, specificity))
    den = se + sp - 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(den > 0, (q + sp - 1.0) / np.where(den > 0, den, 1.0), np.nan)
    out = np.clip(out, 0.0, 1.0)
    return float(out) if out.ndim == 0 else out


def sensitivity_specificity(gold: Sequence[bool], pred: Sequence[bool]) -> tuple[float, float]:
    """(Se, Sp) of binary verdicts ``pred`` against ``gold`` (positives True).

    Raises:
        ValueError: lengths differ, or gold lacks one of the classes."""
    g, p = np.asarray(gold, dtype=bool), np.asarray(pred, dtype=bool)
    if g.shape != p.shape:
        raise ValueError(f"gold and pred lengths differ: {g.size} vs {p.size}")
    if g.all() or not g.any():
        raise ValueError("validation labels need both classes to measure sensitivity and specificity")
    return float(p[g].mean()), float((~p[~g]).mean())


def corrected_rate(judged: Sequence[bool], val_gold: Sequence[bool], val_pred: Sequence[bool], *,
                   clusters=None, val_clusters=None, n_boot: int = 2000, seed: int = 0,
                   confidence: float = 0.95) -> dict:
    """Rogan–Gladen corrected positive rate of the judge verdicts ``judged`` with an interval
    carrying both samples' uncertainty.

    Args:
        judged: (n,) the judge's verdicts on the items being measured (True = positive, e.g. follows).
        val_gold, val_pred: (m,) human labels and the same judge's verdicts on its validation items.
        clusters: cluster labels of ``judged`` (one or two levels, as for
            :func:`personalign.metrics.binary_report`); None: items.
        val_clusters: cluster labels of the validation items (e.g. the pair each belongs to).

    Returns:
        ``{"method": "rogan-gladen", "observed", "sensitivity", "specificity", "corrected", "ci",
        "n", "n_validation", "resampling"}`` (rates in [0, 1]; ``ci`` [low, high]).

    Raises:
        ValueError: the judge is no better than chance on its validation labels (Se + Sp <= 1), or
            its validation labels lack a class.
    """
    from personalign.metrics.binary import _clusters
    from personalign.metrics.cluster import percentile_ci, resample_weights

    j = np.asarray(judged, dtype=bool)
    g, p = np.asarray(val_gold, dtype=bool), np.asarray(val_pred, dtype=bool)
    if j.size == 0:
        raise ValueError("no judged items")
    se, sp = sensitivity_specificity(g, p)
    if se + sp <= 1.0:
        raise ValueError(f"judge sensitivity {se:.3f} + specificity {sp:.3f} <= 1: no better than chance, "
                         "its verdicts cannot be corrected")
    cj, cv = _clusters(clusters, j.size), _clusters(val_clusters, g.size)
    wj = resample_weights(cj, n_boot, seed)
    wv = resample_weights(cv, n_boot, seed + 1)
    i64 = np.int64
    q = (wj @ j.astype(i64)) / np.maximum(wj.sum(axis=1), 1)
    pos, neg = wv @ g.astype(i64), wv @ (~g).astype(i64)
    with np.errstate(divide="ignore", invalid="ignore"):
        se_b = np.where(pos > 0, (wv @ (g & p).astype(i64)) / np.maximum(pos, 1), np.nan)
        sp_b = np.where(neg > 0, (wv @ (~g & ~p).astype(i64)) / np.maximum(neg, 1), np.nan)
    boot = rogan_gladen(q, se_b, sp_b)
    return {"method": "rogan-gladen", "observed": float(j.mean()), "sensitivity": se, "specificity": sp,
            "corrected": rogan_gladen(j.mean(), se, sp), "ci": percentile_ci(boot, confidence), "n": int(j.size),
            "n_validation": int(g.size),
            "resampling": {"unit": cj.unit, "n_clusters": cj.n_clusters, "n_boot": n_boot,
                           "validation_unit": cv.unit, "validation_clusters": cv.n_clusters}}
