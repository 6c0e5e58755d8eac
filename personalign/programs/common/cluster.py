"""Clustering short texts (attributes, profile descriptions) by MiniLM cosine similarity."""

from __future__ import annotations

from typing import Sequence


def cluster_labels(texts: Sequence[str], *, threshold: float, embeddings=None) -> list[int]:
    """Cluster label per text (0-based, in order of first appearance): scikit-learn's
    ``AgglomerativeClustering`` with average linkage on cosine distance, cut at distance
    ``1 - threshold``.

    Args:
        texts: the texts.
        threshold: cosine similarity threshold of average linkage (in (0, 1]).
        embeddings: optional (n, d) precomputed embeddings (else MiniLM,
            :func:`personalign.lm.embedder.embed`).

    Raises:
        ValueError: ``threshold`` outside (0, 1].
    """
    import numpy as np

    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    n = len(texts)
    if n == 0:
        return []
    if n == 1:
        return [0]
    if embeddings is None:
        from personalign.lm.embedder import embed

        embeddings = embed(list(texts))
    from sklearn.cluster import AgglomerativeClustering

    raw = AgglomerativeClustering(n_clusters=None, metric="cosine", linkage="average",
                                  distance_threshold=1.0 - threshold).fit_predict(np.asarray(embeddings))
    relabel: dict[int, int] = {}
    return [relabel.setdefault(int(r), len(relabel)) for r in raw]


__all__ = ["cluster_labels"]
