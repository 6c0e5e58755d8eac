"""Agreement metrics: κ, weighted κ, Spearman, MCQ accuracy — pinned values and edge cases."""

from __future__ import annotations

import math

import pytest

from personalign.metrics import (
    cohen_kappa,
    kappa_vs_majority,
    majority_vote,
    mcq_accuracy,
    pairwise_kappa,
    quadratic_weighted_kappa,
    spearman,
)


def test_cohen_kappa_by_hand():
    # p_o = 3/4; rater a: 2 yes/2 no, rater b: 1 yes/3 no -> p_e = .5*.25 + .5*.75 = .5 -> kappa .5
    assert cohen_kappa([0, 1, 1, 0], [0, 1, 0, 0]) == pytest.approx(0.5)
    assert cohen_kappa(["y", "n", "y"], ["y", "n", "y"]) == pytest.approx(1.0)


def test_kappa_single_label_is_undefined_never_one():
    with pytest.warns(UserWarning, match="undefined"):
        k = cohen_kappa([1, 1, 1], [1, 1, 1])
    assert math.isnan(k)
    # one constant rater against a varying one is defined: p_o = p_e -> 0
    assert cohen_kappa([1, 1, 1, 1], [1, 0, 1, 0]) == pytest.approx(0.0)


def test_quadratic_weighted_kappa():
    assert quadratic_weighted_kappa([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]) == pytest.approx(1.0)
    # one 4-vs-5 miss: sum(W*O) = 1/16, sum(W*E) = 23/16 -> 1 - 1/23 = 22/23
    assert quadratic_weighted_kappa([1, 2, 3, 4, 5], [1, 2, 3, 5, 5]) == pytest.approx(22 / 23)
    # full reversal is maximal disagreement
    assert quadratic_weighted_kappa([1, 5], [5, 1]) == pytest.approx(-1.0)
    with pytest.warns(UserWarning, match="undefined"):
        assert math.isnan(quadratic_weighted_kappa([3, 3], [3, 3]))
    with pytest.raises(ValueError, match="outside"):
        quadratic_weighted_kappa([0, 3], [3, 3])


def test_qwk_uses_the_full_scale():
    # Observed ratings {1, 2, 5}: on the 1..5 scale a 2-vs-5 miss weighs (3/4)^2, not as
    # "adjacent categories" (which is what labels inferred from the data would give: 0.5714).
    # Hand: 1 - sum(W*O)/sum(W*E) with W_ij = ((i-j)/4)^2, E = outer(row, col)/n -> 12/31.
    a, b = [1, 2, 5, 5, 1], [1, 5, 2, 5, 2]
    assert quadratic_weighted_kappa(a, b) == pytest.approx(12 / 31)
    assert quadratic_weighted_kappa(a, b, labels=[1, 2, 5]) == pytest.approx(0.5714285714285715)


def test_spearman_ties_and_constant():
    # average ranks: a -> [1, 2.5, 2.5, 4], b -> [1, 3, 2, 4]; Pearson on ranks = 0.9486832980505139
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(0.9486832980505139)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    with pytest.warns(UserWarning, match="constant"):
        assert math.isnan(spearman([2, 2, 2], [1, 2, 3]))


def test_mcq_accuracy():
    assert mcq_accuracy([0, 1, 2, 3], [0, 1, 0, 0]) == pytest.approx(0.5)


def test_majority_ties_are_no():
    assert majority_vote([True, True, False]) is True
    assert majority_vote([True, False]) is False


def test_pairwise_kappa_reports_undefined():
    ratings = {
        "ann1": {"i1": 1, "i2": 0, "i3": 1, "i4": 0},
        "ann2": {"i1": 1, "i2": 0, "i3": 0, "i4": 0},
        "ann3": {"x1": 1, "x2": 1},
        "ann4": {"x1": 1, "x2": 1},
    }
    rows = {(r["a"], r["b"]): r for r in pairwise_kappa(ratings)}
    assert rows[("ann1", "ann2")]["kappa"] == pytest.approx(0.5) and rows[("ann1", "ann2")]["n"] == 4
    assert rows[("ann1", "ann3")]["kappa"] is None and rows[("ann1", "ann3")]["undefined"] == "no shared items"
    assert rows[("ann3", "ann4")]["kappa"] is None and "single identical label" in rows[("ann3", "ann4")]["undefined"]


def test_kappa_vs_majority_leave_one_out():
    r = {
        "a": {1: True, 2: False, 3: True, 4: False},
        "b": {1: True, 2: False, 3: True, 4: True},
        "c": {1: True, 2: False, 3: False, 4: False},
    }
    out = {x["rater"]: x for x in kappa_vs_majority(r)}
    # for 'a', the others (b, c) on items 1..4: majority(T,T)=T, (F,F)=F, (T,F)=F tie, (T,F)=F
    # a = [T,F,T,F] vs [T,F,F,F] -> kappa 0.5
    assert out["a"]["kappa"] == pytest.approx(0.5) and out["a"]["n"] == 4
