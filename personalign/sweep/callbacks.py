"""Optuna callbacks of a sweep: MLflow trial runs, and the retry of trials whose worker died.

* :class:`TrialRuns`: one MLflow child run per trial. The objective opens it when the trial
  starts (:meth:`TrialRuns.start`; its id goes to the trial's user attribute ``mlflow_run_id``) and
  this ``study.optimize(callbacks=[...])`` callback closes it from the trial's final state and
  ``report`` user attribute.
* :class:`RetryStaleTrial`: the storage's ``heartbeat_stale_trial_callback``; closes the dead
  trial's run as KILLED and re-queues the trial once with Optuna's ``RetryHeartbeatStaleTrialCallback``.

Without MLflow both get a disabled :class:`~personalign.tracking.Tracker` (every call a no-op).
Tracking failures are reported on stderr and counted, never fatal to the sweep.
"""

from __future__ import annotations

import copy
import sys
import threading
import warnings
from typing import Any, Callable

from optuna.trial import FrozenTrial, TrialState

from personalign.sweep.storage import HEARTBEAT_ATTR
from personalign.sweep.workers import WORKER_ATTR

_BOOKKEEPING = (WORKER_ATTR, HEARTBEAT_ATTR)
_RESULT_ATTRS = ("mlflow_run_id", "report", "lm_calls", "failures", "seconds", "compile", "surplus", "error")
_RUN_STATUS = {TrialState.COMPLETE: "FINISHED", TrialState.PRUNED: "FINISHED", TrialState.FAIL: "FAILED"}


def null_tracker():
    """A :class:`~personalign.tracking.Tracker` whose every method is a no-op (``--no-track``)."""
    from personalign.tracking import Tracker

    return Tracker(enabled=False)


class TrialRuns:
    """MLflow child runs of one sweep invocation's trials (an Optuna ``study.optimize`` callback).

    Args:
        tracker: a :class:`~personalign.tracking.Tracker`, or None for no MLflow.
        tags: tags of every trial run (study, worker, stage).
    """

    def __init__(self, tracker=None, tags: dict[str, Any] | None = None) -> None:
        self.tracker = tracker if tracker is not None else null_tracker()
        self.tags = dict(tags or {})
        self.parent_run_id: str | None = None
        self.errors: list[str] = []
        self._lock = threading.Lock()

    def safely(self, fn: Callable[[], Any]) -> Any:
        """Run one tracking call; a failure is printed and counted in :attr:`errors`, never raised."""
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 -- tracking must not stop the sweep
            msg = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
            with self._lock:
                self.errors.append(msg)
            print(f"warning: MLflow tracking failed: {msg}", file=sys.stderr)
            return None

    def start(self, number: int, params: dict[str, Any]) -> str | None:
        """Open the child run of trial ``number`` (under :attr:`parent_run_id`); returns its id
        (None without MLflow or when tracking failed)."""
        return self.safely(lambda: self.tracker.start_run_by_id(
            f"trial-{number}", parent_run_id=self.parent_run_id, params=params,
            tags={**self.tags, "personalign.trial": number, "command": "sweep-trial"}))

    def log_predictions(self, run_id: str | None, predictions: list, errors: list[str]) -> None:
        """``predictions.json`` (plain values, the first 50 errors) in the trial's run."""
        self.safely(lambda: self.tracker.log_dict_to(run_id, {"predictions": [_plain(p) for p in predictions],
                                                              "errors": errors[:50]}, "predictions.json"))

    def end(self, run_id: str | None, status: str, metrics: dict | None = None, tags: dict | None = None) -> None:
        """Close ``run_id`` with ``status`` (FINISHED, FAILED, KILLED); a closed run is left as is."""
        self.safely(lambda: self.tracker.end_run_by_id(run_id, status, metrics=metrics or {}, tags=tags or {}))

    def __call__(self, study, trial: FrozenTrial) -> None:
        """Close the finished ``trial``'s run: FINISHED with its ``report`` for COMPLETE and PRUNED
        (tags ``optuna.state``, ``pruned_at_step``, ``same_as_trial``), FAILED with its error for FAIL."""
        run_id = trial.user_attrs.get("mlflow_run_id")
        if not run_id:
            return
        tags: dict[str, Any] = {"optuna.state": trial.state.name}
        metrics = trial.user_attrs.get("report") or {}
        if trial.state == TrialState.PRUNED and trial.intermediate_values:
            tags["pruned_at_step"] = max(trial.intermediate_values)
        if "same_as" in trial.user_attrs:
            tags["same_as_trial"] = trial.user_attrs["same_as"]
        if trial.state == TrialState.FAIL:
            metrics = {}
            if trial.user_attrs.get("error"):
                tags["error"] = trial.user_attrs["error"]
        self.end(run_id, _RUN_STATUS.get(trial.state, "KILLED"), metrics, tags)


class RetryStaleTrial:
    """Called for a trial whose worker died (after it was set to FAIL): close its MLflow run as
    KILLED and re-queue it once (WAITING, same parameters) with Optuna's
    ``RetryHeartbeatStaleTrialCallback``; bookkeeping and result attributes are not copied.

    Attributes:
        retried: numbers of the trials handled, in order.
        closed_runs: MLflow run ids closed as KILLED.
    """

    def __init__(self, tracker=None, max_retry: int = 3) -> None:
        from optuna.storages import RetryHeartbeatStaleTrialCallback

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._retry = RetryHeartbeatStaleTrialCallback(max_retry=max_retry)
        self.tracker = tracker if tracker is not None else null_tracker()
        self.retried: list[int] = []
        self.closed_runs: list[str] = []

    def __call__(self, study, trial: FrozenTrial) -> None:
        run_id = trial.user_attrs.get("mlflow_run_id")
        if run_id and self.tracker.enabled:
            try:
                self.tracker.end_run_by_id(run_id, "KILLED")
                self.closed_runs.append(run_id)
            except Exception as exc:  # noqa: BLE001 -- tracking must not stop the sweep
                print(f"warning: cannot close MLflow run {run_id}: {exc}", file=sys.stderr)
        clean = copy.deepcopy(trial)
        clean.user_attrs = {k: v for k, v in trial.user_attrs.items() if k not in _RESULT_ATTRS}
        clean.system_attrs = {k: v for k, v in trial.system_attrs.items() if k not in _BOOKKEEPING}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._retry(study, clean)
        self.retried.append(trial.number)


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "model_dump"):
        return value.model_dump()
    return str(value)


__all__ = ["RetryStaleTrial", "TrialRuns", "null_tracker"]
