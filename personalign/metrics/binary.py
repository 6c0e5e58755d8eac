"""Corpus-level binary classification metrics with bootstrap confidence intervals.

Point metrics come from scikit-learn (``precision_score``, ``recall_score``, ``f1_score``,
``fbeta_score``, ``accuracy_score``) with ``zero_division=0``.

Edge-case policy (pinned by tests):

* No positives in the gold labels or in the predictions → precision/recall/F1/Fβ are **0.0,
  never 1.0**, and a ``UserWarning`` says which side has no positives: a degenerate
  all-negative case must not pass as perfect (scikit-learn issues #14876, #26864 on
  ``zero_division``).
* Empty input raises ``ValueError``.

Confidence intervals are percentile bootstrap intervals (Efron & Tibshirani 1993, ch. 13) over
**clusters** when ``clusters`` is given (:mod:`personalign.metrics.cluster`: top-level clusters,
then inner units within them), else over items; ``n_boot`` resamples drawn from
``numpy.random.default_rng(seed)``, every metric of one report on the same resamples. Resampled
statistics are computed from weighted confusion counts with the same zero-division policy (0.0)
as the point estimates, vectorized over resamples. Every report says what was resampled
(``resampling``: unit, number of top-level clusters, n_boot); with fewer than 5 top-level
clusters the intervals are None and the per-group figures and their range are reported instead.
"""

from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np

__all__ = [
    "as_binary",
    "precision",
    "recall",
    "f1",
    "fbeta",
    "accuracy",
    "yes_rate",
    "binary_report",
    "bootstrap_ci",
    "paired_bootstrap_diff",
    "mcnemar_exact",
    "fit_threshold",
]

ArrayLike = Sequence[bool] | Sequence[int] | np.ndarray


def as_binary(y, name: str = "y") -> np.ndarray:
    """Convert labels (bools, 0/1 ints or floats equal to 0/1) to a 1-D bool array.

    Raises ValueError for other values or a non-1-D input."""
    a = np.asarray(y)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    if a.dtype == bool:
        return a
    if a.size and not np.isin(a, (0, 1)).all():
        bad = a[~np.isin(a, (0, 1))][0]
        raise ValueError(f"{name} must hold only 0/1 or booleans, found {bad!r}")
    return a.astype(bool)


def _pair(y_true, y_pred) -> tuple[np.ndarray, np.ndarray]:
    t, p = as_binary(y_true, "y_true"), as_binary(y_pred, "y_pred")
    if t.shape != p.shape:
        raise ValueError(f"y_true and y_pred lengths differ: {t.size} vs {p.size}")
    if t.size == 0:
        raise ValueError("no items: metrics are undefined on an empty set")
    return t, p


def _warn_no_positives(t: np.ndarray, p: np.ndarray, metric: str) -> None:
    if not t.any():
        warnings.warn(f"{metric}: gold labels have no positives; reported as 0.0", UserWarning, stacklevel=3)
    if not p.any():
        warnings.warn(f"{metric}: predictions have no positives; reported as 0.0", UserWarning, stacklevel=3)


def precision(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Precision TP/(TP+FP); 0.0 with a warning when there are no predicted positives."""
    from sklearn.metrics import precision_score

    t, p = _pair(y_true, y_pred)
    if not p.any():
        warnings.warn("precision: predictions have no positives; reported as 0.0", UserWarning, stacklevel=2)
    return float(precision_score(t, p, zero_division=0))


def recall(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Recall TP/(TP+FN); 0.0 with a warning when gold has no positives."""
    from sklearn.metrics import recall_score

    t, p = _pair(y_true, y_pred)
    if not t.any():
        warnings.warn("recall: gold labels have no positives; reported as 0.0", UserWarning, stacklevel=2)
    return float(recall_score(t, p, zero_division=0))


def _fbeta_counts(t: np.ndarray, p: np.ndarray, beta: float) -> float:
    """``(1+β²)TP / ((1+β²)TP + β²FN + FP)``, sklearn's ``fbeta_score(zero_division=0)`` counted directly."""
    (tp, fn, fp), b2 = (np.count_nonzero(x) for x in (t & p, t & ~p, ~t & p)), float(beta) ** 2
    return 0.0 if tp == 0 else float((1 + b2) * tp / ((1 + b2) * tp + b2 * fn + fp))


def fbeta(y_true: ArrayLike, y_pred: ArrayLike, beta: float = 2.0) -> float:
    """F-beta score ``(1+β²)·P·R / (β²·P + R)``; β = 2 weighs recall higher (recall-first
    verifiers). 0.0 with a warning when gold or predictions have no positives."""
    t, p = _pair(y_true, y_pred)
    _warn_no_positives(t, p, f"F{beta:g}")
    return _fbeta_counts(t, p, beta)


def f1(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """F1 of the positive class; 0.0 (never 1.0) with a warning when gold or predictions
    have no positives."""
    t, p = _pair(y_true, y_pred)
    _warn_no_positives(t, p, "F1")
    return _fbeta_counts(t, p, 1.0)


def accuracy(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Share of items where prediction equals gold."""
    from sklearn.metrics import accuracy_score

    t, p = _pair(y_true, y_pred)
    return float(accuracy_score(t, p))


def yes_rate(y_pred: ArrayLike) -> float:
    """Share of positive predictions (how often a system says "relevant")."""
    p = as_binary(y_pred, "y_pred")
    if p.size == 0:
        raise ValueError("no items: yes-rate is undefined on an empty set")
    return float(p.mean())


# --- vectorized statistics over bootstrap resamples -----------------------------------------


def _div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.zeros(np.broadcast(num, den).shape, dtype=float)
    np.divide(num, den, out=out, where=den > 0)
    return out


def _stats_from_counts(tp, fp, fn, tn, beta: float = 1.0) -> dict[str, np.ndarray]:
    n = tp + fp + fn + tn
    prec = _div(tp, tp + fp)
    rec = _div(tp, tp + fn)
    b2 = beta * beta
    fb = _div((1 + b2) * tp, (1 + b2) * tp + b2 * fn + fp)
    f1_ = _div(2 * tp, 2 * tp + fn + fp)
    return {"precision": prec, "recall": rec, "f1": f1_, f"f{beta:g}": fb,
            "accuracy": _div(tp + tn, n), "yes_rate": _div(tp + fp, n), "gold_yes_rate": _div(tp + fn, n)}


def _resampled_counts(t: np.ndarray, p: np.ndarray, weights: np.ndarray):
    """Confusion counts (each shaped like ``weights.shape[:-1]``) of item ``weights`` (..., n)."""
    w = np.asarray(weights)
    tp = w @ (t & p).astype(np.int64)
    fp = w @ (~t & p).astype(np.int64)
    fn = w @ (t & ~p).astype(np.int64)
    tn = w @ (~t & ~p).astype(np.int64)
    return tp, fp, fn, tn


def _clusters(clusters, n: int):
    """A :class:`~personalign.metrics.cluster.Clusters` of n items from ``clusters`` (None: items;
    a Clusters; or a list of up to two label sequences, outermost first)."""
    from personalign.metrics.cluster import Clusters, make_clusters

    if isinstance(clusters, Clusters):
        if clusters.n != n:
            raise ValueError(f"clusters cover {clusters.n} items, not {n}")
        return clusters
    if clusters is not None and len(clusters) and np.ndim(clusters[0]) == 0:
        clusters = [clusters]  # one level given as a flat sequence of labels
    return make_clusters(clusters, n)


def _indices(n: int, n_boot: int, seed: int) -> np.ndarray:
    """Item-bootstrap index draws (n_boot, n): the draws of singleton-cluster :func:`resample_weights`."""
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, size=(n_boot, n))


def _ci(samples: np.ndarray, confidence: float) -> list[float]:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    alpha = (1 - confidence) / 2
    lo, hi = np.percentile(samples, [100 * alpha, 100 * (1 - alpha)])
    return [float(lo), float(hi)]


def bootstrap_ci(statistic, *arrays, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95,
                 clusters=None) -> list[float]:
    """Percentile bootstrap CI ``[low, high]`` of ``statistic(*resampled_arrays)`` for any
    statistic of item-aligned arrays (items resampled jointly; with ``clusters``, whole clusters:
    :func:`personalign.metrics.cluster.resample_weights`). Slow path (one call per resample); the
    binary metrics use a vectorized path instead."""
    from personalign.metrics.cluster import resample_weights

    arrays = [np.asarray(a) for a in arrays]
    n = len(arrays[0])
    if any(len(a) != n for a in arrays):
        raise ValueError("arrays must have the same length")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if clusters is None:
        idx = list(_indices(n, n_boot, seed))
    else:
        items = np.arange(n)
        idx = [np.repeat(items, w) for w in resample_weights(_clusters(clusters, n), n_boot, seed)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vals = np.array([statistic(*(a[i] for a in arrays)) for i in idx], dtype=float)
    vals = vals[~np.isnan(vals)]
    if vals.size == 0:
        return [float("nan"), float("nan")]
    return _ci(vals, confidence)


def _per_group(t: np.ndarray, p: np.ndarray, cl, key: str, beta: float = 1.0) -> dict:
    """``{str(label): metric on that top-level cluster's items}``."""
    onehot = (cl.top[None, :] == np.arange(cl.n_clusters)[:, None]).astype(np.int64)  # (G, n)
    vals = _stats_from_counts(*_resampled_counts(t, p, onehot), beta=beta)[key]
    return {str(lab): float(v) for lab, v in zip(cl.labels, vals)}


def binary_report(y_true: ArrayLike, y_pred: ArrayLike, *, n_boot: int = 1000, seed: int = 0,
                  confidence: float = 0.95, clusters=None) -> dict:
    """Binary metrics with percentile-bootstrap confidence intervals.

    Args:
        y_true, y_pred: 1-D arrays of n labels (bool or 0/1); positives are "relevant".
        n_boot: number of bootstrap resamples.
        seed: seed of the ``numpy.random.default_rng`` drawing the resamples.
        confidence: CI level (0.95 → 2.5th and 97.5th percentiles).
        clusters: None (resample items), or up to two sequences of n cluster labels, outermost
            first (``[prompt_ids, user_ids]``: prompts, then users within prompts), or a
            :class:`~personalign.metrics.cluster.Clusters`.

    Returns:
        ``{"n", "f1", "f1_ci", "precision", "precision_ci", "recall", "recall_ci",
        "yes_rate", "yes_rate_ci", "accuracy", "accuracy_ci", "gold_yes_rate", "resampling"}`` —
        floats in [0, 1]; each ``*_ci`` is ``[low, high]``; ``resampling`` is ``{"unit",
        "n_clusters", "n_boot"}``. With clusters, also ``f1_by_group`` (top-level cluster ->
        F1) and ``f1_range``; below 5 top-level clusters every ``*_ci`` is None (with a warning).

    Warns:
        UserWarning when gold or predictions have no positives (F1 etc. are then 0.0), and when
        there are fewer than 5 top-level clusters.
    """
    from personalign.metrics.cluster import MIN_CLUSTERS, resample_weights

    t, p = _pair(y_true, y_pred)
    _warn_no_positives(t, p, "binary_report")
    cl = _clusters(clusters, t.size)
    # point values from the confusion counts: equal to scikit-learn's with zero_division=0 (pinned by a test)
    point = _stats_from_counts(*_resampled_counts(t, p, np.ones((1, t.size), dtype=np.int64)))
    report: dict = {"n": int(t.size), **{k: float(point[k][0]) for k in ("f1", "precision", "recall", "yes_rate",
                                                                        "accuracy")}}
    boot = _stats_from_counts(*_resampled_counts(t, p, resample_weights(cl, n_boot, seed)))
    too_few = not cl.singletons and cl.n_clusters < MIN_CLUSTERS
    for key in ("f1", "precision", "recall", "yes_rate", "accuracy"):
        report[f"{key}_ci"] = None if too_few else _ci(boot[key], confidence)
    report["gold_yes_rate"] = float(t.mean())
    order = ["n", "f1", "f1_ci", "precision", "precision_ci", "recall", "recall_ci", "yes_rate",
             "yes_rate_ci", "accuracy", "accuracy_ci", "gold_yes_rate"]
    out = {k: report[k] for k in order}
    out["resampling"] = cl.describe(n_boot)
    if not cl.singletons:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            by_group = _per_group(t, p, cl, "f1")
        out["f1_by_group"] = by_group
        out["f1_range"] = [min(by_group.values()), max(by_group.values())]
        if too_few:
            warnings.warn(f"binary_report: only {cl.n_clusters} {cl.unit.split(' > ')[0]} cluster(s) (< {MIN_CLUSTERS}):"
                          " no percentile interval; per-group F1 and its range reported", UserWarning, stacklevel=2)
    return out


_PAIRED_METRICS = ("f1", "precision", "recall", "accuracy", "yes_rate", "f2")


def paired_bootstrap_diff(y_true: ArrayLike, pred_a: ArrayLike, pred_b: ArrayLike, metric: str = "f1",
                          n_boot: int = 1000, seed: int = 0, confidence: float = 0.95, clusters=None) -> dict:
    """Paired bootstrap of ``metric(a) − metric(b)`` for two systems on the same items.

    Both systems are scored on the same resamples (of clusters when ``clusters`` is given, see
    :func:`binary_report`; else of items), so item difficulty cancels (Koehn 2004;
    Berg-Kirkpatrick et al. 2012).

    Args:
        metric: one of ``f1, precision, recall, accuracy, yes_rate, f2``.

    Returns:
        ``{"metric", "n", "a", "b", "diff", "ci": [low, high] | None, "p_value", "se", "mde",
        "resampling", "permutation"}``. ``p_value`` is the two-sided bootstrap p-value
        ``min(1, 2·min(P*(d ≤ 0), P*(d ≥ 0)))``; with clusters, ``permutation`` is the sign-flip
        test of the per-cluster differences (:func:`~personalign.metrics.cluster.sign_flip_test`:
        ``p_value``, ``p_min``) and ``diff_by_group`` / ``range`` the per-group differences (``ci``
        None below 5 top-level clusters). ``se``: sd of the bootstrap differences; ``mde``: the
        minimum detectable effect (1.96 + 0.84) × se.
    """
    from personalign.metrics.cluster import MIN_CLUSTERS, minimum_detectable_effect, resample_weights, sign_flip_test

    if metric not in _PAIRED_METRICS:
        raise ValueError(f"metric must be one of {', '.join(_PAIRED_METRICS)}, got {metric!r}")
    t, a = _pair(y_true, pred_a)
    _, b = _pair(y_true, pred_b)
    beta = 2.0 if metric == "f2" else 1.0
    key = metric
    ones = np.ones((1, t.size), dtype=np.int64)
    point_a = _stats_from_counts(*_resampled_counts(t, a, ones), beta=beta)[key][0]
    point_b = _stats_from_counts(*_resampled_counts(t, b, ones), beta=beta)[key][0]
    cl = _clusters(clusters, t.size)
    w = resample_weights(cl, n_boot, seed)
    da = _stats_from_counts(*_resampled_counts(t, a, w), beta=beta)[key]
    db = _stats_from_counts(*_resampled_counts(t, b, w), beta=beta)[key]
    d = da - db
    p = min(1.0, 2 * min(float(np.mean(d <= 0)), float(np.mean(d >= 0))))
    too_few = not cl.singletons and cl.n_clusters < MIN_CLUSTERS
    out = {"metric": metric, "n": int(t.size), "a": float(point_a), "b": float(point_b),
           "diff": float(point_a - point_b), "ci": None if too_few else _ci(d, confidence), "p_value": p,
           "se": float(d.std(ddof=1)) if d.size > 1 else None, "mde": minimum_detectable_effect(d),
           "resampling": cl.describe(n_boot)}
    if not cl.singletons:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ga, gb = _per_group(t, a, cl, key, beta), _per_group(t, b, cl, key, beta)
        diffs = {k: ga[k] - gb[k] for k in ga}
        out["diff_by_group"] = diffs
        out["range"] = [min(diffs.values()), max(diffs.values())]
        out["permutation"] = sign_flip_test(list(diffs.values()), seed=seed)
    return out


def mcnemar_exact(y_true: ArrayLike, pred_a: ArrayLike, pred_b: ArrayLike) -> dict:
    """McNemar's exact test of two systems' correctness on the same items.

    ``b`` = items A gets right and B wrong, ``c`` = items A gets wrong and B right; the
    two-sided p-value is the exact binomial test of b successes in b + c trials at p = 0.5
    (``scipy.stats.binomtest``; McNemar 1947, exact form per Edwards 1948). With b + c = 0
    the systems never disagree and the p-value is 1.0.

    Returns:
        ``{"b": int, "c": int, "p_value": float}``.
    """
    from scipy.stats import binomtest

    t, a = _pair(y_true, pred_a)
    _, bb = _pair(y_true, pred_b)
    ca, cb = a == t, bb == t
    b = int((ca & ~cb).sum())
    c = int((~ca & cb).sum())
    p = 1.0 if b + c == 0 else float(binomtest(b, b + c, 0.5, alternative="two-sided").pvalue)
    return {"b": b, "c": c, "p_value": p}


def fit_threshold(scores, labels, *, beta: float = 1.0) -> float:
    """Threshold on ``scores`` maximizing F-beta (F1 by default) of ``score >= threshold`` against ``labels``.

    Candidate thresholds are midpoints between adjacent distinct sorted scores (plus one
    below the minimum, i.e. predict all positive), so the chosen threshold never sits on a
    training score. Ties in F1 are broken towards the **higher** threshold (fewer positives).

    Args:
        scores: 1-D float array (n,), e.g. cosine similarities.
        labels: 1-D binary array (n,).
        beta: F-beta weight of recall over precision (van Rijsbergen 1979); 2 favours recall.

    Returns:
        the threshold (float). With no positive label, returns a value above the maximum
        score (predict nothing), with a warning.
    """
    s = np.asarray(scores, dtype=float)
    y = as_binary(labels, "labels")
    if s.ndim != 1 or s.shape != y.shape or s.size == 0:
        raise ValueError("scores and labels must be non-empty 1-D arrays of equal length")
    if np.isnan(s).any():
        raise ValueError("scores contain NaN")
    if not y.any():
        warnings.warn("fit_threshold: no positive labels; threshold set above every score", UserWarning, stacklevel=2)
        return float(s.max() + 1.0)
    u, inv = np.unique(s, return_inverse=True)
    cands = np.concatenate([[u[0] - 1.0], (u[:-1] + u[1:]) / 2])
    # candidate k predicts positive exactly the items whose score is >= u[k]
    pos = np.bincount(inv, weights=y.astype(float), minlength=u.size)
    tot = np.bincount(inv, minlength=u.size).astype(float)
    tp = np.cumsum(pos[::-1])[::-1]
    pp = np.cumsum(tot[::-1])[::-1]
    b2 = float(beta) ** 2
    f = _div((1 + b2) * tp, pp + b2 * y.sum())
    best = np.flatnonzero(f == f.max())[-1]
    return float(cands[best])
