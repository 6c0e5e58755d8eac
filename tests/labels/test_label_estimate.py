"""The selection design and its estimator: probabilities that sum to one, draws spread over the
groups, and a paired F-beta difference that stays unbiased under adaptive, disagreement-seeking
draws (exact enumeration for the totals, a small Monte Carlo for the difference)."""

from __future__ import annotations

import numpy as np
import pytest

from personalign.labels.estimate import Draw, fbeta_difference, fbeta_parts, lure_weights
from personalign.labels.select import allocate, calibrate, compare_acquisition, draw


def test_lure_weights_sum_to_one_and_uniform_draws_give_the_sample_mean():
    for n, m in [(10, 1), (10, 4), (10, 9), (10, 10), (500, 37)]:
        assert lure_weights(n, m).sum() == pytest.approx(1.0)
    # uniform draws without a control: the estimate of a total is N x the sample mean of the drawn rows
    y = np.array([1, 0, 1, 1, 0, 0, 1, 0], dtype=bool)
    ones = np.ones(8, dtype=bool)
    draws = [Draw(i, "s", 1 / (8 - m)) for m, i in enumerate([5, 2, 7])]  # q = 1 / rows left
    out = fbeta_difference(y, ones, ones, draws=draws, strata=["s"] * 8)
    assert out["totals"]["positives"] == pytest.approx(8 * np.mean(y[[5, 2, 7]]))


def test_totals_are_exactly_unbiased_under_adaptive_draws():
    """Every draw sequence of a 7-row, 2-stratum population, enumerated with its probability: the draw
    probabilities depend on the labels already seen and the control changes between rounds, and
    still the expected totals are the true ones."""
    rng = np.random.default_rng(7)
    n = 7
    y, a, b = rng.random(n) < 0.5, rng.random(n) < 0.5, rng.random(n) < 0.5
    y[:3], a[:3], b[:3] = [True, True, False], [True, False, True], [True, True, False]
    strata = [0, 0, 0, 0, 1, 1, 1]
    control = rng.random(n)
    true = np.array([(y & a).sum(), (y & b).sum(), y.sum()], dtype=float)
    expected = np.zeros(3)

    def walk(seq, prob):
        nonlocal expected
        per = [sum(strata[d.row] == s for d in seq) for s in (0, 1)]
        if per == [2, 2]:
            out = fbeta_difference(y, a, b, draws=seq, strata=strata, controls=[None, control])
            expected += prob * np.array([out["totals"][k] for k in ("tp_a", "tp_b", "positives")])
            return
        s = 0 if per[0] < 2 else 1
        left = [i for i in range(n) if strata[i] == s and i not in {d.row for d in seq}]
        w = np.array([1 + a[i] + 3 * (a[i] != b[i]) + sum(y[d.row] for d in seq) for i in left], dtype=float)
        for i, q in zip(left, w / w.sum()):
            walk(seq + [Draw(i, s, float(q), round=0 if len(seq) < 2 else 1)], prob * q)

    walk([], 1.0)
    assert expected == pytest.approx(true, abs=1e-12)


def _population(n=400, seed=0):
    rng = np.random.default_rng(seed)
    strata = np.repeat(["g1", "g2", "g3", "g4"], n // 4)
    y = rng.random(n) < 0.25
    score = y + rng.normal(0, 0.8, n)  # a strategy's score, informative
    a = score > 0.6
    b = np.where(rng.random(n) < 0.25, ~a, a)  # b: a with a quarter of its decisions flipped
    return y, a, b, score, list(strata)


def _one_run(rng, y, a, b, score, strata, *, active, n_seed=40, k=60):
    n = y.size
    sizes = {s: strata.count(s) for s in dict.fromkeys(strata)}
    counts = allocate(sizes, {}, n_seed)
    seed_draws = draw(np.zeros(n), strata, [True] * n, counts, rng, floor=1.0)
    draws = [Draw(i, strata[i], q, 0) for i, q in seed_draws]
    labelled = np.zeros(n, dtype=bool)
    labelled[[d.row for d in draws]] = True
    p = calibrate(np.stack([score, a.astype(float)], axis=1), y, labelled)
    acq = compare_acquisition(a, b, p, y, labelled) if active else np.zeros(n)
    counts = allocate(sizes, {s: sum(strata[d.row] == s for d in draws) for s in sizes}, k)
    more = draw(acq, strata, ~labelled, counts, rng, floor=0.1 if active else 1.0)
    draws += [Draw(i, strata[i], q, 1) for i, q in more]
    return fbeta_difference(y, a, b, draws=draws, strata=strata, controls=[None, p]), [d.row for d in draws]


def test_active_draws_keep_the_difference_unbiased_and_the_naive_one_is_not():
    y, a, b, score, strata = _population()
    truth = fbeta_parts([(y & a).sum(), (y & b).sum(), y.sum()], a.sum(), b.sum())[0]
    rng = np.random.default_rng(1)
    est, naive, covered = [], [], 0
    for _ in range(200):
        out, rows = _one_run(rng, y, a, b, score, strata, active=True)
        est.append(out["diff"])
        covered += out["ci"][0] <= truth <= out["ci"][1]
        yy, aa, bb = y[rows], a[rows], b[rows]
        naive.append(fbeta_parts([(yy & aa).sum(), (yy & bb).sum(), yy.sum()], aa.sum(), bb.sum())[0])
    se = np.std(est) / np.sqrt(len(est))
    assert abs(np.mean(est) - truth) < 3 * se + 0.003  # a ratio estimator: bias O(1/n), small here
    assert abs(np.mean(naive) - truth) > 5 * np.std(naive) / np.sqrt(len(naive))  # the chosen rows alone: biased
    assert covered / len(est) > 0.85


def test_active_draws_narrow_the_interval_against_random_ones():
    y, a, b, score, strata = _population()
    rng = np.random.default_rng(2)
    active = np.mean([_one_run(rng, y, a, b, score, strata, active=True)[0]["se"] for _ in range(60)])
    uniform = np.mean([_one_run(rng, y, a, b, score, strata, active=False)[0]["se"] for _ in range(60)])
    assert active < uniform


def test_allocation_is_proportional_deterministic_and_capped():
    sizes = {"a": 50, "b": 30, "c": 20}
    assert allocate(sizes, {}, 10) == {"a": 5, "b": 3, "c": 2}
    step = allocate(sizes, {}, 3)
    after = allocate(sizes, {k: v for k, v in step.items()}, 7)
    assert {k: step[k] + after[k] for k in sizes} == {"a": 5, "b": 3, "c": 2}  # one batch or two: the same
    assert allocate({"a": 2, "b": 100}, {"a": 2}, 5) == {"a": 0, "b": 5}  # a group drawn out is skipped
    assert sum(allocate(sizes, {}, 1000).values()) == 100
    # every group first gets the two draws its variance needs, then the shares are proportional
    assert allocate({"big": 100, "small": 5}, {}, 4) == {"big": 2, "small": 2}
    assert allocate({"big": 100, "small": 5}, {}, 4, minimum=0) == {"big": 4, "small": 0}


def test_draw_probabilities_are_the_mixture_and_sum_to_one():
    acq = np.array([0.0, 1.0, 3.0, 0.0, 2.0, 2.0])
    strata = ["x", "x", "x", "y", "y", "y"]
    floor = 0.2
    (row, q), = draw(acq, strata, [True] * 6, {"x": 1}, np.random.default_rng(0), floor=floor)
    mixture = (1 - floor) * acq[:3] / acq[:3].sum() + floor / 3
    assert mixture.sum() == pytest.approx(1.0) and q == pytest.approx(mixture[row])
    # draws: each q is the weight over the rows still left in its stratum; every row reachable
    picks = draw(acq, strata, [True] * 6, {"x": 3, "y": 2}, np.random.default_rng(3), floor=floor)
    assert sorted(strata[i] for i, _ in picks) == ["x", "x", "x", "y", "y"]
    assert picks[2][1] == pytest.approx(1.0)  # the last row of x: certain
    counts = np.zeros(3)
    rng = np.random.default_rng(4)
    for _ in range(4000):
        counts[draw(acq, strata, [True] * 6, {"x": 1}, rng, floor=floor)[0][0]] += 1
    assert counts / counts.sum() == pytest.approx(mixture, abs=0.03)
    with pytest.raises(ValueError):
        draw(acq, strata, [True] * 6, {"x": 4}, rng)
    with pytest.raises(ValueError):
        draw(-acq, strata, [True] * 6, {"x": 1}, rng)


def test_estimator_refuses_a_stratum_without_draws_and_says_when_no_interval():
    y = np.array([True, False, True, False])
    with pytest.raises(ValueError, match="no drawn row"):
        fbeta_difference(y, y, y, draws=[Draw(0, "s", 0.5)], strata=["s", "s", "t", "t"])
    out = fbeta_difference(y, y, ~y, draws=[Draw(0, "s", 0.5), Draw(2, "t", 0.5)], strata=["s", "s", "t", "t"])
    assert out["se"] is None and out["p_value"] is None  # one draw per stratum: no variance estimate
    known = fbeta_difference(y, y, ~y, draws=[], strata=[None] * 4, known=[0, 1, 2, 3])
    assert known["diff"] == pytest.approx(1.0) and known["se"] == 0.0  # every row known: exact
