"""Leave-one-group-out (LOGO) summaries of a comparison: how each strategy does on a group it never saw.

A single-split figure says how a strategy does on the prompts of that split. What a user needs is
how it does on the **next** prompt, so ``compare(..., cv="groups")`` pools every labelled row regardless
of ``split`` and, for each group g of the stage's ``group_key`` (relevance: prompts) -- one fold of
:func:`personalign._verbs.folds.group_folds`:

1. fits or compiles every strategy on all groups but g
   (:func:`personalign.compile_service.compile_program`: teleprompters take their dev split from
   whole groups of those remaining groups; nothing is fitted on g);
2. runs it on g and scores it against the human labels (per-group figures; their intervals
   resample the inner units of g, e.g. users within the prompt, or its items).

Per strategy it reports **the mean of the per-group metric as the headline** (F1 for binary
stages), the metric of the pooled out-of-group predictions beside it, and the worst group. The
headline's interval resamples groups (:mod:`personalign.metrics.cluster`); with fewer than 5
groups the per-group figures and their range are reported instead. Each strategy after the first
is compared with the first on the per-group differences: mean difference, sign-flip permutation p
(exact; smallest reachable p = 2 / 2^G), Holm-adjusted when more than two strategies are compared,
and the minimum detectable effect beside a difference that is not significant.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Callable, Sequence

import numpy as np

MIN_GROUPS = 3
"""Leave-one-group-out needs at least this many groups (two to fit on while one is held out)."""


def groups_of(stage, examples: Sequence, data) -> list:
    """The distinct ``stage.group_key`` values of ``examples`` in file order.

    Raises:
        ConfigurationError: the stage has no group key, or fewer than :data:`MIN_GROUPS` groups.
        DataError: an example has no value for the group key (names the file and the field).
    """
    from personalign.errors import ArgumentError, DataError

    key = stage.group_key
    if not key:
        raise ArgumentError("cv", f"groups: stage '{stage.name}' has no group key; leave-one-group-out "
                                 "needs one (use a single split)")
    values = [getattr(ex, key, None) for ex in examples]
    missing = [i for i, v in enumerate(values) if v is None]
    if missing:
        raise DataError(data, missing[0] + 1, key, f"leave-one-group-out: row has no '{key}'")
    groups = list(dict.fromkeys(str(v) for v in values))
    if len(groups) == len(values) and len(values) > 1:  # a stage file without group_key groups by id
        raise ArgumentError("cv", f"groups: every row of {data} is its own '{key}' group, so leave-one-group-out "
                                 f"would be leave-one-item-out; declare the stage's group_key (rows that belong "
                                 "together: a prompt, a user, a topic)")
    if len(groups) < MIN_GROUPS:
        raise ArgumentError("cv", f"groups: {data} has {len(groups)} {key} group(s) "
                                 f"({', '.join(groups)}); leave-one-group-out needs at least {MIN_GROUPS}")
    return groups


def _metric_of(stage) -> str:
    return "f1" if stage.kind == "binary" else stage.metric_name


def _over_groups(values: np.ndarray, labels: list, *, n_boot: int, seed: int, what: str) -> dict:
    """Mean of per-group ``values`` with a percentile interval over resampled groups (>= 5 groups)
    or their range (< 5); plus the bootstrap standard error."""
    from personalign.metrics.cluster import make_clusters, resample_weights, summarize

    cl = make_clusters([labels], len(labels), ["group"])
    w = resample_weights(cl, n_boot, seed) if cl.n_clusters > 1 else np.ones((1, len(labels)), dtype=np.int64)
    boot = (w @ values) / w.sum(axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig = summarize(float(values.mean()), boot, dict(zip(labels, map(float, values))), cl, what=what)
    fig["se"] = float(boot.std(ddof=1)) if boot.size > 1 else None
    fig["boot"] = boot
    return fig


def summarize_strategy(stage, name: str, folds: list[dict], examples: list, *, n_boot: int, seed: int) -> dict:
    """The row of one strategy from its per-group ``folds`` (each ``{"group", "report", ...}``) and
    the pooled ``examples`` in the folds' order: headline, pooled figure, worst group, per-group rows."""
    from personalign.evaluation import stage_report

    key = _metric_of(stage)
    labels = [f["group"] for f in folds]
    values = np.array([float(f["report"][key]) for f in folds])
    head = _over_groups(values, labels, n_boot=n_boot, seed=seed, what=f"{name} mean per-group {key}")
    preds = [p for f in folds for p in f["report"]["predictions"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pooled = stage_report(stage, examples, preds, n_boot=n_boot, seed=seed)
    worst = int(np.argmin(values))
    hidden = {"correct", "gold_positive", "predicted_positive", "scores", "cluster_levels", "predictions",
              "predictions_by_repeat"}
    by_group = [{"group": f["group"], **{k: v for k, v in f["report"].items() if k not in hidden},
                 "compile_summary": f.get("compile_summary")} for f in folds]
    return {"name": name, "metric": key,
            "headline": {"statistic": f"mean per-{stage.group_key} {key}", "value": head["value"], "ci": head["ci"],
                         "range": head["range"], "se": head["se"], "n_groups": len(labels)},
            "pooled": {"statistic": f"{key} of the pooled out-of-group predictions", "value": pooled[key],
                       "ci": pooled.get(f"{key}_ci"), "range": pooled.get(f"{key}_range"),
                       **({"precision": pooled["precision"], "recall": pooled["recall"],
                           "yes_rate": pooled["yes_rate"]} if stage.kind == "binary" else {})},
            "worst": {"group": labels[worst], "value": float(values[worst])},
            "by_group": by_group, "predictions": preds, "_values": values, "_boot": head["boot"]}


def paired_groups(row: dict, first: dict, *, seed: int, group_key: str | None = None) -> dict:
    """``row`` minus ``first`` on the per-group metric: mean difference, interval over resampled
    groups (or the range below 5 groups), se, the minimum detectable effect and the sign-flip test
    of the per-group differences -- a test of the headline's difference, since the mean of the
    per-group differences is the difference of the mean per-group figures (``permutation``, naming
    its ``statistic``, the metric, and its ``unit``, ``group_key``)."""
    from personalign.metrics.cluster import minimum_detectable_effect, sign_flip_test

    d = row["_values"] - first["_values"]
    labels = [g["group"] for g in row["by_group"]]
    fig = _over_groups(d, labels, n_boot=len(row["_boot"]), seed=seed, what=f"{row['name']} - {first['name']}")
    return {"against": first["name"], "diff": fig["value"], "ci": fig["ci"], "range": fig["range"],
            "diff_by_group": fig["by_group"], "se": fig["se"], "mde": minimum_detectable_effect(fig["boot"]),
            "permutation": {**sign_flip_test(d, seed=seed), "statistic": row["metric"], "unit": group_key}}


def add_holm(rows: list[dict], key: Callable[[dict], dict] = lambda r: r["vs_first"],
             test: Callable[[dict], dict] = lambda d: d["permutation"]) -> None:
    """Holm-adjust the p-values of the rows' comparisons with the first in place, as ``p_holm`` in
    ``key(row)``, when more than two strategies are compared; ``test(key(row))`` is the test whose
    ``p_value`` is adjusted (default: the sign-flip ``permutation``). A comparison without a p (an
    undefined objective) is left out."""
    from personalign.metrics.cluster import holm

    compared = [r for r in rows if r.get("vs_first") and test(key(r)).get("p_value") is not None]
    if len(rows) <= 2 or not compared:
        return
    for r, p in zip(compared, holm([test(key(r))["p_value"] for r in compared])):
        key(r)["p_holm"] = p


def public_row(row: dict) -> dict:
    """A strategy row without its internal arrays (JSON-serializable)."""
    return {k: v for k, v in row.items() if not k.startswith("_")}


__all__ = ["MIN_GROUPS", "add_holm", "groups_of", "paired_groups", "public_row", "summarize_strategy"]
