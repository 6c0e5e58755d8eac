"""The MLflow callback: one MLflow run per verb call, named after what ran, with child runs per
candidate, dataset inputs, capped traces of the program calls with each traced row's gold label and
verdict, prediction tables and the prompt registry (:mod:`personalign.tracking.native`,
:mod:`~personalign.tracking.assess`, :mod:`~personalign.tracking.summary`), on the store
:class:`~personalign.tracking.store.Tracker` opens (``sqlite:///runs/mlflow.db`` by default; any
tracking URI). Every run is tagged ``stage``, ``model``, ``adapter``, ``data``, ``split``,
``data_sha256`` (:func:`~personalign.tracking.summary.run_tags`), and each tracked stage adds its
headline metric to the runs list's columns (:mod:`~personalign.tracking.runs_view`).

What each verb's run holds:

* ``compare``: params (stage, data and its sha256, splits, model, seed), the evaluation (and
  training) rows as datasets, one child run per strategy (:func:`~personalign.tracking.summary.child_tags`,
  its figures under stable names, predictions, traces with assessments, a registered prompt when
  compiled), ``<metric>/<strategy>`` (leave-one-group-out: ``<strategy>.mean_group_<metric>``) and
  ``best_<metric>`` summary metrics, the summary table, the result JSON and chart; rows
  annotated by >= 3 people add the human ceiling and each strategy's share of it
  (:mod:`personalign.tracking.human`).
* ``compile``: the compile record's numbers, ``program.json`` and ``prompt.md``, the prompt.
* ``eval``: the figures, predictions and traces with assessments. ``sweep``: a child run per trial
  (opened when the trial starts: a killed worker's run is closed by the next one), the study's
  counts and best figures.

A tracking failure inside a sweep is reported on stderr and counted (``tracking_errors``), never
fatal to the sweep; a store that cannot be opened fails the command before any work.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

from personalign.tracking.callbacks import Candidate, RunCallback, RunInfo

def run_name(run: RunInfo) -> str:
    """``compare relevance · relevance_demo:val · qwen2.5-coder-1.5b-instruct``; a run of one
    strategy starts with it: ``zero-shot@bootstrap · compile relevance · ...``."""
    from personalign.tracking.native import model_label

    stage = getattr(run.stage, "name", None) or ""
    head = f"{run.command} {stage}".strip()
    data = run.data
    where = None if data is None else (Path(str(data)).stem if not str(data).startswith("examples (") else "examples")
    if where is not None and run.split:
        where += f":{run.split}"
    parts = ([run.strategy] if run.strategy else []) + [head] + ([where] if where else [])
    return " · ".join(parts + [model_label(run.lm) if run.lm else "no LM"])


class MLflowCallback(RunCallback):
    """Track verb calls in MLflow.

    Args:
        tracking_uri: the MLflow tracking URI (default ``sqlite:///<runs>/mlflow.db``).
        experiment: the experiment's name.
    """

    def __init__(self, tracking_uri: str | None = None, experiment: str = "personalign") -> None:
        from personalign.tracking.store import Tracker

        self.tracker = Tracker(tracking_uri, experiment=experiment)
        self.tracking_uri = self.tracker.tracking_uri
        self.errors: list[str] = []
        self._lock = threading.Lock()

    def safely(self, fn: Callable[[], Any]) -> Any:
        """Run one tracking call of a sweep trial; a failure is printed and counted, never raised."""
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 -- tracking must not stop the sweep
            msg = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
            with self._lock:
                self.errors.append(msg)
            print(f"warning: MLflow tracking failed: {msg}", file=sys.stderr)
            return None

    def check(self, run: RunInfo) -> None:
        self.tracker.check()

    def on_run_start(self, run: RunInfo) -> None:
        from personalign.record import mlflow_tags, run_record, slug
        from personalign.tracking.native import log_dataset
        from personalign.tracking.store import WORKER_TAG
        from personalign.tracking.summary import adapter_label, run_tags

        stage = getattr(run.stage, "name", None)
        record = run_record(slug(f"{run.command}-{stage or 'run'}"), [], model=run.lm, data=run.data,
                            data_sha256=run.data_sha256, stage=stage, adapter=adapter_label(run.lm) if run.lm else None)
        tags = {"command": run.command, **run_tags(run, run.lm), **mlflow_tags(record),
                **({"mlflow.runType": "evaluation"} if run.command == "eval" else {}),
                **{k: str(v) for k, v in run.tags.items()}}
        if run.command == "sweep":  # runs of this study left RUNNING by killed workers are closed first
            from personalign.processes import worker_alive

            study = run.tags.get("personalign.study")
            self.safely(lambda: self.tracker.close_stale_runs(
                {"personalign.study": study}, lambda t: worker_alive(t.get(WORKER_TAG)) is False))
        run.state["mlflow"] = self.tracker.start(run_name(run), params=run.params, tags=tags)
        if run.stage is not None:
            self.safely(lambda: self._publish_view(run.stage.metric_name))
        for examples, split, context in run.datasets:
            log_dataset(self.tracker, run.stage, examples, data=run.data, sha256=run.data_sha256 or "", split=split,
                        context=context)

    @contextlib.contextmanager
    def tracing(self, run: RunInfo, candidate: str) -> Iterator[Any]:
        from personalign.tracking.native import lm_traces

        tags = {"stage": run.stage.name, "strategy": candidate} if run.stage is not None else {"runner": candidate}
        with lm_traces(self.tracker, tags=tags) as stats:
            run.state.setdefault("mlflow_traces", {}).setdefault(candidate, []).append(stats)
            yield stats

    def _publish_view(self, metric: str) -> None:
        import mlflow

        from personalign.tracking.runs_view import publish_runs_view

        exp = mlflow.get_experiment_by_name(self.tracker.experiment)
        if exp is not None:
            publish_runs_view(self.tracker.client(), exp.experiment_id, metric)

    def _assess(self, run: RunInfo, c: Candidate, examples, calls: list, correct, predictions) -> None:
        """The gold label and the verdict on each traced row (:mod:`personalign.tracking.assess`)."""
        from personalign.tracking.assess import assess_traces

        if calls and examples:
            assess_traces(self.tracker, run.stage, calls, examples, correct=correct, predictions=predictions,
                          data=run.data, split=run.split, strategy=c.name)

    def on_trial_start(self, run: RunInfo, number: int, params: dict) -> dict | None:
        run_id = self.safely(lambda: self.tracker.start_run_by_id(
            f"trial-{number} · sweep {run.stage.name}", parent_run_id=run.state.get("mlflow"), params=params,
            tags={**run.tags, "stage": run.stage.name, "personalign.trial": number, "command": "sweep-trial",
                  "model": str(run.lm), "data_sha256": str(run.data_sha256), "split": str(run.split)}))
        return {"mlflow_run_id": run_id} if run_id else None

    def on_candidate_end(self, run: RunInfo, candidate: Candidate) -> None:
        getattr(self, f"_end_{run.command.split()[0]}", self._end_other)(run, candidate)

    def _end_compare(self, run: RunInfo, c: Candidate) -> None:
        from personalign.tracking.native import link_traces, log_predictions, register_prompt
        from personalign.tracking.summary import child_metrics, child_tags

        params = {**c.params, "model": c.params.get("lm") or "none", "data": run.data, "data_sha256": run.data_sha256,
                  "split": run.split}
        # a single split's candidate carries its rows and report; leave-one-group-out's rows are
        # the evaluation dataset (every fold's test rows, in fold order), its verdicts the row's
        examples = c.examples if c.examples is not None else next(
            (ex for ex, _, context in run.datasets if context == "evaluation"), None)
        report = c.report or {"predictions": c.row.get("predictions"), "correct": c.row.get("correct"),
                              "errors": c.row.get("errors")}
        calls = [call for stats in run.state.get("mlflow_traces", {}).pop(c.name, []) for call in stats["calls"]]
        with self.tracker.run(f"{c.name} · compare {run.stage.name}", nested=True, params=params,
                              tags=child_tags(run, c)):
            self.tracker.log_metrics(child_metrics(run.stage, c))
            if examples is not None and report.get("predictions") is not None:
                log_predictions(self.tracker, run.stage, examples, report)
            if calls:
                link_traces(self.tracker, {"trace_ids": [call["trace_id"] for call in calls]})
                self._assess(run, c, examples, calls, report.get("correct"), report.get("predictions"))
            if c.program is not None and c.params.get("compile"):
                prompt = register_prompt(self.tracker, c.program, stage=run.stage.name, strategy=c.name.split("@")[0],
                                         compile_info=c.params["compile"], lm=run.lm, run_id=self.tracker.run_id)
                if prompt:
                    c.row["prompt"] = prompt

    def _end_compile(self, run: RunInfo, c: Candidate) -> None:
        from personalign.tracking.native import register_prompt

        self.tracker.log_metrics(c.metrics)
        info = c.row.get("compile") or {}
        prompt = register_prompt(self.tracker, c.program, stage=run.stage.name, strategy=c.params["strategy"],
                                 compile_info=info, lm=run.lm, run_id=run.state.get("mlflow"))
        if prompt:
            info["prompt"] = prompt

    def _end_eval(self, run: RunInfo, c: Candidate) -> None:
        from personalign.tracking.human import human_metrics
        from personalign.tracking.native import log_predictions

        self.tracker.log_metrics({k: v for k, v in c.row.items() if k not in ("seed",)} | human_metrics(c.row))
        log_predictions(self.tracker, run.stage, c.examples, c.report)
        calls = [call for stats in run.state.get("mlflow_traces", {}).pop(c.name, []) for call in stats["calls"]]
        self._assess(run, c, c.examples, calls, c.report.get("correct"), c.report.get("predictions"))

    def _end_sweep(self, run: RunInfo, c: Candidate) -> None:
        run_id = c.row.get("mlflow_run_id")
        if not run_id:
            return
        if c.report:
            self.safely(lambda: self.tracker.log_dict_to(run_id, c.report, "predictions.json"))
        self.safely(lambda: self.tracker.end_run_by_id(run_id, c.status, metrics=c.metrics,
                                                       tags=c.row.get("tags") or {}))

    def _end_other(self, run: RunInfo, c: Candidate) -> None:
        self.tracker.log_metrics(c.metrics)

    def on_artifact(self, run: RunInfo, path: Any) -> None:
        if run.command == "sweep":
            self.safely(lambda: self.tracker.log_artifact(path))
        else:
            self.tracker.log_artifact(path)

    def on_run_end(self, run: RunInfo, result: dict, status: str) -> None:
        run_id = run.state.get("mlflow")
        if run_id is None:
            return
        try:
            if status == "FINISHED":
                getattr(self, f"_summary_{run.command.split()[0]}", lambda r, res: None)(run, result)
        finally:
            self.tracker.end(run_id, "FAILED" if status == "REFUSED" else status)
            run.state["killed_runs"] = list(dict.fromkeys(self.tracker.killed))  # the interrupt's line counts them
        if status == "REFUSED":  # bad input found while working: no run is left for it in the UI
            self.tracker.client().delete_run(run_id)

    def _summary_compare(self, run: RunInfo, result: dict) -> None:
        from personalign.tracking.human import human_metrics
        from personalign.tracking.summary import log_summary

        result["mlflow_run_id"] = run.state["mlflow"]
        self.tracker.log_metrics(human_metrics(result))  # the human ceiling and the shares of it ({} without)
        spent = result.get("spent") or {}  # tokens and dollars the run's responses reported, in all
        self.tracker.log_metrics({f"spent_{k}": v for k, v in spent.items() if k != "priced"})
        log_summary(self.tracker, result)

    def _summary_sweep(self, run: RunInfo, result: dict) -> None:
        self.safely(lambda: self.tracker.log_metrics(
            {k: result[k] for k in ("n_complete", "n_pruned", "n_fail", "ran", "seconds", "lm_calls", "n_distinct",
                                    "n_reused") if k in result}))
        ref = result.get("reference") or {}
        if "value" in ref:  # the stage's reference constant on the same rows, beside best_<objective>
            self.safely(lambda: self.tracker.log_metrics({f"reference_{ref['objective']}": ref["value"]}))
        best = result.get("best")
        if best:
            self.safely(lambda: self.tracker.log_metrics({"best_" + k: v for k, v in (best.get("report") or {}).items()
                                                          if k != "n"}))
        result["mlflow_parent_run_id"] = run.state.get("mlflow")
        result["tracking_errors"] = self.errors[:20]

    def _summary_run(self, run: RunInfo, result: dict) -> None:
        from personalign.tracking.native import log_runner_result

        log_runner_result(self.tracker, result)
        result["mlflow_run_id"] = run.state.get("mlflow")


__all__ = ["MLflowCallback", "run_name"]
