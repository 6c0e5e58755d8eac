"""Explicit-mention detection and the judge's rating gap between explicit-mention and
no-mention responses.

Source: the seed study "Re-Centering Humans in LLM Personalization", Stage 3 -- LLM judges rate
responses that explicitly restate a user attribute ("since you are vegan, ...") higher, while
human raters do not value the restatement. :func:`mention_rating_gap` measures that reward: the
mean judge score of responses that mention the attribute minus that of responses that do not,
with a 95% bootstrap CI.

Detectors: :class:`MentionDetector` (typed LLM program, ``mentions: bool``; compilable) and
:class:`LexicalMentionDetector` (LM-free:
:func:`~personalign.programs.common.text.lexical_mention`).
"""

from __future__ import annotations

from typing import Sequence

import dspy

from personalign.programs.common.text import lexical_mention, truncate_head
from personalign.signatures.judge import ExplicitMentionSignature


class MentionDetector(dspy.Module):
    """``forward(attribute, response) -> Prediction(mentions: bool)``; one LM call. The response
    is cut to 2500 characters (head kept)."""

    uses_lm = True

    def __init__(self) -> None:
        super().__init__()
        self.detect = dspy.Predict(ExplicitMentionSignature)

    def forward(self, attribute: str, response: str) -> dspy.Prediction:
        out = self.detect(attribute=truncate_head(attribute, 300), response=truncate_head(response, 2500))
        return dspy.Prediction(mentions=bool(out.mentions))


class LexicalMentionDetector(dspy.Module):
    """LM-free detector: ``Prediction(mentions: bool)`` by :func:`lexical_mention` (a user
    reference such as "since you"/"your diet"/"as a nurse," in a sentence sharing a content word
    with the attribute, or three consecutive content words of the attribute copied)."""

    uses_lm = False

    def forward(self, attribute: str, response: str) -> dspy.Prediction:
        return dspy.Prediction(mentions=lexical_mention(attribute, response))


def mention_rating_gap(scores: Sequence[float], mentions: Sequence[bool], *, n_boot: int = 1000,
                       seed: int = 0) -> dict:
    """Judge's reward for explicit mentions: ``mean(score | mention) - mean(score | no mention)``.

    Args:
        scores: judge scores of responses (e.g. the debiased 1-5 score of "personalized (B) vs
            generic (A)", so higher = judge prefers the personalized response).
        mentions: whether each response explicitly mentions the attribute.

    Returns:
        ``{"gap", "gap_ci", "mean_mention", "mean_no_mention", "n_mention", "n_no_mention"}``;
        ``gap``/``gap_ci`` are None when one group is empty. The CI is a 95% percentile bootstrap
        resampling responses within each group (stratified, so both groups keep their sizes).
    """
    import numpy as np

    s = np.asarray(scores, dtype=float)
    m = np.asarray(mentions, dtype=bool)
    if s.shape != m.shape:
        raise ValueError(f"scores and mentions differ in length: {s.shape} vs {m.shape}")
    a, b = s[m], s[~m]
    out = {"n_mention": int(a.size), "n_no_mention": int(b.size),
           "mean_mention": float(a.mean()) if a.size else None,
           "mean_no_mention": float(b.mean()) if b.size else None, "gap": None, "gap_ci": None}
    if a.size and b.size:
        rng = np.random.default_rng(seed)
        diffs = rng.choice(a, (n_boot, a.size)).mean(axis=1) - rng.choice(b, (n_boot, b.size)).mean(axis=1)
        out["gap"] = float(a.mean() - b.mean())
        out["gap_ci"] = [float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))]
    return out


__all__ = ["MentionDetector", "LexicalMentionDetector", "mention_rating_gap"]
