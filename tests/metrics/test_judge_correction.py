"""Rogan–Gladen judge correction: a synthetic judge with known error rates."""

from __future__ import annotations

import numpy as np
import pytest

from personalign.metrics.judge_correction import corrected_rate, rogan_gladen, sensitivity_specificity


def _judge(rng, truth: np.ndarray, se: float, sp: float) -> np.ndarray:
    return np.where(truth, rng.random(truth.size) < se, rng.random(truth.size) >= sp)


def test_rogan_gladen_by_hand():
    # q = 0.8·0.3 + 0.1·0.7 = 0.31 with Se 0.8, Sp 0.9 inverts to 0.3
    assert rogan_gladen(0.31, 0.8, 0.9) == pytest.approx(0.3)
    assert rogan_gladen(0.05, 0.8, 0.9) == 0.0  # clipped
    assert np.isnan(rogan_gladen(0.5, 0.5, 0.5))


def test_synthetic_judge_recovers_the_true_rate_within_its_interval():
    rng = np.random.default_rng(2024)
    true_rate, se, sp = 0.35, 0.75, 0.8
    hits, raw, corrected = 0, [], []
    for i in range(60):
        truth = rng.random(400) < true_rate
        judged = _judge(rng, truth, se, sp)
        val_gold = np.repeat([True, False], 150)  # a validation set like labelled pairs: one of each
        val_pred = _judge(rng, val_gold, se, sp)
        r = corrected_rate(judged, val_gold, val_pred, n_boot=500, seed=i,
                           val_clusters=[np.tile(np.arange(150), 2)])
        hits += r["ci"][0] <= true_rate <= r["ci"][1]
        raw.append(r["observed"])
        corrected.append(r["corrected"])
    assert hits >= 54  # ~95% nominal over 60 draws
    # the raw judge rate is biased (expected 0.75·0.35 + 0.2·0.65 = 0.3925); the corrected one is not
    assert np.mean(raw) - true_rate > 0.03
    assert abs(np.mean(corrected) - true_rate) < 0.015


def test_refuses_a_judge_no_better_than_chance():
    gold = np.array([True, False] * 20)
    with pytest.raises(ValueError, match="no better than chance"):
        corrected_rate([True, False, True], gold, ~gold)
    with pytest.raises(ValueError, match="both classes"):
        sensitivity_specificity([True, True], [True, False])
