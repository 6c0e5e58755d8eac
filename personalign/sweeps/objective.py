"""The objective of a sweep trial, and the splits it compiles and scores on.

One trial (:meth:`Objective.__call__`): record its worker, claim a place in the budget, sample its
configuration (:meth:`~personalign.sweeps.space.SearchSpace.configure`), compile it on the train
split with the shared compile service (:func:`personalign.compile_service.compile_program`),
score the evaluation split in minibatches (``trial.report`` after each, so the pruner can stop it),
then the whole split with :func:`personalign.evaluation.stage_report`. The trial's value is the
stage's set objective (:mod:`personalign.stages.objective`).
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from personalign.errors import DataError, PersonalignError, find_personalign_error
from personalign.lm.ledger import unit
from personalign.sweeps.attrs import set_report, trial_report
from personalign.sweeps.storage import trial_id
from personalign.sweeps.trust import trusted_trials
from personalign.sweeps.workers import REUSED_ATTR, WORKER_ATTR, Surplus


class TrialFailed(Exception):
    """A trial failed for a reason other than configuration (recorded as FAIL; the sweep continues)."""


@dataclass
class SweepData:
    """The examples of a sweep: ``trainset`` (compiled on), ``evalset`` (scored, fixed order)."""

    trainset: list
    evalset: list
    data_sha256: str
    uses_lm: bool


def load_splits(stage, ds, split: str, train_split: str, limit: int | None, strategies: list[str], *,
                train_limit: int | None = None) -> SweepData:
    """The rows of a sweep, from its loaded data ``ds`` (:class:`personalign._verbs.inputs.Data`).
    ``split == "dev"`` without a ``dev`` split: whole groups held out of ``train_split`` by the
    same function compile holds its dev set out with (:func:`personalign.compile_service.dev_split`,
    seed 0, the same for every worker); trials compile on the rest. Before the first trial every
    strategy of the space is checked against those rows by the check compile runs
    (:func:`personalign.compile_service.check_fit`). The evaluation split is sampled to ``limit``
    rows stratified over the stage's groups, then shuffled, both with seed 0 (independent of
    ``--seed``: every worker and resume prunes on the same minibatches); the rows trials compile
    on, to ``train_limit`` the same way (after the dev groups are held out).

    Raises:
        DataError: an empty evaluation or train split; a strategy the train rows cannot fit (names
            it, the rows, and what would let it fit).
    """
    from personalign.compile_service import check_fit, dev_split
    from personalign.stages import splits_present

    present = splits_present(ds.examples)
    evalset = ds.rows(split)
    trainset = ds.rows(train_split)
    held = split == "dev" and not evalset
    if held:
        trainset, evalset = dev_split(trainset, 0, stage.group_key)
        evalset = evalset or []
    if not evalset:
        why = (f" (the dev split holds whole '{stage.group_key}' groups out of '{train_split}', which has fewer "
               "than 2)") if held else ""
        raise DataError(ds.where, None, "split", f"no examples in split '{split}'{why} (splits present: {present})")
    if not trainset:
        raise DataError(ds.where, None, "split", f"sweeps compile on the '{train_split}' split, which has no "
                                                 f"examples (splits present: {present})")
    trainset = stage.limit(trainset, train_limit, 0)  # --train-limit: seed 0, as --limit (every worker the same rows)
    where = f"'{train_split}' less the dev groups" if held else f"'{train_split}'"
    for name in strategies:
        check_fit(stage, name, trainset, ds.where, where,
                  hint=" -- score the sweep on a split of its own (--split val) or label more groups" if held else "")
    # --limit: a sample stratified over the stage's groups, seed 0 (every worker and resume sees the same rows)
    evalset = stage.limit(evalset, limit, 0)
    order = list(range(len(evalset)))
    random.Random(0).shuffle(order)
    evalset = [evalset[i] for i in order]
    uses_lm = any(stage.registry.info(s).uses_lm for s in strategies)
    return SweepData(trainset, evalset, ds.sha256, uses_lm)


def trial_fingerprint(stage, space, trainset: list, evalset: list, seed: int, lm, number: int) -> str:
    """The name in the cache ledger (:func:`personalign.lm.ledger.unit`) of trial ``number`` of a
    sweep: its space, rows, seed and model -- the same sweep on another storage samples the same
    configuration for it (the sampler is seeded per trial) and makes the same calls."""
    from personalign.lm.ledger import fingerprint, rows_of

    return fingerprint("sweep-trial", stage.name, stage.signature_record(), space.sha256, rows_of(trainset),
                       rows_of(evalset), seed, getattr(lm, "model", None), getattr(lm, "kwargs", None), number)


class Objective:
    """``objective(trial) -> float`` for ``study.optimize``.

    Args:
        stage, space, data: the stage, its :class:`~personalign.sweeps.space.SearchSpace`, its :class:`SweepData`.
        storage: the study's storage (from :func:`~personalign.sweeps.storage.open_storage`).
        study_name: the study's name.
        budget: the shared :class:`~personalign.sweeps.workers.Budget`.
        callbacks / run: the run's :class:`~personalign.tracking.callbacks.Callbacks` and RunInfo.
        lm: the built LM (None when no strategy calls one); seed: optimizers' seed; n_boot: CI resamples.

    Attributes:
        best: ``(value, number, program, compile_info)`` of the best trial this process ran.
        lm_calls: LM calls of this process's trials; surplus_seen: a trial lost the budget race.
        predictions: ``number -> {"predictions", "errors"}`` of the trials this process scored.
    """

    def __init__(self, *, stage, space, data: SweepData, storage, study_name: str, budget, callbacks, run, lm,
                 seed: int, n_boot: int, worker: str, concurrency: int = 1) -> None:
        self.stage, self.space, self.data, self.storage = stage, space, data, storage
        self.study_name, self.budget, self.lm = study_name, budget, lm
        self.callbacks, self.run = callbacks, run
        self.predictions: dict[int, dict] = {}
        self.seed, self.n_boot, self.worker, self.concurrency = seed, n_boot, worker, concurrency
        self.best: tuple[float, int, Any, dict] | None = None
        self.lm_calls = 0
        self.surplus_seen = False
        self.reused = 0  # trials of this process whose value was reused (same parameters as a finished trial)
        self._lock = threading.Lock()

    def compile(self, config, lm):
        """``(program, compile_info)`` of ``config`` compiled on the train split."""
        from personalign.compile_service import compile_program

        program = self.stage.registry.create(config.strategy, **config.strategy_kwargs)
        return compile_program(self.stage, config.strategy, config.optimizer, self.data.trainset, lm=lm,
                               seed=self.seed, optimizer_settings=config.optimizer_settings,
                               fit_settings=config.fit_settings, program=program)

    def trial_lm(self, config):
        """The LM of a trial of ``config`` (its temperature), or None for a strategy without LM."""
        if self.lm is None or not self.stage.registry.info(config.strategy).uses_lm:
            return None
        return self.lm if config.temperature is None else self.lm.copy(temperature=float(config.temperature))

    def __call__(self, trial: optuna.Trial) -> float:
        """The trial on Optuna's thread, with the run's calls in flight entered there
        (:func:`personalign.lm.use`; Optuna's threads do not carry the caller's context)."""
        from personalign.lm import use

        with use(self.lm, concurrency=self.concurrency):
            return self._trial(trial)

    def _trial(self, trial: optuna.Trial) -> float:
        self.storage.set_trial_system_attr(trial_id(self.storage, self.study_name, trial.number), WORKER_ATTR,
                                           self.worker)
        trials = trial.study.get_trials(deepcopy=False)
        try:
            me = self.budget.claim(trials, trial.number)
        except Surplus as exc:
            trial.set_user_attr("surplus", True)
            trial.set_user_attr("error", str(exc))
            self.surplus_seen = True
            trial.study.stop()
            raise
        config = self.space.configure(lambda dim: dim.sample(trial))
        retry_of = me.system_attrs.get("failed_trial")
        attrs = self.callbacks.on_trial_start(self.run, trial.number, {
            "trial": trial.number, **trial.params, "config": config.to_dict(),
            **({"retry_of": retry_of} if retry_of is not None else {})})
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        same = _same_params(trusted_trials(trials, self.space)[0], trial)  # never reuse an untrusted value
        if same is not None:
            # identical parameters were scored already (deterministic for a given seed): reuse the
            # result instead of spending LM calls on it again
            # (Optuna's FAQ for categorical spaces); it does not count toward the budget (REUSED_ATTR)
            trial.set_user_attr(REUSED_ATTR, same.number)
            set_report(trial, {**(trial_report(same) or {}), "lm_calls": 0, "seconds": 0.0},
                       self.stage.objective.name, config.strategy)
            with self._lock:
                self.reused += 1
            return float(same.value)
        try:
            with unit(None if self.lm is None else trial_fingerprint(self.stage, self.space, self.data.trainset,
                                                                     self.data.evalset, self.seed, self.lm,
                                                                     trial.number)):
                return self._score(trial, config)
        except (TrialFailed, optuna.TrialPruned):
            raise  # recorded by Optuna; its after-trial callback reports the trial
        except BaseException as exc:  # a configuration error or an interrupt stops the sweep: report it here
            from personalign.tracking.callbacks import Candidate

            status = "FAILED" if isinstance(exc, PersonalignError) else "KILLED"
            self.callbacks.on_candidate_end(self.run, Candidate(f"trial-{trial.number}", status=status,
                                                                row={"number": trial.number, **attrs}))
            raise

    def _score(self, trial: optuna.Trial, config) -> float:
        from personalign.evaluation import across_groups, run_program, stage_report

        start = time.perf_counter()
        metric = self.stage.objective.name
        evalset = self.data.evalset
        lm = self.trial_lm(config)
        lm_calls = 0
        try:
            program, compile_info = self.compile(config, lm)
            info = compile_info or {}
            lm_calls += int(info.get("actual_lm_calls") or info.get("lm_calls") or 0)
            if compile_info:
                trial.set_user_attr("compile", {k: info.get(k) for k in ("optimizer", "config", "train_score",
                                                                         "actual_lm_calls", "seconds")})
            preds: list[Any] = []
            scores: list[Any] = []
            errors: list[str] = []
            size = self.space.minibatch_size
            for step, lo in enumerate(range(0, len(evalset), size)):
                outcome = run_program(program, evalset[lo: lo + size], inputs=self.stage.inputs,
                                      output=self.stage.output, lm=lm, description=config.name, progress=False)
                preds.extend(outcome.predictions)
                scores.extend(outcome.scores)
                errors.extend(f"{e} (minibatch {step})" for e in outcome.errors)
                lm_calls += outcome.lm_calls
                running = self.stage.score(evalset[: len(preds)], preds, scores=scores)
                trial.report(float(running), step)
                if len(preds) < len(evalset) and trial.should_prune():
                    set_report(trial, {"objective": metric, f"{metric}_running": running, "n_scored": len(preds),
                                       "lm_calls": lm_calls, "seconds": round(time.perf_counter() - start, 3)},
                               metric, config.strategy)
                    raise optuna.TrialPruned(f"{metric} {running:.3f} after {len(preds)} examples")
            # below 5 dev groups (one topic, say): per-group figures and their range, no interval
            report = across_groups(stage_report(self.stage, evalset, preds, n_boot=self.n_boot, seed=self.seed),
                                   self.stage.metric_name)
            summary = {k: v for k, v in report.items()
                       if not isinstance(v, list) or (len(v) == 2 and k.endswith(("_ci", "_range")))}
            value = self.stage.score(evalset, preds, scores=scores)  # the set objective (F1, F2, kappa)
            summary.update({"lm_calls": lm_calls, "failures": sum(p is None for p in preds), "objective": metric,
                            metric: value, "seconds": round(time.perf_counter() - start, 3)})
            set_report(trial, summary, metric, config.strategy)  # short attributes a person can read
            self.predictions[trial.number] = {"predictions": preds, "errors": errors[:50]}
            with self._lock:
                self.lm_calls += lm_calls
                if self.best is None or value > self.best[0]:
                    self.best = (value, trial.number, program, compile_info)
            return value
        except optuna.TrialPruned:
            with self._lock:
                self.lm_calls += lm_calls
            raise
        except PersonalignError:
            raise
        except Exception as exc:  # noqa: BLE001 -- a broken configuration fails this trial, not the sweep
            ours = find_personalign_error(exc)
            if ours is not None:
                raise ours from None
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            trial.set_user_attr("error", f"{type(exc).__name__}: {first}")
            raise TrialFailed(f"{config.name}: {type(exc).__name__}: {first}") from exc


def _same_params(trials: list, trial):
    """A COMPLETE trial of the snapshot ``trials`` with exactly this trial's parameters, or None."""
    params = trial.params
    for t in trials:
        if t.state == TrialState.COMPLETE and t.number != trial.number and t.params == params:
            return t
    return None


__all__ = ["Objective", "SweepData", "TrialFailed", "load_splits"]
