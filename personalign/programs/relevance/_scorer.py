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
