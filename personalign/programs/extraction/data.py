"""Loader and metric of the extraction stage.

``load_extraction(path)``:

* a PrefEval folder (root or ``implicit_preference/persona-driven``) or topic ``.json`` file:
  persona-driven conversations split **by topic** exactly like the verification stage
  (:func:`~personalign.programs.common.stage1.prefeval_topic_splits`: train 0.5 / val 0.25 /
  test 0.25 of the topics, seed 0), each with its hidden gold preference
  (:func:`~personalign.data.derive.extraction_targets`);
* a ``.jsonl`` file: canonical :class:`~personalign.data.schemas.ExtractionExample` lines.

Examples carry input ``conversation`` (list of turns), gold ``gold_attributes``, ``split`` and
``group`` (topic, else user, else id).

Metric (:func:`gold_recovered`): per conversation, the share of its gold attributes that some
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

from pathlib import Path
from typing import Any

RECOVERY_THRESHOLD = 0.6


def load_extraction(path: str | Path) -> list:
    """Extraction examples of ``path`` (module doc).

    Raises:
        DataError: missing file, malformed record/line, unknown format, too few topics.
    """
    from personalign.data import read_examples
    from personalign.data.derive import extraction_targets
    from personalign.errors import DataError
    from personalign.programs.common.stage1 import prefeval_topic_splits, to_dspy

    p = Path(path)
    if not p.exists():
        raise DataError(p, None, None, "file not found")
    if p.is_dir() or p.suffix == ".json":
        out = []
        for split, records in prefeval_topic_splits(p).items():
            out.extend(to_dspy(extraction_targets(records), split))
        return out
    if p.suffix == ".jsonl":
        return to_dspy(read_examples(p, "extraction"))
    raise DataError(p, None, None, "expected a PrefEval folder or topic .json file, or canonical extraction .jsonl")


def attribute_texts(pred: Any) -> list[str]:
    """Attribute texts of a prediction: a ``Prediction``/dict with ``attributes``, or the list
    itself; items may be ExtractedAttribute objects, dicts with ``attribute``/``text``, or strings."""
    if pred is None:
        return []
    attrs = pred
    if not isinstance(pred, (list, tuple)):
        attrs = pred.get("attributes") if isinstance(pred, dict) else getattr(pred, "attributes", None)
    attrs = getattr(attrs, "root", attrs) or []
    out = []
    for a in attrs:
        if isinstance(a, str):
            out.append(a)
        elif isinstance(a, dict):
            out.append(str(a.get("attribute") or a.get("text") or ""))
        else:
            out.append(str(getattr(a, "attribute", None) or getattr(a, "text", "") or ""))
    return [t for t in out if t.strip()]


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


__all__ = ["RECOVERY_THRESHOLD", "attribute_texts", "gold_recovered", "load_extraction", "recovery_scores"]
