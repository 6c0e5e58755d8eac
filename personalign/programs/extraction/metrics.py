"""Metric of the extraction stage.

The metric (:func:`gold_recovered`): per conversation, the share of its gold attributes that some
extracted attribute recovers, where *recovered* means MiniLM (all-MiniLM-L6-v2) cosine similarity
``>= RECOVERY_THRESHOLD`` = 0.6. The threshold, stated: among pairs of *different* PrefEval
persona preferences of the same topic (the hardest non-matches), 89.7% score below 0.6 (median
0.40; 95th percentile 0.68 -- PrefEval holds near-duplicate preferences within a topic), and
99.4% of pairs across topics do; a faithful paraphrase of the first record's preference ("The user
prefers in-person learning over online courses.") scores 0.71, a partial one ("The user dislikes
digital courses.") 0.56. The corpus mean over conversations is the extraction *recall*; the
benchmark also reports it at 0.5 and 0.7.
"""

from __future__ import annotations

from personalign.programs.extraction.data import attribute_texts

RECOVERY_THRESHOLD = 0.6


def recovery_scores(gold: list[str], extracted: list[str]) -> list[float]:
    """Per gold attribute, the best MiniLM cosine with any extracted attribute (0.0 when none)."""
    if not gold:
        return []
    if not extracted:
        return [0.0] * len(gold)
    from personalign.lm.embedder import embed

    G = embed(list(gold))
    X = embed(list(extracted))
    return [float(v) for v in (G @ X.T).max(axis=1)]


def gold_recovered(example, pred, trace=None, *, threshold: float = RECOVERY_THRESHOLD):
    """DSPy metric: share of ``example.gold_attributes`` recovered by ``pred``'s attributes
    (cosine >= ``threshold``), a float in [0, 1]; with a ``trace`` (bootstrapping demos), True only
    when every gold attribute is recovered."""
    gold = getattr(example, "gold_attributes", None)
    if gold is None and isinstance(example, dict):
        gold = example.get("gold_attributes")
    gold = list(gold or [])
    scores = recovery_scores(gold, attribute_texts(pred))
    value = sum(s >= threshold for s in scores) / len(scores) if scores else 0.0
    return value >= 1.0 if trace is not None else float(value)


__all__ = ["RECOVERY_THRESHOLD", "gold_recovered", "recovery_scores"]
