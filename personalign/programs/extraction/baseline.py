"""LM-free extraction baseline: the user's first-person sentences, quoted.

Every sentence of a user turn that speaks about the user in the first person (contains "I",
"I'm", "I've", "my", "me", ...) becomes an attribute ``The user said: "<sentence>"`` with
confidence 0.5 and the turn as evidence; sentences shorter than 4 words are skipped. It never
generalizes (so it cannot over-generalize) and shows how far the recovery metric can be reached
by quoting alone -- at the price of many attributes per conversation (reported beside recall).

``first-person-bare`` (:class:`BareFirstPersonSentences`) keeps the same sentences without the
``The user said: "..."`` wrapper: the control that shows how much of an extractor's recall comes
from writing in the user's own voice, which PrefEval's gold preferences use ("I prefer ...").
"""

from __future__ import annotations

import re

import dspy

from personalign.signatures.extraction import ExtractedAttribute

SENTENCE_REASON = "first-person sentence"
"""The ``reason`` of every attribute that is a user's sentence as written (also used by
:mod:`~personalign.programs.extraction.generalize` to tell its sentences from its generalizations)."""

_SENT = re.compile(r"(?<=[.!?])\s+")
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|im|my|me|mine|myself)\b", re.IGNORECASE)


def first_person_sentences(turns) -> list[tuple[int, str]]:
    """``(turn id, sentence)`` for every distinct first-person sentence of at least 4 words in the
    user turns of ``turns`` (normalized :class:`~personalign.data.schemas.Turn` objects), in
    conversation order; each user turn is read up to its first 20,000 characters."""
    out: list[tuple[int, str]] = []
    seen: set[str] = set()
    for i, t in enumerate(turns):
        if t.role != "user":
            continue
        for sent in _SENT.split(t.content[:20_000]):
            sent = " ".join(sent.split())
            if len(sent.split()) < 4 or not _FIRST_PERSON.search(sent) or sent.lower() in seen:
                continue
            seen.add(sent.lower())
            out.append((i, sent))
    return out


class FirstPersonSentences(dspy.Module):
    """``forward(conversation) -> Prediction(attributes: list[ExtractedAttribute], note)``.

    Args:
        max_attributes: keep at most this many (the first ones), None for all.

    Raises (forward):
        DataError: malformed turns.
    """

    uses_lm = False

    wrapper = 'The user said: "{}"'

    def __init__(self, max_attributes: int | None = None) -> None:
        super().__init__()
        self.max_attributes = max_attributes

    def forward(self, conversation) -> dspy.Prediction:
        from personalign.preprocess import normalize_turns

        turns = normalize_turns(conversation)
        out = [ExtractedAttribute(attribute=self.wrapper.format(sent[:300]), reason=SENTENCE_REASON,
                                  confidence=0.5, evidence_turn_ids=[i]) for i, sent in first_person_sentences(turns)]
        if self.max_attributes is not None:
            out = out[: self.max_attributes]
        note = "" if turns else "empty history"
        return dspy.Prediction(attributes=out, note=note)


class BareFirstPersonSentences(FirstPersonSentences):
    """``first-person-bare``: :class:`FirstPersonSentences` with each sentence as the user wrote it
    (no wrapper); the user's-voice control (module doc)."""

    wrapper = "{}"


__all__ = ["FirstPersonSentences", "BareFirstPersonSentences", "SENTENCE_REASON", "first_person_sentences"]
