"""Run (or resume) one sweep invocation: open the study, run the missing trials, summarize, export.

The sampler and the pruner are Optuna's extension points, injected as ``optuna.create_study``
takes them: ``run_sweep(..., sampler=optuna.samplers.RandomSampler(seed=0),
pruner=optuna.pruners.NopPruner())``. The defaults are multivariate TPE seeded per trial
(:func:`~personalign.sweep.sampler.default_sampler`) and the search space's ``[pruner]``
(``MedianPruner``; :meth:`~personalign.sweep.space.SearchSpace.make_pruner`).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from personalign.errors import ConfigurationError, PersonalignError, find_personalign_error
from personalign.sweep.callbacks import RetryStaleTrial, TrialRuns
from personalign.sweep.objective import Objective, TrialFailed, load_splits
from personalign.sweep.sampler import default_sampler
from personalign.sweep.space import SearchSpace
from personalign.sweep.storage import (GRACE_PERIOD, HEARTBEAT_INTERVAL, check_study_name, fail_stale_trials,
                                       open_storage, redact_url)
from personalign.sweep.trust import check_study_compatible, trusted_trials
from personalign.sweep.workers import Budget, Surplus, counts, worker_alive, worker_id


def objective_name(stage, split: str) -> str:
    """The objective's name shown by Optuna (``study.metric_names``): ``"<objective> (<split>)"``,
    e.g. ``"f1 (val)"``, ``"f2 (dev)"``, ``"kappa (dev)"`` -- the set objective the trial values
    are (:func:`personalign.objectives.objective_name`), not the stage's report metric."""
    from personalign.objectives import objective_name as set_objective_name

    return f"{set_objective_name(stage)} ({split})"


def default_study_name(stage: str, data: Path, split: str, space: SearchSpace) -> str:
    return f"{stage}-{Path(data).stem}-{split}-{space.sha256[:8]}"


def figure_text(report: dict, metric: str, value: float) -> str:
    """A trial's ``value`` of ``metric`` as printed: with its 95% interval, or -- below 5 groups in
    the split it was scored on -- the per-group figures and their range
    (:func:`personalign.metrics.cluster.format_figure`); plain when the report holds neither."""
    from personalign.metrics.cluster import format_figure

    return format_figure(value, report.get(f"{metric}_ci"), report.get(f"{metric}_range"),
                         by_group=report.get(f"{metric}_by_group"))


class Sweep:
    """One invocation of a sweep (see :func:`run_sweep`, which validates the arguments)."""

    on_ready = None  # called once the inputs are validated, before anything is written

    def __init__(self, *, stage, space: SearchSpace, data: Path, split: str, train_split: str, n_trials: int,
                 storage: str, study_name: str, n_jobs: int, seed: int, lm: str | None, tracker, limit: int | None,
                 n_boot: int, progress: bool, heartbeat_interval: int, grace_period: int, export: bool,
                 max_failures: int | None, sampler=None, pruner=None):
        self.stage, self.space, self.data, self.split, self.train_split = stage, space, Path(data), split, train_split
        self.n_trials, self.storage_url, self.study_name = n_trials, storage, study_name
        self.n_jobs, self.seed, self.lm_name = n_jobs, seed, lm
        self.limit, self.n_boot, self.progress = limit, n_boot, progress
        self.heartbeat_interval, self.grace_period, self.export = heartbeat_interval, grace_period, export
        self.max_failures = max_failures if max_failures is not None else max(3, n_trials // 2)
        self.sampler, self.pruner = sampler, pruner
        self.worker = worker_id()
        self.runs = TrialRuns(tracker, tags={"personalign.study": study_name, "personalign.worker": self.worker,
                                             "stage": stage.name})
        self.tracker = self.runs.tracker
        self._lock = threading.Lock()
        self._failures = 0
        self._ran: list[int] = []

    def _record_tags(self, study) -> dict[str, str]:
        """The run record's provenance (:mod:`personalign.record`) as tags: versions, git commit,
        model and its sha256, data sha256, and the sampler with its settings."""
        from personalign.record import mlflow_tags, run_record, slug

        sampler = {"name": type(study.sampler).__name__, "seed": self.seed, "pruner": type(study.pruner).__name__}
        if self.sampler is None:  # the default (sweep/sampler.py: default_sampler)
            sampler["inner"] = "TPESampler(multivariate=True, group=True, constant_liar=True), seeded seed + trial"
        return mlflow_tags(run_record(slug(f"sweep-{self.study_name}"), [], model=self.lm_name, sampler=sampler,
                                      data=self.data, data_sha256=self.splits.data_sha256, stage=self.stage.name))

    def _open_study(self):
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.on_stale = RetryStaleTrial(self.tracker)
        self.storage = open_storage(self.storage_url, heartbeat_interval=self.heartbeat_interval,
                                    grace_period=self.grace_period, on_stale=self.on_stale)
        sampler = self.sampler if self.sampler is not None else default_sampler(self.seed)
        pruner = self.pruner if self.pruner is not None else self.space.make_pruner()
        try:
            study = optuna.create_study(study_name=self.study_name, storage=self.storage, direction="maximize",
                                        sampler=sampler, pruner=pruner, load_if_exists=True)
        except Exception as exc:  # noqa: BLE001
            ours = find_personalign_error(exc)
            if ours:
                raise ours from None
            raise ConfigurationError(f"cannot open study '{self.study_name}' in {redact_url(self.storage_url)}: "
                                     f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}") from None
        identity = {"stage": self.stage.name, "data_sha256": self.splits.data_sha256, "split": self.split,
                    "train_split": self.train_split, "space_sha256": self.space.sha256, "limit": self.limit,
                    "lm": self.lm_name if self.splits.uses_lm else None}
        attrs = study.user_attrs
        if "identity" in attrs and attrs["identity"] != identity:
            diff = sorted(k for k in identity if attrs["identity"].get(k) != identity[k])
            raise ConfigurationError(f"study '{self.study_name}' in {redact_url(self.storage_url)} was created with a "
                                     f"different {', '.join(diff)}; pass another --study-name to start a new study")
        if not study.metric_names:  # the dashboard's axis: "f1 (val)", not "Objective 0"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                study.set_metric_names([objective_name(self.stage, self.split)])
        if "identity" not in attrs:
            study.set_user_attr("identity", identity)
            study.set_user_attr("data", str(self.data))
            study.set_user_attr("space", self.space.raw)
            study.set_user_attr("lm", self.lm_name)
        return study

    def _after_trial(self, study, frozen) -> None:
        """Optuna callback: count failures, print the trial, fail stale trials, stop at the budget."""
        with self._lock:
            self._ran.append(frozen.number)
            if frozen.state == TrialState.FAIL and not frozen.user_attrs.get("surplus"):
                self._failures += 1
            failures = self._failures
        if self.progress:
            self._print_trial(frozen)
        fail_stale_trials(study)
        if self.budget.missing(study.get_trials(deepcopy=False)) <= 0:
            study.stop()
        elif failures > self.max_failures:
            print(f"stopping: {failures} failed trials in this run (limit {self.max_failures})", file=sys.stderr)
            study.stop()

    def _print_trial(self, t) -> None:
        from personalign.objectives import objective_name as set_objective_name

        metric = set_objective_name(self.stage)  # what t.value is
        report = t.user_attrs.get("report") or {}
        value = f"{metric} {figure_text(report, metric, t.value)}" if t.value is not None else ""
        extra = t.user_attrs.get("error", "")
        if "same_as" in t.user_attrs:
            extra = f"(same parameters as trial {t.user_attrs['same_as']}: result reused)"
        params = ", ".join(f"{k}={_short(v)}" for k, v in t.params.items())
        print(f"trial {t.number} {t.state.name} {value} {params} {extra}".rstrip(), file=sys.stderr, flush=True)

    def _optimize(self, study, missing: int) -> None:
        """Rounds of ``study.optimize(n_trials=todo)``: within one process exactly the missing trials
        are created (never more, whatever the order in which threads finish); after a round with
        failed trials the next round replaces them, up to ``max_failures``. Across processes,
        :meth:`_after_trial` stops a round once finished + live running trials reach the budget, and
        :meth:`Budget.claim` turns a trial that lost a race into a (workless) surplus FAIL."""
        todo = missing
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        _quiet_interrupts()
        while todo > 0 and self._failures <= self.max_failures:
            ran_before = len(self._ran)
            # teleprompters print to stdout: keep stdout for the result (--json). Redirected once
            # here, in the main thread, never inside worker threads.
            with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                study.optimize(self.objective, n_trials=todo, n_jobs=max(1, min(self.n_jobs, todo)),
                               catch=(TrialFailed, Surplus), callbacks=[self.runs, self._after_trial],
                               gc_after_trial=False, show_progress_bar=False)
            if len(self._ran) == ran_before or self.objective.surplus_seen:
                break
            todo = self.budget.missing(study.get_trials(deepcopy=False))

    def run(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        self.splits = load_splits(self.stage, self.data, self.split, self.train_split, self.limit,
                                  self.space.strategies)
        if self.splits.uses_lm:
            from personalign.lm import default_model

            self.lm_name = self.lm_name or default_model()
        lm = None
        if self.splits.uses_lm:  # built (embedded models: loaded and verified) once, in the main thread
            from personalign.lm import make_lm

            lm = make_lm(self.lm_name)  # a bad model fails here, before the study or any store is written
        study = self._open_study()
        check_study_compatible(study.get_trials(deepcopy=False), self.space, self.study_name)  # a storage is input
        self.tracker.check()  # the URI was checked when the Tracker was made; this opens the store
        if self.on_ready is not None:
            self.on_ready()  # every input valid: the caller may now create caches
        self.budget = Budget(self.n_trials, self.storage.is_stale)
        self.objective = Objective(stage=self.stage, space=self.space, data=self.splits, storage=self.storage,
                                   study_name=self.study_name, budget=self.budget, runs=self.runs, lm=lm,
                                   seed=self.seed, n_boot=self.n_boot, worker=self.worker)
        closed_runs = self.runs.safely(lambda: self.tracker.close_stale_runs(
            {"personalign.study": self.study_name},
            lambda tags: worker_alive(tags.get("personalign.worker")) is False)) or []
        fail_stale_trials(study)
        trials = study.get_trials(deepcopy=False)
        before = counts(trials)
        missing = self.budget.missing(trials)
        params = {"stage": self.stage.name, "data": str(self.data), "data_sha256": self.splits.data_sha256,
                  "split": self.split, "train_split": self.train_split, "n_trials": self.n_trials,
                  "n_jobs": self.n_jobs, "seed": self.seed, "lm": self.lm_name, "study": self.study_name,
                  "storage": redact_url(self.storage_url), "space": self.space.raw, "limit": self.limit}
        tags = {"command": "sweep", "stage": self.stage.name, "personalign.study": self.study_name,
                "personalign.worker": self.worker, **self._record_tags(study)}
        with self.tracker.run(f"sweep-{self.study_name}", params=params, tags=tags):
            self.runs.parent_run_id = getattr(self.tracker, "run_id", None)
            self._optimize(study, missing)
            result = self._result(study, before, closed_runs, missing, t0)
            self.runs.safely(lambda: self.tracker.log_metrics(
                {k: result[k] for k in ("n_complete", "n_pruned", "n_fail", "ran", "seconds", "lm_calls")}))
            if result.get("best"):
                self.runs.safely(lambda: self.tracker.log_metrics({"best_" + k: v for k, v in result["best"].get(
                    "report", {}).items() if k != "n"}))
            for key in ("program_json", "prompt_file"):
                if result.get(key):
                    self.runs.safely(lambda: self.tracker.log_artifact(result[key]))
        result["mlflow_parent_run_id"] = self.runs.parent_run_id
        result["tracking_errors"] = self.runs.errors[:20]
        return result

    def _result(self, study, before, closed_runs, missing, t0) -> dict[str, Any]:
        from personalign.objectives import objective_name as set_objective_name

        trials = study.get_trials(deepcopy=False)
        n = counts(trials)
        out: dict[str, Any] = {
            "stage": self.stage.name, "study": self.study_name, "storage": redact_url(self.storage_url),
            "data": str(self.data), "split": self.split, "n": len(self.splits.evalset),
            "n_train": len(self.splits.trainset), "metric": self.stage.metric_name,
            "objective": set_objective_name(self.stage), "n_trials": self.n_trials,
            "n_jobs": self.n_jobs, "seed": self.seed, "lm": self.lm_name if self.splits.uses_lm else None,
            "worker": self.worker, "at_start": {k.lower(): v for k, v in before.items() if v},
            "missing_at_start": max(0, missing), "ran": len(self._ran), "ran_trials": sorted(self._ran),
            "n_complete": n["COMPLETE"], "n_pruned": n["PRUNED"], "n_fail": n["FAIL"], "n_running": n["RUNNING"],
            "n_waiting": n["WAITING"], "surplus": sum(1 for t in trials if t.user_attrs.get("surplus")),
            "stale_failed": sorted(set(self.on_stale.retried)),
            "mlflow_runs_closed": sorted(set(closed_runs) | set(self.on_stale.closed_runs)),
            "lm_calls": self.objective.lm_calls, "seconds": round(time.perf_counter() - t0, 3),
            "dashboard": f"optuna-dashboard {redact_url(self.storage_url)}" if "://" in self.storage_url else
                         f"optuna-dashboard {self.storage_url[len('journal:'):]}",
            "best": None,
        }
        complete, refused = trusted_trials(trials, self.space)  # a storage is input: check before trusting
        if refused:
            out["untrusted_trials"] = refused
            print(f"warning: {len(refused)} complete trial(s) of study {self.study_name} ignored as untrusted: "
                  + "; ".join(f"trial {n}: {w}" for n, w in list(refused.items())[:3]), file=sys.stderr)
        if complete:
            best = max(complete, key=lambda t: (t.value, -t.number))
            out["best"] = {"number": best.number, "value": best.value, "params": best.params,
                           "report": best.user_attrs.get("report")}
            if self.export:
                from personalign.sweep.export import export_best

                try:
                    out.update(export_best(self, best))
                except PersonalignError:
                    raise
                except Exception as exc:  # noqa: BLE001 -- the sweep's results stand without the export
                    out["export_error"] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"
                    print(f"warning: could not export the best program: {out['export_error']}", file=sys.stderr)
        return out


class _NoInterruptTraceback(logging.Filter):
    """Drops Optuna's "Trial N failed ... KeyboardInterrupt" record (a traceback): on Ctrl-C or
    SIGTERM the trial is marked FAIL by Optuna and the CLI prints the one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, KeyboardInterrupt)


def _quiet_interrupts() -> None:
    """Install :class:`_NoInterruptTraceback` on Optuna's log handlers (once)."""
    for handler in logging.getLogger("optuna").handlers:
        if not any(isinstance(f, _NoInterruptTraceback) for f in handler.filters):
            handler.addFilter(_NoInterruptTraceback())


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def run_sweep(stage: str, *, data: str | Path, space: str | Path | None = None, n_trials: int = 20,
              storage: str | None = None, study_name: str | None = None, n_jobs: int = 1, seed: int = 0,
              lm: str | None = None, split: str = "dev", train_split: str = "train", tracker=None,
              limit: int | None = None, n_boot: int = 1000, progress: bool = True,
              heartbeat_interval: int = HEARTBEAT_INTERVAL, grace_period: int = GRACE_PERIOD, export: bool = True,
              max_failures: int | None = None, on_ready=None, sampler=None, pruner=None) -> dict[str, Any]:
    """Run (or resume) an Optuna sweep of ``stage`` and return its summary (JSON-serializable).

    Args:
        stage: a stage name (:func:`personalign.programs.stages.get_stage`).
        data: labelled JSONL of the stage with train and evaluation splits.
        space: search space file (TOML/YAML); None: the stage's default space.
        n_trials: total COMPLETE + PRUNED trials wanted in the study (a rerun adds only the missing).
        storage: Optuna storage URL (default ``sqlite:///<runs>/optuna.db``), ``journal:PATH`` or an
            RDB URL such as ``postgresql://user@127.0.0.1:5432/optuna``.
        study_name: default ``<stage>-<data stem>-<split>-<space sha256[:8]>``.
        n_jobs: trials run in parallel threads of this process.
        seed: seed of the default sampler (``seed + trial number``), of the optimizers and of the bootstrap CIs.
        lm: model string for LLM strategies (default: :func:`personalign.lm.default_model`).
        split: the split trials are scored on; ``"dev"`` (default, when the data has no ``dev``
            split): whole groups held out of ``train_split`` (seed 0), trials compile on the rest.
            Trial values are the stage's set objective (:mod:`personalign.objectives`).
        tracker: a :class:`personalign.tracking.Tracker` (None: no MLflow).
        limit: evaluate on a sample of ``limit`` examples of the split, stratified over the stage's
            groups (``Stage.limit_key``) and drawn with seed 0 whatever ``seed`` is (every worker
            and resume sees the same rows).
        heartbeat_interval / grace_period: seconds; see :func:`~personalign.sweep.storage.open_storage`.
        export: save the best trial's program under ``runs/programs/`` at the end.
        max_failures: stop this invocation after this many failed trials (default max(3, n_trials // 2)).
        on_ready: called once the inputs (model, storage, study, tracking store) are validated, before
            any cache is written.
        sampler: an ``optuna.samplers.BaseSampler`` (default: multivariate TPE seeded per trial).
        pruner: an ``optuna.pruners.BasePruner`` (default: the space's ``[pruner]``, MedianPruner).

    Returns:
        ``{"stage", "study", "storage", "n_trials", "n_complete", "n_pruned", "n_fail", "ran",
        "best": {"number", "value", "params", "report"}, "program", "prompt_file", ...}``.

    Raises:
        ConfigurationError: bad flag, space, storage or model; a study created with other data.
        DataError: unreadable data or an empty split.
    """
    from personalign.data.files import check_input
    from personalign.settings import runs_dir
    from personalign.programs.stages import get_stage

    if n_trials < 1:
        raise ConfigurationError(f"--n-trials must be >= 1, got {n_trials}")
    if n_jobs < 1:
        raise ConfigurationError(f"--n-jobs must be >= 1, got {n_jobs}")
    if limit is not None and limit < 1:
        raise ConfigurationError(f"--limit must be >= 1, got {limit}")
    if heartbeat_interval < 1 or grace_period <= heartbeat_interval:
        raise ConfigurationError("the grace period must be longer than the heartbeat interval (both >= 1 s)")
    st = get_stage(stage)
    data = check_input(data, allow_dir=True)
    sp = SearchSpace.load(st, space)
    url = storage or f"sqlite:///{runs_dir() / 'optuna.db'}"
    name = check_study_name(study_name) if study_name is not None else default_study_name(st.name, data, split, sp)
    sweep = Sweep(stage=st, space=sp, data=data, split=split, train_split=train_split, n_trials=n_trials, storage=url,
                  study_name=name, n_jobs=n_jobs, seed=seed, lm=lm, tracker=tracker, limit=limit, n_boot=n_boot,
                  progress=progress, heartbeat_interval=heartbeat_interval, grace_period=grace_period, export=export,
                  max_failures=max_failures, sampler=sampler, pruner=pruner)
    sweep.on_ready = on_ready
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return {"started": started, **sweep.run()}


__all__ = ["Sweep", "default_study_name", "objective_name", "run_sweep"]
