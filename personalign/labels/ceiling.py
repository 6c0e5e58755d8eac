"""The human ceiling: how well one person agrees with the others, scored like a strategy.

On the rows whose ``annotations`` hold labels from at least ``min_annotators`` (3) people, every
annotator's label is a *prediction* and the strict majority of the *other* annotators of that row is
its *gold* (ties: :func:`personalign.data.annotations.majority`, by default not the positive class,
as the released recenter labels count them). All such judgments are pooled and scored with the
stage's own set objective (:meth:`personalign.stages.Stage.score`: relevance F1 of
"relevant", verification F2 of "rejected"). That is the figure a strategy is compared with: a
strategy at the ceiling agrees with the majority of people as well as one of them does.

The interval follows :func:`personalign.evaluation.stage_report`: it resamples the stage's groups
(:func:`personalign.evaluation.stage_clusters`: relevance prompts, then users within them; a
judgment goes with its row), percentile bootstrap of ``n_boot`` resamples
(:mod:`personalign.metrics.cluster`); below 5 top-level groups there is no percentile interval but
the per-group figures and their range. One person under two names -- two annotators who gave the
same label on every one of 10 or more rows they share (:func:`personalign.labels.agreement.same_person`)
-- is counted once: the extra name's labels are left out (``duplicates``). Source of the idea: the study's annotator pilot, which scored
each annotator against the others.
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np

__all__ = ["human_ceiling", "share_of_ceiling", "judgments", "duplicates", "duplicates_text"]


def _with_gold(example, label: str, value: Any):
    if hasattr(example, "model_copy"):
        return example.model_copy(update={label: value})
    return example.copy(**{label: value})


def _annotations(example, leave_out=frozenset()) -> dict | None:
    value = example.get("annotations") if isinstance(example, dict) else getattr(example, "annotations", None)
    if isinstance(value, dict) and leave_out:
        value = {a: v for a, v in value.items() if a not in leave_out}
    return value if isinstance(value, dict) and value else None


def duplicates(examples: Sequence) -> list[dict]:
    """The annotators of ``examples`` that are another's second name
    (:func:`personalign.labels.agreement.same_person`): ``[{"dropped", "kept", "n"}]``."""
    from personalign.labels.agreement import same_person

    return same_person({i: labels for i, ex in enumerate(examples) if (labels := _annotations(ex))})


def duplicates_text(found: Sequence[dict] | None) -> str:
    """``"; left out as one person under two names: B (= A on N shared rows)"``, or ``""``."""
    if not found:
        return ""
    return ("; left out as one person under two names: "
            + ", ".join(f"{d['dropped']} (= {d['kept']} on all {d['n']} shared rows)" for d in found))


def judgments(stage, examples: Sequence, *, ties: str = "negative", min_annotators: int = 3,
              leave_out: Sequence[str] = ()) -> tuple[list, list, list]:
    """The pooled judgments: ``(gold_examples, predictions, annotators)``, one entry per annotator
    (but those in ``leave_out``) of each row with at least ``min_annotators`` annotators whose
    others are not tied under ``drop``. A gold example is the row with its label replaced by the
    others' majority."""
    from personalign.data.annotations import others_majority

    positive = stage.positive if stage.kind == "binary" else True
    golds, preds, who = [], [], []
    gone = frozenset(leave_out)
    for ex in examples:
        labels = _annotations(ex, gone)
        if not labels or len(labels) < min_annotators:
            continue
        for a, v in labels.items():
            defined, rest = others_majority(labels, a, ties=ties, positive=positive, min_others=min_annotators - 1)
            if defined:
                golds.append(_with_gold(ex, stage.label, rest))
                preds.append(v)
                who.append(a)
    return golds, preds, who


def _resampled(stage, golds: list, preds: list, weights: np.ndarray) -> np.ndarray:
    """The objective on each resample (weights (n_boot, n)): F-beta from weighted confusion counts,
    any other objective recomputed on the drawn judgments."""
    from personalign.stages.objective import fbeta_of, labels as positive_labels

    beta = fbeta_of(stage)
    if beta is not None:
        g, p = (np.asarray(x, dtype=bool) for x in positive_labels(stage, golds, preds))
        tp, fp, fn = weights @ (g & p), weights @ (~g & p), weights @ (g & ~p)
        b2 = beta * beta
        den = (1 + b2) * tp + b2 * fn + fp
        return np.divide((1 + b2) * tp, den, out=np.zeros(len(den)), where=den > 0)
    out = []
    for w in weights:
        idx = np.repeat(np.arange(len(golds)), w)
        out.append(stage.score([golds[i] for i in idx], [preds[i] for i in idx]))
    return np.asarray(out, dtype=float)


def human_ceiling(stage, examples: Sequence, *, n_boot: int = 1000, seed: int = 0, ties: str = "negative",
                  min_annotators: int = 3, confidence: float = 0.95, same: Sequence[dict] | None = None) -> dict | None:
    """The human ceiling of ``stage`` on ``examples`` (see the module doc), shaped like a strategy row.

    Args:
        stage: a :class:`~personalign.stages.Stage`.
        examples: rows (``dspy.Example`` or pydantic) carrying ``annotations`` ``{annotator: label}``.
        n_boot, seed: bootstrap resamples and their seed.
        ties: how the others' even split counts (``negative``, ``positive``, ``drop``).
        min_annotators: rows with fewer annotators are left out (each annotator needs 2 others).
        same: the names to leave out as another annotator's second name (:func:`duplicates`);
            None: found in ``examples``.

    Returns:
        None when no row has ``min_annotators`` annotators; else ``{"name": "human", "metric",
        <metric>: pooled value, <metric>_ci: [lo, hi] or None, <metric>_range, <metric>_by_group,
        "n": judgments, "n_items", "n_annotators", "yes_rate" (share of judgments that are the
        positive class), "gold_yes_rate", "by_group": {group: {<metric>, "n"}}, "by_annotator":
        {annotator: {<metric>, "n", "yes_rate"}}, "resampling", "ties", "min_annotators", "duplicates"
        (the names left out), "note"}``
        where <metric> is the stage objective's name (``f1``, ``f2``, ...).
    """
    from personalign.evaluation import stage_clusters
    from personalign.metrics.cluster import make_clusters, resample_weights, summarize
    from personalign.stages.objective import fbeta_of, labels as positive_labels

    same = duplicates(examples) if same is None else list(same)
    gone = frozenset(d["dropped"] for d in same)
    golds, preds, who = judgments(stage, examples, ties=ties, min_annotators=min_annotators, leave_out=gone)
    if not golds:
        return None
    metric = stage.objective.name
    levels = stage_clusters(stage, golds)
    clusters = make_clusters(levels["levels"], len(golds), levels["names"])

    def score(idx) -> float:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return stage.score([golds[i] for i in idx], [preds[i] for i in idx])

    value = score(range(len(golds)))
    samples = _resampled(stage, golds, preds, resample_weights(clusters, n_boot, seed))
    by_group = None
    groups: dict[str, list[int]] = {}
    if levels["levels"]:
        for i, g in enumerate(levels["levels"][0]):
            groups.setdefault(str(g), []).append(i)
        by_group = {g: score(idx) for g, idx in groups.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig = summarize(value, samples, by_group, clusters, confidence=confidence, what="human ceiling")
    positive = [bool(stage.is_positive(p)) if stage.kind == "binary" else None for p in preds]
    gold_pos = [bool(stage.is_positive(stage.gold(g))) if stage.kind == "binary" else None for g in golds]
    by_annotator = {}
    for a in sorted(set(who)):
        idx = [i for i, w in enumerate(who) if w == a]
        by_annotator[a] = {metric: score(idx), "n": len(idx),
                           "yes_rate": float(np.mean([positive[i] for i in idx])) if stage.kind == "binary" else None}
    note = (f"each annotator against the majority of the others on rows with >= {min_annotators} annotators "
            f"(ties: {ties}); {clusters.describe(n_boot)['unit']} resampled{duplicates_text(same)}")
    return {"name": "human", "metric": metric, metric: value, f"{metric}_ci": fig["ci"], f"{metric}_range": fig["range"],
            f"{metric}_by_group": by_group, "n": len(golds),
            "n_items": sum(len(_annotations(ex, gone) or {}) >= min_annotators for ex in examples),
            "n_annotators": len(by_annotator),
            "yes_rate": float(np.mean(positive)) if stage.kind == "binary" else None,
            "gold_yes_rate": float(np.mean(gold_pos)) if stage.kind == "binary" else None,
            "by_group": {g: {metric: by_group[g], "n": len(idx)} for g, idx in groups.items()} if by_group else None,
            "by_annotator": by_annotator, "resampling": clusters.describe(n_boot), "ties": ties,
            "min_annotators": min_annotators, "duplicates": same, "note": note}


def share_of_ceiling(value: float | None, ceiling: float | dict | None) -> float | None:
    """``value / ceiling``: a strategy's figure as a share of the human ceiling (``ceiling``: the
    ceiling's value, or the :func:`human_ceiling` dict, whose ``metric`` is read). None when either
    is missing, not finite, or the ceiling is not positive."""
    if isinstance(ceiling, dict):
        ceiling = ceiling.get(ceiling.get("metric", ""))
    if value is None or ceiling is None:
        return None
    value, ceiling = float(value), float(ceiling)
    if not (np.isfinite(value) and np.isfinite(ceiling)) or ceiling <= 0:
        return None
    return value / ceiling
