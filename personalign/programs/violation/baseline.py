"""LM-free floor of the ``violation`` stage: a judge that never finds a violation."""

from __future__ import annotations

import dspy


class NeverViolates(dspy.Module):
    """``forward(preference, question, response) -> Prediction(violates=False)``; no LM call.
    Cohen's kappa against any labels is 0 (or undefined): the floor a judge must clear."""

    uses_lm = False

    def forward(self, preference: str, question: str, response: str) -> dspy.Prediction:
        return dspy.Prediction(violates=False)


__all__ = ["NeverViolates"]
