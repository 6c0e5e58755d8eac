"""The attribute extractor: chunks of user turns -> typed attributes -> filtered, pooled (and merged).

``AttributeExtractor.forward(conversation)`` (the stage's strategies ``extract`` and
``extract-merge``):

1. :func:`personalign.preprocess.normalize_turns` validates the turns (bad roles or non-text
   content raise :class:`~personalign.errors.DataError`; invalid UTF-8 becomes U+FFFD).
2. The user turns are chunked on turn boundaries
   (:func:`~personalign.programs.extraction.chunking.chunk_user_turns`) into chunks of at most
   ``max_chunk_chars`` (50,000) characters that fit the model's budget
   (:func:`~personalign.programs.common.budget.prompt_budget`): on hosted models 50,000
   characters; on the embedded 4096-token models the tokens left by the exact prompt framing
   (~650 tokens) and the answer (:data:`OUTPUT_TOKENS`), about 1,100 tokens (~4,500 characters of
   English) -- chunks are packed at 4 characters per token, measured with the model's tokenizer,
   and re-packed smaller when one does not fit.
3. One ``dspy.Predict(ExtractionSignature)`` call per chunk returns a typed list of
   :class:`~personalign.signatures.extraction.ExtractedAttribute` (attribute, reason, confidence,
   evidence turn ids).
4. Per attribute: confidence clamped to [0, 1]; evidence ids kept only if they are user turns of
   that chunk; dropped when the text is blank, when ``confidence < min_confidence`` (0.4), or --
   with ``require_evidence`` (default) -- when no valid user-turn id remains; exact duplicates
   (case- and space-insensitive) keep the most confident.
5. The chunks' attributes are pooled; with ``merge=True`` they are merged
   (:func:`~personalign.programs.extraction.merge.merge_attributes`, cosine 0.7).

Defined results for degenerate input (no LM call): an empty history or one without user text
gives ``attributes=[]`` with ``note`` saying why. A single huge message is cut to
``max_turn_chars`` (20,000) and the cut turn ids are reported in ``truncated_turns``.

Output: ``dspy.Prediction(attributes: list[ExtractedAttribute] (MergedAttribute when merged),
n_chunks, n_proposed, dropped: {"blank", "low_confidence", "no_user_evidence", "duplicate"},
truncated_turns, note)``.
"""

from __future__ import annotations

from typing import Any

import dspy

from personalign.programs.extraction.chunking import MAX_CHUNK_CHARS, MAX_TURN_CHARS, Chunking, chunk_user_turns
from personalign.programs.common.budget import Budget, prompt_budget
from personalign.signatures.extraction import ExtractedAttribute, ExtractionSignature

MIN_CONFIDENCE = 0.4
OUTPUT_TOKENS = 2300
"""Output budget of one extraction call on an embedded model: at least the longest answer the
bounded schema allows (2,215 characters for 5 attributes), because the embedded backend counts
one character per token when fitting a schema to the budget and would otherwise shorten every
string bound (a test pins this). Real answers are far shorter; the budget only reserves room."""


def _key(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(".")


def clean_attributes(raw: Any, chunk_turn_ids: list[int], *, min_confidence: float = MIN_CONFIDENCE,
                     require_evidence: bool = True) -> tuple[list[ExtractedAttribute], dict[str, int]]:
    """Apply step 4 of the module doc to one call's output (``list`` of ExtractedAttribute, of
    dicts, or an ``AttributeList``). Returns ``(attributes, dropped counts)``."""
    items = getattr(raw, "root", raw) or []
    dropped = {"blank": 0, "low_confidence": 0, "no_user_evidence": 0, "duplicate": 0}
    allowed = set(chunk_turn_ids)
    best: dict[str, ExtractedAttribute] = {}
    for item in items:
        a = item if isinstance(item, ExtractedAttribute) else ExtractedAttribute.model_validate(
            item.model_dump() if hasattr(item, "model_dump") else item)
        text = " ".join(a.attribute.split())
        if not text:
            dropped["blank"] += 1
            continue
        conf = min(1.0, max(0.0, float(a.confidence)))
        if conf < min_confidence:
            dropped["low_confidence"] += 1
            continue
        ids = sorted({int(i) for i in a.evidence_turn_ids if int(i) in allowed})
        if require_evidence and not ids:
            dropped["no_user_evidence"] += 1
            continue
        clean = ExtractedAttribute(attribute=text, reason=" ".join(a.reason.split()), confidence=conf,
                                   evidence_turn_ids=ids)
        k = _key(text)
        if k in best:
            dropped["duplicate"] += 1
            if conf <= (best[k].confidence or 0.0):
                continue
        best[k] = clean
    return list(best.values()), dropped


class AttributeExtractor(dspy.Module):
    """Extract user attributes from a conversation or history (module doc).

    Args:
        max_chunk_chars: chunk size cap in characters (50,000; lowered to the model's budget).
        min_confidence: drop attributes below this confidence (0.4).
        require_evidence: drop attributes citing no user turn of their chunk.
        max_turn_chars: cut single user turns longer than this (20,000).
        merge: merge near-duplicates across chunks (:mod:`~personalign.programs.extraction.merge`).
        similarity_threshold: cosine threshold of the merge (0.7).

    Raises (forward):
        DataError: malformed turns (see :func:`personalign.preprocess.normalize_turns`).
    """

    uses_lm = True

    def __init__(self, *, max_chunk_chars: int = MAX_CHUNK_CHARS, min_confidence: float = MIN_CONFIDENCE,
                 require_evidence: bool = True, max_turn_chars: int = MAX_TURN_CHARS, merge: bool = False,
                 similarity_threshold: float = 0.7) -> None:
        super().__init__()
        if not 0 <= min_confidence <= 1:
            raise ValueError(f"min_confidence must be in [0, 1], got {min_confidence}")
        self.max_chunk_chars = int(max_chunk_chars)
        self.min_confidence = float(min_confidence)
        self.require_evidence = bool(require_evidence)
        self.max_turn_chars = int(max_turn_chars)
        self.merge = bool(merge)
        self.similarity_threshold = float(similarity_threshold)
        self.extract = dspy.Predict(ExtractionSignature)

    def budget(self) -> Budget:
        """The chunk :class:`~personalign.programs.common.budget.Budget` for the active LM."""
        return prompt_budget(self.extract, {}, "user_turns", output_tokens=OUTPUT_TOKENS)

    def chunking(self, turns, budget: Budget | None = None) -> Chunking:
        """Chunks of ``turns`` that fit ``budget`` (default :meth:`budget`).

        Raises:
            ContextWindowError: no chunk size down to 100 characters fits (a budget of a few tokens).
        """
        from personalign.errors import ContextWindowError

        budget = budget or self.budget()
        max_chars = min(self.max_chunk_chars, budget.approx_chars())
        while True:
            chunking = chunk_user_turns(turns, max_chars=max_chars, max_turn_chars=self.max_turn_chars)
            sizes = [budget.measure(c.text) if len(c.text) <= budget.limit * 10 else len(c.text)
                     for c in chunking.chunks if not budget.fits(c.text)]
            if not sizes:
                return chunking
            if max_chars <= 100:
                raise ContextWindowError(f"no chunk of user turns fits a budget of {budget.limit} {budget.unit}")
            max_chars = max(100, int(max_chars * budget.limit / max(sizes) * 0.9))

    def _call(self, text: str):
        from personalign.lm import is_local
        from personalign.programs.common.budget import active_model

        model = active_model()
        if model and is_local(model):
            return self.extract(user_turns=text, config={"max_tokens": OUTPUT_TOKENS})
        return self.extract(user_turns=text)

    def forward(self, conversation) -> dspy.Prediction:
        from personalign.preprocess import normalize_turns

        turns = normalize_turns(conversation)
        empty = {"blank": 0, "low_confidence": 0, "no_user_evidence": 0, "duplicate": 0}
        if not any(t.role == "user" and t.content.strip() for t in turns):
            note = "empty history" if not turns else "no user turns with text"
            return dspy.Prediction(attributes=[], n_chunks=0, n_proposed=0, dropped=empty, truncated_turns=[], note=note)
        chunking = self.chunking(turns)
        pooled: list[ExtractedAttribute] = []
        dropped = dict(empty)
        proposed = 0
        for chunk in chunking.chunks:
            out = self._call(chunk.text)
            raw = getattr(out.attributes, "root", out.attributes) or []
            proposed += len(raw)
            attrs, d = clean_attributes(raw, chunk.turn_ids, min_confidence=self.min_confidence,
                                        require_evidence=self.require_evidence)
            pooled.extend(attrs)
            for k, v in d.items():
                dropped[k] += v
        if len(chunking.chunks) > 1:  # duplicates across chunks
            pooled, d = clean_attributes(pooled, sorted({i for c in chunking.chunks for i in c.turn_ids}),
                                         min_confidence=self.min_confidence, require_evidence=self.require_evidence)
            dropped["duplicate"] += d["duplicate"]
        if self.merge and pooled:
            from personalign.programs.extraction.merge import merge_attributes

            pooled = merge_attributes(pooled, threshold=self.similarity_threshold)
        return dspy.Prediction(attributes=pooled, n_chunks=len(chunking.chunks), n_proposed=proposed, dropped=dropped,
                               truncated_turns=chunking.truncated_turns, note="")


class MergingExtractor(AttributeExtractor):
    """:class:`AttributeExtractor` with ``merge=True`` (strategy ``extract-merge``)."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("merge", True)
        super().__init__(**kwargs)


__all__ = ["AttributeExtractor", "MergingExtractor", "clean_attributes", "MIN_CONFIDENCE", "OUTPUT_TOKENS"]
