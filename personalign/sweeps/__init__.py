"""Optuna sweeps over the strategies of a stage: resumable, parallel, prunable, tracked.

A sweep searches one stage's strategies (and, per strategy, the teleprompter and its demo counts,
the LM temperature, the settings of a trainable strategy's fit and its constructor arguments) for
the best set objective (F1 for binary stages) on a labelled split. Each trial:

1. samples its parameters from the search space (:class:`SearchSpace`, a TOML/YAML file; the
   defaults per stage are :mod:`personalign.sweeps.defaults`, for relevance also in
   ``examples/sweep_relevance.toml``), define-by-run, so a parameter is sampled only where it
   applies (``labeled.k`` only when the optimizer is ``labeled``);
2. builds the strategy from the stage registry and compiles it on the train split
   (:func:`personalign.compile_service.compile_program`: a teleprompter on a dev set held out from
   train by group, or the strategy's own fit) -- nothing is fitted on the evaluation split;
3. evaluates it on the evaluation split in minibatches (fixed order), reporting the running
   metric after each minibatch (``trial.report``) so that the pruner (default ``MedianPruner``)
   stops trials below the median of earlier trials at the same step;
4. scores the full split with :func:`personalign.evaluation.stage_report` (metric with 95%
   bootstrap CIs), recorded in the trial's user attributes and in an MLflow child run; the
   trial's value is the stage's **set objective** (F1, F2, kappa: :mod:`personalign.stages.objective`).
   The default split is ``dev``: whole groups held out of train, so the study never selects on val.

Storage (``--storage``): ``sqlite:///runs/optuna.db`` (default), ``journal:PATH`` (an append-only
log with file locks: several processes on one machine or a shared file system) or any SQLAlchemy
URL such as ``postgresql://user@host/db`` (many workers on many machines). SQLite is *not* meant
for many concurrent writers: use it for one process (threads included).

Resuming: rerunning the same command loads the study and runs only the trials missing to reach
``n_trials`` COMPLETE + PRUNED trials, counting trials that live workers are running. A killed
worker leaves its trial RUNNING; it is stale at once when the worker ran on this machine and its
process is gone, else after ``grace_period`` seconds without a heartbeat (Optuna's heartbeat,
on both storages: :mod:`personalign.sweeps.storage`). Optuna fails it and the storage's callback
(:class:`RetryStaleTrial`) re-queues it once with the same parameters and reports it KILLED to the
run's callbacks (an MLflow run is closed). A worker never starts a trial beyond the budget (:class:`~personalign.sweeps.workers.Budget`).

Threads: ``n_jobs`` trials run in threads of ``study.optimize(n_jobs=...)``; every LM call is made
inside :func:`personalign.lm.use` (``dspy.context``), never ``dspy.configure``.

Modules: :mod:`~personalign.sweeps.space` (search-space language), :mod:`~personalign.sweeps.defaults`,
:mod:`~personalign.sweeps.storage`, :mod:`~personalign.sweeps.workers`, :mod:`~personalign.sweeps.objective`,
:mod:`~personalign.sweeps.callbacks`, :mod:`~personalign.sweeps.sampler`, :mod:`~personalign.sweeps.export`,
:mod:`~personalign.sweeps.runner` (the :class:`Sweep` that :func:`personalign.sweep` runs, with injectable ``sampler=`` and ``pruner=``),
:mod:`~personalign.sweeps.attrs` (a trial's report as short user attributes, :func:`trial_report` reads them back),
:mod:`~personalign.sweeps.space_size` (a finite space's size), :mod:`~personalign.sweeps.reference` (the stage's
reference constant beside the best).

A trial whose parameters equal a COMPLETE trial's reuses its value without work and is not counted
toward ``n_trials``; a finite space stops the sweep once every configuration has run. A study keeps
one seed (its user attribute ``seed``); each trial's sampler seed derives from it and the trial's number.

View the storage with ``optuna-dashboard sqlite:///runs/optuna.db`` and the runs with ``mlflow ui``.
"""

from personalign.sweeps.attrs import trial_report
from personalign.sweeps.callbacks import RetryStaleTrial, TrialEvents
from personalign.sweeps.defaults import DEFAULT_SPACE, STAGE_SPACES, default_space
from personalign.sweeps.objective import Objective, TrialFailed
from personalign.sweeps.runner import Sweep, default_study_name, objective_name
from personalign.sweeps.sampler import PerTrialSeedSampler, default_sampler
from personalign.sweeps.space import Dimension, SearchSpace, TrialConfig
from personalign.sweeps.storage import (
    GRACE_PERIOD,
    HEARTBEAT_ATTR,
    HEARTBEAT_INTERVAL,
    JournalHeartbeatStorage,
    LivenessRDBStorage,
    fail_stale_trials,
    is_stale,
    open_storage,
    redact_url,
)
from personalign.sweeps.workers import WORKER_ATTR, Budget, worker_alive, worker_id

__all__ = [
    "DEFAULT_SPACE", "GRACE_PERIOD", "HEARTBEAT_ATTR", "HEARTBEAT_INTERVAL", "STAGE_SPACES", "WORKER_ATTR", "Budget",
    "Dimension", "JournalHeartbeatStorage", "LivenessRDBStorage", "Objective", "PerTrialSeedSampler",
    "RetryStaleTrial", "SearchSpace", "Sweep", "TrialConfig", "TrialEvents", "TrialFailed", "default_sampler",
    "default_space", "default_study_name", "fail_stale_trials", "is_stale", "objective_name", "open_storage",
    "redact_url", "trial_report", "worker_alive", "worker_id",
]

