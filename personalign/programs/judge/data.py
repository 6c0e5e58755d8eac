"""The judge stage's loader, on the public canonical reader :func:`personalign.data.canonical.read_examples`."""

from __future__ import annotations

import os

from personalign.programs.judge import STAGE


def load_ratings(path: str | os.PathLike, *, seed: int = 0) -> list:
    """Canonical preference-rating JSONL -> ``dspy.Example``s for the ``judge`` stage.

    Each example has the inputs ``profile, prompt, response_a, response_b, attributes`` (the
    rated attributes, i.e. the keys of ``ratings`` in file order) and the gold ``ratings``.
    Lines without ``split``: split by prompt (``prompt_id``, else the prompt text) into
    train/val/test = 0.5/0.25/0.25 (:func:`personalign.data.group_split`, seeded).

    Raises:
        DataError: missing file, malformed line, rating outside 1-5, duplicate id (names file,
            line and field).
    """
    from personalign.data.canonical import read_examples
    from personalign.data.splits import assign_split, group_split
    from personalign.errors import DataError

    items = read_examples(path, "rating")
    if all(x.split is None for x in items):
        keyed = [x if x.prompt_id else x.model_copy(update={"prompt_id": "prompt:" + x.prompt}) for x in items]
        if len({x.prompt_id for x in keyed}) < 3:
            raise DataError(path, None, "split", "no 'split' field and fewer than 3 distinct prompts to split by")
        items = assign_split(group_split(keyed, by="prompt", fractions={"train": 0.5, "val": 0.25, "test": 0.25},
                                         seed=seed))
    out = []
    for x in items:
        ex = x.to_dspy()
        out.append(ex.copy(attributes=list(x.ratings)).with_inputs(*STAGE.inputs))
    return out


__all__ = ["load_ratings"]
