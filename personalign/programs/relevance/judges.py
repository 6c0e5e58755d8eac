"""LLM judges for relevance: one LM call per (attribute, prompt) pair.

All three share the stage's output (``relevant: bool``) and score their own answer: ``score`` is
the log-probability margin ``log P(true) - log P(false)`` of the ``relevant`` value under the
program's own prompt (:func:`personalign.lm.logprobs.scored`; None when the LM returns no
log-probabilities, e.g. DummyLM), so compiling can fit a decision rule on it. Each
is a plain DSPy module whose only parameter is its ``judge`` predictor, so any DSPy teleprompter
(few-shot bootstrapping, instruction search) can compile it. Untrained: the registry marks them
``trainable=False`` and ``compare`` runs them as they are.

* :class:`ZeroShotJudge` -- ``dspy.Predict(RelevanceSignature)``.
* :class:`ChainOfThoughtJudge` -- ``dspy.ChainOfThought(RelevanceSignature)`` (a ``reasoning``
  field is generated before the verdict; more output tokens per call).
* :class:`CriteriaJudge` -- ``dspy.Predict(RelevanceCriteriaSignature)``: the instructions state
  the annotation criterion of the seed study in our own words (YES when the answer would change
  explicitly or implicitly -- tone, vocabulary, examples, detail, framing; NO when a thoughtful
  assistant would answer the same without the attribute).

Source of the task and of the human yes-rate (~20%) vs LLM judges (40-60%): "Re-Centering Humans
in LLM Personalization" (relevance task).
"""

from __future__ import annotations

import dspy

from personalign.lm.logprobs import bool_field, scored
from personalign.signatures.relevance import RelevanceCriteriaSignature, RelevanceSignature

FIELD = bool_field(RelevanceSignature)


class _Judge(dspy.Module):
    uses_lm = True
    gives_score = True  # its predictions carry a score: a compile fits a decision rule on it (and scores fit rows)

    def forward(self, attribute: str, prompt: str) -> dspy.Prediction:
        out, score = scored(self.judge, FIELD, attribute=attribute, prompt=prompt)
        return dspy.Prediction(**{FIELD: bool(out[FIELD])}, score=score)


class ZeroShotJudge(_Judge):
    """Zero-shot judge: ``dspy.Predict(RelevanceSignature)``; one LM call per (attribute, prompt).

    Returns ``Prediction(relevant: bool, score: float | None)``. LM errors propagate (``run_program``
    retries and counts them).
    """

    def __init__(self) -> None:
        super().__init__()
        self.judge = dspy.Predict(RelevanceSignature)


class ChainOfThoughtJudge(_Judge):
    """Chain-of-thought judge: ``dspy.ChainOfThought(RelevanceSignature)``; one LM call per pair
    (reasoning then verdict in the same answer). Returns ``Prediction(relevant, score)``."""

    def __init__(self) -> None:
        super().__init__()
        self.judge = dspy.ChainOfThought(RelevanceSignature)


class CriteriaJudge(_Judge):
    """Criteria-prompt judge: ``dspy.Predict(RelevanceCriteriaSignature)`` whose instructions spell
    out when an attribute counts as relevant (explicit or implicit change of the answer) and that
    most attributes are not. One LM call per pair; ``Prediction(relevant, score)``."""

    def __init__(self) -> None:
        super().__init__()
        self.judge = dspy.Predict(RelevanceCriteriaSignature)
