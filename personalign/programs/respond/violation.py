"""Preference following in generation: does a response violate the user's stated preference?

Source: PrefEval ("Do LLMs Recognize Your Preferences?", ICLR 2025), generation task: a response
to a question asked after the user stated a preference is checked by an LLM judge for violating
it. The judge is a typed program (:class:`~personalign.programs.common.violation.ViolationJudge`, shared with the
``violation`` stage, output ``violates: bool``) that
any DSPy teleprompter can compile; :func:`preference_followed` is the respond stage's DSPy metric
(1.0 when the judge finds no violation).
"""

from __future__ import annotations

import dspy

from personalign.programs.common.violation import ViolationJudge

_judge: ViolationJudge | None = None


def preference_followed(example, pred, trace=None):
    """DSPy metric of the respond stage: 1.0 when :class:`ViolationJudge` (run with the LM of the
    current ``dspy`` context) finds that ``pred.response`` does not violate ``example.preference``
    for ``example.prompt``; 0.0 when it does or the response is empty. With a ``trace`` (while
    an optimizer bootstraps demos) returns a bool.

    Raises:
        ConfigurationError: no LM is configured in the current context.
    """
    from personalign.errors import ConfigurationError

    global _judge
    response = str(getattr(pred, "response", "") or "").strip()
    if not response:
        score = 0.0
    else:
        if dspy.settings.lm is None:
            raise ConfigurationError("preference_followed needs an LM: run it inside personalign.lm.use(lm)")
        if _judge is None:
            _judge = ViolationJudge()
        question = getattr(example, "question", None) or example.prompt
        score = 0.0 if _judge(preference=example.preference, question=question, response=response).violates else 1.0
    return score >= 1.0 if trace is not None else score


__all__ = ["ViolationJudge", "preference_followed"]
