"""Shared base of the scoring strategies: relevant = score >= a fitted threshold."""

from __future__ import annotations

from typing import Sequence

import dspy


class ThresholdedScorer(dspy.Module):
    """A strategy that scores (attribute, prompt) pairs in bulk and decides with a threshold.

    Subclasses implement ``score_batch(examples) -> list[float]`` (one score per example) and set
    ``threshold`` when compiled; ``fit_with`` names the optimizer that fits them (for the error
    raised when predicting unfitted).
    """

    fit_with = "ThresholdFit"
    threshold: float | None = None

    def score_batch(self, examples: Sequence) -> list[float]:
        raise NotImplementedError

    def decide(self, scores: Sequence[float], examples: Sequence) -> list[bool]:
        """``score >= threshold`` per example (subclasses may decide by rank within a group)."""
        return [s >= self.threshold for s in scores]

    def predict_batch(self, examples: Sequence) -> list[dspy.Prediction]:
        """One ``Prediction(relevant, score)`` per example, decided by :meth:`decide`.

        Raises:
            RuntimeError: not compiled (no threshold yet).
        """
        if self.threshold is None:
            raise RuntimeError(f"{type(self).__name__} has no threshold: compile it with {self.fit_with} first")
        scores = self.score_batch(examples)
        return [dspy.Prediction(relevant=r, score=s) for r, s in zip(self.decide(scores, examples), scores)]

    def forward(self, attribute: str, prompt: str) -> dspy.Prediction:
        (pred,) = self.predict_batch([dspy.Example(attribute=attribute, prompt=prompt)])
        return pred


class TopShareDecision:
    """Mixin for a :class:`ThresholdedScorer`: decide by within-group top share instead of a global
    threshold (:func:`~personalign.programs.relevance.ranked.top_share_decisions`): the top
    ``top_fraction`` of each (prompt, user) group of at least ``min_group`` examples is relevant,
    smaller groups use ``score >= threshold``. ``top_fraction`` is the positive rate of the
    training examples (:meth:`fit_top_fraction`); both are saved with the state.
    """

    min_group: int = 5
    top_fraction: float | None = None

    def fit_top_fraction(self, examples: Sequence) -> None:
        """``top_fraction`` = the share of ``examples`` whose ``relevant`` is true."""
        self.top_fraction = sum(bool(e.relevant) for e in examples) / max(1, len(examples))

    def decide(self, scores: Sequence[float], examples: Sequence) -> list[bool]:
        """Top share per group.

        Raises:
            RuntimeError: not fitted (no ``top_fraction``) or no threshold.
        """
        from personalign.programs.relevance.ranked import top_share_decisions

        if self.top_fraction is None or self.threshold is None:
            raise RuntimeError(f"{type(self).__name__} has no top_fraction/threshold: "
                               "compile it with LearnedSelectorFit first")
        return top_share_decisions(scores, examples, self.top_fraction, self.min_group, self.threshold)

    def dump_state(self, *args, **kwargs) -> dict:
        return {**super().dump_state(), "top_fraction": self.top_fraction, "min_group": self.min_group}

    def load_state(self, state: dict):
        super().load_state(state)
        self.top_fraction = state.get("top_fraction")
        self.min_group = int(state.get("min_group", self.min_group))
        return self
