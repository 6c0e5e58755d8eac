"""Non-LLM baseline: BM25 of the prompt (query) against the attribute (document), thresholded.

Source: the seed study's BM25 baseline (F1 0.243 on its full set). Implementation: ``bm25s``
(Lucene variant, English stopwords). Score of a pair = BM25(prompt -> attribute) divided by the
prompt's best BM25 score over the reference corpus, so one threshold transfers across prompts of
different length (raw BM25 grows with the number of query terms). The reference corpus is the
train attributes (stored by :meth:`BM25Relevance.prepare`, label-free) plus the attributes being
scored; without a stored corpus it is the scored attributes alone. Scores lie in [0, 1].

State (JSON, no weights): ``{"threshold": float | None, "corpus": list[str]}``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Sequence


from personalign.programs.relevance._scorer import RelevanceScorer


class BM25Relevance(RelevanceScorer):
    """Predict relevant when the normalized BM25 score >= ``threshold``.

    Args:
        threshold: in [0, 1]; None until fitted by :class:`personalign.optimizers.ThresholdFit`
            (after :meth:`prepare` stored the train attributes as reference corpus).
        corpus: reference attributes for IDF and normalization (JSON state).

    Raises:
        RuntimeError: predicting before the threshold is fitted.
    """

    optimizer = "personalign.optimizers.cv_threshold:CorpusThresholdFit"  # its own fit (trainable)

    uses_lm = False

    def __init__(self, threshold: float | None = None, corpus: Sequence[str] | None = None) -> None:
        super().__init__()
        self.threshold = threshold
        self.corpus = list(corpus or [])

    def prepare(self, trainset: Sequence) -> None:
        """Store the train attributes (deduplicated, label-free) as the reference corpus."""
        self.corpus = list(OrderedDict.fromkeys(ex.attribute for ex in trainset))

    def score_batch(self, examples: Sequence) -> list[float]:
        """Normalized BM25 score in [0, 1] per example (shape (n,))."""
        import bm25s
        import numpy as np

        if not examples:
            return []
        docs = list(OrderedDict.fromkeys(list(self.corpus) + [ex.attribute for ex in examples]))
        doc_index = {d: i for i, d in enumerate(docs)}
        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(docs, stopwords="en", show_progress=False), show_progress=False)
        out = np.zeros(len(examples), dtype=float)
        by_prompt: "OrderedDict[str, list[int]]" = OrderedDict()
        for i, ex in enumerate(examples):
            by_prompt.setdefault(ex.prompt, []).append(i)
        for prompt, idx in by_prompt.items():
            query = bm25s.tokenize([prompt], stopwords="en", return_ids=False, show_progress=False)[0]
            s = np.asarray(retriever.get_scores(query), dtype=float) if query else np.zeros(len(docs))
            top = s.max() if s.size else 0.0
            for i in idx:
                out[i] = s[doc_index[examples[i].attribute]] / top if top > 0 else 0.0
        return [float(v) for v in out]

    def dump_state(self, *args, **kwargs) -> dict:
        return {"threshold": self.threshold, "corpus": list(self.corpus)}

    def load_state(self, state: dict) -> "BM25Relevance":
        self.threshold = state.get("threshold")
        self.corpus = list(state.get("corpus") or [])
        return self
