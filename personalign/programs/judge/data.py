"""The judge stage's loader, on the public canonical reader :func:`personalign.data.canonical.read_examples`."""

from __future__ import annotations

import os


def load_ratings(path: str | os.PathLike, *, seed: int = 0) -> list:
    """Canonical preference-rating JSONL, or PrefEval's MCQ option labels -> ``dspy.Example``s
    for the ``judge`` stage.

    A PrefEval folder (root or ``mcq_options/``) or ``mcq_options`` topic ``.json`` file: one
    example per question (:func:`~personalign.programs.common.stage1.prefeval_option_pairs`,
    split by topic): the following option and one seeded violating option in a seeded A/B order;
    ``profile`` and the one rated attribute are the stated preference, ``prompt`` the question, and
    the gold rating is 1 (A much better) when the following option is A, else 5 -- PrefEval's
    authors' labels, so ``compile judge`` maximizes the kappa of its verdicts against them.

    Each example has the inputs ``profile, prompt, response_a, response_b, attributes`` (the
    rated attributes, i.e. the keys of ``ratings`` in file order) and the gold ``ratings``. An
    example rating exactly one attribute (every PrefEval pair) also carries it in the fields of the
    per-attribute judge signature (:class:`~personalign.signatures.judge.PairwiseJudgeSignature`:
    ``attribute`` and the gold ``rating``), so it is a complete demo of the strategies' one
    predictor and ``LabeledFewShot`` can show the judge labelled verdicts.
    Lines without ``split``: split by prompt (``prompt_id``, else the prompt text) into
    train/val/test = 0.5/0.25/0.25 (:func:`personalign.data.group_split`, seeded).

    Raises:
        DataError: missing file, malformed line, rating outside 1-5, duplicate id (names file,
            line and field).
    """
    from pathlib import Path

    from personalign.data.canonical import read_examples
    from personalign.data.splits import assign_split, group_split
    from personalign.errors import DataError

    if Path(path).is_dir() or Path(path).suffix == ".json":
        return _prefeval_pairs(path, seed)
    items = read_examples(path, "rating")
    if all(x.split is None for x in items):
        keyed = [x if x.prompt_id else x.model_copy(update={"prompt_id": "prompt:" + x.prompt}) for x in items]
        if len({x.prompt_id for x in keyed}) < 3:
            raise DataError(path, None, "split", "no 'split' field and fewer than 3 distinct prompts to split by")
        items = assign_split(group_split(keyed, by="prompt", fractions={"train": 0.5, "val": 0.25, "test": 0.25},
                                         seed=seed))
    return [_per_attribute(x.to_dspy().copy(attributes=list(x.ratings))) for x in items]


def _per_attribute(ex):
    """``ex`` with the stage inputs; with exactly one rated attribute also ``attribute`` / ``rating``
    (the per-attribute signature's own field names) so that it is a demo of that predictor."""
    from personalign.signatures.judge import PairwiseJudgeSignature

    ratings = dict(ex.ratings)
    if len(ratings) == 1:
        (attr, gold), = ratings.items()
        (extra,) = [k for k in PairwiseJudgeSignature.input_fields if k not in inputs()]
        (out,) = PairwiseJudgeSignature.output_fields
        ex = ex.copy(**{extra: attr, out: gold})
    return ex.with_inputs(*inputs())


def _prefeval_pairs(path, seed: int) -> list:
    import dspy

    from personalign.programs.common.stage1 import prefeval_option_pairs

    out = []
    for pair in prefeval_option_pairs(path, seed=seed):
        r, first = pair["record"], pair["follow_first"]
        a, b = (pair["follows"], pair["violates"]) if first else (pair["violates"], pair["follows"])
        out.append(dspy.Example(id=r.id, prompt_id=r.id, topic=r.topic, split=pair["split"], profile=r.preference,
                                prompt=r.question, response_a=a, response_b=b, attributes=[r.preference],
                                ratings={r.preference: 1 if first else 5}))
    return [_per_attribute(ex) for ex in out]


def inputs() -> tuple[str, ...]:
    """The stage's input fields: those of its signature
    (:class:`personalign.signatures.judge.PairwiseRatingsSignature`), in order."""
    from personalign.signatures.judge import PairwiseRatingsSignature

    return tuple(PairwiseRatingsSignature.input_fields)

__all__ = ["load_ratings"]
