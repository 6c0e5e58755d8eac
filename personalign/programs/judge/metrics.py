"""Metrics of the judge stage: agreement of a judge with human 1-5 ratings.

:func:`judge_agreement` pools every (example, attribute) pair rated by both the humans and the
judge and reports Spearman's rho and the quadratic-weighted kappa (Cohen 1968) -- both from
:mod:`personalign.metrics` -- with 95% percentile-bootstrap CIs over the pairs, plus exact
agreement, mean absolute error and the judges' inflation (mean distance from 3, judge minus
human: the seed study finds LLM judges give more extreme ratings than people).

The per-example DSPy metric the stage compiles toward is the generic
:func:`personalign.metrics.rating_agreement`. The stage's set objective is :func:`verdict_kappa`:
Cohen's kappa of the *verdicts* (A better / tie / B better, :func:`verdict`) of the judge's
unrounded debiased scores against the humans' -- the verdict is what every use of a judge reads
(a win rate counts ``score > 3``) and what :mod:`personalign.judge_validation` validates. The
integer rating hides it: ``pairwise-expected`` scores such as 2.97 round to 3, so a kappa on
rounded ratings (:func:`weighted_kappa`, still reported by :func:`judge_agreement`) cannot see
the shift that makes that judge usable.
The loader is :func:`personalign.programs.judge.data.load_ratings`.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Mapping, Sequence

from personalign.stages.objective import Objective



def _get(obj: Any, name: str):
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _nan_to_none(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def rating_pairs(examples: Sequence, predictions: Sequence) -> tuple[list[int], list[int], list[float], int]:
    """``(human, judge, judge_scores, n_missing)`` over every attribute rated by the humans;
    a prediction that is None (failure) or lacks an attribute counts in ``n_missing``."""
    human, judge, scores, missing = [], [], [], 0
    for ex, pred in zip(examples, predictions, strict=True):
        gold = _get(ex, "ratings") or {}
        got = (_get(pred, "ratings") or {}) if pred is not None else {}
        sc = (_get(pred, "scores") or {}) if pred is not None else {}
        if isinstance(pred, Mapping) and "ratings" not in pred:
            got = pred  # a bare {attribute: rating} dict (run_program keeps the output field only)
        for attr, g in gold.items():
            r = got.get(attr) if isinstance(got, Mapping) else None
            if isinstance(r, bool) or not isinstance(r, (int, float)) or not 1 <= r <= 5:
                missing += 1
                continue
            human.append(int(g))
            judge.append(int(round(r)))
            scores.append(float(sc.get(attr, r)) if isinstance(sc, Mapping) else float(r))
    return human, judge, scores, missing


def judge_agreement(examples: Sequence, predictions: Sequence, *, n_boot: int = 1000, seed: int = 0) -> dict:
    """Agreement of judge ratings with human ratings, pooled over (example, attribute) pairs.

    Args:
        examples: items with ``ratings`` (attribute -> human 1-5).
        predictions: per example a Prediction/dict with ``ratings`` (and optionally ``scores``,
            the unrounded debiased values used for Spearman), a bare ``{attribute: rating}``
            dict, or None for a failure.

    Returns:
        ``{"n_pairs", "n_missing", "spearman", "spearman_ci", "qwk", "qwk_ci", "exact",
        "mae", "human_mean", "judge_mean", "human_extremity", "judge_extremity",
        "inflation"}``; undefined statistics (constant ratings) are None.
    """
    import numpy as np

    from personalign.metrics import bootstrap_ci, quadratic_weighted_kappa, spearman

    human, judge, scores, missing = rating_pairs(examples, predictions)
    out: dict[str, Any] = {"n_pairs": len(human), "n_missing": missing}
    if not human:
        return {**out, **{k: None for k in ("spearman", "spearman_ci", "qwk", "qwk_ci", "exact", "mae", "human_mean",
                                             "judge_mean", "human_extremity", "judge_extremity", "inflation")}}
    h, j, s = np.asarray(human), np.asarray(judge), np.asarray(scores)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rho = spearman(h, s)
        kw = quadratic_weighted_kappa(h, j)
        rho_ci = bootstrap_ci(lambda a, b: spearman(a, b), h, s, n_boot=n_boot, seed=seed)
        kw_ci = bootstrap_ci(lambda a, b: quadratic_weighted_kappa(a, b), h, j, n_boot=n_boot, seed=seed)
    he, je = float(np.mean(np.abs(h - 3))), float(np.mean(np.abs(j - 3)))
    out.update(
        spearman=_nan_to_none(rho), spearman_ci=None if any(math.isnan(x) for x in rho_ci) else rho_ci,
        qwk=_nan_to_none(kw), qwk_ci=None if any(math.isnan(x) for x in kw_ci) else kw_ci,
        exact=float(np.mean(h == j)), mae=float(np.mean(np.abs(h - j))),
        human_mean=float(h.mean()), judge_mean=float(j.mean()),
        human_extremity=he, judge_extremity=je, inflation=je - he,
    )
    return out


def verdict(rating: float) -> str:
    """``"A"`` (rating < 3), ``"B"`` (> 3) or ``"tie"`` (== 3) on the 1-5 scale (1 = A much better)."""
    return "A" if rating < 3 else ("B" if rating > 3 else "tie")


def verdict_kappa(examples: Sequence, predictions: Sequence, scores: Sequence | None = None) -> float:
    """The judge stage's set objective: Cohen's kappa (:func:`personalign.metrics.cohen_kappa`)
    of the judge's verdicts against the humans', pooled over every human-rated attribute.

    The judge's verdict is read from its unrounded score: ``scores[attribute]`` of a whole
    prediction; else, for an example rating one attribute, ``scores[i]`` (the program's ``score``
    per example, as :func:`personalign.programs.run.run_program` returns it beside the bare
    ratings); else the integer rating. The human's verdict is read from the gold rating. A missing
    or failed rating counts as a wrong verdict (the opposite side; "A" for a human tie), so failing
    never pays. 0.0 when undefined (one verdict everywhere on both sides).
    """
    from personalign.metrics import cohen_kappa

    human, judge = [], []
    for i, (ex, pred) in enumerate(zip(examples, predictions, strict=True)):
        gold = _get(ex, "ratings") or {}
        if scores is not None and scores[i] is not None and len(gold) == 1 and isinstance(pred, Mapping) \
                and "ratings" not in pred:
            pred = {"ratings": pred, "scores": {a: float(scores[i]) for a in gold}}
        for attr, g in gold.items():
            h = verdict(int(g))
            _, _, s, missing = rating_pairs([{"ratings": {attr: g}}], [pred])
            human.append(h)
            judge.append(verdict(s[0]) if not missing else {"A": "B", "B": "A"}.get(h, "A"))
    return _or_zero(cohen_kappa, human, judge)


def weighted_kappa(examples: Sequence, predictions: Sequence) -> float:
    """Quadratic-weighted kappa of the judge's integer ratings against the human ones, pooled over
    every human-rated attribute; a missing or failed rating counts as the rating farthest from the
    human one (so failing never pays). 0.0 when undefined."""
    from personalign.metrics import quadratic_weighted_kappa

    human, judge = [], []
    for ex, pred in zip(examples, predictions, strict=True):
        for attr, g in (_get(ex, "ratings") or {}).items():
            h, j, _, missing = rating_pairs([{"ratings": {attr: g}}], [pred])
            human.append(int(g))
            judge.append(j[0] if not missing else (5 if int(g) <= 3 else 1))
    return _or_zero(quadratic_weighted_kappa, human, judge)


def _or_zero(statistic, human: list, judge: list) -> float:
    """``statistic(human, judge)``; 0.0 for an empty set or an undefined (nan) value."""
    if not human:
        return 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = statistic(human, judge)
    return 0.0 if math.isnan(value) else float(value)


VERDICT_KAPPA = Objective("verdict_kappa", "verdict_kappa", verdict_kappa, on="examples", needs_scores=True,
                          kinds=frozenset({"scored"}))
"""The judge stage's set objective, registered by name in :data:`personalign.stages.objective.OBJECTIVES`."""

__all__ = ["VERDICT_KAPPA", "judge_agreement", "rating_pairs", "verdict", "verdict_kappa", "weighted_kappa"]
