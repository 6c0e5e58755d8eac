"""The ``human`` row of ``compare`` and ``eval``: the human ceiling on the evaluated rows, and each
strategy's objective as a share of it.

Where the evaluated rows carry ``annotations`` from at least :data:`MIN_ANNOTATORS` (3) people,
the ceiling is :func:`personalign.labels.human_ceiling`: each annotator scored with the stage's objective against
the strict majority of the others, its interval resampling the stage's groups. Rows without
annotations from 3 people add nothing: no row, no keys. An annotator who is another's second name
(the same label on every one of 10 or more shared rows: :func:`personalign.labels.ceiling.duplicates`,
found on all the evaluated rows) is left out of the ceiling and of the rows it covers.

* **Single split** (``compare``, ``eval``): the ceiling on the split's rows (:func:`human_on_rows`).
  A strategy's share is its objective **on the rows the ceiling covers** (those with >= 3
  annotators) divided by the ceiling (:func:`share_on_rows`): the same rows on both sides. When
  every row is annotated, that is the table's objective divided by the ceiling.
* **Leave-one-group-out** (``compare --cv groups``): as the strategies are, the ceiling is computed
  on the held-out rows of each group (its interval resamples that group's users, or its rows), its
  headline is the mean of the per-group ceilings with an interval over groups (the range below 5),
  the pooled ceiling (all judgments) and the worst group beside it (:func:`human_over_groups`). A
  group without annotated rows has no ceiling and is left out of the human mean; a strategy's share
  is the mean of its per-group objective on the covered rows of the covered groups divided by the
  human headline (:func:`share_over_groups`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = ["MIN_ANNOTATORS", "covered_rows", "human_fields", "human_on_rows", "human_over_groups", "share_on_rows",
           "share_over_groups"]

MIN_ANNOTATORS = 3
"""Rows with labels from fewer people are not part of the ceiling (each annotator needs 2 others)."""


def _left_out(human: dict | None) -> frozenset:
    return frozenset(d["dropped"] for d in (human or {}).get("duplicates") or ())


def covered_rows(examples: Sequence, min_annotators: int = MIN_ANNOTATORS, leave_out=frozenset()) -> list[int]:
    """Indices of the rows whose ``annotations`` hold labels from at least ``min_annotators`` people
    (names in ``leave_out`` not counted)."""
    out = []
    for i, ex in enumerate(examples):
        value = getattr(ex, "annotations", None) if not isinstance(ex, dict) else ex.get("annotations")
        if isinstance(value, dict) and len(set(value) - leave_out) >= min_annotators:
            out.append(i)
    return out


def human_on_rows(stage, examples: Sequence, *, n_boot: int, seed: int) -> dict | None:
    """:func:`personalign.labels.human_ceiling` on ``examples``, plus ``rows`` (the evaluated rows)
    and ``rows_covered`` (those with >= 3 annotators); None when no row has 3 annotators."""
    from personalign.labels.ceiling import human_ceiling

    human = human_ceiling(stage, examples, n_boot=n_boot, seed=seed, min_annotators=MIN_ANNOTATORS)
    if human is None:
        return None
    return {**human, "rows": len(examples), "rows_covered": len(covered_rows(examples, leave_out=_left_out(human)))}


def _objective_on(stage, examples: Sequence, predictions: Sequence, correct: Sequence | None,
                  scores: Sequence | None, idx: list[int]) -> float | None:
    """The stage objective of ``predictions`` on the rows ``idx`` (a scored stage's ``mean``: the
    mean of its per-row scores ``correct`` there)."""
    if not idx:
        return None
    if stage.objective.on == "metric" and correct is not None:
        return float(np.mean([correct[i] for i in idx]))
    value = stage.score([examples[i] for i in idx], [predictions[i] for i in idx],
                        scores=None if scores is None else [scores[i] for i in idx])
    return stage.objective.value_or_none(value)


def share_on_rows(stage, human: dict | None, examples: Sequence, report: dict) -> float | None:
    """A strategy's objective on the rows the ceiling covers, as a share of the ceiling
    (:func:`personalign.labels.share_of_ceiling`); None without a ceiling.

    Args:
        report: the strategy's report on ``examples`` (``predictions``, ``correct``, ``scores``).
    """
    if not human:
        return None
    from personalign.labels.ceiling import share_of_ceiling

    value = _objective_on(stage, examples, report["predictions"], report.get("correct"), report.get("scores"),
                          covered_rows(examples, leave_out=_left_out(human)))
    return share_of_ceiling(value, human)


def human_over_groups(stage, folds: Sequence, *, n_boot: int, seed: int) -> dict | None:
    """The human row of a leave-one-group-out comparison (see the module doc); None when no group
    has a row with 3 annotators.

    Args:
        folds: the comparison's folds (``name``, ``test`` rows), one per held-out group.

    Returns:
        ``{"name": "human", "metric", "headline": {"statistic", "value", "ci", "range", "se",
        "n_groups"}, "pooled": {"value", "ci", "range"}, "worst": {"group", "value"}, "by_group":
        [{"group", <metric>, <metric>_ci, "n", "n_items", "resampling"}], "groups", "groups_without",
        "n", "n_items", "n_annotators", "yes_rate", "by_annotator", "ties", "min_annotators", "note"}``.
    """
    from personalign._verbs.groups import _over_groups
    from personalign.labels.ceiling import duplicates, duplicates_text, human_ceiling
    from personalign.record import group_noun

    same = duplicates([ex for f in folds for ex in f.test])  # on all rows: a group alone may share too few
    per = {f.name: human_ceiling(stage, f.test, n_boot=n_boot, seed=seed, min_annotators=MIN_ANNOTATORS, same=same)
           for f in folds}
    per = {g: h for g, h in per.items() if h is not None}
    if not per:
        return None
    pooled = human_ceiling(stage, [ex for f in folds for ex in f.test], n_boot=n_boot, seed=seed,
                           min_annotators=MIN_ANNOTATORS, same=same)
    metric, labels = pooled["metric"], list(per)
    values = np.array([per[g][metric] for g in labels], dtype=float)
    head = _over_groups(values, labels, n_boot=n_boot, seed=seed, what="human mean per-group ceiling")
    worst = int(np.argmin(values))
    gk = group_noun(stage.group_key)
    return {"name": "human", "metric": metric,
            "headline": {"statistic": f"mean per-{stage.group_key} {metric}", "value": head["value"], "ci": head["ci"],
                         "range": head["range"], "se": head["se"], "n_groups": len(labels)},
            "pooled": {"statistic": f"{metric} of all judgments pooled", "value": pooled[metric],
                       "ci": pooled[f"{metric}_ci"], "range": pooled[f"{metric}_range"]},
            "worst": {"group": labels[worst], "value": float(values[worst])},
            "by_group": [{"group": g, metric: h[metric], f"{metric}_ci": h[f"{metric}_ci"], "n": h["n"],
                          "n_items": h["n_items"], "resampling": h["resampling"]} for g, h in per.items()],
            "groups": labels, "groups_without": [f.name for f in folds if f.name not in per],
            **{k: pooled[k] for k in ("n", "n_items", "n_annotators", "yes_rate", "by_annotator", "ties",
                                      "min_annotators", "duplicates")},
            "note": f"each annotator against the majority of the others on the held-out rows of each {gk} with >= "
                    f"{MIN_ANNOTATORS} annotators; headline: the mean of the {len(labels)} per-{gk} ceilings"
                    + duplicates_text(same)}


def share_over_groups(stage, human: dict | None, folds: Sequence, reports: Sequence[dict]) -> float | None:
    """A strategy's mean per-group objective on the covered rows of the groups the human row covers,
    as a share of the human headline; None without a human row.

    Args:
        folds / reports: the comparison's folds and the strategy's report on each, in the same order.
    """
    if not human:
        return None
    from personalign.labels.ceiling import share_of_ceiling

    values = []
    for fold, report in zip(folds, reports):
        if fold.name in human["groups"]:
            values.append(_objective_on(stage, fold.test, report["predictions"], report.get("correct"),
                                        report.get("scores"), covered_rows(fold.test, leave_out=_left_out(human))))
    values = [v for v in values if v is not None]
    return share_of_ceiling(float(np.mean(values)) if values else None, human["headline"]["value"])


def human_fields(human: dict | None, share: Any = None) -> dict:
    """``{"human": ..., "share_of_human": ...}`` for a result, or ``{}`` without a human row."""
    return {} if human is None else {"human": human, "share_of_human": share}
