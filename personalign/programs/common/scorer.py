"""One thresholded scorer: a program that scores examples in bulk and decides ``score >= threshold``.

Used by the scoring strategies of every stage (relevance: relevant when the score reaches the
threshold; verification: *rejected* when it does). The threshold is fitted by an optimizer
(``fit_with`` names it in errors); subclasses may replace the decision (:meth:`decide`, e.g. by
rank inside a group) and add fields to each prediction (:meth:`explain`).
"""

from __future__ import annotations

from typing import Any, Sequence

import dspy


class ThresholdedScorer(dspy.Module):
    """Base of the scoring strategies.

    Subclasses implement ``score_batch(examples) -> list[float]`` (one score per example) and set
    the class attributes:

    * ``output_field`` -- the stage's output field (``"relevant"``, ``"accepted"``);
    * ``positive_output`` -- its value when the decision is True (``score >= threshold``): True for
      relevance, False for verification (a high score means *reject*);
    * ``fit_with`` -- the optimizer that sets ``threshold`` (named in the unfitted error).

    Raises:
        RuntimeError: predicting before compile (no threshold).
    """

    output_field: str = "relevant"
    positive_output: bool = True
    fit_with: str = "ThresholdFit"
    threshold: float | None = None

    def score_batch(self, examples: Sequence) -> list[float]:
        raise NotImplementedError

    def require_compiled(self) -> None:
        """Raise ``RuntimeError`` unless the decision parameters are set (here: ``threshold``)."""
        if self.threshold is None:
            raise RuntimeError(f"{type(self).__name__} has no threshold: compile it with {self.fit_with} first")

    def decide(self, scores: Sequence[float], examples: Sequence) -> list[bool]:
        """``score >= threshold`` per example (subclasses may decide by rank within a group)."""
        return [s >= self.threshold for s in scores]

    def explain(self, examples: Sequence, scores: Sequence[float], decisions: Sequence[bool]) -> list[dict[str, Any]] | None:
        """Extra prediction fields per example (e.g. a rationale); None adds none."""
        return None

    def decision_notes(self, examples: Sequence) -> list[str | None] | None:
        """Per example, how :meth:`decide` decided it when that differs from the batch rule (e.g. a
        group too small to rank falls back to the threshold); None: every example by the rule."""
        return None

    def predict_batch(self, examples: Sequence) -> list[dspy.Prediction]:
        """One ``Prediction(<output_field>, score, ...)`` per example, decided by :meth:`decide`
        (plus ``decision_note`` where :meth:`decision_notes` gives one).

        Raises:
            RuntimeError: not compiled (:meth:`require_compiled`).
        """
        self.require_compiled()
        scores = self.score_batch(examples)
        decisions = self.decide(scores, examples)
        extras = self.explain(examples, scores, decisions) or [{} for _ in scores]
        notes = self.decision_notes(examples) or [None] * len(scores)
        extras = [{**x, "decision_note": n} if n else x for x, n in zip(extras, notes)]
        return [dspy.Prediction(**{self.output_field: d if self.positive_output else not d}, score=s, **x)
                for d, s, x in zip(decisions, scores, extras)]

    def forward(self, **inputs: Any) -> dspy.Prediction:
        (pred,) = self.predict_batch([dspy.Example(**inputs)])
        return pred


__all__ = ["ThresholdedScorer"]
