"""Tasks derived from PrefEval records — deterministic, documented constructions.

* :func:`relevance_pairs` — a preference is relevant to its own question (positive); paired
  with questions of *other topics* it is irrelevant (negatives). Same-topic questions are
  never used as negatives, because two preferences of one topic (e.g. two diets) can bear on
  each other's questions.
* :func:`verification_pairs` — a preference is supported by its own persona-driven
  conversation (accepted) and unsupported by the conversations of records of other topics
  (rejected).
* :func:`extraction_targets` — the gold preference hidden in a persona-driven (or
  choice-based) conversation.

Determinism: negatives for a record are drawn by ``random.Random(f"{seed}:{record.id}")``
from the other-topic records sorted by id, so a record's pairs depend only on the seed and
the candidate pool, not on input order. To keep splits leakage-free, split the *records*
first (e.g. by topic with :func:`~personalign.data.splits.group_split`) and derive pairs
within each side; negatives then never cross sides.
"""

from __future__ import annotations

import random
from typing import Iterable, Sequence

from personalign.data.prefeval import PrefEvalRecord, render_turns
from personalign.data.schemas import ExtractionExample, RelevanceExample, VerificationExample
from personalign.errors import DataError

__all__ = ["relevance_pairs", "verification_pairs", "extraction_targets"]


def _other_topic_sampler(records: Sequence[PrefEvalRecord], k: int, seed: int):
    if k < 0:
        raise ValueError(f"negatives_per_positive must be >= 0, got {k}")
    by_id = sorted(records, key=lambda r: r.id)
    topics = {r.topic for r in by_id}
    if k > 0 and len(topics) < 2:
        raise DataError("records", None, "topic", "irrelevant pairs need records of at least 2 topics")

    def sample(rec: PrefEvalRecord) -> list[PrefEvalRecord]:
        pool = [o for o in by_id if o.topic != rec.topic]
        rng = random.Random(f"{seed}:{rec.id}")
        return rng.sample(pool, min(k, len(pool)))

    return sample


def relevance_pairs(records: Iterable[PrefEvalRecord], *, negatives_per_positive: int = 3,
                    seed: int = 0) -> list[RelevanceExample]:
    """(preference, question) relevance pairs from PrefEval records (any kind).

    For each record: one positive ``(its preference, its question)`` and
    ``negatives_per_positive`` negatives ``(its preference, question of a record of another
    topic)``. The positive rate is ``1 / (1 + negatives_per_positive)``.

    Ids: ``<record id>:rel:pos`` and ``<record id>:rel:neg:<other record id>``. ``user_id``
    is the preference owner, ``prompt_id`` the question's group, ``topic`` the question's
    topic.
    """
    recs = list(records)
    sample = _other_topic_sampler(recs, negatives_per_positive, seed)
    out: list[RelevanceExample] = []
    for r in recs:
        out.append(RelevanceExample(id=f"{r.id}:rel:pos", attribute=r.preference, prompt=r.question,
                                    relevant=True, prompt_id=r.prompt_id, user_id=r.user_id, topic=r.topic))
        for o in sample(r):
            out.append(RelevanceExample(id=f"{r.id}:rel:neg:{o.id}", attribute=r.preference, prompt=o.question,
                                        relevant=False, prompt_id=o.prompt_id, user_id=r.user_id, topic=o.topic))
    return out


def verification_pairs(records: Iterable[PrefEvalRecord], *, negatives_per_positive: int = 1,
                       seed: int = 0) -> list[VerificationExample]:
    """(conversation, preference) verification pairs from persona-driven records.

    For each record: the preference against its own conversation → ``accepted=True``; the
    preferences of ``negatives_per_positive`` records of other topics against this
    conversation → ``accepted=False``. ``evidence`` is the conversation rendered as
    ``User: ...`` / ``Assistant: ...`` paragraphs; ``user_id`` is the conversation's owner.

    Raises:
        DataError: a record without a conversation (not persona-driven/choice-based).
    """
    recs = list(records)
    for r in recs:
        if not r.conversation:
            raise DataError(r.id, None, "conversation", "verification pairs need persona-driven records")
    sample = _other_topic_sampler(recs, negatives_per_positive, seed)
    out: list[VerificationExample] = []
    for r in recs:
        evidence = render_turns(r.conversation or [])
        out.append(VerificationExample(id=f"{r.id}:ver:pos", evidence=evidence, attribute=r.preference,
                                       accepted=True, user_id=r.user_id, prompt_id=r.prompt_id, topic=r.topic))
        for o in sample(r):
            out.append(VerificationExample(id=f"{r.id}:ver:neg:{o.id}", evidence=evidence, attribute=o.preference,
                                           accepted=False, user_id=r.user_id, prompt_id=r.prompt_id, topic=r.topic))
    return out


def extraction_targets(records: Iterable[PrefEvalRecord]) -> list[ExtractionExample]:
    """Extraction targets: each conversation with its hidden gold preference.

    Raises:
        DataError: a record without a conversation.
    """
    out = []
    for r in records:
        if not r.conversation:
            raise DataError(r.id, None, "conversation", "extraction targets need persona-driven or choice-based records")
        out.append(ExtractionExample(id=f"{r.id}:ext", conversation=list(r.conversation), gold_attributes=[r.preference],
                                     persona=r.persona, user_id=r.user_id, topic=r.topic))
    return out
