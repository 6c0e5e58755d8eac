"""MiniLM embeddings with a process-wide text -> vector cache (grouped-CV refits embed each text once)."""

from __future__ import annotations

from typing import Sequence

CACHE_MAX = 50_000
_cache: dict[str, object] = {}


def embed_cached(texts: Sequence[str]):
    """MiniLM embeddings of ``texts``, float32 of shape (n, 384), L2-normalized
    (:func:`personalign.lm.embedder.embed`); texts seen before come from the cache (cleared when it
    would exceed ``CACHE_MAX`` texts)."""
    import numpy as np

    from personalign.lm.embedder import EMBEDDING_DIM, embed

    missing = list(dict.fromkeys(t for t in texts if t not in _cache))
    if missing:
        if len(_cache) + len(missing) > CACHE_MAX:
            _cache.clear()
        for t, v in zip(missing, embed(missing)):
            _cache[t] = v
    if not texts:
        return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
    return np.stack([_cache[t] for t in texts])


__all__ = ["CACHE_MAX", "embed_cached"]
