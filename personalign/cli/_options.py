"""The options the commands share, one definition each (typer ``Annotated`` types), and what they
become: the model settings (:func:`model_args`) and the run's callbacks (:func:`callbacks`) that the
public verbs take. Light: typer only at import."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from personalign.cli._checks import api_base_option, lm_kwargs_option, lm_option, max_cost_option

LM_HELP = ("Model: local/qwen2.5-coder-1.5b-instruct (default), local/qwen2.5-coder-0.5b-instruct (fast), "
           "local/smollm2-135m-instruct (tiny), or any litellm model string.")
LIMIT_HELP = ("Evaluate a seeded random sample of N examples of the split (--seed), stratified over the stage's "
              "groups: its group key (prompt_id, group), or topic for mcq and respond; kept in file order.")
STAGE_HELP = ("Stage: a built-in name (relevance, verification, ...; `personalign stages` lists them), your stage "
              "file path/to/stage.toml, path/to/file.py:STAGE, module:STAGE, or an installed entry-point name.")

StageArg = Annotated[str, typer.Argument(help=STAGE_HELP)]
DataOpt = Annotated[Path, typer.Option("--data", help="The stage's labelled data: canonical JSONL (relevance also "
                                                      "reads the recenter format); the stages built on PrefEval also "
                                                      "read its folder, e.g. ../shared/data/prefeval.")]
SplitOpt = Annotated[str, typer.Option("--split", help="Split to evaluate on.")]
TrainSplitOpt = Annotated[str, typer.Option("--train-split", help="Split trainable strategies are fitted on.")]
LmOpt = Annotated[Optional[str], typer.Option("--lm", help=LM_HELP, callback=lm_option)]
ProgramLmOpt = Annotated[Optional[str], typer.Option(
    "--lm", callback=lm_option, help=LM_HELP + " Default: the program's own when it is an embedded local/ model "
                                                "(a saved program never chooses a remote one), else the default.")]
ApiBaseOpt = Annotated[Optional[str], typer.Option(
    "--api-base", callback=api_base_option, envvar="PERSONALIGN_API_BASE",
    help="OpenAI-compatible server for a non-embedded --lm, e.g. http://127.0.0.1:8000/v1 with --lm openai/NAME "
         "(env PERSONALIGN_API_BASE). A capability check at start prints what it supports.")]
LmKwargsOpt = Annotated[Optional[str], typer.Option(
    "--lm-kwargs", callback=lm_kwargs_option, envvar="PERSONALIGN_LM_KWARGS",
    help='JSON object of model kwargs passed to litellm with every call, e.g. \'{"api_key": "none", '
         '"extra_body": {"repeat_penalty": 1.0}}\' (env PERSONALIGN_LM_KWARGS).')]
CONCURRENCY_MAX = 256  # personalign.lm.flight.MAX_CONCURRENCY; kept light here, tested equal
ConcurrencyOpt = Annotated[Optional[int], typer.Option(
    "--concurrency", min=1, max=CONCURRENCY_MAX, metavar="N",
    help="Model calls kept in flight at once (default: 1 for the embedded model, 32 for a hosted or served one). "
         "Rate-limit (429) and overload (503) answers shrink the window and honour Retry-After; results and "
         "figures are the same at any N.")]
MaxCostOpt = Annotated[Optional[str], typer.Option(
    "--max-cost", callback=max_cost_option, metavar="USD",
    help="Spend at most USD dollars (litellm's bundled prices; embedded and unpriced models cost $0): the model call "
         "that would pass it (at the cost line's projected dollars per call) is not made, nothing is written, "
         "exit 1 with how far it got.")]
SEED_MAX = 2**32 - 1  # personalign.settings.SEED_MAX (llama.cpp seeds are uint32); kept light here, tested equal
SeedOpt = Annotated[int, typer.Option("--seed", min=0, max=SEED_MAX, help="Seed of every stochastic step.")]
N_BOOT_MAX, N_TRIALS_MAX = 20_000, 100_000  # personalign.settings.N_BOOT_MAX / N_TRIALS_MAX; kept light here, tested equal
NBootOpt = Annotated[int, typer.Option("--n-boot", min=1, max=N_BOOT_MAX, help="Bootstrap resamples for the 95% CIs.")]
LimitOpt = Annotated[Optional[int], typer.Option("--limit", min=1, help=LIMIT_HELP)]
CacheDirOpt = Annotated[Optional[Path], typer.Option("--cache-dir", help="DSPy cache directory (default runs/cache).")]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Disable the LM cache.")]
TrackingOpt = Annotated[Optional[str], typer.Option("--tracking-uri",
                                                    help="MLflow tracking URI (default sqlite:///runs/mlflow.db).")]
NoTrackOpt = Annotated[bool, typer.Option("--no-track", help="Do not log to MLflow.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
TrainLimitOpt = Annotated[Optional[int], typer.Option(
    "--train-limit", min=1, help="Fit or compile each strategy on a seeded random sample of N training rows, "
                                 "stratified over the stage's groups, as --limit samples the evaluation rows. Recorded "
                                 "in the result.")]
CONFIRM_OVER_DEFAULT = 600.0
ConfirmOverOpt = Annotated[float, typer.Option(
    "--confirm-over", min=0.0, envvar="PERSONALIGN_CONFIRM_OVER", metavar="SECONDS",
    help="Before the first model call a line says how many model calls the run makes at most and, when this model's "
         "speed is known (`personalign doctor --bench`, or an earlier run), about how long they take. When that "
         "estimate passes SECONDS, ask first at a terminal (never when stdin is not one: CI, pipes). "
         "Env PERSONALIGN_CONFIRM_OVER; 'inf' never asks.")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Never ask before running (see --confirm-over).")]


def model_args(lm: str | None, api_base: str | None, lm_kwargs: str | None, concurrency: int | None = None,
               max_cost: float | None = None) -> dict:
    """The verbs' model arguments from the flags: ``lm``, ``api_base``, ``lm_kwargs`` (a dict),
    ``concurrency``, ``max_cost``."""
    from personalign.cli._checks import parse_lm_kwargs

    return {"lm": lm, "api_base": api_base, "lm_kwargs": parse_lm_kwargs(lm_kwargs), "concurrency": concurrency,
            "max_cost": max_cost}


def cost_hook(confirm_over: float = CONFIRM_OVER_DEFAULT, yes: bool = False):
    """The verbs' ``on_cost`` from the flags: the cost line on stderr, and a question at a terminal
    when the estimate passes ``--confirm-over`` (:func:`personalign.cost_gate`)."""
    from personalign import cost_gate

    return cost_gate(confirm_over, assume_yes=yes)


def callbacks(*, cache_dir: Path | None = None, no_cache: bool = False, tracking_uri: str | None = None,
              no_track: bool = False, results: Path | None = None, cache: bool = True) -> list:
    """The run's callbacks from the flags: the LM cache first (it is configured once the inputs are
    valid), then an MLflow run unless ``--no-track``, then the ``--results`` record."""
    from personalign import ConfigureCache, MLflowCallback, RecordCallback

    out: list = [ConfigureCache(cache_dir, enabled=not no_cache)] if cache else []
    if not no_track:
        out.append(MLflowCallback(tracking_uri))
    if results is not None:
        out.append(RecordCallback(results))
    return out


__all__ = ["ApiBaseOpt", "CONCURRENCY_MAX", "CONFIRM_OVER_DEFAULT", "CacheDirOpt", "ConcurrencyOpt", "ConfirmOverOpt", "DataOpt", "JsonOpt", "LIMIT_HELP",
           "LM_HELP", "MaxCostOpt", "N_BOOT_MAX", "N_TRIALS_MAX", "LimitOpt", "LmKwargsOpt", "LmOpt", "NBootOpt", "NoCacheOpt", "NoTrackOpt", "ProgramLmOpt",
           "STAGE_HELP", "SeedOpt", "SplitOpt", "StageArg", "TrackingOpt", "TrainLimitOpt", "TrainSplitOpt", "YesOpt",
           "callbacks", "cost_hook", "model_args"]
