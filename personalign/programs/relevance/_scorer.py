"""Base of the relevance scoring strategies: relevant = score >= a fitted threshold, or by top share
within a (prompt, user) group."""

from __future__ import annotations

from typing import Sequence

import dspy

from personalign.programs.common.scorer import ThresholdedScorer


def group_keys(examples: Sequence) -> list[tuple[str, str]]:
    """``(prompt_id or prompt, user_id or "")`` per example: the unit inside which attributes are ranked."""
    out = []
    for e in examples:
        pid = getattr(e, "prompt_id", None) if not hasattr(e, "get") else e.get("prompt_id")
        uid = getattr(e, "user_id", None) if not hasattr(e, "get") else e.get("user_id")
        out.append((str(pid if pid is not None else e.prompt), str(uid if uid is not None else "")))
    return out


def _groups(examples: Sequence) -> dict[tuple[str, str], list[int]]:
    g: dict[tuple[str, str], list[int]] = {}
    for i, k in enumerate(group_keys(examples)):
        g.setdefault(k, []).append(i)
    return g


def top_share_decisions(scores: Sequence[float], examples: Sequence, top_fraction: float, min_group: int,
                        threshold: float) -> list[bool]:
    """Within-group top share: in each (prompt, user) group of n >= ``min_group`` examples
    (:func:`group_keys`), the top ``round(top_fraction * n)`` by score are True (ties broken by
    input order); in smaller groups, ``score >= threshold``. Returns one bool per example."""
    out = [False] * len(examples)
    for idx in _groups(examples).values():
        if len(idx) >= min_group:
            k = int(round(top_fraction * len(idx)))
            for i in sorted(idx, key=lambda i: (-scores[i], i))[:k]:
                out[i] = True
        else:
            for i in idx:
                out[i] = scores[i] >= threshold
    return out


def small_group_mask(examples: Sequence, min_group: int) -> list[bool]:
    """True for each example whose (prompt, user) group (:func:`group_keys`) has fewer than
    ``min_group`` examples: :func:`top_share_decisions` decides it by the threshold, not by rank."""
    out = [False] * len(examples)
    for idx in _groups(examples).values():
        for i in idx:
            out[i] = len(idx) < min_group
    return out



class RelevanceScorer(ThresholdedScorer):
    """A relevance strategy that scores (attribute, prompt) pairs in bulk: ``Prediction(relevant,
    score)``, relevant when ``score >= threshold`` (:class:`~personalign.programs.common.scorer.ThresholdedScorer`)."""

    def messages(self, example) -> list[dict]:
        """The yes/no question of ``example``'s pair: the prompt of the one forward pass the
        model-reading strategies share (:func:`personalign.lm.scoring.relevance_messages`)."""
        from personalign.lm.scoring import relevance_messages

        return relevance_messages(example.attribute, example.prompt)

    output_field = "relevant"
    positive_output = True

    def forward(self, attribute: str, prompt: str) -> dspy.Prediction:
        (pred,) = self.predict_batch([dspy.Example(attribute=attribute, prompt=prompt)])
        return pred


class TopShareDecision:
    """Mixin for a :class:`RelevanceScorer`: decide by within-group top share instead of a global
    threshold (:func:`top_share_decisions`): the top
    ``top_fraction`` of each (prompt, user) group of at least ``min_group`` examples is relevant,
    smaller groups use ``score >= threshold``. ``top_fraction`` is the positive rate of the
    training examples (:meth:`fit_top_fraction`); both are saved with the state.
    """

    min_group: int = 5
    top_fraction: float | None = None

    def fit_top_fraction(self, examples: Sequence) -> None:
        """``top_fraction`` = the share of ``examples`` whose ``relevant`` is true."""
        self.top_fraction = sum(bool(e.relevant) for e in examples) / max(1, len(examples))

    def decide(self, scores: Sequence[float], examples: Sequence) -> list[bool]:
        """Top share per group. Examples sharing (prompt_id, user_id) are ranked together, so pass
        a user's attributes for a prompt in one ``predict_batch`` call.

        Raises:
            RuntimeError: not fitted (no ``top_fraction``) or no threshold.
        """
        if self.top_fraction is None or self.threshold is None:
            raise RuntimeError(f"{type(self).__name__} has no top_fraction/threshold: "
                               "compile it with LearnedSelectorFit first")
        return top_share_decisions(scores, examples, self.top_fraction, self.min_group, self.threshold)

    def decision_notes(self, examples: Sequence) -> list[str | None]:
        """The fallback note (:func:`personalign.programs.decision.fallback_note`) for examples whose
        (prompt, user) group has fewer than ``min_group`` examples, None for the ranked ones."""
        from personalign.programs.decision import fallback_note

        note = fallback_note(self.threshold, self.min_group, "top_share", ["prompt_id", "user_id"])
        return [note if small else None for small in small_group_mask(examples, self.min_group)]

    def dump_state(self, *args, **kwargs) -> dict:
        return {**super().dump_state(), "top_fraction": self.top_fraction, "min_group": self.min_group}

    def load_state(self, state: dict):
        super().load_state(state)
        self.top_fraction = state.get("top_fraction")
        self.min_group = int(state.get("min_group", self.min_group))
        return self
