"""Strategies of the ``mcq`` stage: pick the option that suits the user.

Every strategy is a ``dspy.Module`` with ``forward(context, question, options, attributes)``
returning ``dspy.Prediction(answer_index: int, score=None)`` (0-based; the stage's output,
compared with ``gold_index`` by :func:`personalign.metrics.mcq_correct`). LLM strategies narrow the
typed answer to ``Literal[0..n-1]`` per question (:func:`~personalign.signatures.mcq.with_option_count`),
so on the embedded backend the grammar can only emit a valid index; an out-of-range answer from
another backend raises ``ValueError`` (counted as a failure by ``run_program``).

* :class:`NoProfileMCQ` (``no-profile``) -- the question and options only.
* :class:`ContextMCQ` (``gold-preference``) -- plus ``context``: in PrefEval the user's stated
  preference (the explicit setting of PrefEval's classification task); in PersonaMem the
  conversation so far. Contexts longer than ``max_context_chars`` (default 6000, ~1500 tokens)
  keep their end (:func:`~personalign.programs.common.text.truncate_tail`).
* :class:`AttributesMCQ` (``extracted-attributes``) -- plus the user's extracted attributes
  (at most 12, each cut to 300 characters).
* :class:`EmbeddingMCQ` (``minilm-preference``) -- LM-free baseline: the option whose MiniLM
  embedding is closest to the context (else the attributes, else the question).
* :class:`RandomMCQ` (``random``) -- chance baseline: a seeded uniform pick per question.

Budget: options are cut to 300 characters each; the prompt of the LLM strategies then stays
under ~2500 tokens of the embedded models' 4096-token window.
"""

from __future__ import annotations

import hashlib
import random
from typing import Sequence

import dspy

from personalign.programs.common.text import clip_list, truncate_head, truncate_tail
from personalign.signatures.mcq import (
    MCQAttributesSignature,
    MCQContextSignature,
    MCQSignature,
    with_option_count,
)

MAX_OPTION_CHARS = 300
MAX_QUESTION_CHARS = 1500


def _options(options: Sequence[str]) -> list[str]:
    opts = [truncate_head(str(o).strip(), MAX_OPTION_CHARS) for o in options]
    if len(opts) < 2:
        raise ValueError(f"a multiple-choice question needs at least 2 options, got {len(opts)}")
    return opts


def _index(value, n: int) -> int:
    if isinstance(value, bool):
        raise ValueError(f"answer_index must be an integer, got {value!r}")
    idx = int(value)
    if not 0 <= idx < n:
        raise ValueError(f"answer_index {idx} out of range for {n} options")
    return idx


class _LLMChoice(dspy.Module):
    uses_lm = True
    _signature: type[dspy.Signature] = MCQSignature

    def __init__(self) -> None:
        super().__init__()
        self.choose = dspy.Predict(self._signature)

    def _choose(self, options: Sequence[str], **inputs) -> dspy.Prediction:
        opts = _options(options)
        sig = with_option_count(self.choose.signature, len(opts))
        out = self.choose(signature=sig, options=opts, **inputs)
        return dspy.Prediction(answer_index=_index(out.answer_index, len(opts)), score=None)


class NoProfileMCQ(_LLMChoice):
    """``no-profile``: ``dspy.Predict(MCQSignature)`` on the question and options; ignores the
    context and attributes. One LM call."""

    _signature = MCQSignature

    def forward(self, question: str, options: Sequence[str], context: str = "", attributes=None) -> dspy.Prediction:
        return self._choose(options, question=truncate_head(question, MAX_QUESTION_CHARS))


class ContextMCQ(_LLMChoice):
    """``gold-preference``: ``dspy.Predict(MCQContextSignature)`` with the context (the stated
    preference in PrefEval). One LM call.

    Args:
        max_context_chars: contexts longer than this keep their end (default 6000 characters).
    """

    _signature = MCQContextSignature

    def __init__(self, max_context_chars: int = 6000) -> None:
        super().__init__()
        self.max_context_chars = int(max_context_chars)

    def forward(self, question: str, options: Sequence[str], context: str = "", attributes=None) -> dspy.Prediction:
        ctx = truncate_tail(str(context or "").strip(), self.max_context_chars) or "(nothing)"
        return self._choose(options, context=ctx, question=truncate_head(question, MAX_QUESTION_CHARS))


class AttributesMCQ(_LLMChoice):
    """``extracted-attributes``: ``dspy.Predict(MCQAttributesSignature)`` with the user's
    attributes (at most ``max_attributes``, each cut to 300 characters). One LM call. With no
    attributes the model sees an empty list (the no-profile condition)."""

    _signature = MCQAttributesSignature

    def __init__(self, max_attributes: int = 12) -> None:
        super().__init__()
        self.max_attributes = int(max_attributes)

    def forward(self, question: str, options: Sequence[str], context: str = "", attributes=None) -> dspy.Prediction:
        attrs = clip_list(attributes, max_items=self.max_attributes, max_chars=300)
        return self._choose(options, attributes=attrs, question=truncate_head(question, MAX_QUESTION_CHARS))


class EmbeddingMCQ(dspy.Module):
    """``minilm-preference``: LM-free baseline. Embeds the user text -- the context when present,
    else the attributes joined, else the question -- and each option with MiniLM
    (:mod:`personalign.lm.embedder`), and picks the option of highest cosine similarity;
    ``score`` is that similarity. ``predict_batch`` embeds all texts of a batch at once."""

    uses_lm = False

    @staticmethod
    def _query(question, context, attributes) -> str:
        ctx = str(context or "").strip()
        if ctx:
            return truncate_tail(ctx, 2000)
        attrs = clip_list(attributes, max_items=12, max_chars=300)
        return " ".join(attrs) if attrs else str(question)

    def predict_batch(self, examples: Sequence) -> list[dspy.Prediction]:
        import numpy as np

        from personalign.lm.embedder import embed

        queries = [self._query(e.question, getattr(e, "context", ""), getattr(e, "attributes", None)) for e in examples]
        opts = [_options(e.options) for e in examples]
        texts = sorted(set(queries) | {o for os_ in opts for o in os_})
        index = {t: i for i, t in enumerate(texts)}
        vecs = embed(texts)
        out = []
        for q, os_ in zip(queries, opts):
            sims = vecs[[index[o] for o in os_]] @ vecs[index[q]]
            best = int(np.argmax(sims))
            out.append(dspy.Prediction(answer_index=best, score=float(sims[best])))
        return out

    def forward(self, question: str, options: Sequence[str], context: str = "", attributes=None) -> dspy.Prediction:
        ex = dspy.Example(question=question, options=list(options), context=context, attributes=attributes)
        return self.predict_batch([ex])[0]


class RandomMCQ(dspy.Module):
    """``random``: chance baseline; picks uniformly with ``random.Random(sha1(seed, question,
    options))`` so a rerun gives the same picks. Expected accuracy 1/n."""

    uses_lm = False

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.seed = int(seed)

    def forward(self, question: str, options: Sequence[str], context: str = "", attributes=None) -> dspy.Prediction:
        opts = _options(options)
        key = hashlib.sha1(f"{self.seed}\x00{question}\x00{'|'.join(opts)}".encode()).hexdigest()
        return dspy.Prediction(answer_index=random.Random(key).randrange(len(opts)), score=None)


__all__ = ["NoProfileMCQ", "ContextMCQ", "AttributesMCQ", "EmbeddingMCQ", "RandomMCQ"]
