"""Decision rules of binary programs: the rule that turns a program's scores into its yes/no output.

A rule is ``threshold`` (``output = score >= value``) or ``top_share`` (within each group, e.g.
one prompt's attributes, the top ``ceil(value * n_group)`` scores are True). :class:`DecidedProgram`
and :class:`TopShareProgram` wrap a program with its rule; the rule is saved in the program JSON
(``decision_rule``) and reapplied on load (:mod:`personalign.programs.saved`). The rule is fitted
by grouped cross-validation at compile time (:mod:`personalign.optimizers.decision`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import dspy
import numpy as np

@dataclass
class DecisionRule:
    """A fitted decision rule.

    Attributes:
        kind: ``"threshold"`` or ``"top_share"``.
        value: the score threshold, or the share in (0, 1) of each group predicted True.
        cv_objective: out-of-fold set objective of the rule on the calibration examples.
        raw_objective: the program's own decisions' objective on the same examples.
        n, n_groups, n_splits: calibration examples, their groups, CV folds.
    """

    kind: str
    value: float
    cv_objective: float
    raw_objective: float
    n: int
    n_groups: int
    n_splits: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "DecisionRule":
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__})

    def describe(self) -> str:
        if self.kind == "threshold":
            return f"yes when score >= {self.value:.4g}"
        return f"yes for the top {self.value:.0%} of scores within each group"


def apply_rule(kind: str, value: float, scores: Sequence[float], groups: Sequence[Any]) -> list[bool]:
    """Decisions of a rule on ``scores`` (one per example; ``groups`` used by ``top_share``)."""
    s = np.asarray(scores, dtype=float)
    if kind == "threshold":
        return [bool(x >= value) for x in s]
    out = [False] * len(s)
    by: dict[Any, list[int]] = {}
    for i, g in enumerate(groups):
        by.setdefault(g, []).append(i)
    for idx in by.values():
        k = math.ceil(value * len(idx) - 1e-9)
        for i in sorted(idx, key=lambda i: -s[i])[:k]:
            out[i] = True
    return out


class DecidedProgram(dspy.Module):
    """``program`` with a threshold rule on its predictions' ``score``: ``output = score >= value``
    (a prediction without a score keeps the program's own decision). ``undecided`` is the wrapped
    program (saved as the strategy's state); ``decision_rule`` the rule's dict; ``group_of(example)``
    the unit a ``top_share`` rule ranks within (the stage's ``decision_group``; None: one unit)."""

    def __init__(self, program, rule: DecisionRule, output: str, group_of: Callable[[Any], Any] | None = None) -> None:
        super().__init__()
        self.undecided = program
        self.rule = rule
        self.output = output
        self.group_of = group_of
        self.uses_lm = getattr(program, "uses_lm", True)

    @property
    def decision_rule(self) -> dict[str, Any]:
        return self.rule.to_dict()

    def _decide(self, pred, decision: bool):
        if pred is not None and getattr(pred, "score", None) is not None:
            pred[self.output] = decision
        return pred

    def forward(self, **kwargs):
        pred = self.undecided(**kwargs)
        score = getattr(pred, "score", None)
        if score is None or self.rule.kind != "threshold":
            return pred
        return self._decide(pred, float(score) >= self.rule.value)


class TopShareProgram(DecidedProgram):
    """A :class:`DecidedProgram` with a ``top_share`` rule: decides per group in
    ``predict_batch(examples)`` (``forward`` alone returns the program's own decision)."""

    def predict_batch(self, examples: Sequence) -> list:
        inner = self.undecided
        if hasattr(inner, "predict_batch"):
            preds = list(inner.predict_batch(examples))
        else:
            preds = [inner(**ex.inputs()) for ex in examples]
        scored = [i for i, p in enumerate(preds) if getattr(p, "score", None) is not None]
        groups = [self.group_of(examples[i]) if self.group_of else None for i in scored]
        decisions = apply_rule("top_share", self.rule.value, [float(preds[i].score) for i in scored], groups)
        for i, d in zip(scored, decisions):
            self._decide(preds[i], d)
        return preds


def with_rule(program, rule: DecisionRule | dict, output: str, group_of: Callable[[Any], Any] | None):
    """Wrap ``program`` with ``rule`` (a :class:`DecisionRule` or its dict); ``group_of(example)``
    gives a ``top_share`` rule's ranking unit."""
    if isinstance(rule, dict):
        rule = DecisionRule.from_dict(rule)
    cls = TopShareProgram if rule.kind == "top_share" else DecidedProgram
    return cls(program, rule, output, group_of)


__all__ = ["DecisionRule", "DecidedProgram", "TopShareProgram", "apply_rule", "with_rule"]
