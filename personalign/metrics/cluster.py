"""Cluster bootstrap, sign-flip permutation test, Holm adjustment and minimum detectable effect.

Human-labelled relevance data is clustered: the attributes of one user for one prompt are
strongly correlated, and the prompts are what a user's next question differs in. An item
bootstrap treats correlated items as independent and gives intervals far too narrow (Field &
Welsh 2007; Davison & Hinkley 1997, sec. 3.8). Here every interval resamples **clusters**:

* one level (``levels=[prompt_id]``): draw the top-level clusters with replacement;
* two levels (``levels=[prompt_id, user_id]``): draw top-level clusters with replacement, then,
  inside each drawn cluster, its inner units (users within the prompt) with replacement
  (two-stage bootstrap, Davison & Hinkley 1997, strategy 2 of sec. 3.8). Items inside an inner
  unit are kept whole.

A resample is a vector of item **weights** (how many times each item was drawn), so every
count-based statistic is a matrix product, vectorized over resamples. With singleton clusters
(one item each) the draws are exactly the item bootstrap's (same seed, same random stream).

With fewer than :data:`MIN_CLUSTERS` top-level clusters a percentile interval is not reported:
the per-group figures and their range are (:func:`summarize`).

The paired test is a sign-flip permutation test of the per-cluster differences (Fisher 1935;
Good 2005 ch. 3): exact enumeration of all 2^G sign vectors when G <= :data:`EXACT_MAX`
clusters, else a seeded Monte-Carlo sample. Its smallest reachable two-sided p is 2 / 2^G
(G = 4 prompts: 0.125), reported as ``p_min``.
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

__all__ = ["Clusters", "make_clusters", "resample_weights", "percentile_ci", "summarize", "sign_flip_test",
           "holm", "minimum_detectable_effect", "format_figure", "resampling_note", "MIN_CLUSTERS", "EXACT_MAX",
           "MDE_Z"]

MIN_CLUSTERS = 5
"""Below this many top-level clusters no percentile interval is reported (per-group figures and range instead)."""
EXACT_MAX = 16
"""Up to this many clusters the sign-flip test enumerates all 2^G sign vectors."""
MDE_Z = 1.96 + 0.84
"""Minimum detectable effect = MDE_Z x SE: two-sided alpha 0.05 with 80% power (Cohen 1988)."""


@dataclass(frozen=True)
class Clusters:
    """Cluster membership of n items.

    Attributes:
        top: (n,) int codes 0..G-1 of the top-level cluster of each item.
        inner: (n,) int codes of the inner unit of each item (unique across top clusters), or None.
        unit: what is resampled, e.g. ``"item"``, ``"prompt_id"``, ``"prompt_id > user_id"``.
        labels: the G top-level cluster labels (``labels[code]``).
    """

    top: np.ndarray
    inner: np.ndarray | None
    unit: str
    labels: list = field(default_factory=list)

    @property
    def n(self) -> int:
        return int(self.top.size)

    @property
    def n_clusters(self) -> int:
        """G, the number of top-level clusters."""
        return len(self.labels)

    @property
    def singletons(self) -> bool:
        return self.inner is None and self.n_clusters == self.n

    def describe(self, n_boot: int | None = None) -> dict:
        """``{"unit", "n_clusters", "n_boot"}`` for a report."""
        return {"unit": self.unit, "n_clusters": self.n_clusters, "n_boot": n_boot}


def make_clusters(levels: Sequence[Sequence] | None, n: int, names: Sequence[str] = ()) -> Clusters:
    """Clusters of ``n`` items from up to two levels of labels.

    Args:
        levels: ``None`` or ``[]`` (items are their own clusters: the item bootstrap), or one or two
            sequences of n hashable labels, outermost first (``[prompt_ids, user_ids]``); the inner
            unit is the pair (outer, inner), so inner labels need not be unique across clusters.
        names: a name per level for :attr:`Clusters.unit` (default ``level0``, ``level1``).

    Raises:
        ValueError: a level's length is not n, or more than two levels.
    """
    if not levels:
        return Clusters(np.arange(n), None, "item", list(range(n)))
    if len(levels) > 2:
        raise ValueError(f"at most two cluster levels, got {len(levels)}")
    for i, lev in enumerate(levels):
        if len(lev) != n:
            raise ValueError(f"cluster level {i} has {len(lev)} labels for {n} items")
    names = list(names) + [f"level{i}" for i in range(len(names), len(levels))]
    keys = [str(v) for v in levels[0]]
    labels = sorted(set(keys), key=lambda k: (keys.index(k)))
    code = {k: i for i, k in enumerate(labels)}
    top = np.array([code[k] for k in keys], dtype=np.int64)
    if len(levels) == 1:
        if len(labels) == 1:  # one cluster: its items are resampled (says nothing beyond it)
            return Clusters(np.arange(n), None, f"item within one {names[0]}", list(range(n)))
        return Clusters(top, None, names[0], [levels[0][keys.index(k)] for k in labels])
    if len(labels) == 1:  # one top cluster: its inner units are the clusters (says nothing beyond it)
        inner_only = make_clusters([levels[1]], n, [names[1]])
        return Clusters(inner_only.top, None, f"{names[1]} within one {names[0]}", inner_only.labels)
    pairs = [(k, str(v)) for k, v in zip(keys, levels[1])]
    inner_code = {p: i for i, p in enumerate(dict.fromkeys(pairs))}
    inner = np.array([inner_code[p] for p in pairs], dtype=np.int64)
    return Clusters(top, inner, f"{names[0]} > {names[1]}", [levels[0][keys.index(k)] for k in labels])


def _check_boot(n_boot: int) -> None:
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")


def resample_weights(clusters: Clusters, n_boot: int, seed: int) -> np.ndarray:
    """Item weights of ``n_boot`` cluster-bootstrap resamples: int array (n_boot, n), each row
    counting how often each item was drawn (rows sum to about n).

    Singleton clusters: ``rng.integers(0, n, (n_boot, n))`` item draws, exactly the item bootstrap.
    Top level: G draws of the G clusters with replacement; two levels: each drawn top cluster then
    draws its m inner units with replacement (a cluster drawn c times draws c·m inner units:
    ``multinomial(c·m, 1/m)``).
    """
    _check_boot(n_boot)
    rng = np.random.default_rng(seed)
    g = clusters.n_clusters
    draws = rng.integers(0, g, size=(n_boot, g))
    counts = np.bincount((draws + np.arange(n_boot)[:, None] * g).ravel(), minlength=n_boot * g).reshape(n_boot, g)
    if clusters.inner is None:
        return counts[:, clusters.top]
    weights = np.zeros((n_boot, clusters.n), dtype=np.int64)
    for c in range(g):
        units = np.unique(clusters.inner[clusters.top == c])
        m = units.size
        unit_counts = rng.multinomial(counts[:, c] * m, np.full(m, 1.0 / m))  # (n_boot, m)
        for j, u in enumerate(units):
            weights[:, clusters.inner == u] = unit_counts[:, j:j + 1]
    return weights


def percentile_ci(samples: np.ndarray, confidence: float = 0.95) -> list[float] | None:
    """Percentile interval ``[low, high]`` of the finite ``samples`` (None when there are none)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    s = np.asarray(samples, dtype=float)
    s = s[np.isfinite(s)]
    if s.size == 0:
        return None
    alpha = (1 - confidence) / 2
    lo, hi = np.percentile(s, [100 * alpha, 100 * (1 - alpha)])
    return [float(lo), float(hi)]


def summarize(point: float, samples: np.ndarray, per_group: dict | None, clusters: Clusters, *,
              confidence: float = 0.95, what: str = "statistic") -> dict:
    """One figure: ``{"value", "ci", "range", "by_group"}``.

    ``ci`` is the percentile interval of ``samples`` when there are at least :data:`MIN_CLUSTERS`
    top-level clusters, else None with a ``UserWarning``, and ``range`` ``[min, max]`` of the
    per-group figures (``by_group``: label -> value) is what is shown instead.
    """
    out = {"value": float(point), "ci": None, "range": None, "by_group": per_group}
    if per_group:
        vals = [v for v in per_group.values() if v is not None and np.isfinite(v)]
        out["range"] = [float(min(vals)), float(max(vals))] if vals else None
    if clusters.n_clusters >= MIN_CLUSTERS:
        out["ci"] = percentile_ci(samples, confidence)
    else:
        warnings.warn(f"{what}: only {clusters.n_clusters} {clusters.unit.split(' > ')[0]} cluster(s) (< {MIN_CLUSTERS}): "
                      "no percentile interval; the per-group figures and their range are reported", UserWarning,
                      stacklevel=2)
    return out


def format_figure(value: float | None, ci: Sequence[float] | None = None, rng: Sequence[float] | None = None,
                  sign: str = "", by_group: dict | None = None) -> str:
    """A figure as printed: ``0.512 [0.40, 0.61]`` (percentile interval); without one, the range of
    its per-group figures, ``0.512 (range 0.30–0.70)``, followed by the figures themselves when
    ``by_group`` is given (``0.512 (range 0.30–0.70: p1 0.300, p2 0.700)``; a single group:
    ``0.750 (one group, music: no interval)``). ``sign="+"`` signs differences; None prints ``-``."""
    if value is None:
        return "-"
    if ci is not None:
        return f"{value:{sign}.3f} [{ci[0]:{sign}.2f}, {ci[1]:{sign}.2f}]"
    if by_group and len(by_group) == 1:
        return f"{value:{sign}.3f} (one group, {next(iter(by_group))}: no interval)"
    if rng is not None:
        groups = ": " + ", ".join(f"{g} {v:{sign}.3f}" for g, v in by_group.items()) if by_group else ""
        return f"{value:{sign}.3f} (range {rng[0]:{sign}.2f}–{rng[1]:{sign}.2f}{groups})"
    return f"{value:{sign}.3f}"


def resampling_note(res: dict | None) -> str:
    """What a report's intervals resample (its ``resampling``: ``{"unit", "n_clusters", "n_boot"}``),
    and what is shown instead below :data:`MIN_CLUSTERS` top-level clusters; ``""`` for None."""
    if not res:
        return ""
    line = f"intervals resample {res['unit']} ({res['n_clusters']} top-level cluster{'s' if res['n_clusters'] != 1 else ''}, {res['n_boot']} resamples)"
    if res["unit"] != "item" and res["n_clusters"] < MIN_CLUSTERS:
        line += f"; fewer than {MIN_CLUSTERS}: per-group range shown, no percentile interval"
    if " within one " in res["unit"]:
        line += f"; single split: says nothing about another {res['unit'].split(' within one ')[1]}"
    return line


def sign_flip_test(diffs: Sequence[float], *, n_perm: int = 10000, seed: int = 0) -> dict:
    """Two-sided sign-flip permutation test that the per-cluster differences have mean 0.

    Args:
        diffs: (G,) per-cluster differences (system a minus system b on cluster g).
        n_perm: Monte-Carlo sign vectors when G > :data:`EXACT_MAX`.

    Returns:
        ``{"p_value", "p_min", "exact", "n_clusters", "test": "sign-flip"}``; exact: p is the share
        of the 2^G sign vectors whose |mean| >= the observed |mean|, ``p_min`` = 2 / 2^G; Monte
        Carlo: (1 + hits) / (1 + n_perm) and ``p_min`` = 1 / (1 + n_perm). G = 0: p = 1.
    """
    d = np.asarray(diffs, dtype=float)
    d = d[np.isfinite(d)]
    g = d.size
    if g == 0:
        return {"test": "sign-flip", "p_value": 1.0, "p_min": 1.0, "exact": True, "n_clusters": 0}
    observed = abs(d.mean())
    tol = 1e-12 * max(1.0, observed)
    if g <= EXACT_MAX:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=g)))
        stats = np.abs(signs @ d) / g
        return {"test": "sign-flip", "p_value": float(np.mean(stats >= observed - tol)), "p_min": 2.0 / 2 ** g,
                "exact": True, "n_clusters": g}
    rng = np.random.default_rng(seed)
    signs = rng.choice((1.0, -1.0), size=(n_perm, g))
    hits = int(np.sum(np.abs(signs @ d) / g >= observed - tol))
    return {"test": "sign-flip", "p_value": (1 + hits) / (1 + n_perm), "p_min": 1.0 / (1 + n_perm), "exact": False,
            "n_clusters": g}


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (``statsmodels.stats.multitest.multipletests``, method
    ``holm``), in the order given."""
    from statsmodels.stats.multitest import multipletests

    if len(p_values) == 0:
        return []
    return [float(p) for p in multipletests(np.asarray(p_values, dtype=float), method="holm")[1]]


def minimum_detectable_effect(boot_diffs: np.ndarray) -> float | None:
    """(1.96 + 0.84) x the standard error (sd, ddof=1) of the bootstrap differences: the smallest
    true difference this data size detects with 80% power at two-sided alpha 0.05. None with < 2 draws."""
    s = np.asarray(boot_diffs, dtype=float)
    s = s[np.isfinite(s)]
    return float(MDE_Z * s.std(ddof=1)) if s.size >= 2 else None
