"""What a compare shows at a glance in MLflow's runs list: the same short names on every run.

* **Child runs** (one per strategy): tags ``stage``, ``strategy``, ``model`` (the model string,
  ``none`` for an LM-free strategy), ``adapter`` (:func:`adapter_label`, the wording of the CLI
  table: ``json-grammar``, ``chat``, ...), ``data`` (the data file), ``split`` (``logo`` for
  leave-one-group-out), ``data_sha256``, and MLflow's ``mlflow.runType = evaluation`` (the UI
  then lists them expanded under their parent); metrics: the headline under the stage's metric
  name (``f1``; for leave-one-group-out the mean per-group figure) with its interval as
  ``f1_ci_low`` / ``f1_ci_high`` (or, with too few clusters for an interval, the per-group range
  ``f1_range_low`` / ``_high``), plus ``lm_calls``, ``seconds``, ``failures``, ... as measured.
* **The parent run**: ``<metric>/<strategy>`` per strategy, ``best_<metric>`` and the tag
  ``best_strategy``, and the summary table (:func:`summary_columns`) as an MLflow table
  (``mlflow.log_table``, artifact ``summary_table.json``: the run page's Artifacts tab shows it
  as a table).
"""

from __future__ import annotations

import re
import warnings
from typing import Any

SUMMARY_TABLE = "summary_table.json"
_METRIC_NAME = re.compile(r"[^\w.\- /]+")


def adapter_label(model: str | None) -> str:
    """The adapter of ``model`` as the CLI table and run records name it
    (:func:`personalign.lm.adapter_name`: ``json-grammar``, ``json-schema[...]``, ``json``,
    ``chat``); ``none`` when nothing calls a model."""
    if not model:
        return "none"
    from personalign.lm import adapter_name

    return adapter_name(model)


def run_tags(run, model: str | None) -> dict[str, str]:
    """Tags every run of a verb carries for the runs list: ``stage``, ``model``, ``adapter``,
    ``data``, ``split``, ``data_sha256`` (``none`` where the run has none, e.g. no model)."""
    stage = getattr(run.stage, "name", None)
    text = {k: "none" if v is None else str(v) for k, v in (("data", run.data), ("split", run.split),
                                                             ("data_sha256", run.data_sha256))}
    return {**({"stage": stage} if stage else {}), "model": model or "none", "adapter": adapter_label(model), **text}


def child_tags(run, candidate) -> dict[str, str]:
    """The tags of a compare's child run (see the module docstring)."""
    return {**run_tags(run, candidate.params.get("lm")), "strategy": candidate.name, "mlflow.runType": "evaluation"}


def metric_keys(kind: str, metric: str) -> tuple[str, ...]:
    """The report keys logged as metrics for a stage of ``kind`` whose headline is ``metric``."""
    if kind == "binary":
        return ("f1", "f1_ci", "f1_range", "precision", "precision_ci", "recall", "recall_ci", "yes_rate",
                "yes_rate_ci", "accuracy")
    return (metric, f"{metric}_ci", f"{metric}_range")


def headline(row: dict, metric: str) -> dict[str, Any]:
    """A result row's headline under stable names: ``{metric, metric_ci, metric_range}`` (a
    ``[low, high]`` or None each); a leave-one-group-out row adds ``pooled_<metric>`` and
    ``worst_group_<metric>`` (its headline is the mean per-group figure)."""
    if isinstance(row.get("headline"), dict):
        head, pooled, worst = row["headline"], row.get("pooled") or {}, row.get("worst") or {}
        return {metric: head.get("value"), f"{metric}_ci": head.get("ci"), f"{metric}_range": head.get("range"),
                f"pooled_{metric}": pooled.get("value"), f"worst_group_{metric}": worst.get("value")}
    return {k: row.get(k) for k in (metric, f"{metric}_ci", f"{metric}_range")}


def child_metrics(stage, candidate) -> dict[str, Any]:
    """The metrics of a compare's child run: the candidate's numbers, its headline and the
    intervals of :func:`metric_keys` (``[low, high]`` -> ``_low`` / ``_high``)."""
    row = candidate.row
    cis = {k: row[k] for k in metric_keys(stage.kind, stage.metric_name) if isinstance(row.get(k), (list, tuple))}
    head = {k: v for k, v in headline(row, stage.metric_name).items() if v is not None}
    return {**candidate.metrics, **cis, **head}


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        return f"{value[0]:.3f}–{value[1]:.3f}"
    return None if value is None else str(value) if not isinstance(value, (int, bool)) else value


def summary_columns(result: dict) -> dict[str, list]:
    """The summary table of a compare result, one row per strategy, as ``{column: values}``:
    ``strategy``; the headline metric; its ``95% CI`` and/or ``range`` (the per-group range, for
    rows with too few clusters for an interval; a column no row has is left out);
    leave-one-group-out's ``pooled`` and ``worst group``; then ``precision``, ``recall``,
    ``yes_rate``, ``objective``, ``lm_calls``, ``compile_lm_calls``, ``seconds``, ``failures``
    where the result has them. Figures to 4 decimals; intervals as ``low–high`` text."""
    key, rows = result.get("metric", "f1"), result["strategies"]
    heads = [headline(r, key) for r in rows]
    columns: dict[str, list] = {"strategy": [r["name"] for r in rows], key: [_round(h[key]) for h in heads]}
    if any(h[f"{key}_ci"] is not None for h in heads):
        columns[f"{key} 95% CI"] = [_round(h[f"{key}_ci"]) or "" for h in heads]
    if any(h[f"{key}_ci"] is None and h[f"{key}_range"] is not None for h in heads):
        columns[f"{key} range"] = [_round(h[f"{key}_range"]) or "" for h in heads]
    if result.get("cv") == "groups":
        columns[f"pooled {key}"] = [_round(h[f"pooled_{key}"]) for h in heads]
        columns["worst group"] = [f"{(r.get('worst') or {}).get('group')}: {_round(h[f'worst_group_{key}'])}"
                                  for r, h in zip(rows, heads)]
    for k in ("precision", "recall", "yes_rate", "objective", "lm_calls", "compile_lm_calls", "seconds", "failures"):
        if any(k in r for r in rows) and k != key:
            columns[k] = [_round(r.get(k)) for r in rows]
    return columns


def log_summary(tracker, result: dict) -> None:
    """Log a compare result's summary into the active (parent) run: ``<metric>/<strategy>`` per
    strategy (``@`` in a strategy name becomes `` at ``; CIs as ``_low``/``_high``), ``best_<metric>``
    and the tag ``best_strategy``; the summary table (:func:`summary_columns`) as an MLflow table
    (:data:`SUMMARY_TABLE`). Leave-one-group-out results log ``<strategy>.mean_group_<metric>``,
    ``.pooled_<metric>`` and ``.worst_group_<metric>`` instead of ``<metric>/<strategy>``."""
    if not result.get("strategies"):
        return
    import mlflow

    key = result.get("metric", "f1")
    cv = result.get("cv") == "groups"
    metrics: dict[str, Any] = {}
    for row in result["strategies"]:
        if cv:
            head = headline(row, key)
            metrics.update({f"{row['name']}.mean_group_{key}": head[key], f"{row['name']}.pooled_{key}":
                            head[f"pooled_{key}"], f"{row['name']}.worst_group_{key}": head[f"worst_group_{key}"]})
            continue
        name = _METRIC_NAME.sub("_", row["name"].replace("@", " at "))
        metrics.update({f"{k}/{name}": row[k] for k in (*metric_keys(result.get("kind", "binary"), key), "objective",
                                                         "lm_calls", "compile_lm_calls", "failures") if k in row})
    scored = [(r, headline(r, key)[key]) for r in result["strategies"]]
    scored = [(r, v) for r, v in scored if isinstance(v, (int, float))]
    tracker.check()
    if scored:
        best, value = max(scored, key=lambda rv: rv[1])
        metrics[f"best_{key}"] = value
        mlflow.set_tag("best_strategy", best["name"])
    tracker.log_metrics({k: v for k, v in metrics.items() if v is not None})
    with warnings.catch_warnings():  # pandas deprecation warnings raised inside MLflow
        warnings.simplefilter("ignore")
        mlflow.log_table(summary_columns(result), artifact_file=SUMMARY_TABLE)


__all__ = ["SUMMARY_TABLE", "adapter_label", "child_metrics", "child_tags", "headline", "log_summary", "metric_keys",
           "run_tags", "summary_columns"]
