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
(``decision_rule``) and reapplied on load (:mod:`personalign.programs.saved`).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from personalign.programs.decision import (DecidedProgram, DecisionRule, TopShareProgram, apply_rule,
                                            with_rule)

KINDS = ("threshold", "top_share")
SHARES = tuple(round(0.05 * k, 2) for k in range(1, 20))


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
                      kinds: Sequence[str] = KINDS, out_of_fold: list | None = None) -> DecisionRule | None:
    """Fit a decision rule by grouped CV (see the module docstring).

    Args:
        scores: one float per example (higher = True).
        groups: one hashable group per example (whole groups are held out together; a
            ``top_share`` rule ranks within each).
        raw: the program's own decisions (output field True/False) on the same examples.
        objective: ``objective(indices, decisions) -> float``: the set objective of ``decisions``
            for the examples at ``indices`` (higher is better).
        n_splits: CV folds (capped by the number of groups).
        out_of_fold: when a list, it receives the chosen kind's out-of-fold decisions (one bool
            per example) if a rule is returned -- to score the rule on a subset (e.g. dev).

    Returns:
        the rule when its out-of-fold objective beats ``raw``'s, else None (also None with fewer
        than 2 groups or constant scores).
    """
    from sklearn.model_selection import GroupKFold

    s = np.asarray(scores, dtype=float)
    ids: dict[Any, int] = {}
    groups = [ids.setdefault(g, len(ids)) for g in groups]  # any hashable unit (tuples too) -> int
    n_groups = len(set(groups))
    if len(s) < 4 or n_groups < 2 or np.unique(s).size < 2:
        return None
    k = min(n_splits, n_groups)
    everything = np.arange(len(s))
    raw_obj = float(objective(everything, [bool(x) for x in raw]))
    best: tuple[float, str, list[bool]] | None = None
    for kind in kinds:
        oof = [False] * len(s)
        for fit_idx, test_idx in GroupKFold(n_splits=k).split(s, groups=groups):
            v = _best_value(kind, fit_idx, s, groups, objective)
            for i, d in zip(test_idx, apply_rule(kind, v, s[test_idx], [groups[i] for i in test_idx])):
                oof[i] = d
        cv = float(objective(everything, oof))
        if best is None or cv > best[0] + 1e-12:
            best = (cv, kind, oof)
    if best is None or not best[0] > raw_obj + 1e-12:
        return None
    cv, kind, oof = best
    if out_of_fold is not None:
        out_of_fold[:] = oof
    value = _best_value(kind, everything, s, groups, objective)
    return DecisionRule(kind, value, cv, raw_obj, len(s), n_groups, k)


__all__ = ["DecisionRule", "DecidedProgram", "TopShareProgram", "apply_rule", "fit_decision_rule", "with_rule"]
