"""Metric of the ``perspectives`` stage.

The metric (:func:`answer_win_rate`): the answer against the reference, judged by the typed
:class:`~personalign.signatures.judge.AnswerPreferenceSignature` in both orders (win 1, tie 0.5,
loss 0, averaged); an answer that breaks a rule (empty, meta text, wrong item count) scores 0.
"""

from __future__ import annotations

_PREF_SCORE = {"A": 1.0, "B": 0.0, "tie": 0.5}


def answer_win_rate(example, pred, trace=None):
    """DSPy metric of the perspectives stage: ``pred.answer`` against ``example.reference`` (or,
    when empty, the single no-profile answer of the current LM at temperature 0), judged in both
    orders by the typed answer-preference judge: mean of (win 1, tie 0.5, loss 0). A rule-breaking
    answer (empty, meta text, persona name, wrong item count) scores 0. Two or three LM calls.

    Raises:
        ConfigurationError: no LM in the current ``dspy`` context.
    """
    import dspy

    from personalign.errors import ConfigurationError
    from personalign.programs.perspectives.rules import rule_violations
    from personalign.programs.common.text import requested_count, truncate_head
    from personalign.signatures.judge import AnswerPreferenceSignature

    answer = str(getattr(pred, "answer", "") or "")
    question = str(example.question)
    if rule_violations(answer, n_items=requested_count(question), question=question):
        score = 0.0
    else:
        if dspy.settings.lm is None:
            raise ConfigurationError("answer_win_rate needs an LM: run it inside personalign.lm.use(lm)")
        reference = str(getattr(example, "reference", "") or "")
        if not reference:
            from personalign.programs.perspectives.aggregator import SingleAnswer

            reference = SingleAnswer()(question=question).answer
        judge = dspy.Predict(AnswerPreferenceSignature)
        a, r = truncate_head(answer, 2000), truncate_head(reference, 2000)
        first = judge(question=question, answer_a=a, answer_b=r).preferred
        second = judge(question=question, answer_a=r, answer_b=a).preferred
        score = (_PREF_SCORE.get(str(first), 0.5) + (1.0 - _PREF_SCORE.get(str(second), 0.5))) / 2.0
    return score > 0.5 if trace is not None else score


__all__ = ["answer_win_rate"]
