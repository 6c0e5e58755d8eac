"""Which rows to label next: acquisition scores, and a stratified draw that records its probabilities.

**Acquisition** (``goal="compare"``). The decision between two strategies a and b rests on the
difference of their F-beta. Linearized around the current totals (:mod:`personalign.labels.estimate`),
a row's label moves the difference by φ_i (y_i - p_i), with φ_i = ∇(F_a - F_b) · (a_i, b_i, 1) and
p_i the predicted probability that the row is positive. Where a and b agree φ_i is small (both gain
or lose alike); where they disagree it is large. The variance of the estimate is smallest when rows
are drawn with probability proportional to sqrt(E[(φ_i (y_i - p_i))²]) = |φ_i| sqrt(p_i (1 - p_i))
(importance sampling's optimal proposal; the active-testing and active-inference rule: label where
the models disagree, weighted by how unsure they are -- Kossen et al. 2021, Zrnic & Candès 2024).
``goal="compile"``: rows near a compiled program's decision boundary, exp(-|d_i| / median |d|).

**Draw.** Never the top-k (argmax): rows are *sampled*, so that every row keeps a known positive
chance and the estimate stays unbiased. Within each stratum (the stage's group) the probability is
a mixture ``(1 - floor) * acquisition share + floor * uniform`` (the floor keeps rows whose
acquisition the models got wrong reachable), drawn sequentially without replacement; each chosen
row records the probability ``q`` it was drawn with among the rows still unlabelled in its stratum.
The draws are spread over the strata in proportion to their size by a fixed rule
(:func:`allocate`), so every group keeps labels (leave-one-group-out stays possible) and the number
of draws per group never depends on the labels.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = ["allocate", "draw", "compare_acquisition", "boundary_acquisition", "calibrate", "DEFAULT_FLOOR"]

DEFAULT_FLOOR = 0.1
"""Share of each draw's probability spread uniformly over the stratum's unlabelled rows."""


def allocate(sizes: dict[Any, int], drawn: dict[Any, int], k: int, *, minimum: int = 2) -> dict[Any, int]:
    """How many of the next ``k`` draws each stratum gets: one draw at a time, first to the strata
    with fewer than ``minimum`` draws (2: a stratum's variance needs two), then to the stratum whose
    count falls furthest below its proportional share ``size * B / total`` (B: draws so far, this one
    included), skipping strata with no row left; ties go to the first stratum in order. A
    deterministic function of the sizes and B, never of the labels.

    Args:
        sizes: stratum -> rows in its pool (drawn ones included).
        drawn: stratum -> rows drawn so far.
        k: draws to allocate (fewer when the pool runs out).
    """
    total = sum(sizes.values())
    count = {s: int(drawn.get(s, 0)) for s in sizes}
    out = {s: 0 for s in sizes}
    b = sum(count.values())
    for _ in range(k):
        open_ = [s for s in sizes if count[s] < sizes[s]]
        if not open_:
            break
        b += 1
        short = [s for s in open_ if count[s] < minimum]
        best = max(short or open_, key=lambda s: sizes[s] * b / total - count[s])
        count[best] += 1
        out[best] += 1
    return out


def draw(acquisition: Sequence[float], strata: Sequence, available: Sequence[bool], counts: dict[Any, int],
         rng: np.random.Generator, *, floor: float = DEFAULT_FLOOR) -> list[tuple[int, float]]:
    """Draw ``counts[s]`` rows of each stratum s among the ``available`` rows, sequentially without
    replacement, row i with probability ``w_i / sum of w over the stratum's rows not yet drawn``,
    ``w = (1 - floor) * acq / sum(acq) + floor / n_available`` (uniform when every acquisition is 0).

    Returns:
        ``[(row, q)]`` in draw order (stratum by stratum, in the order of ``counts``).

    Raises:
        ValueError: ``floor`` outside (0, 1]; a negative or non-finite acquisition; more draws than rows.
    """
    if not 0 < floor <= 1:
        raise ValueError(f"floor must be in (0, 1], got {floor}")
    acq = np.asarray(acquisition, dtype=float)
    if not np.all(np.isfinite(acq)) or np.any(acq < 0):
        raise ValueError("acquisition scores must be finite and >= 0")
    avail = np.asarray(available, dtype=bool)
    out = []
    for s, k in counts.items():
        if k <= 0:
            continue
        rows = np.array([i for i in range(len(acq)) if avail[i] and strata[i] == s])
        if k > rows.size:
            raise ValueError(f"stratum {s!r}: {k} draws asked, {rows.size} rows available")
        a = acq[rows]
        w = (1 - floor) * a / a.sum() + floor / rows.size if a.sum() > 0 else np.full(rows.size, 1.0 / rows.size)
        left = np.ones(rows.size, dtype=bool)
        for _ in range(k):
            q = np.where(left, w, 0.0)
            q = q / q.sum()
            j = int(rng.choice(rows.size, p=q))
            out.append((int(rows[j]), float(q[j])))
            left[j] = False
    return out


def calibrate(features: np.ndarray, gold: Sequence, labelled: Sequence[bool]) -> np.ndarray:
    """Predicted probability that each row is positive: a logistic regression (scikit-learn) of the
    labelled rows' gold on ``features`` (n, d) -- the strategies' scores, standardized -- applied to
    every row, clipped to [0.02, 0.98]. One class among the labelled rows: its smoothed rate."""
    from sklearn.linear_model import LogisticRegression

    x = np.asarray(features, dtype=float)
    x = (x - x.mean(axis=0)) / np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
    mask = np.asarray(labelled, dtype=bool)
    y = np.array([bool(g) for g, m in zip(gold, mask) if m])
    if y.size == 0 or y.all() or not y.any():
        rate = (y.sum() + 1) / (y.size + 2)
        return np.full(x.shape[0], float(rate))
    model = LogisticRegression(C=1.0, solver="liblinear").fit(x[mask], y)
    return np.clip(model.predict_proba(x)[:, 1], 0.02, 0.98)


def compare_acquisition(pred_a: Sequence[bool], pred_b: Sequence[bool], p: Sequence[float], gold: Sequence,
                        labelled: Sequence[bool], *, beta: float | None = 1.0, control: bool = True) -> np.ndarray:
    """Acquisition of every row for the decision between strategies a and b: ``|φ_i| sqrt(p_i (1-p_i))``
    (with a control, see the module doc) or ``|φ_i| sqrt(p_i)`` (without), φ from the totals of the
    labelled rows' gold plus the unlabelled rows' expected labels ``p``; 0 on labelled rows.
    ``beta`` None (an objective that is not an F-beta): φ_i = |a_i - b_i|, the disagreement (the
    influence of a label on a difference of accuracies, up to a factor)."""
    from personalign.labels.estimate import fbeta_gradient

    a, b = np.asarray(pred_a, dtype=float), np.asarray(pred_b, dtype=float)
    p = np.asarray(p, dtype=float)
    mask = np.asarray(labelled, dtype=bool)
    y = np.where(mask, [float(bool(g)) if m else 0.0 for g, m in zip(gold, mask)], p)
    feats = np.stack([a, b, np.ones_like(a)], axis=1)
    if beta is None:
        phi = np.abs(a - b)
    else:
        phi = np.abs(feats @ fbeta_gradient(y @ feats, float(a.sum()), float(b.sum()), beta))
    spread = np.sqrt(p * (1 - p)) if control else np.sqrt(p)
    return np.where(mask, 0.0, phi * spread)


def boundary_acquisition(distance: Sequence[float]) -> np.ndarray:
    """Acquisition near a decision boundary: ``exp(-|d| / median |d|)`` of each row's signed
    distance to it (scale 1 when the median is 0)."""
    d = np.abs(np.asarray(distance, dtype=float))
    scale = float(np.median(d)) if d.size and np.median(d) > 0 else 1.0
    return np.exp(-d / scale)
