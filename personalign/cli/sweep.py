"""``personalign sweep STAGE``: a resumable Optuna sweep over a stage's strategies, tracked in MLflow.

Light at import (typer only); the sweep machinery (optuna, dspy, mlflow) loads when the command runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from personalign.cli._output import print_json
from personalign.cli._options import (
    CONFIRM_OVER_DEFAULT,
    ApiBaseOpt,
    ConcurrencyOpt,
    MaxCostOpt,
    CacheDirOpt,
    ConfirmOverOpt,
    JsonOpt,
    LmKwargsOpt,
    LmOpt,
    N_TRIALS_MAX,
    NBootOpt,
    NoCacheOpt,
    NoTrackOpt,
    StageArg,
    TrackingOpt,
    TrainLimitOpt,
    YesOpt,
    callbacks,
    cost_hook,
    model_args,
)

_STORAGE_HELP = ("Optuna storage: sqlite:///PATH (default sqlite:///runs/optuna.db; one process, threads included -- "
                 "SQLite is not meant for many concurrent writers), journal:PATH (several processes on one machine "
                 "or a shared file system), postgresql+psycopg://USER@HOST/DB (many workers on many machines; "
                 "pip install 'personalign[postgres]').")


def sweep(
    stage: StageArg,
    data: Path = typer.Option(..., "--data", help="The stage's labelled JSONL with train and evaluation splits."),
    space: Optional[Path] = typer.Option(None, "--space", help="Search space, TOML or YAML (default: the stage's; "
                                                                "see examples/sweep_relevance.toml)."),
    n_trials: int = typer.Option(20, "--n-trials", min=1, max=N_TRIALS_MAX, help="Total COMPLETE+PRUNED trials wanted in the study; "
                                                                "a rerun runs only the missing ones. Fewer completed "
                                                                "at the end: exit 1."),
    storage: Optional[str] = typer.Option(None, "--storage", help=_STORAGE_HELP),
    study_name: Optional[str] = typer.Option(None, "--study-name", help="Study name (default "
                                                                        "STAGE-DATASTEM-SPLIT-SPACEHASH); the same "
                                                                        "name resumes the study."),
    n_jobs: int = typer.Option(1, "--n-jobs", min=1, help="Trials run in parallel threads of this process (pays off with hosted LMs; the "
                                                      "embedded model runs one call at a time per process)."),
    split: str = typer.Option("dev", "--split", help="Split each trial is scored on (its set objective: F1, F2, "
                                                     "kappa); dev (default): whole groups held out of the train "
                                                     "split as compile holds them out, never val."),
    train_split: str = typer.Option("train", "--train-split", help="Split each trial is compiled on."),
    seed: int = typer.Option(0, "--seed", help="Seed of the TPE sampler, the optimizers and the "
                                                  "bootstrap; the study keeps its first worker's seed."),
    lm: LmOpt = None,
    api_base: ApiBaseOpt = None,
    lm_kwargs: LmKwargsOpt = None,
    concurrency: ConcurrencyOpt = None,
    max_cost: MaxCostOpt = None,
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Evaluate on a random sample of N examples of the split, "
                                                                     "stratified over the stage's groups (its group key; "
                                                                     "mcq/respond: topic), seed 0."),
    n_boot: NBootOpt = 1000,
    export: bool = typer.Option(True, "--export/--no-export", help="Save the best trial's program under "
                                                                   "runs/programs/ at the end."),
    heartbeat: int = typer.Option(10, "--heartbeat", min=1, help="Seconds between heartbeats of a running trial."),
    grace: int = typer.Option(40, "--grace", min=2, help="Seconds without heartbeat after which a trial of a "
                                                         "worker on another machine is failed and retried."),
    cache_dir: CacheDirOpt = None,
    no_cache: NoCacheOpt = False,
    tracking_uri: TrackingOpt = None,
    no_track: NoTrackOpt = False,
    json_out: JsonOpt = False,
    train_limit: TrainLimitOpt = None,
    confirm_over: ConfirmOverOpt = CONFIRM_OVER_DEFAULT,
    yes: YesOpt = False,
) -> None:
    """Optuna sweep over a stage's strategies, optimizers and settings; resumable, parallel, pruned, tracked.

    Each trial compiles a strategy on the train split and is scored by the stage's set objective
    on --split (default: dev groups held out of train) in minibatches
    (MedianPruner); the best trial's program is saved under runs/programs/ with a readable
    prompt.md. View the study with `optuna-dashboard STORAGE` and the runs with `personalign ui`.
    """
    import personalign

    report = personalign.sweep(stage, data, space=space, n_trials=n_trials, storage=storage, study_name=study_name,
                               n_jobs=n_jobs, split=split, train_split=train_split, **model_args(lm, api_base, lm_kwargs, concurrency, max_cost),
                               seed=seed, limit=limit, n_boot=n_boot, heartbeat=heartbeat, grace=grace, export=export,
                               callbacks=callbacks(cache_dir=cache_dir, no_cache=no_cache, tracking_uri=tracking_uri,
                                                   no_track=no_track), progress=True, train_limit=train_limit,
                               on_cost=cost_hook(confirm_over, yes))
    result = report.to_dict()
    if json_out:
        print_json(result, default=str)
    else:
        from rich.console import Console

        console = Console() if sys.stdout.isatty() else Console(width=160)
        for line in report.renderables():
            console.print(line, markup=False, highlight=False)
        if result.get("mlflow_parent_run_id"):
            from personalign.redaction import redact

            console.print(f"MLflow run {result['mlflow_parent_run_id']} (view: personalign ui"
                          + (f" --tracking-uri {redact(tracking_uri)})" if tracking_uri else ")"), markup=False,
                          highlight=False)
    # the trials the budget counts: a trial that reused a finished trial's value is not one
    done = result.get("n_counted", result["n_complete"] + result["n_pruned"])
    # trials another live worker is still running count as on their way, not as missing; a finite
    # space whose every configuration ran has nothing left to run
    if (done + result.get("n_running", 0) < result["n_trials"] and not result.get("exhausted")) or not done:
        # fewer trials than asked for is a failure, not a success (exit 1, after the summary)
        what = "every trial" if not done else f"{result['n_trials'] - done} of the {result['n_trials']} trials asked for"
        sys.stderr.write(f"error: {what} of study {result['study']} did not complete ({result['n_fail']} failed); "
                         "see the trial lines above\n")
        raise typer.Exit(1)
