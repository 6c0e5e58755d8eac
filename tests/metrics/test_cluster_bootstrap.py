"""Cluster bootstrap, sign-flip test, Holm and MDE on synthetic clustered data with known truth."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest

from personalign.metrics import binary_report, paired_bootstrap_diff
from personalign.metrics.cluster import (MDE_Z, holm, make_clusters, minimum_detectable_effect, resample_weights,
                                         sign_flip_test)

TRUTH = 0.5


def _clustered(rng, g: int = 30, m: int = 10, a: float = 0.3):
    """g clusters of m items; item i of cluster c is correct with probability p_c ~ Beta(a, a)
    (mean 0.5, intra-cluster correlation 1 / (2a + 1) = 0.625 for a = 0.3)."""
    p = rng.beta(a, a, size=g)
    pred = rng.random((g, m)) < p[:, None]
    return np.ones(g * m, dtype=bool), pred.ravel(), np.repeat(np.arange(g), m)


def test_cluster_interval_wider_than_item_interval_and_covers_at_stated_rate():
    rng = np.random.default_rng(12345)
    t0 = time.perf_counter()
    covered, wider = 0, 0
    draws = 200
    for i in range(draws):
        y, p, cl = _clustered(rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clus = binary_report(y, p, n_boot=400, seed=i, clusters=[cl])
            item = binary_report(y, p, n_boot=400, seed=i)
        lo, hi = clus["accuracy_ci"]
        covered += lo <= TRUTH <= hi
        wider += (hi - lo) > (item["accuracy_ci"][1] - item["accuracy_ci"][0])
        assert clus["accuracy"] == item["accuracy"] == p.mean()
        assert clus["resampling"] == {"unit": "level0", "n_clusters": 30, "n_boot": 400}
    elapsed = time.perf_counter() - t0
    assert 0.90 <= covered / draws <= 0.99, covered / draws
    assert wider == draws  # ICC 0.625, 10 items a cluster: the design effect is about 6.6
    assert elapsed < 30, elapsed


def test_item_interval_undercovers_clustered_data():
    # the failure the cluster bootstrap fixes: an item interval misses the truth far too often
    rng = np.random.default_rng(7)
    covered = 0
    for i in range(100):
        y, p, _ = _clustered(rng)
        lo, hi = binary_report(y, p, n_boot=300, seed=i)["accuracy_ci"]
        covered += lo <= TRUTH <= hi
    assert covered < 70


def test_singleton_clusters_agree_with_item_bootstrap():
    rng = np.random.default_rng(0)
    y, p = rng.random(80) < 0.4, rng.random(80) < 0.5
    item = binary_report(y, p, n_boot=500, seed=3)
    single = binary_report(y, p, n_boot=500, seed=3, clusters=[[f"id{i}" for i in range(80)]])
    for k in ("f1_ci", "precision_ci", "recall_ci", "accuracy_ci", "yes_rate_ci"):
        assert single[k] == item[k]
    q = rng.random(80) < 0.5
    d_item = paired_bootstrap_diff(y, p, q, n_boot=500, seed=3)
    d_single = paired_bootstrap_diff(y, p, q, n_boot=500, seed=3, clusters=[list(range(80))])
    assert d_single["ci"] == d_item["ci"] and d_single["mde"] == pytest.approx(d_item["mde"])


def test_fewer_than_five_clusters_warns_and_reports_the_range():
    y = [1, 0, 1, 1, 0, 1, 0, 1, 1, 0, 1, 0]
    p = [1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 1, 1]
    groups = ["a"] * 3 + ["b"] * 3 + ["c"] * 3 + ["d"] * 3
    with pytest.warns(UserWarning, match=r"only 4 .*cluster.*no percentile interval"):
        r = binary_report(y, p, n_boot=200, seed=0, clusters=[groups])
    assert r["f1_ci"] is None and r["accuracy_ci"] is None
    assert r["resampling"]["n_clusters"] == 4
    by = r["f1_by_group"]
    assert set(by) == {"a", "b", "c", "d"}
    assert by["a"] == pytest.approx(2 * 1 / (2 * 1 + 1 + 0))  # a: TP=1, FN=1, FP=0
    assert r["f1_range"] == [min(by.values()), max(by.values())]


def test_two_stage_weights_draw_inner_units_inside_drawn_clusters():
    prompts = np.repeat(["p0", "p1", "p2"], 12)
    users = np.tile(np.repeat(["u0", "u1", "u2", "u3"], 3), 3)
    cl = make_clusters([prompts, users], prompts.size, ["prompt_id", "user_id"])
    assert cl.unit == "prompt_id > user_id" and cl.n_clusters == 3
    w = resample_weights(cl, 50, seed=1)
    assert w.shape == (50, 36)
    assert (w.sum(axis=1) == 36).all()  # 3 prompt draws x 4 user draws x 3 items
    for c in range(3):  # a user's items are drawn together
        block = w[:, c * 12:(c + 1) * 12].reshape(50, 4, 3)
        assert (block == block[:, :, :1]).all()


def test_one_top_cluster_resamples_its_inner_units():
    cl = make_clusters([["p"] * 10, [f"u{i // 2}" for i in range(10)]], 10, ["prompt_id", "user_id"])
    assert cl.unit == "user_id within one prompt_id" and cl.n_clusters == 5


def test_sign_flip_exact_smallest_p_with_four_clusters():
    r = sign_flip_test([0.1, 0.2, 0.05, 0.3])
    assert r["exact"] and r["p_min"] == pytest.approx(0.125) and r["p_value"] == pytest.approx(0.125)
    r = sign_flip_test([0.1, -0.1, 0.1, -0.1])
    assert r["p_value"] == pytest.approx(1.0)
    # by hand: diffs (1, 2, -0.5): |mean| >= 2.5/3 for the sign vectors (+,+,-), (-,-,+), (+,+,+), (-,-,-)
    assert sign_flip_test([1.0, 2.0, -0.5])["p_value"] == pytest.approx(4 / 8)


def test_sign_flip_monte_carlo_beyond_exact():
    d = np.full(30, 0.1)
    r = sign_flip_test(d, n_perm=2000, seed=0)
    assert not r["exact"] and r["p_value"] == pytest.approx(1 / 2001)


def test_paired_clustered_difference_reports_permutation_and_mde():
    rng = np.random.default_rng(3)
    y, a, cl = _clustered(rng, g=8)
    b = a.copy()
    b[:20] = ~b[:20]
    d = paired_bootstrap_diff(y, a, b, metric="accuracy", n_boot=300, seed=0, clusters=[cl])
    assert d["permutation"]["n_clusters"] == 8 and d["permutation"]["p_min"] == pytest.approx(2 / 256)
    assert d["mde"] == pytest.approx(MDE_Z * d["se"])
    assert d["ci"][0] <= d["diff"] <= d["ci"][1]


def test_holm_matches_statsmodels_and_hand_computation():
    from statsmodels.stats.multitest import multipletests

    p = [0.01, 0.04, 0.03, 0.20]
    ours = holm(p)
    assert ours == pytest.approx(list(multipletests(p, method="holm")[1]))
    # by hand: sorted 0.01, 0.03, 0.04, 0.20 times 4, 3, 2, 1 with a running max
    assert ours == pytest.approx([0.04, 0.09, 0.09, 0.20])


def test_mde_is_z_times_sd():
    s = np.array([0.0, 0.1, -0.1, 0.2])
    assert minimum_detectable_effect(s) == pytest.approx(2.8 * s.std(ddof=1))


def test_repeats_spread_widens_the_interval_and_one_repeat_equals_the_report():
    from personalign.metrics.repeats import repeated_binary_report

    rng = np.random.default_rng(11)
    y, p, cl = _clustered(rng, g=20)
    one = repeated_binary_report(y, p[None, :], n_boot=300, seed=2, clusters=[cl])
    plain = binary_report(y, p, n_boot=300, seed=2, clusters=[cl])
    assert one["accuracy"] == plain["accuracy"] and one["repeats"] == 1
    # five noisy runs: each flips a random 40% of the predictions
    runs = np.array([np.where(rng.random(p.size) < 0.4, ~p, p) for _ in range(5)])
    rep = repeated_binary_report(y, runs, n_boot=300, seed=2, clusters=[cl])
    assert rep["accuracy"] == pytest.approx(np.mean([r.mean() for r in runs]))
    assert rep["resampling"]["repeats"] == 5 and len(rep["f1_by_repeat"]) == 5
    assert rep["accuracy_ci"][0] <= rep["accuracy"] <= rep["accuracy_ci"][1]
    with pytest.raises(ValueError, match=r"\(repeats, n\)"):
        repeated_binary_report(y, p, n_boot=10)
