"""The paired test of a set objective, and how a table names and prints it.

A comparison table shows the difference of a set objective (F1, F-beta, Cohen's kappa, accuracy,
macro F1, the mean of a per-row metric) between two strategies scored on the same rows. Its p is a
**paired permutation test of that same difference** (approximate randomization: Noreen 1989;
Yeh 2000 for F-scores, which are not means over rows; Dror et al. 2018):

* under the null hypothesis the two strategies are exchangeable, so on each unit either
  strategy's predictions could have been the other's. A permutation swaps the two strategies'
  predictions on whole **groups** (the stage's top-level clusters: prompts; with a single group,
  its users or its rows; without groups, rows) -- the unit the intervals resample, so correlated
  rows move together;
* the statistic is ``objective(a') - objective(b')`` over all the rows, computed from the swapped
  groups' additive totals (confusion counts, or sums of per-row scores), vectorized;
* ``scipy.stats.permutation_test`` (``permutation_type="samples"``) enumerates all 2^G swaps
  exactly when 2^G <= ``n_resamples`` (G <= 13 at the default 9999), smallest reachable two-sided
  p = 2 / 2^G (4 prompts: 0.125); otherwise it draws ``n_resamples`` seeded swaps, p = (1 + hits) /
  (1 + n_resamples).

:func:`permutation_test_of_totals` is the test on per-row additive contributions
(:func:`permutation_test_of_swaps` on any statistic of the swapped groups);
:func:`objective_of_counts` turns a confusion matrix into each label objective.
:func:`comparison_test`, :func:`describe_test`, :func:`p_header` and :func:`p_parts` are the one place
a table (the command line's and the results page's) finds, names and prints the test of a
comparison, for new results and for result files written before this test existed (a sign-flip
test of per-cluster differences; McNemar's test of accuracy).
"""

from __future__ import annotations

import warnings
from typing import Callable, Sequence

import numpy as np

__all__ = ["N_RESAMPLES", "LABEL_OBJECTIVES", "objective_of_counts", "confusion_cells", "permutation_test_of_totals",
           "permutation_test_of_swaps", "p_note",
           "comparison_test", "describe_test", "p_header", "p_parts", "unit_noun"]

N_RESAMPLES = 9999
"""Monte-Carlo swaps beyond exact enumeration (exact while 2^G <= this: G <= 13)."""
LABEL_OBJECTIVES = ("f1", "fbeta", "kappa", "accuracy", "macro_f1")
"""The label objectives :func:`objective_of_counts` computes from a confusion matrix."""


def _div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.zeros(np.broadcast(num, den).shape, dtype=float)
    np.divide(num, den, out=out, where=den > 0)
    return out


def confusion_cells(gold: Sequence, pred: Sequence, labels: Sequence) -> np.ndarray:
    """(n,) index of each row's confusion cell ``gold_index * K + pred_index`` over ``labels`` (K)."""
    index = {lab: i for i, lab in enumerate(labels)}
    k = len(labels)
    return np.array([index[g] * k + index[p] for g, p in zip(gold, pred)], dtype=np.int64)


def objective_of_counts(name: str, counts: np.ndarray, *, positive: int | None = None, beta: float = 1.0,
                        gold_present: Sequence[int] = ()) -> np.ndarray:
    """A label objective of confusion matrices ``counts`` (..., K, K; rows gold, columns predicted).

    Args:
        name: ``fbeta`` (F-beta of the class ``positive``; ``f1`` is beta 1), ``accuracy``, ``kappa``
            (Cohen's; NaN where the expected agreement is 1), ``macro_f1`` (the mean per-label F1 over
            ``gold_present``, the labels the gold holds).
    Returns:
        (...) floats, equal to scikit-learn's ``fbeta_score`` / ``accuracy_score`` /
        ``cohen_kappa_score`` / ``f1_score(average="macro", labels=gold_present)`` with
        ``zero_division=0`` on the same rows.
    """
    c = np.asarray(counts, dtype=float)
    n = c.sum(axis=(-2, -1))
    diag = np.diagonal(c, axis1=-2, axis2=-1)
    if name in ("f1", "fbeta"):
        b2 = 1.0 if name == "f1" else beta * beta
        tp = c[..., positive, positive]
        fn = c[..., positive, :].sum(axis=-1) - tp
        fp = c[..., :, positive].sum(axis=-1) - tp
        return _div((1 + b2) * tp, (1 + b2) * tp + b2 * fn + fp)
    if name == "accuracy":
        return _div(diag.sum(axis=-1), n)
    if name == "kappa":
        po = _div(diag.sum(axis=-1), n)
        pe = _div((c.sum(axis=-1) * c.sum(axis=-2)).sum(axis=-1), n * n)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(np.isclose(pe, 1.0), np.nan, (po - pe) / (1 - pe))
    if name == "macro_f1":
        idx = list(gold_present)
        f1 = _div(2 * diag[..., idx], c.sum(axis=-1)[..., idx] + c.sum(axis=-2)[..., idx])
        return f1.mean(axis=-1)
    raise ValueError(f"no confusion-matrix form of objective {name!r}; use one of {', '.join(LABEL_OBJECTIVES)}")


def permutation_test_of_totals(contrib_a: np.ndarray, contrib_b: np.ndarray, statistic: Callable[[np.ndarray], np.ndarray],
                               groups: np.ndarray, *, n_resamples: int = N_RESAMPLES, seed: int = 0) -> dict:
    """Paired permutation test of ``statistic(totals of a) - statistic(totals of b)``, swapping the
    two systems' rows group by group.

    Args:
        contrib_a, contrib_b: (n, m) per-row additive contributions of each system (a one-hot of the
            row's confusion cell, or its score); a row's totals are their column sums.
        statistic: (..., m) totals -> (...) objective values.
        groups: (n,) int group codes 0..G-1: the units swapped whole.
        n_resamples, seed: Monte-Carlo swaps when 2^G > n_resamples, and their seed.

    Returns:
        ``{"p_value", "p_min", "exact", "n_resamples", "n_clusters", "a", "b", "diff"}``: two-sided
        p (``scipy.stats.permutation_test``, ``permutation_type="samples"``); ``p_min`` the smallest
        p it could reach (exact: 2 / 2^G; Monte Carlo: 2 / (1 + n_resamples)); ``a``, ``b`` the
        systems' objectives and ``diff`` = a - b (None and p None when the objective is undefined).
    """
    a, b = np.asarray(contrib_a, dtype=float), np.asarray(contrib_b, dtype=float)
    codes = np.asarray(groups, dtype=np.int64)
    g = int(codes.max()) + 1 if codes.size else 0
    onehot = (codes[None, :] == np.arange(g)[:, None]).astype(float)  # (G, n)
    ga, gb = onehot @ a, onehot @ b  # (G, m) per-group totals

    def of_swaps(swapped: np.ndarray) -> np.ndarray:
        s = swapped.astype(float)
        return statistic((1 - s) @ ga + s @ gb) - statistic(s @ ga + (1 - s) @ gb)

    va, vb = float(statistic(ga.sum(axis=0))), float(statistic(gb.sum(axis=0)))
    return {**permutation_test_of_swaps(of_swaps, g, n_resamples=n_resamples, seed=seed, width=ga.shape[1]),
            "a": _finite(va), "b": _finite(vb), "diff": _finite(va - vb)}


def permutation_test_of_swaps(statistic: Callable[[np.ndarray], np.ndarray], n_groups: int, *,
                              n_resamples: int = N_RESAMPLES, seed: int = 0, width: int = 1) -> dict:
    """Two-sided paired permutation test over swaps of ``n_groups`` groups.

    Args:
        statistic: (..., G) booleans (True: the group's predictions swapped between the systems)
            -> (...) the difference a - b on the swapped rows; no swap is the observed difference.
        width: the size of the statistic's work per group, to bound a batch's memory.

    Returns:
        ``{"p_value", "p_min", "exact", "n_resamples", "n_clusters"}`` (p None when the observed
        difference is not finite, or there are no groups).
    """
    from scipy.stats import permutation_test

    g = int(n_groups)
    exact = g > 0 and 2 ** g <= n_resamples
    out = {"n_clusters": g, "exact": bool(exact), "n_resamples": 2 ** g if exact else n_resamples}
    observed = float(statistic(np.zeros(g, dtype=bool))) if g else float("nan")
    if not np.isfinite(observed):
        return {**out, "p_value": None, "p_min": None}

    def stat(x, y, axis=-1):  # x: (..., G) group ids; g + id where the swap took b's rows as a's
        return statistic(np.asarray(x) >= g)

    ids = np.arange(g)
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")
        res = permutation_test((ids, ids + g), stat, permutation_type="samples", vectorized=True,
                               n_resamples=n_resamples, batch=max(1, 4_000_000 // max(1, g * width)),
                               rng=np.random.default_rng(seed))
    p_min = 2.0 / 2 ** g if exact else 2.0 / (1 + n_resamples)
    return {**out, "p_value": float(min(1.0, res.pvalue)), "p_min": float(min(1.0, p_min))}


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


# --- what a table prints --------------------------------------------------------------------


def unit_noun(unit: str | None) -> str:
    """The unit a test swaps or resamples, for a label: ``prompt_id`` -> ``prompt``, ``item`` -> ``row``."""
    if not unit or unit == "item":
        return "row"
    return unit.removesuffix("_id") or unit


def comparison_test(vs: dict) -> tuple[dict | None, dict]:
    """``(test, diff)``: the test a table shows for a comparison ``vs`` (a row's ``vs_first`` or
    ``vs_uncompiled``, or a difference dict) and the dict holding its difference (``ci``, ``mde``).

    The test is ``vs["paired_test"]`` (the objective's paired permutation test); in a result
    written before it existed, or in a leave-one-group-out row, the sign-flip test of the
    per-cluster differences (``permutation``) with its Holm-adjusted ``p_holm``; else None."""
    diff = vs.get("diff") if isinstance(vs.get("diff"), dict) else vs
    test = vs.get("paired_test")
    if test is None and diff.get("permutation") is not None:
        test = {**diff["permutation"], **({"p_holm": diff["p_holm"]} if "p_holm" in diff else {})}
    return test, diff


def describe_test(test: dict | None, mcnemar: dict | None = None) -> str:
    """What a test is, in words (a column header's): ``paired permutation of f1 over prompts`` (the
    unit swapped; :func:`p_note` says when it is within one group), ``sign-flip of per-prompt f1
    differences``, ``McNemar, item-level: a test of accuracy``; ``""`` for none."""
    if test is None:
        return "McNemar, item-level: a test of accuracy" if mcnemar is not None else ""
    kind, stat, unit = test.get("test", "sign-flip"), test.get("statistic"), test.get("unit")
    if kind == "paired permutation":
        return f"paired permutation of {stat or 'the difference'} over {unit_noun(unit)}s"
    if stat and unit:
        return f"sign-flip of per-{unit_noun(unit)} {stat} differences"
    return f"{kind} over clusters"


def p_header(result: dict) -> str:
    """The p column's header of a compare result: ``p (<the test of the first comparison>)``."""
    for row in result.get("strategies", []):
        vs = row.get("vs_first")
        if vs:
            label = describe_test(comparison_test(vs)[0], vs.get("mcnemar"))
            return f"p ({label})" if label else "p"
    return "p"


def p_parts(vs: dict, mcnemar: dict | None = None) -> tuple[str, list[str]]:
    """The p of a comparison as printed: ``(p, notes)``. ``p`` is Holm-adjusted when the result holds
    it; the notes say ``Holm``, the smallest reachable p, and when not significant why: too few
    clusters for any test to reach 0.05, or the minimum detectable effect of the difference shown
    (when the test is of that difference). Without a test: the item-level McNemar p, labelled a test
    of accuracy; without either, ``"-"``."""
    test, diff = comparison_test(vs)
    mcnemar = mcnemar if mcnemar is not None else vs.get("mcnemar")
    if test is None or test.get("p_value") is None:
        if mcnemar is None:
            return "-", ([] if test is None else ["objective undefined"])
        return f"{mcnemar['p_value']:.3g}", ["McNemar, item-level: a test of accuracy"]
    holm = "p_holm" in test
    p = test["p_holm"] if holm else test["p_value"]
    notes = (["Holm"] if holm else []) + [f"min {test['p_min']:.3g}"]
    same = test.get("statistic") in (None, diff.get("metric"))
    if p >= 0.05 and test["p_min"] >= 0.05:
        notes.append("too few clusters to show a difference")
    elif p >= 0.05 and same and diff.get("mde") is not None and diff.get("ci") is not None:
        notes.append(f"no difference shown, MDE ±{diff['mde']:.2f}")  # an MDE needs >= 5 clusters' SE
    return f"{p:.3g}", notes


def p_note(result: dict) -> str | None:
    """The line under a compare table saying what its p is (None with no comparison): the test, on
    what it swaps, exact or Monte Carlo with the smallest reachable p, Holm, and (single split) when
    the objective tested is not the metric of the Δ column."""
    compared = [r["vs_first"] for r in result.get("strategies", []) if r.get("vs_first")]
    if not compared:
        return None
    test, diff = comparison_test(compared[0])
    holm = "; Holm-adjusted over the comparisons" if len(result["strategies"]) > 2 else ""
    if test is None:
        return f"p: {describe_test(None, compared[0].get('mcnemar'))}{holm}"
    reach = (f"exact over 2^{test['n_clusters']} swaps" if test.get("exact") else
             f"{test.get('n_resamples')} seeded random swaps") + (
        f" (smallest reachable p = {test['p_min']:.3g})" if test.get("p_min") is not None else "")
    if test.get("test") == "paired permutation":
        within = f" within one {unit_noun(test['within'])}" if test.get("within") else ""
        line = (f"p: paired permutation test of the {test['statistic']} difference (the stage's objective) on the same "
                f"rows: the two strategies' predictions swapped whole per {unit_noun(test.get('unit'))}{within}, "
                f"{reach}{holm}")
        metric = diff.get("metric") or result.get("metric")
        if metric and test.get("statistic") != metric:
            line += f"; the Δ column is {metric}, the test is of {test['statistic']}"
        return line
    unit = unit_noun(test.get("unit")) if test.get("unit") else "cluster"
    reach = reach.replace("swaps", "sign vectors")
    return (f"p: sign-flip permutation of the per-{unit} {test.get('statistic') or 'metric'} differences (tests the "
            f"headline's difference), {reach}{holm}")
