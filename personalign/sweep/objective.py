"""The objective of a sweep trial, and the splits it compiles and scores on.

One trial (:meth:`Objective.__call__`): record its worker, claim a place in the budget, sample its
configuration (:meth:`~personalign.sweep.space.SearchSpace.configure`), compile it on the train
split with the shared compile service (:func:`personalign.compile_service.compile_program`),
score the evaluation split in minibatches (``trial.report`` after each, so the pruner can stop it),
then the whole split with :func:`personalign.evaluation.stage_report`. The trial's value is the
stage's set objective (:mod:`personalign.objectives`).
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
from personalign.sweep.storage import trial_id
from personalign.sweep.trust import trusted_trials
from personalign.sweep.workers import WORKER_ATTR, Surplus


class TrialFailed(Exception):
    """A trial failed for a reason other than configuration (recorded as FAIL; the sweep continues)."""


@dataclass
class SweepData:
    """The examples of a sweep: ``trainset`` (compiled on), ``evalset`` (scored, fixed order)."""

    trainset: list
    evalset: list
    data_sha256: str
    uses_lm: bool


def load_splits(stage, data: Path, split: str, train_split: str, limit: int | None, strategies: list[str]) -> SweepData:
    """Read ``data`` and select the splits. ``split == "dev"`` without a ``dev`` split: whole
    groups held out of ``train_split`` (seed 0, the same for every worker). The evaluation split is
    sampled to ``limit`` examples stratified over the stage's groups (``Stage.limit``), then
    shuffled, both with seed 0 (independent of ``--seed``: every worker and resume prunes on the
    same minibatches).

    Raises:
        DataError: an empty evaluation or train split; a trainable strategy that cannot fit.
    """
    from personalign.data.digest import file_sha256
    from personalign.programs.stages import split_of, splits_present

    examples = stage.load(data)
    present = splits_present(examples)
    evalset = [ex for ex in examples if split_of(ex) == split]
    trainset = [ex for ex in examples if split_of(ex) == train_split]
    if split == "dev" and not evalset:
        from personalign.compile_service import dev_split

        trainset, evalset = dev_split(trainset, 0, stage.group_key)
        evalset = evalset or []
    if not evalset:
        raise DataError(data, None, "split", f"no examples in split '{split}' (splits present: {present})")
    if not trainset:
        raise DataError(data, None, "split", f"sweeps compile on the '{train_split}' split, which has no examples "
                                             f"(splits present: {present})")
    if any(stage.registry.info(s).trainable for s in strategies):
        stage.check_fittable(trainset, data, train_split)
    # --limit: a sample stratified over the stage's groups, seed 0 (every worker and resume sees the same rows)
    evalset = stage.limit(evalset, limit, 0)
    order = list(range(len(evalset)))
    random.Random(0).shuffle(order)
    evalset = [evalset[i] for i in order]
    uses_lm = any(stage.registry.info(s).uses_lm for s in strategies)
    return SweepData(trainset, evalset, file_sha256(data), uses_lm)


class Objective:
    """``objective(trial) -> float`` for ``study.optimize``.

    Args:
        stage, space, data: the stage, its :class:`~personalign.sweep.space.SearchSpace`, its :class:`SweepData`.
        storage: the study's storage (from :func:`~personalign.sweep.storage.open_storage`).
        study_name: the study's name.
        budget: the shared :class:`~personalign.sweep.workers.Budget`.
        runs: the :class:`~personalign.sweep.callbacks.TrialRuns` of this invocation.
        lm: the built LM (None when no strategy calls one); seed: optimizers' seed; n_boot: CI resamples.

    Attributes:
        best: ``(value, number, program, compile_info)`` of the best trial this process ran.
        lm_calls: LM calls of this process's trials; surplus_seen: a trial lost the budget race.
    """

    def __init__(self, *, stage, space, data: SweepData, storage, study_name: str, budget, runs, lm, seed: int,
                 n_boot: int, worker: str) -> None:
        self.stage, self.space, self.data, self.storage = stage, space, data, storage
        self.study_name, self.budget, self.runs, self.lm = study_name, budget, runs, lm
        self.seed, self.n_boot, self.worker = seed, n_boot, worker
        self.best: tuple[float, int, Any, dict] | None = None
        self.lm_calls = 0
        self.surplus_seen = False
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
        run_id = self.runs.start(trial.number, {"trial": trial.number, **trial.params, "config": config.to_dict(),
                                                **({"retry_of": retry_of} if retry_of is not None else {})})
        if run_id:
            trial.set_user_attr("mlflow_run_id", run_id)
        same = _same_params(trusted_trials(trials, self.space)[0], trial)  # never reuse an untrusted value
        if same is not None:
            # identical parameters were scored already (deterministic for a given seed): reuse the
            # result instead of spending LM calls on it again
            trial.set_user_attr("same_as", same.number)
            trial.set_user_attr("report", {**(same.user_attrs.get("report") or {}), "lm_calls": 0, "seconds": 0.0})
            return float(same.value)
        try:
            return self._score(trial, config, run_id)
        except (TrialFailed, optuna.TrialPruned):
            raise  # recorded by Optuna; the TrialRuns callback closes the run
        except PersonalignError:
            self.runs.end(run_id, "FAILED")  # stops the sweep: no callback will run
            raise
        except BaseException:
            self.runs.end(run_id, "KILLED")
            raise

    def _score(self, trial: optuna.Trial, config, run_id: str | None) -> float:
        from personalign.evaluation import across_groups, run_program, stage_report
        from personalign.objectives import objective_name, objective_score

        start = time.perf_counter()
        metric = objective_name(self.stage)
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
                running = objective_score(self.stage, evalset[: len(preds)], preds, scores=scores)
                trial.report(float(running), step)
                if len(preds) < len(evalset) and trial.should_prune():
                    trial.set_user_attr("report", {f"{metric}_running": running, "n_scored": len(preds),
                                                   "lm_calls": lm_calls,
                                                   "seconds": round(time.perf_counter() - start, 3)})
                    raise optuna.TrialPruned(f"{metric} {running:.3f} after {len(preds)} examples")
            # below 5 dev groups (one topic, say): per-group figures and their range, no interval
            report = across_groups(stage_report(self.stage, evalset, preds, n_boot=self.n_boot, seed=self.seed),
                                   self.stage.metric_name)
            summary = {k: v for k, v in report.items()
                       if not isinstance(v, list) or (len(v) == 2 and k.endswith(("_ci", "_range")))}
            value = objective_score(self.stage, evalset, preds, scores=scores)  # the set objective (F1, F2, kappa)
            summary.update({"lm_calls": lm_calls, "failures": sum(p is None for p in preds), "objective": metric,
                            metric: value, "seconds": round(time.perf_counter() - start, 3)})
            trial.set_user_attr("report", summary)
            self.runs.log_predictions(run_id, preds, errors)
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
