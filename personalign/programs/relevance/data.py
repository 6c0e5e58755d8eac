"""The relevance stage's loader, on the public data reader :func:`personalign.data.load_relevance`."""

from __future__ import annotations

from pathlib import Path


def load_examples(path: str | Path, *, split: str | None = None) -> list:
    """Rows of a relevance JSONL (recenter format or canonical) as ``dspy.Example``s with the
    stage's inputs marked (:attr:`personalign.stages.Stage.inputs`: ``prompt, attribute``) and the
    fields ``relevant, split, prompt_id, user_id, ...``; ``split``: only that split's rows (in file
    order; possibly none).

    Raises:
        DataError: unreadable or malformed file (path, line, field).
    """
    from personalign.data import load_relevance
    return [r.to_dspy().with_inputs(*inputs()) for r in load_relevance(path, split=split)]


def inputs() -> tuple[str, ...]:
    """The stage's input fields: those of its signature
    (:class:`personalign.signatures.relevance.RelevanceSignature`), in order."""
    from personalign.signatures.relevance import RelevanceSignature

    return tuple(RelevanceSignature.input_fields)

__all__ = ["load_examples"]
