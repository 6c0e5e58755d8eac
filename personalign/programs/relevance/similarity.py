"""Non-LLM baseline: MiniLM cosine similarity with a decision threshold.

Source: the seed study's sentence-embedding baseline (F1 0.384 on its full set). The threshold
is a learned parameter, fitted on train by :class:`personalign.optimizers.ThresholdFit`; it is
saved in the program's JSON state.
"""

from __future__ import annotations


from personalign.programs.relevance._scorer import RelevanceScorer


class EmbeddingSimilarity(RelevanceScorer):
    """Predict relevant when cos(MiniLM(attribute), MiniLM(prompt)) >= ``threshold``.

    Attributes:
        threshold: cosine similarity in [-1, 1]; None until fitted (then predicting raises).
    """

    optimizer = "personalign.optimizers.threshold:ThresholdFit"  # its own fit (trainable)

    uses_lm = False

    def __init__(self, threshold: float | None = None) -> None:
        super().__init__()
        self.threshold = threshold

    def score_batch(self, examples) -> "list[float]":
        """Cosine similarity for each example (shape (n,)); embeds unique texts once."""
        from personalign.lm.embedder import cosine_pairs

        return [float(s) for s in cosine_pairs([e.attribute for e in examples], [e.prompt for e in examples])]

    def dump_state(self, *args, **kwargs) -> dict:
        return {"threshold": self.threshold}

    def load_state(self, state: dict) -> "EmbeddingSimilarity":
        self.threshold = state.get("threshold")
        return self
