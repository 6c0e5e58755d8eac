"""PrefEval splits and example conversion shared by the Stage 1 loaders (extraction, verification).

PrefEval records are split **by topic** (seeded :func:`~personalign.data.splits.group_split`,
shares train 0.5 / val 0.25 / test 0.25 -- with the 16 public topics 8 / 4 / 4), so no
conversation, preference or topic crosses splits; the group of an example (grouped CV, the
teleprompters' dev split) is its topic, else its user, else its id.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

SPLIT_FRACTIONS = {"train": 0.5, "val": 0.25, "test": 0.25}
SPLIT_SEED = 0


def prefeval_topic_splits(path: str | Path, *, kind: str = "persona", seed: int = SPLIT_SEED,
                          fractions: dict[str, float] | None = None) -> dict[str, list]:
    """PrefEval records of ``kind`` split by topic: ``{"train": [...], "val": [...], "test": [...]}``.

    Raises:
        DataError: unreadable PrefEval data, or fewer topics than splits.
    """
    from personalign.data import load_prefeval
    from personalign.data.splits import group_split
    from personalign.errors import DataError

    records = load_prefeval(path, kind)
    fractions = dict(fractions or SPLIT_FRACTIONS)
    topics = sorted({r.topic for r in records})
    if len(topics) < len(fractions):
        raise DataError(path, None, "topic", f"{len(topics)} topic(s) cannot fill the {len(fractions)} splits "
                                             f"{', '.join(fractions)} without sharing a topic")
    return group_split(records, by="topic", fractions=fractions, seed=seed)


def prefeval_option_pairs(path: str | Path, *, seed: int = 0) -> list[dict]:
    """One labelled pair per PrefEval MCQ question, split by topic like :func:`prefeval_topic_splits`.

    PrefEval's authors wrote the options: the first of ``classification_task_options`` follows the
    stated preference, the other three violate it. Per record, ``random.Random(f"{seed}:{id}")``
    draws one violating option and then the order the pair is shown in.

    Returns:
        dicts ``{"split", "record", "follows", "violates", "follow_first"}`` (``record`` a
        :class:`~personalign.data.prefeval.PrefEvalRecord`; ``follow_first``: the following option
        is shown first, as response A).

    Raises:
        DataError: unreadable PrefEval MCQ data, or fewer topics than splits.
    """
    import random

    out = []
    for split, records in prefeval_topic_splits(path, kind="mcq").items():
        for r in records:
            options = list(r.mcq_options or [])
            rng = random.Random(f"{seed}:{r.id}")
            bad = rng.choice(range(1, len(options)))
            out.append({"split": split, "record": r, "follows": options[0], "violates": options[bad],
                        "follow_first": rng.random() < 0.5})
    return out


def group_of(example) -> str:
    """The CV group of a verification or extraction example: topic, else user id, else id."""
    for key in ("topic", "user_id", "id"):
        v = getattr(example, key, None)
        if v:
            return str(v)
    return "all"


def to_examples(records: Sequence, inputs: Sequence[str], split: str | None = None) -> list:
    """Canonical (pydantic) task examples as ``dspy.Example``s with ``inputs`` marked (the stage
    signature's input fields), a ``group`` (:func:`group_of`) and, when given, ``split``."""
    out = []
    for ex in records:
        if split is not None:
            ex = ex.model_copy(update={"split": split})
        d = ex.to_dspy().with_inputs(*inputs)
        d["group"] = group_of(ex)
        out.append(d)
    return out


def load_prefeval_or_jsonl(path: str | Path, kind: str, derive, inputs: Sequence[str]) -> list:
    """The examples of a stage-1 stage (extraction, verification) from ``path``: a PrefEval folder
    or topic ``.json`` file (records split by topic with :func:`prefeval_topic_splits`, then
    ``derive(records)`` within each split), or a canonical ``kind`` ``.jsonl`` file.

    Raises:
        DataError: missing file, malformed record or line, unknown format.
    """
    from personalign.data import read_examples
    from personalign.errors import DataError

    p = Path(path)
    if not p.exists():
        raise DataError(p, None, None, "file not found")
    if p.is_dir() or p.suffix == ".json":
        return [ex for split, records in prefeval_topic_splits(p).items()
                for ex in to_examples(derive(records), inputs, split)]
    if p.suffix == ".jsonl":
        return to_examples(read_examples(p, kind), inputs)
    raise DataError(p, None, None, f"expected a PrefEval folder or topic .json file, or canonical {kind} .jsonl")


__all__ = ["SPLIT_FRACTIONS", "SPLIT_SEED", "group_of", "load_prefeval_or_jsonl", "prefeval_option_pairs",
           "prefeval_topic_splits", "to_examples"]
