"""The all-yes baseline: every attribute is relevant to every prompt.

The reference point of the seed study's relevance task (an LLM judge that says yes to
everything scores exactly this): F1 = 2p / (1 + p) for a positive rate p (0.296 on the recenter
val split, p = 17.3%). A strategy is only useful if its paired F1 difference against this
baseline has a CI above 0 (``personalign compare relevance --strategies all-yes,...``).
"""

from __future__ import annotations

from typing import Sequence

import dspy


class AllRelevant(dspy.Module):
    """Predicts ``relevant=True`` for every (attribute, prompt); no LM, nothing to fit."""

    uses_lm = False

    def predict_batch(self, examples: Sequence) -> list[dspy.Prediction]:
        """One ``Prediction(relevant=True, score=None)`` per example."""
        return [dspy.Prediction(relevant=True, score=None) for _ in examples]

    def forward(self, attribute: str, prompt: str) -> dspy.Prediction:
        return dspy.Prediction(relevant=True, score=None)
