"""The typed violation judge: does a response go against the user's stated preference?

Source: PrefEval ("Do LLMs Recognize Your Preferences?", ICLR 2025), generation task: a response
to a question asked after the user stated a preference is checked by an LLM judge for violating
it. Shared by the ``respond`` stage (its metric) and the ``violation`` stage (the judge itself,
compiled toward Cohen's kappa against PrefEval's option labels).
"""

from __future__ import annotations

import dspy

from personalign.programs.common.text import truncate_head
from personalign.signatures.respond import PreferenceViolationSignature

MAX_RESPONSE_CHARS = 3000


class ViolationJudge(dspy.Module):
    """``forward(preference, question, response) -> Prediction(violates: bool)``; one LM call.

    The response is cut to 3000 characters (head kept) so the prompt fits a 4096-token window.
    LM errors propagate (callers retry and count them).
    """

    uses_lm = True

    def __init__(self) -> None:
        super().__init__()
        self.judge = dspy.Predict(PreferenceViolationSignature)

    def forward(self, preference: str, question: str, response: str) -> dspy.Prediction:
        out = self.judge(preference=truncate_head(preference, 600), question=truncate_head(question, 1000),
                         response=truncate_head(response, MAX_RESPONSE_CHARS))
        return dspy.Prediction(violates=bool(out.violates))


__all__ = ["ViolationJudge", "MAX_RESPONSE_CHARS"]
