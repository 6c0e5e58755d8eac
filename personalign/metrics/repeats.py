"""Binary figures over repeated runs (``--repeats N``): the spread across repeats inside the interval.

A strategy that samples (temperature > 0) gives different predictions on each run. Run it R times
(distinct DSPy cache keys: ``rollout_id``) and report, for each metric, the mean over the R runs;
the interval resamples clusters (:func:`personalign.metrics.cluster.resample_weights`) and, inside
each resample, draws one of the R runs for every drawn top-level cluster, so run-to-run variation
widens the interval as much as it should (a two-way bootstrap: clusters x repeats).
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["repeated_binary_report"]

_KEYS = ("f1", "precision", "recall", "yes_rate", "accuracy")


def repeated_binary_report(y_true, preds, *, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95,
                           clusters=None) -> dict:
    """:func:`personalign.metrics.binary_report` for ``preds`` of shape (R, n): R repeated runs.

    Returns:
        the keys of ``binary_report`` (each metric: the mean over the R runs; each ``*_ci`` the
        percentile interval over resamples of clusters x repeats, None below 5 top-level clusters),
        plus ``repeats`` (R) and ``f1_by_repeat`` (R floats). With R = 1 the figures equal
        ``binary_report``'s.

    Raises:
        ValueError: ``preds`` is not (R, n) with n = len(y_true), or holds non-binary values.
    """
    from personalign.metrics.binary import (_clusters, _pair, _resampled_counts, _stats_from_counts, as_binary,
                                            binary_report)
    from personalign.metrics.cluster import MIN_CLUSTERS, percentile_ci, resample_weights

    p = np.asarray(preds)
    if p.ndim != 2 or p.shape[0] < 1:
        raise ValueError(f"preds must be (repeats, n), got shape {p.shape}")
    runs = [as_binary(row, f"preds[{r}]") for r, row in enumerate(p)]
    t, _ = _pair(y_true, runs[0])
    if any(r.size != t.size for r in runs):
        raise ValueError(f"every run must have {t.size} predictions")
    cl = _clusters(clusters, t.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        each = [binary_report(t, r, n_boot=1, seed=seed, clusters=cl) for r in runs]
    out = binary_report(t, runs[0], n_boot=1, seed=seed, clusters=cl) if len(runs) == 1 else None
    w = resample_weights(cl, n_boot, seed)
    rng = np.random.default_rng([seed, 1])
    choice = rng.integers(0, len(runs), size=(n_boot, cl.n_clusters))[:, cl.top]  # (n_boot, n): run per cluster
    counts = [np.zeros(n_boot, dtype=np.int64) for _ in range(4)]
    for r, run in enumerate(runs):
        part = _resampled_counts(t, run, w * (choice == r))
        counts = [c + x for c, x in zip(counts, part)]
    boot = _stats_from_counts(*counts)
    too_few = not cl.singletons and cl.n_clusters < MIN_CLUSTERS
    report = {"n": int(t.size)}
    for k in _KEYS:
        report[k] = float(np.mean([e[k] for e in each]))
        report[f"{k}_ci"] = None if too_few else percentile_ci(boot[k], confidence)
    report["gold_yes_rate"] = float(t.mean())
    report["resampling"] = {**cl.describe(n_boot), "repeats": len(runs)}
    report["repeats"] = len(runs)
    report["f1_by_repeat"] = [e["f1"] for e in each]
    if not cl.singletons:
        by = {g: float(np.mean([e["f1_by_group"][g] for e in each])) for g in each[0]["f1_by_group"]}
        report["f1_by_group"], report["f1_range"] = by, [min(by.values()), max(by.values())]
    if out is not None:  # one run: exactly binary_report's point figures
        report.update({k: out[k] for k in _KEYS})
    return report
