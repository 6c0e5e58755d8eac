"""``personalign.sweep``: a resumable, parallel, pruned Optuna study over a stage's strategies."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from personalign._verbs.cost import announce, measured
from personalign._verbs.projection import project_sweep
from personalign._verbs.inputs import check_counts, load_data, resolve_model
from personalign._verbs.reports import SweepReport
from personalign.errors import ArgumentError


def sweep(stage, data: Any, *, space: str | Path | None = None, n_trials: int = 20, storage: str | None = None,
          study_name: str | None = None, n_jobs: int = 1, split: str = "dev", train_split: str = "train",
          lm: Any = None, api_base: str | None = None, lm_kwargs: dict | None = None, seed: int = 0,
          limit: int | None = None, n_boot: int = 1000, heartbeat: int = 10, grace: int = 40, export: bool = True,
          max_failures: int | None = None, sampler=None, pruner=None, callbacks: Any = (),
          train_limit: int | None = None, progress: bool = False, on_cost: Any = None,
          concurrency: int | None = None, max_cost: float | None = None) -> SweepReport:
    """Run (or resume) an Optuna sweep of ``stage``: each trial samples a strategy and its
    settings from the search space, compiles it on the train rows by the one compile path, and is
    scored by the stage's set objective on ``split`` in minibatches (a pruner stops trials below
    the median); the best trial's program is saved under ``runs/programs/``.

    Args:
        stage, data, lm, api_base, lm_kwargs, callbacks, concurrency, max_cost: as :func:`personalign.compile`
            (each trial keeps that many calls in flight; the endpoint's window is shared by all).
        space: a search space file (TOML/YAML); None: the stage's default space (and a stage
            file's ``[sweep]`` sections).
        n_trials: COMPLETE + PRUNED trials wanted in the study (a rerun runs only the missing ones);
            a trial whose parameters equal a finished trial's reuses its value without work and is
            not counted; a finite space stops once every configuration has run.
        seed: the study's seed, stored by its first worker (a later worker's other seed is ignored,
            one line on stderr); each trial's sampler seed derives from it and the trial's number.
        storage: ``sqlite:///PATH`` (default ``runs/optuna.db``), ``journal:PATH`` or an RDB URL
            (``postgresql+psycopg://...``): Optuna's own storages. study_name: default
            ``STAGE-DATASTEM-SPLIT-SPACEHASH``; the same name resumes.
        split: scored on this split; ``"dev"`` (default, when the data has none): whole groups held
            out of ``train_split`` as compile holds them out -- trials compile on the rest. A
            strategy those rows cannot fit is refused before the first trial.
        n_jobs: trials in parallel threads. limit: a sample of the split (seed 0, stratified).
        heartbeat / grace: seconds between a running trial's heartbeats / without one before
            another worker's trial is failed and retried.
        export: save the best trial's program. max_failures: stop after this many failed trials
            (default max(3, n_trials // 2)). sampler / pruner: Optuna's (default multivariate TPE
            seeded per trial; the space's pruner, MedianPruner).
        train_limit: trials compile on a sample of that many training rows (seed 0, stratified).
        progress: the cost line and each trial's line on stderr. on_cost: called with the
            projected model calls (:class:`personalign.Cost`: the trials to run, each at most the
            most costly configuration of the space) before the first trial, instead of the line.

    Returns:
        :class:`SweepReport`: ``best`` (``number``, ``value``, ``params``, ``report``), the counts
        (``n_complete``, ``n_pruned``, ``n_fail``, ``n_counted``, ``n_distinct``, ``n_reused``,
        ``space_size``, ``exhausted``), ``reference`` (the stage's reference constant on the same
        rows, ``best_beats_it``), ``program`` and ``prompt_file``.

    Raises:
        ConfigurationError: a bad argument, space, storage or model; a study created with other data.
        DataError: unreadable data, an empty split, a strategy the training rows cannot fit.
    """
    from personalign.lm import default_model
    from personalign.settings import default_sweep_storage
    from personalign.stages import resolve_stage
    from personalign.sweeps.runner import Sweep, default_study_name
    from personalign.sweeps.storage import check_study_name
    from personalign.sweeps.space import SearchSpace
    from personalign.tracking.callbacks import Callbacks

    from personalign.lm.spend import check_max_cost

    check_counts(n_trials=n_trials, n_jobs=n_jobs, n_boot=n_boot, limit=limit, train_limit=train_limit)
    check_max_cost(max_cost)
    if heartbeat < 1:
        raise ArgumentError("heartbeat", f"must be >= 1, got {heartbeat}")
    if grace <= heartbeat:
        raise ArgumentError("grace", f"must be longer than the heartbeat interval ({heartbeat} s), got {grace}")
    st = resolve_stage(stage)
    ds = load_data(st, data)
    sp = SearchSpace.load(st, space)
    url = storage or default_sweep_storage()
    name = check_study_name(study_name) if study_name is not None else default_study_name(
        st.name, ds.path or Path("examples"), split, sp)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    lm_name = lm if isinstance(lm, str) or lm is None else str(getattr(lm, "model", type(lm).__name__))

    announced: list = []

    def cost(splits, trials: int, model_lm, history: list) -> None:  # before the first trial
        name = (lm_name or default_model()) if splits.uses_lm else None
        announced.append(project_sweep(st, sp, splits.trainset, splits.evalset, trials, lm=model_lm, model=name,
                                       seed=seed, first=len(history),
                                       history=history if sampler is None else None))
        announce(announced[-1], on_cost, progress)

    run = Sweep(stage=st, space=sp, data=ds, split=split, train_split=train_split, n_trials=n_trials, storage=url,
                study_name=name, n_jobs=n_jobs, seed=seed,
                model=lambda needed: resolve_model(lm, needed=needed, api_base=api_base, lm_kwargs=lm_kwargs,
                                                   concurrency=concurrency, max_cost=max_cost),
                lm_name=lm_name, callbacks=Callbacks(callbacks), limit=limit, train_limit=train_limit, cost=cost,
                n_boot=n_boot, progress=progress, heartbeat_interval=heartbeat, grace_period=grace, export=export,
                max_failures=max_failures, sampler=sampler, pruner=pruner)
    from personalign.lm.spend import budget

    uses = (lm_name or default_model()) if any(st.registry.info(n).uses_lm for n in sp.strategies) else None
    with budget(check_max_cost(max_cost), uses), measured(uses, announced):
        result = {"started": started, **run.run()}
    return SweepReport(stage=st.name, data=result, best=result.get("best"))


__all__ = ["sweep"]
