"""The page ``personalign ui`` opens: the experiment's runs list with its metric columns showing.

MLflow's UI (3.x) opens an experiment on its GenAI overview, and its runs list shows only the
Source, Models and Dataset columns until the reader picks others. Two things of the UI itself
(read from the MLflow 3.17 web app) make the runs page readable without a click:

* the route ``#/experiments/<id>/runs?workflowType=machine_learning`` opens the runs list (the
  "Model training" side of the UI) instead of the GenAI overview;
* a **shared view**: the experiment tag ``mlflow.sharedViewState.<key>`` holds a view state
  (JSON: ``selectedColumns`` as ``metrics.`f1``` / ``tags.`model```, the sort) that the URL
  parameter ``viewStateShareKey=<key>`` applies. Every tracked run merges its stage's columns
  into the view :data:`VIEW_KEY` (:func:`publish_runs_view`): ``<metric>``, ``<metric>_ci_low``,
  ``<metric>_ci_high``, ``best_<metric>``, ``lm_calls``, ``seconds`` and the tags ``strategy``,
  ``model``, ``adapter``, ``split``. The reader's own column choice is kept in the browser; the UI
  says "You're viewing a shared view" and offers to keep it ("Override saved view").
"""

from __future__ import annotations

import json
from typing import Any

VIEW_KEY = "personalign"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"
TAG_COLUMNS = ("strategy", "model", "adapter", "split")


RUN_NAME = "attributes.`Run Name`"  # the UI's column ids: attributes, metrics and tags by key


def view_columns(metrics: list[str]) -> list[str]:
    """The runs list's columns for stages whose headline metrics are ``metrics`` (in order): the
    tag ``strategy``; per metric ``m``: ``m``, ``m_ci_low``, ``m_ci_high``, ``m_range_low``,
    ``m_range_high``, ``best_m``; ``lm_calls``, ``seconds``; the tags ``model``, ``adapter``,
    ``split``. The UI leaves out a column no listed run has (e.g. ``_range_`` when every run has
    an interval)."""
    cols = [f"tags.`{TAG_COLUMNS[0]}`"]
    for m in metrics:
        cols += [f"metrics.`{k}`" for k in (m, f"{m}_ci_low", f"{m}_ci_high", f"{m}_range_low", f"{m}_range_high",
                                            f"best_{m}")]
    return cols + ["metrics.`lm_calls`", "metrics.`seconds`"] + [f"tags.`{t}`" for t in TAG_COLUMNS[1:]]


def view_state(metrics: list[str]) -> dict[str, Any]:
    """The shared view state: :func:`view_columns` in that order (the run name wide enough for
    ``<strategy> · compare <stage>``), newest runs first."""
    cols = view_columns(metrics)
    return {"selectedColumns": cols, "columnOrder": [RUN_NAME, *cols], "columnWidths": {RUN_NAME: 330, cols[0]: 150},
            "orderByKey": "attributes.start_time", "orderByAsc": False, "personalign_metrics": list(metrics)}


def publish_runs_view(client, experiment_id: str, metric: str) -> None:
    """Add ``metric``'s columns to the experiment's shared view :data:`VIEW_TAG` (created when
    missing; kept as it is when it already has them)."""
    exp = client.get_experiment(experiment_id)
    try:
        metrics = list(json.loads(exp.tags.get(VIEW_TAG) or "{}").get("personalign_metrics") or [])
    except (ValueError, AttributeError):  # a view someone else wrote under our key: replaced
        metrics = []
    if metric in metrics and VIEW_TAG in exp.tags:
        return
    client.set_experiment_tag(experiment_id, VIEW_TAG, json.dumps(view_state([*metrics, metric])))


def runs_page_url(tracking_uri: str, base_url: str, experiment: str = "personalign") -> str:
    """The URL of ``experiment``'s runs page on the MLflow UI at ``base_url`` serving
    ``tracking_uri``: ``<base>/#/experiments/<id>/runs?workflowType=machine_learning`` plus
    ``&viewStateShareKey=personalign`` when the experiment has the shared view; ``<base>/`` when
    the store has no such experiment (or cannot be read). Reads the store, never writes it."""
    try:
        import mlflow

        exp = mlflow.MlflowClient(tracking_uri=tracking_uri).get_experiment_by_name(experiment)
    except Exception:  # noqa: BLE001 -- the UI itself reports a store it cannot open
        exp = None
    base = base_url.rstrip("/")
    if exp is None:
        return f"{base}/"
    shared = f"&viewStateShareKey={VIEW_KEY}" if VIEW_TAG in exp.tags else ""
    return f"{base}/#/experiments/{exp.experiment_id}/runs?workflowType=machine_learning{shared}"


__all__ = ["TAG_COLUMNS", "VIEW_KEY", "VIEW_TAG", "publish_runs_view", "runs_page_url", "view_columns", "view_state"]
