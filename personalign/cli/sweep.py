"""``personalign sweep STAGE``: a resumable Optuna sweep over a stage's strategies, tracked in MLflow.

Light at import (typer only); the sweep machinery (optuna, dspy, mlflow) loads when the command runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from personalign.cli._checks import lm_option

_STORAGE_HELP = ("Optuna storage: sqlite:///PATH (default sqlite:///runs/optuna.db; one process, threads included -- "
                 "SQLite is not meant for many concurrent writers), journal:PATH (several processes on one machine "
                 "or a shared file system), postgresql://USER@HOST/DB (many workers on many machines).")


def sweep(
    stage: str = typer.Argument(..., help="Stage to sweep: a built-in name (relevance) or your own (stage.toml, file.py:STAGE, module:STAGE, entry point)."),
    data: Path = typer.Option(..., "--data", help="The stage's labelled JSONL with train and evaluation splits."),
    space: Optional[Path] = typer.Option(None, "--space", help="Search space, TOML or YAML (default: the stage's; "
                                                                "see examples/sweep_relevance.toml)."),
    n_trials: int = typer.Option(20, "--n-trials", min=1, help="Total COMPLETE+PRUNED trials wanted in the study; "
                                                                "a rerun runs only the missing ones."),
    storage: Optional[str] = typer.Option(None, "--storage", help=_STORAGE_HELP),
    study_name: Optional[str] = typer.Option(None, "--study-name", help="Study name (default "
                                                                        "STAGE-DATASTEM-SPLIT-SPACEHASH); the same "
                                                                        "name resumes the study."),
    n_jobs: int = typer.Option(1, "--n-jobs", min=1, help="Trials run in parallel threads of this process (pays off with hosted LMs; the "
                                                      "embedded model runs one call at a time per process)."),
    split: str = typer.Option("dev", "--split", help="Split each trial is scored on (its set objective: F1, F2, "
                                                     "kappa); dev (default): whole groups held out of the train "
                                                     "split, never val."),
    train_split: str = typer.Option("train", "--train-split", help="Split each trial is compiled on."),
    seed: int = typer.Option(0, "--seed", help="Seed of the TPE sampler, the optimizers and the bootstrap."),
    lm: Optional[str] = typer.Option(None, "--lm", callback=lm_option, help="Model: local/qwen2.5-coder-1.5b-instruct (default), "
                                                        "local/qwen2.5-coder-0.5b-instruct (fast), or any litellm model string."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Evaluate on a random sample of N examples of the split, "
                                                                     "stratified over the stage's groups (its group key; "
                                                                     "mcq/respond: topic), seed 0."),
    n_boot: int = typer.Option(1000, "--n-boot", min=1, help="Bootstrap resamples for the 95% CIs."),
    export: bool = typer.Option(True, "--export/--no-export", help="Save the best trial's program under "
                                                                   "runs/programs/ at the end."),
    heartbeat: int = typer.Option(10, "--heartbeat", min=1, help="Seconds between heartbeats of a running trial."),
    grace: int = typer.Option(40, "--grace", min=2, help="Seconds without heartbeat after which a trial of a "
                                                         "worker on another machine is failed and retried."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="DSPy cache directory (default runs/cache)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Disable the LM cache."),
    tracking_uri: Optional[str] = typer.Option(None, "--tracking-uri", help="MLflow tracking URI (default "
                                                                            "sqlite:///runs/mlflow.db)."),
    no_track: bool = typer.Option(False, "--no-track", help="Do not log to MLflow."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Optuna sweep over a stage's strategies, optimizers and settings; resumable, parallel, pruned, tracked.

    Each trial compiles a strategy on the train split and is scored by the stage's set objective
    on --split (default: dev groups held out of train) in minibatches
    (MedianPruner); the best trial's program is saved under runs/programs/ with a readable
    prompt.md. View the study with `optuna-dashboard STORAGE` and the runs with `personalign ui`.
    """
    from personalign.lm import configure_cache
    from personalign.sweep import run_sweep
    from personalign.tracking import Tracker

    tracker = None if no_track else Tracker(tracking_uri)
    result = run_sweep(stage, data=data, space=space, n_trials=n_trials, storage=storage, study_name=study_name,
                       n_jobs=n_jobs, seed=seed, lm=lm, split=split, train_split=train_split, tracker=tracker,
                       limit=limit, n_boot=n_boot, progress=True, heartbeat_interval=heartbeat, grace_period=grace,
                       export=export, on_ready=lambda: configure_cache(cache_dir, enabled=not no_cache))
    if json_out:
        from personalign.data.strict_json import dumps

        sys.stdout.write(dumps(result, default=str) + "\n")
    else:
        _print(result, tracker)
    if not result["n_complete"] and not result["n_pruned"]:
        # a sweep that produced no result is a failure, not a success (exit 1, after the summary)
        sys.stderr.write(f"error: every trial of study {result['study']} failed ({result['n_fail']} failed, "
                         "0 complete); see the trial errors above\n")
        raise typer.Exit(1)


def _print(result: dict, tracker) -> None:
    from rich.console import Console

    console = Console() if sys.stdout.isatty() else Console(width=160)
    metric = result.get("objective") or result["metric"]  # the best value is the set objective (f1, f2, kappa)
    console.print(f"study {result['study']} in {result['storage']}: {result['n_complete']} complete, "
                  f"{result['n_pruned']} pruned, {result['n_fail']} failed of {result['n_trials']} requested "
                  f"(this run: {result['ran']} trials, {result['seconds']:.1f} s, {result['lm_calls']} LM calls)",
                  markup=False, highlight=False)
    if result.get("stale_failed"):
        console.print(f"stale trials of killed workers failed and re-queued: {result['stale_failed']}", markup=False)
    best = result.get("best")
    if best:
        from personalign.metrics.cluster import resampling_note
        from personalign.sweep.runner import figure_text

        report = best.get("report") or {}
        console.print(f"best: trial {best['number']} {metric} {figure_text(report, metric, best['value'])} "
                      f"{best['params']}", markup=False, highlight=False)
        if resampling_note(report.get("resampling")):
            console.print(resampling_note(report.get("resampling")), markup=False, highlight=False)
    if result.get("program"):
        console.print(f"program: {result['program']}\nreadable prompt: {result['prompt_file']}", markup=False)
    console.print(f"view: {result['dashboard']}", markup=False, highlight=False)
    if tracker is not None:
        console.print(f"MLflow run {result.get('mlflow_parent_run_id')} in {tracker.tracking_uri} "
                      f"(view: personalign ui --tracking-uri {tracker.tracking_uri})", markup=False, highlight=False)
