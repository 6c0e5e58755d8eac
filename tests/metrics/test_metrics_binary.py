"""Binary metrics, bootstrap CIs, paired tests and thresholds, pinned on hand-checkable arrays."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from personalign.metrics import (
    accuracy,
    binary_report,
    bootstrap_ci,
    f1,
    fbeta,
    fit_threshold,
    mcnemar_exact,
    paired_bootstrap_diff,
    precision,
    recall,
    yes_rate,
)

# TP=3 (0,3,6), FP=2 (1,7), FN=1 (2), TN=2 (4,5)
Y = [1, 0, 1, 1, 0, 0, 1, 0]
P = [1, 1, 0, 1, 0, 0, 1, 1]


def test_point_metrics_by_hand():
    assert precision(Y, P) == pytest.approx(3 / 5)
    assert recall(Y, P) == pytest.approx(3 / 4)
    assert f1(Y, P) == pytest.approx(2 * 3 / (2 * 3 + 2 + 1))  # 2/3
    # F2 = 5 TP / (5 TP + 4 FN + FP) = 15 / 21
    assert fbeta(Y, P, beta=2) == pytest.approx(15 / 21)
    assert accuracy(Y, P) == pytest.approx(5 / 8)
    assert yes_rate(P) == pytest.approx(5 / 8)


def test_report_keys_and_ci_contain_point():
    r = binary_report(Y, P, n_boot=500, seed=3)
    assert list(r) == ["n", "f1", "f1_ci", "precision", "precision_ci", "recall", "recall_ci", "yes_rate",
                       "yes_rate_ci", "accuracy", "accuracy_ci", "gold_yes_rate", "resampling"]
    assert r["resampling"] == {"unit": "item", "n_clusters": 8, "n_boot": 500}
    assert r["n"] == 8 and r["gold_yes_rate"] == 0.5 and r["f1"] == pytest.approx(2 / 3)
    for k in ("f1", "precision", "recall", "yes_rate", "accuracy"):
        lo, hi = r[f"{k}_ci"]
        assert 0.0 <= lo <= r[k] <= hi <= 1.0
        assert isinstance(lo, float) and isinstance(hi, float)


def test_report_points_equal_sklearn():
    from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score

    rng = np.random.default_rng(5)
    for _ in range(20):
        t, p = rng.random(30) < rng.random(), rng.random(30) < rng.random()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = binary_report(t, p, n_boot=10)
        assert r["f1"] == pytest.approx(f1_score(t, p, zero_division=0))
        assert r["precision"] == pytest.approx(precision_score(t, p, zero_division=0))
        assert r["recall"] == pytest.approx(recall_score(t, p, zero_division=0))
        assert r["accuracy"] == pytest.approx(accuracy_score(t, p)) and r["yes_rate"] == pytest.approx(p.mean())


def test_report_is_seeded():
    a = binary_report(Y, P, n_boot=200, seed=7)
    assert a == binary_report(Y, P, n_boot=200, seed=7)
    assert a["f1_ci"] != binary_report(Y, P, n_boot=200, seed=8)["f1_ci"]


def test_bootstrap_matches_sklearn_on_a_resample():
    # The vectorized resampled statistics must equal scikit-learn on the same resample.
    from sklearn.metrics import f1_score

    from personalign.metrics.binary import _resampled_counts, _stats_from_counts

    rng = np.random.default_rng(0)
    t = rng.random(50) < 0.3
    p = rng.random(50) < 0.4
    idx = rng.integers(0, 50, size=(20, 50))
    weights = np.stack([np.bincount(i, minlength=50) for i in idx])  # a resample as item weights
    ours = _stats_from_counts(*_resampled_counts(t, p, weights))["f1"]
    theirs = [f1_score(t[i], p[i], zero_division=0) for i in idx]
    assert np.allclose(ours, theirs)


def test_all_negative_is_zero_never_one():
    with pytest.warns(UserWarning) as rec:
        assert f1([0, 0, 0], [0, 0, 0]) == 0.0
    msgs = " | ".join(str(w.message) for w in rec)
    assert "gold labels have no positives" in msgs and "predictions have no positives" in msgs
    with pytest.warns(UserWarning, match="predictions have no positives"):
        assert f1([1, 0, 1], [0, 0, 0]) == 0.0
    with pytest.warns(UserWarning):
        r = binary_report([0, 0, 0, 0], [0, 0, 0, 0], n_boot=50)
    assert r["f1"] == 0.0 and r["precision"] == 0.0 and r["recall"] == 0.0 and r["accuracy"] == 1.0
    assert r["f1_ci"] == [0.0, 0.0]


def test_all_yes_baseline():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # all-yes has positives on both sides: no warning
        r = binary_report([1, 0, 0, 0, 0], [1, 1, 1, 1, 1], n_boot=100)
    assert r["recall"] == 1.0 and r["precision"] == pytest.approx(0.2) and r["f1"] == pytest.approx(1 / 3)
    assert r["yes_rate"] == 1.0 and r["yes_rate_ci"] == [1.0, 1.0]


def test_input_validation():
    with pytest.raises(ValueError, match="empty"):
        f1([], [])
    with pytest.raises(ValueError, match="lengths differ"):
        f1([1, 0], [1])
    with pytest.raises(ValueError, match="0/1"):
        f1([1, 2], [1, 0])


def test_generic_bootstrap_ci():
    lo, hi = bootstrap_ci(lambda a: float(np.mean(a)), np.array([0.0, 1.0] * 50), n_boot=400, seed=1)
    assert 0.38 < lo < 0.5 < hi < 0.62


def test_mcnemar_exact_by_hand():
    y = [1, 1, 1, 1, 1, 0, 0, 0]
    a = [1, 1, 1, 1, 1, 0, 0, 0]  # all correct
    b = [0, 0, 0, 0, 1, 0, 0, 1]  # 4 misses + 1 false alarm
    r = mcnemar_exact(y, a, b)
    assert (r["b"], r["c"]) == (5, 0)
    assert r["p_value"] == pytest.approx(2 * 0.5 ** 5)  # 0.0625
    assert mcnemar_exact(y, a, a) == {"b": 0, "c": 0, "p_value": 1.0}
    r2 = mcnemar_exact(y, b, a)
    assert (r2["b"], r2["c"]) == (0, 5) and r2["p_value"] == pytest.approx(0.0625)


def test_paired_bootstrap_diff():
    y = [1, 0] * 20
    perfect = list(y)
    allyes = [1] * 40
    r = paired_bootstrap_diff(y, perfect, allyes, metric="f1", n_boot=300, seed=0)
    assert r["a"] == 1.0 and r["b"] == pytest.approx(2 / 3) and r["diff"] == pytest.approx(1 / 3)
    assert r["ci"][0] > 0 and r["p_value"] == 0.0
    same = paired_bootstrap_diff(y, allyes, allyes, n_boot=50)
    assert same["diff"] == 0.0 and same["ci"] == [0.0, 0.0] and same["p_value"] == 1.0
    with pytest.raises(ValueError, match="metric"):
        paired_bootstrap_diff(y, perfect, allyes, metric="auc")


def test_fit_threshold_midpoints_and_ties():
    # sorted scores .1(0) .35(1) .4(0) .8(1): best F1 0.8 predicting {.35,.4,.8}
    assert fit_threshold([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == pytest.approx((0.1 + 0.35) / 2)
    # perfectly separable: midpoint between the last negative and the first positive
    assert fit_threshold([0.2, 0.3, 0.6, 0.9], [0, 0, 1, 1]) == pytest.approx(0.45)
    # tied scores are one candidate: >=0.5 gives F1 0.8, >=0.9 gives 2/3
    assert fit_threshold([0.5, 0.5, 0.9], [0, 1, 1]) < 0.5
    assert fit_threshold([0.1, 0.9, 0.2, 0.8], [0, 1, 1, 0]) == pytest.approx(0.15)
    with pytest.warns(UserWarning, match="no positive"):
        assert fit_threshold([0.1, 0.2], [0, 0]) > 0.2
    with pytest.raises(ValueError):
        fit_threshold([0.1, math.nan], [0, 1])


def test_fit_threshold_tie_prefers_higher():
    # F1 = 2tp/(pp+P): >=.9 -> 2/3 ; >=.7 -> 2/4 ; >=.5 -> 2/5 ; >=.3 -> 4/6 ; all -> 4/7
    # the tie between >=.9 and >=.3 goes to the higher threshold, midpoint (.7+.9)/2
    assert fit_threshold([0.9, 0.7, 0.5, 0.3, 0.1], [1, 0, 0, 1, 0]) == pytest.approx(0.8)
