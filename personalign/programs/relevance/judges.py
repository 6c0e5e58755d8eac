"""LLM judges for relevance."""

from __future__ import annotations

import dspy

from personalign.signatures.relevance import RelevanceSignature


class ZeroShotJudge(dspy.Module):
    """Zero-shot judge: ``dspy.Predict(RelevanceSignature)``; one LM call per (attribute, prompt).

    Compilable by any DSPy teleprompter (its only parameter is the ``judge`` predictor).
    """

    uses_lm = True

    def __init__(self) -> None:
        super().__init__()
        self.judge = dspy.Predict(RelevanceSignature)

    def forward(self, attribute: str, prompt: str) -> dspy.Prediction:
        out = self.judge(attribute=attribute, prompt=prompt)
        return dspy.Prediction(relevant=bool(out.relevant))
