"""An unbiased paired F-beta difference from actively chosen labels.

Labels chosen where two strategies disagree are not a random sample: F1 on them alone is biased.
Here the figure stays unbiased because every chosen row carries the probability it was drawn with.

**Design** (what :mod:`personalign.labels.select` does). The rows are a finite population. Some are
``known`` from the start (labelled before any selection; counted exactly). The others form a pool
split into strata (the stage's groups); each stratum g of N_g rows is sampled *sequentially without
replacement*: draw m picks row i with probability q_m(i) among the rows still unlabelled in g, any
q_m that is fixed before the draw (it may depend on every label seen so far) and positive on every
row. How many draws each stratum gets after B draws in all is fixed in advance (proportional to
N_g), so it does not depend on the labels.

**Estimator.** A label enters the objective through three totals, T = (TP_a, TP_b, P): the rows
that are positive and predicted positive by strategy a, by b, and the positives; the predicted
positives N_a, N_b are known without labels. With t_i = y_i (a_i, b_i, 1) and a *control* f_i =
p_i (a_i, b_i, 1) (p_i a predicted probability that row i is positive, fixed before the draw;
none: 0), each draw m of a stratum gives an unbiased estimate of the stratum's total

    Z_m = sum_U f + sum_{j<m} e_{i_j} + e_{i_m} / q_m(i_m),    e = t - f,

(E[Z_m | the past] = the stratum's total: the importance-weighted term is unbiased for the
remaining rows, the rows already drawn are known). The estimate of the stratum combines them with
the weights c_m = N (N - M) / (M (N - m) (N - m + 1)) (they sum to 1): this is the LURE estimator of
Farquhar, Gal & Rainforth (2021) that active testing uses (Kossen et al. 2021), which reduces to the
sample mean for uniform draws; the control is the prediction-powered / active-inference correction
(Angelopoulos et al. 2023; Zrnic & Candès 2024), unbiased whatever f is. A stratum drawn
completely (M = N) is known exactly. The totals are unbiased; F-beta_a - F-beta_b =
(1+β²) [TP_a / (β² P + N_a) - TP_b / (β² P + N_b)] is a smooth function of them (a ratio
estimator: consistent, its bias of order 1/M).

**Interval.** The Z_m - total are martingale differences, so the variance of the combination is
sum c_m² Var(Z_m | past); it is estimated by sum c_m² (Z_m - Ẑ)² / (1 - sum c_m²) per stratum on
the linearized difference (delta method), summed over strata; a normal 95% interval and a two-sided
z-test follow. A stratum with fewer than 2 draws has no variance estimate (``se`` None). Design-based:
the interval is about the difference on *these* rows (all of them labelled), not on other prompts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

__all__ = ["Draw", "lure_weights", "fbeta_difference", "fbeta_parts", "fbeta_gradient"]


@dataclass(frozen=True)
class Draw:
    """One chosen row: its index in the population, its stratum, the probability ``q`` it was drawn
    with among the stratum's rows still unlabelled, and the index of the control (round) in force."""

    row: int
    stratum: Any
    q: float
    round: int = 0


def lure_weights(n: int, m: int) -> np.ndarray:
    """The weights c_1..c_m of the per-draw estimates Z_1..Z_m after m draws from n rows (sum 1);
    m == n: all weight on the last draw (it is exact)."""
    if not 1 <= m <= n:
        raise ValueError(f"need 1 <= draws <= rows, got {m} draws of {n}")
    if m == n:
        return np.eye(1, m, m - 1).ravel()
    j = np.arange(1, m + 1, dtype=float)
    return n * (n - m) / (m * (n - j) * (n - j + 1))


def fbeta_parts(totals: Sequence[float], na: float, nb: float, beta: float = 1.0) -> tuple[float, float, float, np.ndarray]:
    """``(F_a - F_b, F_a, F_b, gradient)`` of the F-beta difference at ``totals`` = (TP_a, TP_b, P),
    with N_a, N_b the predicted positives: F = (1+β²) TP / (β² P + N); the gradient is with respect
    to the three totals (0 where a denominator is 0)."""
    b2 = beta * beta
    tpa, tpb, pos = totals
    da, db = b2 * pos + na, b2 * pos + nb
    fa = (1 + b2) * tpa / da if da > 0 else 0.0
    fb = (1 + b2) * tpb / db if db > 0 else 0.0
    ga = (1 + b2) / da if da > 0 else 0.0
    gb = (1 + b2) / db if db > 0 else 0.0
    gp = -(ga * b2 * tpa / da if da > 0 else 0.0) + (gb * b2 * tpb / db if db > 0 else 0.0)
    return fa - fb, fa, fb, np.array([ga, -gb, gp])


def fbeta_gradient(totals: Sequence[float], na: float, nb: float, beta: float = 1.0) -> np.ndarray:
    """The gradient of :func:`fbeta_parts` alone."""
    return fbeta_parts(totals, na, nb, beta)[3]


def fbeta_difference(gold: Sequence, pred_a: Sequence[bool], pred_b: Sequence[bool], *, draws: Sequence[Draw],
                     strata: Sequence, known: Sequence[int] = (), beta: float = 1.0,
                     controls: Sequence[Sequence[float] | None] | None = None, confidence: float = 0.95) -> dict:
    """F-beta(a) - F-beta(b) on the whole population from the labels of ``known`` and ``draws``.

    Args:
        gold: (N,) the positive class (True/False) where labelled; anything (None) elsewhere.
        pred_a, pred_b: (N,) each strategy's positive-class predictions on every row.
        draws: the chosen rows in draw order (:class:`Draw`).
        strata: (N,) each row's stratum (ignored for ``known`` rows).
        known: rows labelled outside the draws (exact; not part of any stratum's pool).
        beta: 1 for F1 (relevance), 2 for F2 (verification).
        controls: per round r, (N,) predicted probabilities of the positive class fixed before that
            round's draws, or None (no control: Horvitz-Thompson-type); None: no control at all.

    Returns:
        ``{"diff", "a", "b", "se", "ci", "p_value", "n_labels", "totals", "strata": {stratum: draws},
        "estimator"}``; ``se``/``ci``/``p_value`` None when a stratum has fewer than 2 draws.

    Raises:
        ValueError: a stratum with no draw (its total is unknown); a row drawn twice or known and
            drawn; a probability outside (0, 1].
    """
    from scipy.stats import norm

    a, b = np.asarray(pred_a, dtype=bool), np.asarray(pred_b, dtype=bool)
    n = a.size
    feats = np.stack([a, b, np.ones(n, dtype=bool)], axis=1).astype(float)  # t_i = y_i * feats_i
    known = list(known)
    drawn = [d.row for d in draws]
    if len(set(drawn)) != len(drawn) or set(drawn) & set(known):
        raise ValueError("a row is drawn twice, or both known and drawn")
    y = np.zeros(n)
    for i in known + drawn:
        y[i] = float(bool(gold[i]))
    known_set = set(known)
    pool: dict[Any, list[int]] = {}
    for i in range(n):
        if i not in known_set:
            pool.setdefault(strata[i], []).append(i)
    by: dict[Any, list[Draw]] = {}
    for d in draws:
        if not 0 < d.q <= 1:
            raise ValueError(f"selection probability of row {d.row} must be in (0, 1], got {d.q}")
        by.setdefault(strata[d.row], []).append(d)
    empty = [s for s in pool if s not in by]
    if empty:
        raise ValueError(f"stratum {empty[0]!r} has no drawn row: its total is unknown")

    def control(r: int) -> np.ndarray | None:
        c = None if controls is None or r >= len(controls) else controls[r]
        return None if c is None else np.asarray(c, dtype=float)

    def exclusive_cumsum(x: np.ndarray) -> np.ndarray:
        return np.vstack([np.zeros((1, x.shape[1])), np.cumsum(x, axis=0)[:-1]])

    totals = y[known] @ feats[known] if known else np.zeros(3)
    parts = []  # per stratum: (Z_m (M, 3), weights c, rows in the stratum)
    for s, rows in pool.items():
        ds = by[s]
        idx = np.array([d.row for d in ds])
        q = np.array([d.q for d in ds])[:, None]
        rnd = np.array([d.round for d in ds])
        t = y[idx, None] * feats[idx]
        z = exclusive_cumsum(t) + t / q
        for r in np.unique(rnd):
            p = control(int(r))
            if p is None:
                continue
            f = p[:, None] * feats
            mask = rnd == r
            z[mask] += f[rows].sum(axis=0) - exclusive_cumsum(f[idx])[mask] - f[idx[mask]] / q[mask]
        c = lure_weights(len(rows), len(ds))
        parts.append((z, c, len(rows)))
        totals = totals + c @ z
    diff, fa, fb, grad = fbeta_parts(totals, float(a.sum()), float(b.sum()), beta)
    var, defined = 0.0, True
    for z, c, size in parts:
        if len(c) == size:  # drawn completely: exact
            continue
        if len(c) < 2:
            defined = False
            continue
        lin = z @ grad
        var += float((c * c) @ (lin - float(c @ lin)) ** 2) / (1.0 - float(c @ c))
    out = {"diff": float(diff), "a": float(fa), "b": float(fb), "se": None, "ci": None, "p_value": None,
           "n_labels": len(known) + len(drawn), "totals": {"tp_a": float(totals[0]), "tp_b": float(totals[1]),
                                                           "positives": float(totals[2])},
           "strata": {str(s): len(by[s]) for s in pool}, "beta": beta,
           "estimator": "LURE per stratum with a prediction control (Farquhar et al. 2021; Zrnic & Candes 2024)"}
    if defined:
        se = math.sqrt(max(var, 0.0))
        zq = float(norm.ppf(0.5 + confidence / 2))
        out.update(se=se, ci=[diff - zq * se, diff + zq * se],
                   p_value=float(2 * norm.sf(abs(diff) / se)) if se > 0 else (0.0 if diff != 0 else 1.0))
    return out
