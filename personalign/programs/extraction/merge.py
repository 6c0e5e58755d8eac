"""Merge near-duplicate attributes of one user.

Clustering: the attributes' MiniLM embeddings (all-MiniLM-L6-v2, L2-normalized) are clustered
with scikit-learn's ``AgglomerativeClustering(metric="cosine", linkage="average",
distance_threshold=1 - similarity_threshold)`` -- average linkage merges two clusters while the
mean cosine similarity between their members is at least ``similarity_threshold`` (0.7).

Representative: the member closest (cosine) to the cluster's confidence-weighted centroid
``c = sum_i w_i e_i / sum_i w_i`` with ``w_i`` the member confidences (uniform when all are 0 or
missing); ties go to the higher confidence, then the earlier member.

Merged confidence -- an independence-aware noisy-OR. Treating each member as an independent
detector of the same fact, the noisy-OR (Pearl 1988, *Probabilistic Reasoning in Intelligent
Systems*, sec. 4.3.2) gives ``1 - prod_i (1 - c_i)``. Members drawn from the same user turns are
not independent: the same sentence read twice is one piece of evidence. Each member's factor is
therefore raised to a weight ``n_i`` in [0, 1], its *novelty* -- a weighted logarithmic pool of the
failure probabilities (Genest & Zidek 1986, "Combining probability distributions", Statistical
Science 1(1), where weights below 1 discount dependent sources)::

    merged = 1 - prod_i (1 - c_i) ** n_i
    n_i    = 1 - max_{j before i} |E_i & E_j| / |E_i | E_j|      (Jaccard overlap of evidence turn ids)

with members ordered by decreasing confidence (so ``n_1 = 1`` and ``merged >= max_i c_i``), and the
overlap of two empty evidence sets taken as 1 (no independent evidence). Identical evidence adds
nothing; disjoint evidence gives the plain noisy-OR. Evidence of the merged attribute is the union.
"""

from __future__ import annotations

from typing import Sequence

import pydantic

from personalign.programs.common.cluster import cluster_labels
from personalign.signatures.extraction import ExtractedAttribute

SIMILARITY_THRESHOLD = 0.7


class MergedAttribute(ExtractedAttribute):
    """A merged attribute: the representative's text and reason, the merged ``confidence``, the
    union of evidence turn ids, ``support`` = number of members and ``members`` their texts."""

    support: int = 1
    members: list[str] = pydantic.Field(default_factory=list)


def _overlap(a: set[int], b: set[int]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def merged_confidence(confidences: Sequence[float | None], evidence: Sequence[Sequence[int]]) -> float:
    """Independence-aware noisy-OR of member confidences (formula in the module doc); None
    confidences count as 0. Returns a float in [0, 1] (0 for no members)."""
    order = sorted(range(len(confidences)), key=lambda i: (-(confidences[i] or 0.0), i))
    log_fail = 0.0
    seen: list[set[int]] = []
    import math

    for i in order:
        c = min(1.0, max(0.0, float(confidences[i] or 0.0)))
        e = set(evidence[i])
        novelty = 1.0 - max((_overlap(e, s) for s in seen), default=0.0)
        seen.append(e)
        if c >= 1.0 and novelty > 0:
            return 1.0
        if c > 0:
            log_fail += novelty * math.log1p(-c)
    return float(1.0 - math.exp(log_fail))


def merge_attributes(attributes: Sequence[ExtractedAttribute], *, threshold: float = SIMILARITY_THRESHOLD,
                     embeddings=None) -> list[MergedAttribute]:
    """Merge one user's attributes (module doc). Output order: clusters by first member.

    Args:
        attributes: :class:`ExtractedAttribute` objects of ONE user (merging across users would
            pool different people's evidence).
        threshold: cosine similarity threshold (0.7).
        embeddings: optional precomputed (n, d) L2-normalized embeddings of the attribute texts.
    """
    import numpy as np

    attrs = list(attributes)
    if not attrs:
        return []
    if embeddings is None:
        from personalign.lm.embedder import embed

        embeddings = embed([a.attribute for a in attrs])
    E = np.asarray(embeddings, dtype=np.float64)
    labels = cluster_labels([a.attribute for a in attrs], threshold=threshold, embeddings=E)
    out = []
    for label in range(max(labels) + 1):
        idx = [i for i, lab in enumerate(labels) if lab == label]
        conf = np.array([a.confidence or 0.0 for a in (attrs[i] for i in idx)])
        w = conf if conf.sum() > 0 else np.ones(len(idx))
        centroid = (w[:, None] * E[idx]).sum(axis=0) / w.sum()
        sims = E[idx] @ centroid
        best = min(range(len(idx)), key=lambda k: (-round(float(sims[k]), 9), -conf[k], k))
        rep = attrs[idx[best]]
        evidence = sorted({t for i in idx for t in attrs[i].evidence_turn_ids})
        out.append(MergedAttribute(
            attribute=rep.attribute, reason=rep.reason,
            confidence=merged_confidence([attrs[i].confidence for i in idx], [attrs[i].evidence_turn_ids for i in idx]),
            evidence_turn_ids=evidence, support=len(idx), members=[attrs[i].attribute for i in idx]))
    return out


__all__ = ["MergedAttribute", "SIMILARITY_THRESHOLD", "merge_attributes", "merged_confidence"]
