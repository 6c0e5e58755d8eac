"""Optuna callbacks of a sweep: trial ends reported to the run's callbacks, and the retry of
trials whose worker died.

* :class:`TrialEvents` (``study.optimize(callbacks=[...])``): each finished trial becomes a
  :class:`~personalign.tracking.callbacks.Candidate` (``trial-N``: its state, ``report`` and user
  attributes, its predictions when this process ran it) for the run's callbacks -- an MLflow
  child run is closed there (:class:`personalign.tracking.MLflowCallback`).
* :class:`RetryStaleTrial`: the storage's ``heartbeat_stale_trial_callback``; reports the dead trial
  as ``KILLED`` and re-queues it once with Optuna's ``RetryHeartbeatStaleTrialCallback``.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any, Callable

from optuna.trial import FrozenTrial, TrialState

from personalign.sweeps.attrs import PREFIX, RESULT_KEYS, trial_report
from personalign.sweeps.storage import HEARTBEAT_ATTR
from personalign.sweeps.workers import REUSED_ATTR, WORKER_ATTR

_BOOKKEEPING = (WORKER_ATTR, HEARTBEAT_ATTR)
_RESULT_ATTRS = ("mlflow_run_id", "compile", "surplus", "error", REUSED_ATTR, *RESULT_KEYS)


def _result_attr(key: str, attrs: dict) -> bool:
    """Whether user attribute ``key`` is a result of the trial (not copied into its retry)."""
    return (key in _RESULT_ATTRS or key.startswith(PREFIX) or key.endswith("_running")
            or key == attrs.get("objective"))
_STATUS = {TrialState.COMPLETE: "FINISHED", TrialState.PRUNED: "FINISHED", TrialState.FAIL: "FAILED"}


def trial_candidate(trial: FrozenTrial, status: str | None = None, predictions: dict | None = None):
    """The :class:`~personalign.tracking.callbacks.Candidate` of a finished (or dead) ``trial``:
    ``metrics`` its ``report`` (none for a failure), ``row`` its number, state, parameters and user
    attributes (``mlflow_run_id`` among them), ``report`` its predictions and errors when known."""
    from personalign.tracking.callbacks import Candidate

    status = status or _STATUS.get(trial.state, "KILLED")
    tags: dict[str, Any] = {"optuna.state": trial.state.name}
    if trial.state == TrialState.PRUNED and trial.intermediate_values:
        tags["pruned_at_step"] = max(trial.intermediate_values)
    if REUSED_ATTR in trial.user_attrs:
        tags["same_as_trial"] = trial.user_attrs[REUSED_ATTR]
    if trial.state == TrialState.FAIL and trial.user_attrs.get("error"):
        tags["error"] = trial.user_attrs["error"]
    metrics = {} if trial.state == TrialState.FAIL or status == "KILLED" else dict(trial_report(trial) or {})
    return Candidate(f"trial-{trial.number}", params=dict(trial.params), metrics=metrics,
                     row={"number": trial.number, "state": trial.state.name, "tags": tags, **trial.user_attrs},
                     report=predictions, status=status)


class TrialEvents:
    """``study.optimize`` callback: each finished trial to ``callbacks.on_candidate_end``.

    Args:
        callbacks: the run's :class:`~personalign.tracking.callbacks.Callbacks`; run: its RunInfo.
        predictions: ``number -> {"predictions", "errors"}`` of the trials this process scored
            (popped when reported).
    """

    def __init__(self, callbacks, run, predictions: dict) -> None:
        self.callbacks, self.run, self.predictions = callbacks, run, predictions

    def __call__(self, study, trial: FrozenTrial) -> None:
        self.callbacks.on_candidate_end(self.run, trial_candidate(trial, predictions=self.predictions.pop(trial.number,
                                                                                                          None)))


class RetryStaleTrial:
    """Called for a trial whose worker died (after it was set to FAIL): report it as ``KILLED``
    (``on_dead(trial)``) and re-queue it once (WAITING, same parameters) with Optuna's
    ``RetryHeartbeatStaleTrialCallback``; bookkeeping and result attributes are not copied.

    Attributes:
        retried: numbers of the trials handled, in order.
    """

    def __init__(self, on_dead: Callable[[FrozenTrial], None] | None = None, max_retry: int = 3) -> None:
        from optuna.storages import RetryHeartbeatStaleTrialCallback

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._retry = RetryHeartbeatStaleTrialCallback(max_retry=max_retry)
        self.on_dead = on_dead
        self.retried: list[int] = []

    def __call__(self, study, trial: FrozenTrial) -> None:
        if self.on_dead is not None:
            self.on_dead(trial)
        clean = copy.deepcopy(trial)
        clean.user_attrs = {k: v for k, v in trial.user_attrs.items() if not _result_attr(k, trial.user_attrs)}
        clean.system_attrs = {k: v for k, v in trial.system_attrs.items() if k not in _BOOKKEEPING}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._retry(study, clean)
        self.retried.append(trial.number)


__all__ = ["RetryStaleTrial", "TrialEvents", "trial_candidate"]
