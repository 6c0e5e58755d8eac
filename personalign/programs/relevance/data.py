"""The relevance stage's loader, on the public data reader :func:`personalign.data.load_relevance`."""

from __future__ import annotations

from pathlib import Path


def load_examples(path: str | Path, *, split: str | None = None) -> list:
    """Rows of a relevance JSONL (recenter format or canonical) as ``dspy.Example``s with the
    stage's inputs marked (:attr:`personalign.programs.stages.Stage.inputs`: ``prompt, attribute``) and the
    fields ``relevant, split, prompt_id, user_id, ...``; ``split``: only that split's rows (in file
    order; possibly none).

    Raises:
        DataError: unreadable or malformed file (path, line, field).
    """
    from personalign.data import load_relevance
    from personalign.programs.relevance import STAGE

    return [STAGE.mark_inputs(r.to_dspy()) for r in load_relevance(path, split=split)]


__all__ = ["load_examples"]
