"""Diversity of users' attribute profiles (the seed study's appendix: users are sampled for
diversity of their attribute embeddings; K = 17 attributes per generalist score).

Cosine distance = 1 - cosine similarity of L2-normalized vectors. Importing this module is light
(numpy and scikit-learn load inside the functions that need them). Also importable from
:mod:`personalign.preprocess`.
"""

from __future__ import annotations

from typing import Sequence


def _as_unit_rows(vectors):
    import numpy as np

    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"expected a 2-D array of embeddings, got shape {x.shape}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ValueError("an embedding has zero norm")
    return x / norms


def _embeddings_of(items):
    """Embeddings of ``items``: an (n, d) array is used as is; a list of strings is embedded with
    MiniLM (:func:`personalign.lm.embedder.embed`)."""
    import numpy as np

    if len(items) and isinstance(items[0], str):
        from personalign.lm.embedder import embed

        return embed(list(items))
    return np.asarray(items, dtype=np.float64)


def mean_pairwise_cosine_distance(vectors) -> float:
    """Mean of ``1 - cos(u, v)`` over all unordered pairs of rows (n >= 2), via scikit-learn's
    ``cosine_distances``.

    Raises:
        ValueError: fewer than 2 rows, or a zero vector.
    """
    import numpy as np
    from sklearn.metrics.pairwise import cosine_distances

    x = _as_unit_rows(vectors)
    n = x.shape[0]
    if n < 2:
        raise ValueError(f"need at least 2 vectors for a pairwise distance, got {n}")
    d = cosine_distances(x)
    iu = np.triu_indices(n, k=1)
    return float(d[iu].mean())


def generalist_score(attributes, *, k: int = 17, seed: int = 0) -> float:
    """A user's generalist score: the mean pairwise cosine distance of a random sample of ``k``
    (17) of the user's attribute embeddings (all of them when the user has fewer than ``k``).
    High = the attributes span many unrelated topics; low = a specialist.

    Args:
        attributes: attribute texts (embedded with MiniLM) or an (n, d) array of embeddings.
        seed: seed of the ``numpy.random.default_rng`` drawing the sample.

    Raises:
        ValueError: fewer than 2 attributes.
    """
    import numpy as np

    x = _embeddings_of(attributes)
    if len(x) < 2:
        raise ValueError(f"a generalist score needs at least 2 attributes, got {len(x)}")
    if len(x) > k:
        idx = np.random.default_rng(seed).choice(len(x), size=k, replace=False)
        x = x[np.sort(idx)]
    return mean_pairwise_cosine_distance(x)


def quintile_bins(scores: Sequence[float]) -> list[int]:
    """Quintile bin (0..4) of each score: edges are the 20/40/60/80th percentiles of ``scores``
    (numpy's linear interpolation); a score equal to an edge goes to the upper bin.

    Raises:
        ValueError: empty input or NaN.
    """
    import numpy as np

    s = np.asarray(scores, dtype=float)
    if s.size == 0 or np.isnan(s).any():
        raise ValueError("quintile_bins needs non-empty scores without NaN")
    edges = np.percentile(s, [20, 40, 60, 80])
    return [int(b) for b in np.searchsorted(edges, s, side="right")]


def farthest_point_sampling(vectors, n: int, *, start: int | None = None, seed: int = 0) -> list[int]:
    """Greedy farthest-point sampling under cosine distance (Gonzalez 1985): start from ``start``
    (default: a seeded random row), then repeatedly add the row whose distance to the nearest
    chosen row is largest (ties: lowest index). Returns ``min(n, len(vectors))`` row indices in
    the order chosen.

    Raises:
        ValueError: ``n`` < 0 or a zero vector.
    """
    import numpy as np

    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    x = _as_unit_rows(vectors) if len(vectors) else np.zeros((0, 1))
    m = len(x)
    if n == 0 or m == 0:
        return []
    first = int(np.random.default_rng(seed).integers(m)) if start is None else int(start)
    chosen = [first]
    dist = 1.0 - x @ x[first]
    dist[first] = -np.inf
    while len(chosen) < min(n, m):
        nxt = int(np.argmax(dist))
        chosen.append(nxt)
        dist = np.minimum(dist, 1.0 - x @ x[nxt])
        dist[chosen] = -np.inf
    return chosen


def diverse_sample(user_vectors, scores: Sequence[float], per_bin: int, *, seed: int = 0) -> list[int]:
    """The study's diverse user sample: users are binned by generalist score into quintiles
    (:func:`quintile_bins`) and ``per_bin`` users are drawn from each bin by farthest-point
    sampling over their profile embeddings (:func:`farthest_point_sampling`), so both
    specialists and generalists are represented and users within a bin differ.

    Args:
        user_vectors: (n_users, d) profile embeddings (e.g. the mean of a user's attribute embeddings).
        scores: (n_users,) generalist scores.

    Returns:
        chosen user row indices, bin by bin.

    Raises:
        ValueError: lengths differ.
    """
    import numpy as np

    x = np.asarray(user_vectors, dtype=np.float64)
    if len(x) != len(scores):
        raise ValueError(f"{len(x)} user vectors vs {len(scores)} scores")
    bins = quintile_bins(scores)
    out: list[int] = []
    for b in range(5):
        rows = [i for i, v in enumerate(bins) if v == b]
        if rows:
            picked = farthest_point_sampling(x[rows], per_bin, seed=seed + b)
            out.extend(rows[j] for j in picked)
    return out


def dataset_diversity(user_attributes: Sequence) -> float:
    """Dataset diversity: mean pairwise cosine distance between users, each user represented by
    the normalized mean of their attribute embeddings.

    Args:
        user_attributes: per user, a list of attribute texts or an (n_i, d) embedding array.

    Raises:
        ValueError: fewer than 2 users, or a user without attributes.
    """
    import numpy as np

    if len(user_attributes) < 2:
        raise ValueError(f"dataset diversity needs at least 2 users, got {len(user_attributes)}")
    centroids = []
    for i, attrs in enumerate(user_attributes):
        if len(attrs) == 0:
            raise ValueError(f"user {i} has no attributes")
        centroids.append(_as_unit_rows(_embeddings_of(attrs)).mean(axis=0))
    return mean_pairwise_cosine_distance(np.stack(centroids))


__all__ = ["mean_pairwise_cosine_distance", "generalist_score", "quintile_bins", "farthest_point_sampling",
           "diverse_sample", "dataset_diversity"]
