"""Sentence restating: the user's first-person sentences, each restated by the LM as an attribute.

``SentenceRestater.forward(conversation)`` (strategy ``extract-sentences``):

1. :func:`personalign.preprocess.normalize_turns` validates the turns (bad roles or non-text
   content raise :class:`~personalign.errors.DataError`).
2. The candidates are the user's first-person sentences
   (:func:`~personalign.programs.extraction.baseline.first_person_sentences`, the ``first-person``
   baseline's sentences), at most ``max_sentences`` (40) of them, in conversation order.
3. One ``dspy.Predict(RestateSignature)`` call per candidate returns a string: the lasting
   preference, dislike, habit or trait the sentence states, as one sentence starting "The user",
   or ``none``.
4. ``none`` and blank answers are dropped (counted in ``dropped["none"]``); the rest become
   :class:`~personalign.signatures.extraction.ExtractedAttribute` with the sentence's turn as
   evidence, the quoted sentence as reason and confidence 0.5 (the call gives none); exact
   duplicates are dropped; with ``merge=True`` near-duplicates are merged
   (:func:`~personalign.programs.extraction.merge.merge_attributes`, cosine 0.7).

Why per sentence: on the embedded 1.5B model the whole-chunk typed list of the ``extract``
strategy closes at once with ``[]`` on every PrefEval conversation (recall 0.0); a single
sentence in, a single string out is a task the model does (README, "Every stage on the default
model"). The price is one short call per candidate sentence (~10 per PrefEval conversation).

Output: ``dspy.Prediction(attributes: list[ExtractedAttribute] (MergedAttribute when merged),
n_candidates, n_proposed, dropped: {"none", "duplicate", "over_limit"}, note)``; an empty
history or one without first-person user sentences gives ``attributes=[]`` and a ``note``, with
no LM call.
"""

from __future__ import annotations

import dspy

from personalign.programs.extraction.baseline import first_person_sentences
from personalign.programs.extraction.extractor import clean_attributes
from personalign.signatures.extraction import (MAX_ATTRIBUTE_CHARS, ExtractedAttribute, OwnVoiceRestateSignature,
                                                RestateSignature)

MAX_SENTENCES = 40
OUTPUT_TOKENS = 400
"""Output budget of one restating call on an embedded model. It only reserves room (answers are
one sentence), but it must be large: the embedded backend bounds the free string of a typed answer
so that its longest form fits the budget at one character per token, and a budget of 96 tokens
cut every answer at ~60 characters -- the 1.5B model then finished its sentences in Chinese
("... the医院", a word per token) to fit. 400 tokens leave a bound of >= 320 characters (twice the
160 an attribute should take); a test pins it."""

_NONE = {"none", "n/a", "no", ""}


def is_none(text: str) -> bool:
    """True when a restated answer says the sentence states no attribute (``none``, blank, ...)."""
    return " ".join(text.lower().split()).strip(" .'\"`*") in _NONE


def call_config() -> dict:
    """Per-call config of a one-sentence answer: ``{"max_tokens": OUTPUT_TOKENS}`` on an embedded
    model (see :data:`OUTPUT_TOKENS`), nothing for a hosted one."""
    from personalign.lm import is_local
    from personalign.programs.common.budget import active_model

    model = active_model()
    return {"max_tokens": OUTPUT_TOKENS} if model and is_local(model) else {}


class SentenceRestater(dspy.Module):
    """Restate each first-person user sentence as an attribute (module doc).

    Args:
        max_sentences: restate at most this many candidate sentences per conversation (40; >= 1);
            the rest are counted in ``dropped["over_limit"]``.
        merge: merge near-duplicates (:mod:`~personalign.programs.extraction.merge`).
        similarity_threshold: cosine threshold of the merge (0.7).

    Raises:
        ValueError: ``max_sentences`` < 1.
        DataError (forward): malformed turns.
    """

    uses_lm = True
    signature = RestateSignature

    def __init__(self, *, max_sentences: int = MAX_SENTENCES, merge: bool = False,
                 similarity_threshold: float = 0.7) -> None:
        super().__init__()
        if max_sentences < 1:
            raise ValueError(f"max_sentences must be >= 1, got {max_sentences}")
        self.max_sentences = int(max_sentences)
        self.merge = bool(merge)
        self.similarity_threshold = float(similarity_threshold)
        self.restate = dspy.Predict(self.signature)

    def lm_calls_per_run(self, example) -> int:
        """Restating calls of one forward pass on ``example``: one per candidate sentence, at most
        ``max_sentences`` (read by the LM-call projection, :mod:`personalign.optimizers.budget`)."""
        from personalign.preprocess import normalize_turns

        conversation = example.get("conversation") if hasattr(example, "get") else getattr(example, "conversation")
        return min(self.max_sentences, len(first_person_sentences(normalize_turns(conversation or []))))

    def _call(self, sentence: str) -> str:
        return str(self.restate(sentence=sentence, config=call_config()).attribute or "")

    def forward(self, conversation) -> dspy.Prediction:
        from personalign.preprocess import normalize_turns

        turns = normalize_turns(conversation)
        candidates = first_person_sentences(turns)
        dropped = {"none": 0, "duplicate": 0, "over_limit": max(0, len(candidates) - self.max_sentences)}
        if not candidates:
            note = "empty history" if not turns else "no first-person user sentences"
            return dspy.Prediction(attributes=[], n_candidates=0, n_proposed=0, dropped=dropped, note=note)
        proposed = []
        for turn_id, sentence in candidates[: self.max_sentences]:
            text = " ".join(self._call(sentence).split())
            if is_none(text):
                dropped["none"] += 1
                continue
            proposed.append(ExtractedAttribute(attribute=text[:MAX_ATTRIBUTE_CHARS * 2], reason=f'"{sentence[:300]}"',
                                               confidence=0.5, evidence_turn_ids=[turn_id]))
        attrs, d = clean_attributes(proposed, sorted({i for i, _ in candidates}), min_confidence=0.0)
        dropped["duplicate"] = d["duplicate"]
        if self.merge and attrs:
            from personalign.programs.extraction.merge import merge_attributes

            attrs = merge_attributes(attrs, threshold=self.similarity_threshold)
        return dspy.Prediction(attributes=attrs, n_candidates=len(candidates), n_proposed=len(proposed),
                               dropped=dropped, note="")


class OwnVoiceRestater(SentenceRestater):
    """``extract-own-voice``: :class:`SentenceRestater` restating in the user's own voice ("I ...",
    :data:`~personalign.signatures.extraction.OwnVoiceRestateSignature`) instead of "The user ..."."""

    signature = OwnVoiceRestateSignature


__all__ = ["SentenceRestater", "OwnVoiceRestater", "call_config", "is_none", "MAX_SENTENCES", "OUTPUT_TOKENS"]
