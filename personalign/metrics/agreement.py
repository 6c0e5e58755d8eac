"""Agreement between raters (humans or systems): Cohen's κ, quadratic-weighted κ, Spearman ρ,
MCQ accuracy.

Edge-case policy (pinned by tests):

* **κ undefined.** When expected agreement is 1 (both raters used one and the same single
  label, so p_e = 1 and κ = (p_o − p_e)/(1 − p_e) is 0/0) κ is undefined: the functions
  return ``nan`` and warn, and report dicts carry ``kappa: None`` with ``"undefined"``
  set. κ is never reported as 1 in that case (scikit-learn issues #9624, #14256).
  If only one rater is constant, κ is defined (and is 0 when the other rater varies).
* **Quadratic-weighted κ** uses the full 1–5 scale as categories (``labels=[1..5]``) so
  weights do not depend on which values happen to occur; undefined (nan) when the weighted
  expected disagreement is 0.
* **Spearman ρ ties** get average ranks (``scipy.stats.spearmanr``), i.e. ρ is Pearson's r on
  mid-ranks; a constant input makes ρ undefined → ``nan`` with a warning.

Sources: Cohen (1960) for κ; Cohen (1968) for weighted κ; computations via
``sklearn.metrics.cohen_kappa_score`` and ``scipy.stats.spearmanr``.
"""

from __future__ import annotations

import itertools
import math
import warnings
from typing import Hashable, Mapping, Sequence

import numpy as np

__all__ = [
    "cohen_kappa",
    "quadratic_weighted_kappa",
    "spearman",
    "mcq_accuracy",
    "pairwise_kappa",
    "kappa_vs_majority",
    "majority_vote",
]

RATING_SCALE = (1, 2, 3, 4, 5)


def _two(a, b) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(a), np.asarray(b)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"need two 1-D arrays of equal length, got shapes {x.shape} and {y.shape}")
    if x.size == 0:
        raise ValueError("no items: agreement is undefined on an empty set")
    return x, y


def cohen_kappa(a: Sequence, b: Sequence) -> float:
    """Cohen's κ between two raters' labels on the same n items (any hashable labels).

    Returns ``nan`` (with a ``UserWarning``) when κ is undefined: both raters used a single,
    identical label. Never returns 1.0 for that case.
    """
    from sklearn.metrics import cohen_kappa_score

    x, y = _two(a, b)
    if np.unique(np.concatenate([x, y])).size == 1:
        warnings.warn("Cohen's kappa undefined: both raters used a single identical label (p_e = 1)",
                      UserWarning, stacklevel=2)
        return float("nan")
    return float(cohen_kappa_score(x, y))


def quadratic_weighted_kappa(a: Sequence[int], b: Sequence[int], labels: Sequence[int] = RATING_SCALE) -> float:
    """Quadratic-weighted κ between two raters' 1–5 ratings (Cohen 1968).

    ``labels`` fixes the category set (default 1..5). Returns ``nan`` with a warning when
    undefined (zero weighted expected disagreement, e.g. both raters constant and equal).

    Raises:
        ValueError: a rating outside ``labels``.
    """
    from sklearn.metrics import cohen_kappa_score

    x, y = _two(a, b)
    bad = set(np.unique(np.concatenate([x, y])).tolist()) - set(labels)
    if bad:
        raise ValueError(f"ratings outside {list(labels)}: {sorted(bad)}")
    if np.unique(np.concatenate([x, y])).size == 1:
        warnings.warn("quadratic-weighted kappa undefined: both raters used a single identical rating",
                      UserWarning, stacklevel=2)
        return float("nan")
    return float(cohen_kappa_score(x, y, labels=list(labels), weights="quadratic"))


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's ρ (average ranks for ties, ``scipy.stats.spearmanr``); ``nan`` with a
    warning when either input is constant (ρ undefined)."""
    from scipy.stats import spearmanr

    x, y = _two(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    if np.unique(x).size == 1 or np.unique(y).size == 1:
        warnings.warn("Spearman rho undefined: an input is constant", UserWarning, stacklevel=2)
        return float("nan")
    return float(spearmanr(x, y).statistic)


def mcq_accuracy(gold_index: Sequence[int], pred_index: Sequence[int]) -> float:
    """Share of questions whose predicted option index equals the gold index."""
    x, y = _two(gold_index, pred_index)
    return float(np.mean(x == y))


def majority_vote(votes: Sequence[bool]) -> bool:
    """Majority of binary votes; ties count as False (the recenter convention:
    relevant iff yes-rate > 0.5)."""
    if len(votes) == 0:
        raise ValueError("no votes")
    return sum(bool(v) for v in votes) / len(votes) > 0.5


def _kappa_entry(x: list, y: list) -> dict:
    n = len(x)
    if n == 0:
        return {"n": 0, "kappa": None, "undefined": "no shared items"}
    if len(set(x) | set(y)) == 1:
        return {"n": n, "kappa": None, "undefined": "both raters used a single identical label"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = cohen_kappa(x, y)
    if math.isnan(k):
        return {"n": n, "kappa": None, "undefined": "kappa is 0/0"}
    return {"n": n, "kappa": k, "undefined": None}


def pairwise_kappa(ratings: Mapping[str, Mapping[Hashable, Hashable]]) -> list[dict]:
    """Cohen's κ for every pair of raters on the items both rated.

    Args:
        ratings: ``{rater: {item_id: label}}``.

    Returns:
        one dict per pair (sorted by rater names): ``{"a", "b", "n", "kappa", "undefined"}``;
        ``kappa`` is None and ``undefined`` names the reason when κ is undefined or the
        raters share no item.
    """
    out = []
    for ra, rb in itertools.combinations(sorted(ratings), 2):
        common = sorted(set(ratings[ra]) & set(ratings[rb]), key=repr)
        entry = _kappa_entry([ratings[ra][i] for i in common], [ratings[rb][i] for i in common])
        out.append({"a": ra, "b": rb, **entry})
    return out


def kappa_vs_majority(ratings: Mapping[str, Mapping[Hashable, bool]], *, leave_one_out: bool = True,
                      min_others: int = 2) -> list[dict]:
    """Cohen's κ of each rater against the majority of the raters (binary labels).

    With ``leave_one_out`` (default) the majority for rater r on an item is taken over the
    *other* raters of that item (at least ``min_others`` of them), so a rater is not compared
    with a vote that includes their own; ties count as False (see :func:`majority_vote`).

    Returns:
        one dict per rater: ``{"rater", "n", "kappa", "undefined"}``.
    """
    items: dict[Hashable, dict[str, bool]] = {}
    for r, lab in ratings.items():
        for i, v in lab.items():
            items.setdefault(i, {})[r] = bool(v)
    out = []
    for r in sorted(ratings):
        x, y = [], []
        for i, v in ratings[r].items():
            others = [items[i][o] for o in items[i] if o != r] if leave_one_out else list(items[i].values())
            if len(others) < (min_others if leave_one_out else 1):
                continue
            x.append(bool(v))
            y.append(majority_vote(others))
        out.append({"rater": r, **_kappa_entry(x, y)})
    return out
