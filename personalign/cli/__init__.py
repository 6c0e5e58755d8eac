"""The ``personalign`` command line (typer + rich). Thin: it parses flags and calls the Python API.

Importing this module imports only typer (and click/rich through it): ``personalign --help``
never loads dspy, litellm, torch or llama_cpp. Every command imports its machinery when run.
Errors caused by input (:class:`personalign.errors.PersonalignError`, click's usage errors among
them: :mod:`personalign.cli._usage`) print one line and exit 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from personalign import __version__
from personalign.cli._options import (
    CONFIRM_OVER_DEFAULT,
    ApiBaseOpt,
    ConcurrencyOpt,
    MaxCostOpt,
    CacheDirOpt,
    ConfirmOverOpt,
    DataOpt,
    JsonOpt,
    LimitOpt,
    LmKwargsOpt,
    LmOpt,
    NBootOpt,
    NoCacheOpt,
    NoTrackOpt,
    ProgramLmOpt,
    SeedOpt,
    SplitOpt,
    StageArg,
    TrackingOpt,
    TrainLimitOpt,
    TrainSplitOpt,
    YesOpt,
)
from personalign.cli._usage import OneLineUsageGroup
from personalign.errors import find_personalign_error

app = typer.Typer(
    name="personalign",
    help="Compile human-aligned LLM personalization pipelines: typed DSPy programs measured against human labels.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain click help: keeps `personalign --help` fast (no rich/markdown import)
    cls=OneLineUsageGroup,  # click's usage errors: one line `error: ...`, exit 2 (cli/_usage.py)
)


from personalign.cli.data import app as _data_app  # noqa: E402  (light: typer only)

from personalign.cli.predict import app as _predict_app  # noqa: E402  (light: typer only)

app.add_typer(_data_app, name="data", help="Validate and describe data files.")
app.add_typer(_predict_app, name="predict", help="Predict on new inputs: `predict relevance` (a user's attributes against a prompt), `predict batch` (a saved program of any stage on an unlabelled JSONL).")
from personalign.cli.sweep import sweep as _sweep_cmd  # noqa: E402  (light: typer only)
app.command("sweep")(_sweep_cmd)
from personalign.cli.view import view as _view_cmd; app.command("view")(_view_cmd)  # noqa: E402,E702  (light: typer only)
from personalign.cli.run import app as _runners_app  # noqa: E402  (light: typer only)
from personalign.cli.stage import app as _stage_app  # noqa: E402  (light: typer only)

app.add_typer(_stage_app, name="stage", help="Your own stage: `stage init NAME` writes a stage file, `stage validate FILE --data DATA` checks it.")

from personalign.cli.label import app as _label_app  # noqa: E402  (light: typer only)
from personalign.cli.label_serve import register as _register_label_serve  # noqa: E402

_register_label_serve(_label_app)
app.add_typer(_label_app, name="label", help="Humans in the loop: `label merge` (annotations into labels, agreement), `label next` (the rows to label next), `label serve` (a local annotation page), `label export` / `label import` (canonical JSONL, Label Studio).")
app.add_typer(_runners_app, name="run", help="Benchmark runners: PrefEval MCQ/generation, the end-to-end pipeline, PersonaMem, CUPID, judge agreement, SFT export.")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"personalign {__version__}")
        raise typer.Exit()


READ_ONLY_COMMANDS = frozenset({"data", "stages", "ui", "doctor"})  # need no writable runs dir


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """personalign command line."""
    if ctx.resilient_parsing or "--help" in ctx.args or "--help" in sys.argv[1:]:
        return
    from personalign.settings import check_environment  # every PERSONALIGN_* setting, once, before any work

    check_environment(writes=ctx.invoked_subcommand not in READ_ONLY_COMMANDS)


@app.command()
def doctor(
    json_out: JsonOpt = False,
    bench: bool = typer.Option(False, "--bench", help="Also measure prompt and generation tokens/s here, and the seconds of a forward pass and of a typed call (kept in the cache dir's speed.json: the time estimate of a run's cost line)."),
    lm: str = typer.Option("local/qwen2.5-coder-1.5b-instruct", "--lm", help="Local model for --bench."),
    cache_dir: CacheDirOpt = None,
    rehash: bool = typer.Option(False, "--rehash", help="Re-hash every model file even when its stamp says it is verified."),
    full: bool = typer.Option(False, "--full", help="Also check the wiring: litellm routes local/... with JSON-schema support, DSPy's cache, llama.cpp's system info (imports them: slower)."),
) -> None:
    """Versions, backend, model files (sha256; assembled into the model cache if missing), threads, cache dir; with --bench, tokens/s and seconds per model call."""
    from personalign.cli._doctor import run_doctor

    run_doctor(json_out=json_out, bench=bench, lm=lm, cache_dir=cache_dir, rehash=rehash, full=full)


@app.command()
def stages(json_out: JsonOpt = False) -> None:
    """List the stages with their strategies, metric and data loader."""
    from personalign.cli._commands import run_stages

    run_stages(json_out=json_out)


@app.command()
def compare(
    stage: StageArg,
    data: DataOpt,
    split: SplitOpt = "val",
    train_split: TrainSplitOpt = "train",
    strategies: Optional[str] = typer.Option(None, "--strategies", help="Comma-separated strategies (default: the stage's); NAME@OPTIMIZER compiles an LLM strategy with a teleprompter, e.g. zero-shot@bootstrap. A binary stage's first row is the constant that predicts the class its objective scores (all-yes for F1 of a true class), added when not listed."),
    lm: LmOpt = None,
    api_base: ApiBaseOpt = None,
    lm_kwargs: LmKwargsOpt = None,
    concurrency: ConcurrencyOpt = None,
    max_cost: MaxCostOpt = None,
    seed: SeedOpt = 0,
    n_boot: NBootOpt = 1000,
    limit: LimitOpt = None,
    cache_dir: CacheDirOpt = None,
    no_cache: NoCacheOpt = False,
    tracking_uri: TrackingOpt = None,
    no_track: NoTrackOpt = False,
    json_out: JsonOpt = False,
    repeats: int = typer.Option(1, "--repeats", min=1, help="Runs of each sampling strategy (LM at --temperature > 0), each with its own cache key (rollout_id); the spread across runs is inside every interval. Deterministic strategies run once and say so."),
    temperature: Optional[float] = typer.Option(None, "--temperature", min=0.0, help="Sampling temperature of the LM (default: the model's; 0 for embedded models)."),
    cv: Optional[str] = typer.Option(None, "--cv", help="'groups': leave-one-group-out over every labelled row (all splits pooled): each strategy is fitted on all groups but one and scored on it; headline: the mean per-group figure, with the pooled figure and the worst group."),
    results: Optional[Path] = typer.Option(None, "--results", help="Also write the run record (command, git commit, versions, model and data sha256, figures with intervals) to FILE, e.g. benchmarks/results/demo.json; the file's stem is the record's name (lower-case letters, digits, hyphens)."),
    html: bool = typer.Option(False, "--html", help="Also write the run's results page (`personalign view`): one offline HTML file beside the result JSON."),
    train_limit: TrainLimitOpt = None,
    confirm_over: ConfirmOverOpt = CONFIRM_OVER_DEFAULT,
    yes: YesOpt = False,
) -> None:
    """Compare strategies of a stage on one split against the human labels (table, JSON, PNG, MLflow)."""
    from personalign.cli._commands import run_compare

    run_compare(stage=stage, data=data, split=split, train_split=train_split, strategies=strategies,
                model=(lm, api_base, lm_kwargs, concurrency, max_cost), seed=seed, n_boot=n_boot, limit=limit, cv=cv, repeats=repeats,
                temperature=temperature, json_out=json_out, html=html, train_limit=train_limit, cost=(confirm_over, yes),
                tracking=dict(cache_dir=cache_dir, no_cache=no_cache, tracking_uri=tracking_uri, no_track=no_track,
                              results=results))


@app.command("compile")
def compile_(
    stage: StageArg,
    data: Path = typer.Option(..., "--data", help="The stage's labelled JSONL."),
    strategy: Optional[str] = typer.Option(None, "--strategy", help="Strategy to compile (default: the stage's first default strategy)."),
    optimizer: Optional[str] = typer.Option(None, "--optimizer", help="labeled, bootstrap, bootstrap-rs, mipro, copro, simba, gepa (LLM strategies); default: the strategy's own fit."),
    train_split: str = typer.Option("train", "--train-split", help="Split to compile on."),
    lm: LmOpt = None,
    api_base: ApiBaseOpt = None,
    lm_kwargs: LmKwargsOpt = None,
    concurrency: ConcurrencyOpt = None,
    max_cost: MaxCostOpt = None,
    seed: SeedOpt = 0,
    out: Optional[Path] = typer.Option(None, "--out", help="Output directory (default runs/programs/STAGE-STRATEGY-...)."),
    cache_dir: CacheDirOpt = None,
    no_cache: NoCacheOpt = False,
    tracking_uri: TrackingOpt = None,
    no_track: NoTrackOpt = False,
    json_out: JsonOpt = False,
    train_limit: TrainLimitOpt = None,
    confirm_over: ConfirmOverOpt = CONFIRM_OVER_DEFAULT,
    yes: YesOpt = False,
) -> None:
    """Compile a strategy of a stage; save program.json (+ weights) and a readable prompt.md."""
    from personalign.cli._commands import run_compile

    run_compile(stage=stage, strategy=strategy, optimizer=optimizer, data=data, train_split=train_split,
                model=(lm, api_base, lm_kwargs, concurrency, max_cost), seed=seed, out=out, json_out=json_out, train_limit=train_limit,
                cost=(confirm_over, yes),
                tracking=dict(cache_dir=cache_dir, no_cache=no_cache, tracking_uri=tracking_uri, no_track=no_track))


@app.command("eval")
def eval_(
    stage: StageArg,
    program: Path = typer.Option(..., "--program", help="A saved program directory (from `compile`)."),
    data: Path = typer.Option(..., "--data", help="The stage's labelled JSONL."),
    split: SplitOpt = "val",
    lm: ProgramLmOpt = None,
    api_base: ApiBaseOpt = None,
    lm_kwargs: LmKwargsOpt = None,
    concurrency: ConcurrencyOpt = None,
    max_cost: MaxCostOpt = None,
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
    n_boot: NBootOpt = 1000,
    limit: LimitOpt = None,
    cache_dir: CacheDirOpt = None,
    no_cache: NoCacheOpt = False,
    tracking_uri: TrackingOpt = None,
    no_track: NoTrackOpt = False,
    json_out: JsonOpt = False,
    confirm_over: ConfirmOverOpt = CONFIRM_OVER_DEFAULT,
    yes: YesOpt = False,
) -> None:
    """Evaluate a saved program on a labelled split (binary stages: F1 with 95% CI, precision, recall, yes-rate, LM calls)."""
    from personalign.cli._commands import run_eval

    run_eval(stage=stage, program=program, data=data, split=split, model=(lm, api_base, lm_kwargs, concurrency, max_cost), seed=seed,
             n_boot=n_boot, limit=limit, json_out=json_out, cost=(confirm_over, yes),
             tracking=dict(cache_dir=cache_dir, no_cache=no_cache, tracking_uri=tracking_uri, no_track=no_track))


@app.command()
def ui(
    port: str = typer.Option("5000", "--port", help="Port on 127.0.0.1 (1-65535)."),
    tracking_uri: TrackingOpt = None,
) -> None:
    """Open MLflow's UI on personalign's store: offline (no cost-map fetch), loopback only."""
    from personalign.cli._ui import run_ui

    run_ui(tracking_uri=tracking_uri, port=port)


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Python warnings as the command line shows them: ``warning: <message>``, one line, no source."""
    from personalign.errors import printable

    (file or sys.stderr).write(f"warning: {printable(' '.join(str(message).split()))}\n")


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the app; input errors become one line on stderr and exit code 2
    (a bad argument named as its flag: :meth:`personalign.errors.ArgumentError.as_flag`); Python
    warnings print as one ``warning:`` line."""
    import warnings

    from personalign.cli import _signals
    from personalign.errors import ArgumentError, printable

    warnings.showwarning = _one_line_warning
    try:
        with _signals.handle_signals():
            app(args=argv, standalone_mode=True)
    except (SystemExit, KeyboardInterrupt) as exc:
        interrupt = _signals.interrupt_of(exc)  # typer turns Ctrl-C into a silent exit 130
        if interrupt is None:
            raise
        sys.stderr.write(_signals.message(interrupt) + "\n")
        raise SystemExit(_signals.exit_code(interrupt)) from None
    except BaseException as exc:  # noqa: BLE001
        ours = find_personalign_error(exc)
        if ours is None:
            raise
        from personalign.redaction import redact  # the last guard: no error line prints a secret

        line = redact(f"error: {ours.as_flag() if isinstance(ours, ArgumentError) else ours}")
        sys.stderr.write(printable(line) + "\n")  # one line: a newline or an escape in a value is shown escaped
        raise SystemExit(ours.exit_code) from None


if __name__ == "__main__":  # pragma: no cover
    main()
