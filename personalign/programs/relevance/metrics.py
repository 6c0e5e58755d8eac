"""Metrics of the relevance stage. Its DSPy metric is the generic
:func:`personalign.metrics.relevance_accuracy`; here its GEPA feedback metric,
``metric(example, pred, trace=None, pred_name=None, pred_trace=None)`` returning
``dspy.Prediction(score=float, feedback=str)``.

GEPA's reflection LM reads ``feedback`` to rewrite instructions, so the text says what the human
label was and what the annotation criterion is (seed study: an attribute is relevant when a
thoughtful assistant would answer differently because of it, explicitly or implicitly; humans say
yes ~20% of the time while LLM judges say yes 40-60%).
"""

from __future__ import annotations

from typing import Any

from personalign.metrics import to_bool


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    try:
        return getattr(obj, name)
    except (AttributeError, KeyError):
        try:
            return obj[name]
        except Exception:  # noqa: BLE001
            return None


def relevance_feedback(example, pred, trace=None, pred_name=None, pred_trace=None):
    """Score 1.0/0.0 (``pred.relevant == example.relevant``) with a feedback sentence for GEPA.

    An unreadable or missing prediction scores 0 with feedback asking for a boolean. When the
    example carries ``human_yes_rate`` the feedback quotes it.
    """
    import dspy

    gold = bool(to_bool(_get(example, "relevant")))
    got = to_bool(_get(pred, "relevant"))
    attribute = _get(example, "attribute") or "the attribute"
    rate = _get(example, "human_yes_rate")
    humans = f" ({float(rate):.0%} of annotators said relevant)" if isinstance(rate, (int, float)) else ""
    if got is None:
        return dspy.Prediction(score=0.0, feedback=(
            "The output could not be read as true/false. Answer `relevant` with a boolean only."))
    if got == gold:
        verdict = "relevant" if gold else "not relevant"
        return dspy.Prediction(score=1.0, feedback=(
            f"Correct: human annotators judged '{attribute}' {verdict} to this prompt{humans}."))
    if got and not gold:
        return dspy.Prediction(score=0.0, feedback=(
            f"Wrong: you said relevant, but human annotators judged that '{attribute}' would not change how a "
            f"thoughtful assistant answers this prompt{humans}. Humans mark only about 1 in 5 attributes "
            "relevant; say true only when you can name what in the answer would change."))
    return dspy.Prediction(score=0.0, feedback=(
        f"Wrong: you said not relevant, but human annotators judged that '{attribute}' should change the "
        f"answer{humans}, explicitly (the answer builds on it) or implicitly (tone, vocabulary, choice of "
        "examples, level of detail or framing)."))


__all__ = ["relevance_feedback"]
