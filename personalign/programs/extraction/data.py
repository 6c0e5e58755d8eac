"""Loader of the extraction stage.

``load_extraction(path)``:

* a PrefEval folder (root or ``implicit_preference/persona-driven``) or topic ``.json`` file:
  persona-driven conversations split **by topic** exactly like the verification stage
  (:func:`~personalign.programs.common.stage1.prefeval_topic_splits`: train 0.5 / val 0.25 /
  test 0.25 of the topics, seed 0), each with its hidden gold preference
  (:func:`~personalign.data.derive.extraction_targets`);
* a ``.jsonl`` file: canonical :class:`~personalign.data.schemas.ExtractionExample` lines.

Examples carry input ``conversation`` (list of turns), gold ``gold_attributes``, ``split`` and
``group`` (topic, else user, else id).

The metric is :func:`personalign.programs.extraction.metrics.gold_recovered`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

def load_extraction(path: str | Path) -> list:
    """Extraction examples of ``path`` (module doc).

    Raises:
        DataError: missing file, malformed record/line, unknown format, too few topics.
    """
    from personalign.data.derive import extraction_targets
    from personalign.programs.common.stage1 import load_prefeval_or_jsonl

    return load_prefeval_or_jsonl(path, "extraction", extraction_targets, inputs())


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


def inputs() -> tuple[str, ...]:
    """The stage's input fields: those of its signature
    (:class:`personalign.signatures.extraction.ConversationAttributesSignature`), in order."""
    from personalign.signatures.extraction import ConversationAttributesSignature

    return tuple(ConversationAttributesSignature.input_fields)

__all__ = ["attribute_texts", "load_extraction"]
