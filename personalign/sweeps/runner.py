"""Run (or resume) one sweep invocation: open the study, run the missing trials, summarize, export.

The sampler and the pruner are Optuna's extension points, injected as ``optuna.create_study``
takes them: ``personalign.sweep(..., sampler=optuna.samplers.RandomSampler(seed=0),
pruner=optuna.pruners.NopPruner())``. The defaults are multivariate TPE seeded per trial
(:func:`~personalign.sweeps.sampler.default_sampler`) and the search space's ``[pruner]``
(``MedianPruner``; :meth:`~personalign.sweeps.space.SearchSpace.make_pruner`).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from personalign.errors import ConfigurationError, PersonalignError, find_personalign_error
from personalign.sweeps.callbacks import RetryStaleTrial, TrialEvents, trial_candidate
from personalign.sweeps.objective import Objective, TrialFailed, load_splits
from personalign.sweeps.sampler import default_sampler
from personalign.sweeps.space import SearchSpace
from personalign.sweeps.space_size import space_size
from personalign.sweeps.storage import GRACE_PERIOD, HEARTBEAT_INTERVAL, fail_stale_trials, open_storage, redact_url
from personalign.sweeps.trust import check_study_compatible, configurations_run, trusted_trials
from personalign.sweeps.attrs import trial_report
from personalign.sweeps.workers import REUSED_ATTR, Budget, Surplus, counts, finished, worker_alive, worker_id

MAX_REPEATS = 50  # trials in a row that only repeat finished configurations before a sweep stops


def objective_name(stage, split: str) -> str:
    """The objective's name shown by Optuna (``study.metric_names``): ``"<objective> (<split>)"``,
    e.g. ``"f1 (val)"``, ``"f2 (dev)"``, ``"kappa (dev)"`` -- the set objective the trial values
    are (:class:`personalign.stages.Objective`), not the stage's report metric."""
    return f"{stage.objective.name} ({split})"


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
    """One invocation of a sweep (see :func:`personalign.sweep`, which validates the arguments)."""

    on_ready = None  # called once the inputs are validated, before anything is written

    def __init__(self, *, stage, space: SearchSpace, data, split: str, train_split: str, n_trials: int,
                 storage: str, study_name: str, n_jobs: int, seed: int, model, lm_name: str | None, callbacks,
                 limit: int | None,
                 n_boot: int, progress: bool, heartbeat_interval: int, grace_period: int, export: bool,
                 max_failures: int | None, sampler=None, pruner=None, train_limit: int | None = None, cost=None):
        self.stage, self.space, self.data, self.split, self.train_split = stage, space, data, split, train_split
        self.n_trials, self.storage_url, self.study_name = n_trials, storage, study_name
        self.n_jobs, self.seed, self.resolve_model = n_jobs, seed, model
        self.lm_name = lm_name
        self.limit, self.n_boot, self.progress = limit, n_boot, progress
        self.heartbeat_interval, self.grace_period, self.export = heartbeat_interval, grace_period, export
        self.max_failures = max_failures if max_failures is not None else max(3, n_trials // 2)
        self.sampler, self.pruner = sampler, pruner
        self.train_limit = train_limit
        self.cost = cost  # cost(splits, trials to run, lm, the study's trials): before the first trial (the cost line)
        self.worker = worker_id()
        self.callbacks = callbacks
        self._lock = threading.Lock()
        self._failures = 0
        self._ran: list[int] = []
        self._repeats = 0  # trials in a row whose value was reused
        self.stop_reason: str | None = None  # why this run stopped before its budget (the space is exhausted)
        self.exhausted = False  # every configuration of a finite space has run
        self.seed_ignored: int | None = None  # a --seed other than the study's own

    def _record_tags(self, study) -> dict[str, str]:
        """The run record's provenance (:mod:`personalign.record`) as tags: versions, git commit,
        model and its sha256, data sha256, and the sampler with its settings."""
        from personalign.record import mlflow_tags, run_record, slug

        sampler = {"name": type(study.sampler).__name__, "seed": self.seed, "pruner": type(study.pruner).__name__}
        if self.sampler is None:  # the default (sweep/sampler.py: default_sampler)
            sampler["inner"] = ("TPESampler(multivariate=True, group=True, constant_liar=True), seeded per trial "
                                "from the study's seed and the trial's number")
        return mlflow_tags(run_record(slug(f"sweep-{self.study_name}"), [], model=self.lm_name, sampler=sampler,
                                      data=self.data.label, data_sha256=self.splits.data_sha256, stage=self.stage.name))

    def _open_study(self):
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.on_stale = RetryStaleTrial(lambda t: self.callbacks.on_candidate_end(self.run_info, trial_candidate(t, "KILLED")))
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
                    "lm": self.lm_name if self.splits.uses_lm else None,
                    **({"train_limit": self.train_limit} if self.train_limit is not None else {})}
        attrs = study.user_attrs
        if "identity" in attrs and attrs["identity"] != identity:
            diff = sorted(k for k in identity if attrs["identity"].get(k) != identity[k])
            raise ConfigurationError(f"study '{self.study_name}' in {redact_url(self.storage_url)} was created with a "
                                     f"different {', '.join(diff)}; pass another --study-name to start a new study")
        if not study.metric_names:  # the dashboard's axis: "f1 (val)", not "Objective 0"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                study.set_metric_names([objective_name(self.stage, self.split)])
        self._study_seed(study, attrs)
        if "identity" not in attrs:
            study.set_user_attr("identity", identity)
            study.set_user_attr("data", self.data.label)
            study.set_user_attr("space", self.space.raw)
            study.set_user_attr("lm", self.lm_name)
        return study

    def _study_seed(self, study, attrs: dict) -> None:
        """One seed per study: the first worker stores its ``--seed`` as the study's user attribute
        ``seed``; a later worker with another ``--seed`` uses the study's (one line says so), so
        each trial's sampler seed depends on the study and the trial's number alone."""
        if "seed" not in attrs:
            study.set_user_attr("seed", self.seed)
            attrs = study.user_attrs  # two workers storing at once: both take the one stored last
        stored = attrs.get("seed")
        if isinstance(stored, int) and not isinstance(stored, bool) and stored != self.seed:
            print(f"note: study {self.study_name} uses seed {stored} (set by its first worker); "
                  f"--seed {self.seed} ignored", file=sys.stderr)
            self.seed_ignored, self.seed = self.seed, stored
            if self.sampler is None:
                study.sampler = default_sampler(self.seed)

    def _exhausted(self, trials: list) -> bool:
        """Whether every configuration of a finite space has run (sets :attr:`stop_reason`)."""
        if self.size is None or configurations_run(trials, self.space) < self.size:
            return False
        self.exhausted = True
        if self.stop_reason is None:
            self.stop_reason = f"every configuration of the search space has run ({self.size})"
            print(f"stopping: {self.stop_reason}; nothing is left to try", file=sys.stderr)
        return True

    def _after_trial(self, study, frozen) -> None:
        """Optuna callback: count failures and repeats, print the trial, fail stale trials, stop at
        the budget, when the finite space is exhausted or the sampler only repeats itself."""
        with self._lock:
            self._ran.append(frozen.number)
            if frozen.state == TrialState.FAIL and not frozen.user_attrs.get("surplus"):
                self._failures += 1
            self._repeats = self._repeats + 1 if REUSED_ATTR in frozen.user_attrs else 0
            failures, repeats = self._failures, self._repeats
        if self.progress:
            self._print_trial(frozen)
        fail_stale_trials(study)
        trials = study.get_trials(deepcopy=False)
        if self.budget.missing(trials) <= 0 or self._exhausted(trials):
            study.stop()
        elif failures > self.max_failures:
            print(f"stopping: {failures} failed trials in this run (limit {self.max_failures})", file=sys.stderr)
            study.stop()
        elif repeats >= MAX_REPEATS:
            self.stop_reason = f"the sampler proposed only configurations that already ran, {repeats} times in a row"
            print(f"stopping: {self.stop_reason}", file=sys.stderr)
            study.stop()

    def _reference(self, best_value: float | None) -> dict | None:
        """The stage's reference constant on the same rows, set beside the best (None: the stage has none)."""
        from personalign.sweeps.reference import reference_figure, versus_best

        try:
            with contextlib.redirect_stdout(sys.stderr):
                ref = reference_figure(self.stage, self.objective, self.splits.evalset, n_boot=self.n_boot,
                                       seed=self.seed)
        except PersonalignError:
            raise
        except Exception as exc:  # noqa: BLE001 -- the sweep's results stand without the reference
            first = (str(exc).splitlines() or [""])[0][:300]
            print(f"warning: could not score the reference constant {self.stage.reference}: {first}", file=sys.stderr)
            return {"strategy": self.stage.reference, "error": f"{type(exc).__name__}: {first}"}
        return None if ref is None else versus_best(ref, best_value)

    def _print_trial(self, t) -> None:
        metric = self.stage.objective.name  # what t.value is
        report = trial_report(t) or {}
        value = f"{metric} {figure_text(report, metric, t.value)}" if t.value is not None else ""
        extra = t.user_attrs.get("error", "")
        if REUSED_ATTR in t.user_attrs:
            extra = f"(same parameters as trial {t.user_attrs[REUSED_ATTR]}: result reused, not counted)"
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
        while todo > 0 and self._failures <= self.max_failures and self.stop_reason is None:
            if self._exhausted(study.get_trials(deepcopy=False)):
                break
            ran_before = len(self._ran)
            # teleprompters print to stdout: keep stdout for the result (--json). Redirected once
            # here, in the main thread, never inside worker threads.
            with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                study.optimize(self.objective, n_trials=todo, n_jobs=max(1, min(self.n_jobs, todo)),
                               catch=(TrialFailed, Surplus), callbacks=[self.events, self._after_trial],
                               gc_after_trial=False, show_progress_bar=False)
            if len(self._ran) == ran_before or self.objective.surplus_seen or self.stop_reason:
                break
            todo = self.budget.missing(study.get_trials(deepcopy=False))

    def run(self) -> dict[str, Any]:
        from personalign.tracking.callbacks import RunInfo

        t0 = time.perf_counter()
        self.splits = load_splits(self.stage, self.data, self.split, self.train_split, self.limit,
                                  self.space.strategies, train_limit=self.train_limit)
        if self.splits.uses_lm:  # the model's name now; the model itself once the run's inputs are checked
            from personalign.lm import default_model

            self.lm_name = self.lm_name or default_model()
        params = {"stage": self.stage.name, "data": self.data.label, "data_sha256": self.splits.data_sha256,
                  "split": self.split, "train_split": self.train_split, "n_trials": self.n_trials,
                  "n_jobs": self.n_jobs, "seed": self.seed, "lm": self.lm_name, "study": self.study_name,
                  "storage": redact_url(self.storage_url), "space": self.space.raw, "limit": self.limit,
                  **({"train_limit": self.train_limit} if self.train_limit is not None else {})}
        self.run_info = RunInfo("sweep", self.stage, params=params, data=self.data.label,
                                data_sha256=self.splits.data_sha256, lm=self.lm_name, split=self.split,
                                tags={"personalign.study": self.study_name, "personalign.worker": self.worker})
        self.callbacks.check(self.run_info)  # before the study or an LM is touched
        model = self.resolve_model(self.splits.uses_lm)  # built once, in the main thread; a bad model writes nothing
        self.lm_name, lm = model.name, model.lm
        study = self._open_study()
        check_study_compatible(study.get_trials(deepcopy=False), self.space, self.study_name)  # a storage is input
        self.run_info.tags.update(self._record_tags(study))
        self.budget = Budget(self.n_trials, self.storage.is_stale)
        self.size = space_size(self.space)
        self.objective = Objective(stage=self.stage, space=self.space, data=self.splits, storage=self.storage,
                                   study_name=self.study_name, budget=self.budget, callbacks=self.callbacks,
                                   run=self.run_info, lm=lm, seed=self.seed, n_boot=self.n_boot, worker=self.worker,
                                   concurrency=model.concurrency)
        self.events = TrialEvents(self.callbacks, self.run_info, self.objective.predictions)
        fail_stale_trials(study)
        trials = study.get_trials(deepcopy=False)
        before = counts(trials)
        missing = self.budget.missing(trials)
        result: dict[str, Any] = {}
        with self.callbacks.run(self.run_info, result):
            if self.cost is not None:  # the run's inputs and cache checked; no trial yet
                self.cost(self.splits, max(0, missing), lm, trials)
            self._optimize(study, missing)
            result.update(self._result(study, before, missing, t0))
            for key in ("program_json", "prompt_file"):
                if result.get(key):
                    self.callbacks.on_artifact(self.run_info, result[key])
        return result

    def _result(self, study, before, missing, t0) -> dict[str, Any]:
        trials = study.get_trials(deepcopy=False)
        n = counts(trials)
        out: dict[str, Any] = {
            "stage": self.stage.name, "study": self.study_name, "storage": redact_url(self.storage_url),
            "data": self.data.label, "split": self.split, "n": len(self.splits.evalset),
            "n_train": len(self.splits.trainset), "metric": self.stage.metric_name,
            "objective": self.stage.objective.name, "n_trials": self.n_trials,
            "n_jobs": self.n_jobs, "seed": self.seed, "lm": self.lm_name if self.splits.uses_lm else None,
            "worker": self.worker, "at_start": {k.lower(): v for k, v in before.items() if v},
            "missing_at_start": max(0, missing), "ran": len(self._ran), "ran_trials": sorted(self._ran),
            "n_complete": n["COMPLETE"], "n_pruned": n["PRUNED"], "n_fail": n["FAIL"], "n_running": n["RUNNING"],
            "n_waiting": n["WAITING"], "surplus": sum(1 for t in trials if t.user_attrs.get("surplus")),
            "n_counted": finished(trials), "n_distinct": configurations_run(trials, self.space), "space_size": self.size,
            "n_reused": sum(1 for t in trials if REUSED_ATTR in t.user_attrs and t.state == TrialState.COMPLETE),
            "reused_this_run": self.objective.reused, "exhausted": self.exhausted, "stop_reason": self.stop_reason,
            **({"seed_ignored": self.seed_ignored} if self.seed_ignored is not None else {}),
            "stale_failed": sorted(set(self.on_stale.retried)),
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
                           "report": trial_report(best)}
        self.reference = self._reference(out["best"]["value"] if out["best"] else None)
        if self.reference is not None:
            out["reference"] = self.reference
        if complete and self.export:
            from personalign.sweeps.export import export_best

            try:
                out.update(export_best(self, best))
            except PersonalignError:
                raise
            except Exception as exc:  # noqa: BLE001 -- the sweep's results stand without the export
                out["export_error"] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"
                print(f"warning: could not export the best program: {out['export_error']}", file=sys.stderr)
        return out


class _NoInterruptTraceback(logging.Filter):
    """Drops Optuna's "Trial N failed ..." records with their traceback: for a failed trial the
    sweep prints its own one line (``trial N FAIL ... error``); on Ctrl-C or SIGTERM the trial is
    marked FAIL by Optuna and the CLI prints the one line; so does a :class:`PersonalignError` that
    stops the sweep (``--max-cost`` reached, a model that refuses: one line, no traceback)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, (KeyboardInterrupt, PersonalignError, TrialFailed, Surplus))


def _quiet_interrupts() -> None:
    """Install :class:`_NoInterruptTraceback` on Optuna's log handlers (once)."""
    for handler in logging.getLogger("optuna").handlers:
        if not any(isinstance(f, _NoInterruptTraceback) for f in handler.filters):
            handler.addFilter(_NoInterruptTraceback())


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


__all__ = ["Sweep", "default_study_name", "figure_text", "objective_name"]
