"""Decision calibration: the rule that turns a binary program's scores into its yes/no output.

A binary LLM program whose predictions carry a ``score`` (a yes-probability margin, a
similarity, a stacked logit; higher = the output field is True) can decide by

* ``threshold``: ``output = score >= value``; or
* ``top_share``: within each group (the stage's ``group_key``, e.g. one prompt's attributes),
  the top ``ceil(value * n_group)`` scores are True.

:func:`fit_decision_rule` chooses the kind and its value by **grouped cross-validation**
(scikit-learn ``GroupKFold``: whole groups are held out): in each fold the value that maximizes
the set objective on the other folds is applied to the held-out fold, and the out-of-fold
objective of each kind is compared with the program's own decisions on the same examples. The
rule is kept only when it beats them out of fold; the final value is refitted on all examples.

:class:`DecidedProgram` (threshold) and :class:`TopShareProgram` (top share; decides in
``predict_batch``) wrap the program; the rule is saved in the program JSON
(``decision_rule``) and reapplied on load (:mod:`personalign.programs._saved`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import dspy
import numpy as np

KINDS = ("threshold", "top_share")
SHARES = tuple(round(0.05 * k, 2) for k in range(1, 20))


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


def _candidates(kind: str, scores: np.ndarray) -> list[float]:
    if kind == "top_share":
        return list(SHARES)
    qs = np.unique(np.quantile(scores, np.linspace(0.0, 1.0, 41)))
    return [float(q) for q in qs] + [float(scores.max()) + 1.0]


def _best_value(kind: str, idx: np.ndarray, scores: np.ndarray, groups: list, objective) -> float:
    best, best_v = -math.inf, None
    for v in _candidates(kind, scores[idx]):
        val = objective(idx, apply_rule(kind, v, scores[idx], [groups[i] for i in idx]))
        if val > best + 1e-12:
            best, best_v = val, v
    return float(best_v)


def fit_decision_rule(scores: Sequence[float], groups: Sequence[Any], raw: Sequence[bool],
                      objective: Callable[[np.ndarray, list[bool]], float], *, n_splits: int = 5,
                      kinds: Sequence[str] = KINDS) -> DecisionRule | None:
    """Fit a decision rule by grouped CV (see the module docstring).

    Args:
        scores: one float per example (higher = True).
        groups: one group id per example (whole groups are held out together).
        raw: the program's own decisions (output field True/False) on the same examples.
        objective: ``objective(indices, decisions) -> float``: the set objective of ``decisions``
            for the examples at ``indices`` (higher is better).
        n_splits: CV folds (capped by the number of groups).

    Returns:
        the rule when its out-of-fold objective beats ``raw``'s, else None (also None with fewer
        than 2 groups or constant scores).
    """
    from sklearn.model_selection import GroupKFold

    s = np.asarray(scores, dtype=float)
    groups = list(groups)
    n_groups = len(set(groups))
    if len(s) < 4 or n_groups < 2 or np.unique(s).size < 2:
        return None
    k = min(n_splits, n_groups)
    everything = np.arange(len(s))
    raw_obj = float(objective(everything, [bool(x) for x in raw]))
    best: tuple[float, str] | None = None
    for kind in kinds:
        oof = [False] * len(s)
        for fit_idx, test_idx in GroupKFold(n_splits=k).split(s, groups=groups):
            v = _best_value(kind, fit_idx, s, groups, objective)
            for i, d in zip(test_idx, apply_rule(kind, v, s[test_idx], [groups[i] for i in test_idx])):
                oof[i] = d
        cv = float(objective(everything, oof))
        if best is None or cv > best[0] + 1e-12:
            best = (cv, kind)
    if best is None or not best[0] > raw_obj + 1e-12:
        return None
    cv, kind = best
    value = _best_value(kind, everything, s, groups, objective)
    return DecisionRule(kind, value, cv, raw_obj, len(s), n_groups, k)


class DecidedProgram(dspy.Module):
    """``program`` with a threshold rule on its predictions' ``score``: ``output = score >= value``
    (a prediction without a score keeps the program's own decision). ``undecided`` is the wrapped
    program (saved as the strategy's state); ``decision_rule`` the rule's dict."""

    def __init__(self, program, rule: DecisionRule, output: str, group_key: str | None = None) -> None:
        super().__init__()
        self.undecided = program
        self.rule = rule
        self.output = output
        self.group_key = group_key
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
        groups = [getattr(examples[i], self.group_key, None) if self.group_key else None for i in scored]
        decisions = apply_rule("top_share", self.rule.value, [float(preds[i].score) for i in scored], groups)
        for i, d in zip(scored, decisions):
            self._decide(preds[i], d)
        return preds


def with_rule(program, rule: DecisionRule | dict, output: str, group_key: str | None):
    """Wrap ``program`` with ``rule`` (a :class:`DecisionRule` or its dict)."""
    if isinstance(rule, dict):
        rule = DecisionRule.from_dict(rule)
    cls = TopShareProgram if rule.kind == "top_share" else DecidedProgram
    return cls(program, rule, output, group_key)


__all__ = ["DecisionRule", "DecidedProgram", "TopShareProgram", "apply_rule", "fit_decision_rule", "with_rule"]
