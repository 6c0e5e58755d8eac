"""Generalizing extraction: the user's own sentences, plus the lasting preference each hinting
sentence implies, stated in general terms by the LM.

``PreferenceGeneralizer.forward(conversation)`` (strategy ``extract-generalize``):

1. :func:`personalign.preprocess.normalize_turns` validates the turns (bad roles or non-text
   content raise :class:`~personalign.errors.DataError`).
2. The candidates are the user's first-person sentences
   (:func:`~personalign.programs.extraction.baseline.first_person_sentences`). With
   ``keep_sentences`` (the default) every one of them is kept as written, as the LM-free
   ``first-person-bare`` control does (reason :data:`SENTENCE_REASON`).
3. The candidates that carry a preference cue (:data:`PREFERENCE_CUE`: "prefer", "avoid",
   "usually", "tend to", "dislike", "as someone who", ...), at most ``max_sentences`` (10), each
   get one ``dspy.Predict(GeneralizeSignature)`` call that sees the sentence and its whole user
   message and returns the lasting preference in general terms, in the user's voice (on a train
   conversation whose gold is "I prefer not to live in places with a high cost of living", the
   1.5B wrote "I prefer living in low-cost areas."; often it only restates the sentence).
4. Blank and ``none`` answers are dropped (``dropped["none"]``), exact duplicates too; the rest
   become :class:`~personalign.signatures.extraction.ExtractedAttribute` with the sentence's turn
   as evidence, reason ``generalized from "<sentence>"`` and confidence 0.5.

Why: PrefEval's persona-driven conversations imply a preference through one instance ("I usually
prefer ground-level venues"), while the preference to recover is general ("I prefer not to dine at
rooftop locations"); the bare sentence then falls short of the recovery threshold. Why only cue
sentences: on the 429 PrefEval train conversations the first-person sentence closest to the gold
preference carries a cue in 96% of them, and about 1.9 of the ~10 first-person sentences of a
conversation do, so the LM is called ~2 times per conversation instead of ~10. The cue list and
the prompt were chosen on train conversations only.

Output: ``dspy.Prediction(attributes: list[ExtractedAttribute], generalized: list[ExtractedAttribute]
(the LM's part alone), n_candidates, n_cued, dropped: {"none", "duplicate", "over_limit"}, note)``;
an empty history or one without first-person user sentences gives ``attributes=[]`` and a
``note``, with no LM call.
"""

from __future__ import annotations

import re

import dspy

from personalign.programs.extraction.baseline import SENTENCE_REASON, first_person_sentences
from personalign.programs.extraction.extractor import clean_attributes
from personalign.programs.extraction.restate import call_config, is_none
from personalign.signatures.extraction import MAX_ATTRIBUTE_CHARS, ExtractedAttribute, GeneralizeSignature

MAX_SENTENCES = 10
MAX_MESSAGE_CHARS = 4_000
PREFERENCE_CUE = re.compile(
    r"\b(prefer\w*|avoid\w*|tend to|usually|dislike\w*|hate|love|fan of|can't stand|cannot stand|allergic|"
    r"as someone who|rather|never|uncomfortable|aversion|fear|not really into|not into|stay away|steer clear|"
    r"enjoy|favorite|favourite)\b", re.IGNORECASE)
"""Words that mark a sentence as stating a preference, a dislike or a trait (module doc, step 3)."""


def cued(sentence: str) -> bool:
    """True when ``sentence`` carries a :data:`PREFERENCE_CUE`."""
    return PREFERENCE_CUE.search(sentence) is not None


class PreferenceGeneralizer(dspy.Module):
    """The user's sentences plus the LM's general restatement of the hinting ones (module doc).

    Args:
        max_sentences: generalize at most this many cue sentences per conversation (10; >= 1);
            the rest are counted in ``dropped["over_limit"]``.
        keep_sentences: also return every first-person sentence as written (True).

    Raises:
        ValueError: ``max_sentences`` < 1.
        DataError (forward): malformed turns.
    """

    uses_lm = True

    def __init__(self, *, max_sentences: int = MAX_SENTENCES, keep_sentences: bool = True) -> None:
        super().__init__()
        if max_sentences < 1:
            raise ValueError(f"max_sentences must be >= 1, got {max_sentences}")
        self.max_sentences = int(max_sentences)
        self.keep_sentences = bool(keep_sentences)
        self.generalize = dspy.Predict(GeneralizeSignature)

    def lm_calls_per_run(self, example) -> int:
        """Generalizing calls of one forward pass on ``example``: one per cue sentence, at most
        ``max_sentences`` (read by the LM-call projection, :mod:`personalign.optimizers.budget`)."""
        from personalign.preprocess import normalize_turns

        conversation = example.get("conversation") if hasattr(example, "get") else getattr(example, "conversation")
        sentences = first_person_sentences(normalize_turns(conversation or []))
        return min(self.max_sentences, sum(cued(s) for _, s in sentences))

    def forward(self, conversation) -> dspy.Prediction:
        from personalign.preprocess import normalize_turns

        turns = normalize_turns(conversation)
        candidates = first_person_sentences(turns)
        hinting = [(i, s) for i, s in candidates if cued(s)]
        dropped = {"none": 0, "duplicate": 0, "over_limit": max(0, len(hinting) - self.max_sentences)}
        if not candidates:
            note = "empty history" if not turns else "no first-person user sentences"
            return dspy.Prediction(attributes=[], generalized=[], n_candidates=0, n_cued=0, dropped=dropped, note=note)
        generalized = []
        for turn_id, sentence in hinting[: self.max_sentences]:
            out = self.generalize(message=turns[turn_id].content[:MAX_MESSAGE_CHARS], sentence=sentence,
                                  config=call_config())
            text = " ".join(str(out.preference or "").split())
            if is_none(text):
                dropped["none"] += 1
                continue
            generalized.append(ExtractedAttribute(attribute=text[:MAX_ATTRIBUTE_CHARS * 2],
                                                  reason=f'generalized from "{sentence[:300]}"', confidence=0.5,
                                                  evidence_turn_ids=[turn_id]))
        sentences = [ExtractedAttribute(attribute=s[:300], reason=SENTENCE_REASON, confidence=0.5,
                                        evidence_turn_ids=[i]) for i, s in candidates] if self.keep_sentences else []
        turn_ids = sorted({i for i, _ in candidates})
        generalized, d = clean_attributes(generalized, turn_ids, min_confidence=0.0)
        attrs, d_all = clean_attributes(sentences + generalized, turn_ids, min_confidence=0.0)
        dropped["duplicate"] = d_all["duplicate"] + d["duplicate"]
        return dspy.Prediction(attributes=attrs, generalized=generalized, n_candidates=len(candidates),
                               n_cued=len(hinting), dropped=dropped, note="")


__all__ = ["MAX_SENTENCES", "PREFERENCE_CUE", "PreferenceGeneralizer", "cued"]
