"""``personalign run COMMAND`` (also ``python -m personalign.runners COMMAND``): Stage 3 benchmark
runners and the SFT export, as a typer app mounted by :mod:`personalign.cli`.

Each command prints one JSON object on stdout, progress on stderr (a start and an end line, and
a progress bar per strategy), uses the LM cache (``--cache-dir``, ``--no-cache``) and logs an
MLflow run (``--tracking-uri``, ``--no-track``; see :func:`personalign.runners.run_tracked`). An input
or configuration error (:class:`personalign.errors.PersonalignError`) prints one line on stderr
and exits with code 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from personalign.cli._checks import lm_option
from personalign.cli._output import print_json
from personalign.runners import PIPELINE_STEPS

app = typer.Typer(name="personalign-runners", no_args_is_help=True, add_completion=False,
                  pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Stage 3 runners: PrefEval MCQ / generation, the end-to-end pipeline, PersonaMem, CUPID, SFT export.")

LM = typer.Option(None, "--lm", help="Model string (default local/qwen2.5-coder-1.5b-instruct).", callback=lm_option)
SEED = typer.Option(0, "--seed")
NBOOT = typer.Option(1000, "--n-boot", min=1)
CACHE_DIR = typer.Option(None, "--cache-dir", help="DSPy cache directory (default runs/cache).")
NO_CACHE = typer.Option(False, "--no-cache", help="Disable the LM cache.")
TRACKING = typer.Option(None, "--tracking-uri", help="MLflow tracking URI (default sqlite:///runs/mlflow.db).")
NO_TRACK = typer.Option(False, "--no-track", help="Do not log to MLflow.")
LIMIT_HELP = ("Run a seeded random sample of N items (--seed), stratified over the stage's groups (PrefEval, PersonaMem: "
              "topic; judge ratings: prompt; CUPID: persona), in file order.")


def _emit(command: str, fn, *, params: dict, data=None, lm=None, uses_lm=True, cache_dir=None,
          no_cache: bool = False, tracking_uri=None, no_track: bool = False, inputs: tuple = (),
          validate=None) -> None:
    """Run ``fn`` as a tracked runner; ``validate()`` (reads and checks inputs, no side effects)
    runs after the path checks and before the cache or the MLflow store is touched."""
    from personalign.cli._options import callbacks
    from personalign.errors import PersonalignError, find_personalign_error
    from personalign.runners import check_inputs, run_tracked

    try:
        check_inputs((data, *inputs))  # before the cache or the MLflow store is written
        if validate is not None:
            validate()
        uses_lm = uses_lm() if callable(uses_lm) else uses_lm
        out = run_tracked(command, fn, params=params, data=data, lm=lm, uses_lm=uses_lm, inputs=(data, *inputs),
                          callbacks=callbacks(cache_dir=cache_dir, no_cache=no_cache, tracking_uri=tracking_uri,
                                              no_track=no_track))
    except Exception as exc:  # noqa: BLE001 -- user errors: one line, exit 2
        ours = exc if isinstance(exc, PersonalignError) else find_personalign_error(exc)
        if ours is None:
            raise
        sys.stderr.write(f"error: {ours}\n")
        raise typer.Exit(2) from None
    print_json(out)


def _split(strategies: str) -> list[str]:
    return [s.strip() for s in strategies.split(",") if s.strip()]


def _uses_lm(stage: str, strategies: str) -> bool:
    """Whether any of ``strategies`` of ``stage`` calls an LM (an unknown name fails here, before any work)."""
    from personalign.stages import resolve_stage

    registry = resolve_stage(stage).registry
    return any(registry.info(name).uses_lm for name in _split(strategies))


@app.command("prefeval-mcq")
def prefeval_mcq(data: Path, strategies: str = typer.Option("no-profile,gold-preference,extracted-attributes"),
                 split: str = typer.Option("val"), limit: Optional[int] = typer.Option(None, min=1, help=LIMIT_HELP),
                 attributes: Optional[Path] = typer.Option(None, help="JSONL of user attributes (user_id, attributes)."),
                 lm: Optional[str] = LM, seed: int = SEED, n_boot: int = NBOOT, cache_dir: Optional[Path] = CACHE_DIR,
                 no_cache: bool = NO_CACHE, tracking_uri: Optional[str] = TRACKING, no_track: bool = NO_TRACK) -> None:
    """PrefEval MCQ accuracy with 95% CIs per strategy."""
    from personalign.runners import run_prefeval_mcq

    params = dict(data=str(data), strategies=strategies, split=split, limit=limit, attributes=attributes, lm=lm,
                  seed=seed, n_boot=n_boot)
    _emit("prefeval-mcq", lambda: run_prefeval_mcq(data, strategies=_split(strategies), split=split, limit=limit,
                                                   attributes=attributes, lm=lm, n_boot=n_boot, seed=seed,
                                                   progress=True),
          params=params, data=data, inputs=(attributes,), lm=lm, uses_lm=lambda: _uses_lm("mcq", strategies),
          cache_dir=cache_dir, no_cache=no_cache, tracking_uri=tracking_uri, no_track=no_track)


@app.command("prefeval-generation")
def prefeval_generation(data: Path, strategies: str = typer.Option("generic,personalized,personalized-implicit"),
                        split: str = typer.Option("val"), limit: int = typer.Option(10, min=1, help=LIMIT_HELP),
                        lm: Optional[str] = LM, seed: int = SEED, n_boot: int = NBOOT,
                        cache_dir: Optional[Path] = CACHE_DIR, no_cache: bool = NO_CACHE,
                        tracking_uri: Optional[str] = TRACKING, no_track: bool = NO_TRACK) -> None:
    """Preference-violation rate of generated responses (typed judge), per strategy."""
    from personalign.runners import run_prefeval_generation

    params = dict(data=str(data), strategies=strategies, split=split, limit=limit, lm=lm, seed=seed, n_boot=n_boot)
    _emit("prefeval-generation", lambda: run_prefeval_generation(data, strategies=_split(strategies), split=split,
                                                                 limit=limit, lm=lm, n_boot=n_boot, seed=seed,
                                                                 progress=True),
          params=params, data=data, lm=lm, cache_dir=cache_dir, no_cache=no_cache, tracking_uri=tracking_uri,
          no_track=no_track)


@app.command("pipeline")
def pipeline(data: Path = typer.Argument(..., help="The PrefEval root (mcq_options/ and implicit_preference/persona-driven/)."),
             split: str = typer.Option("val"), limit: Optional[int] = typer.Option(None, min=1, help=LIMIT_HELP),
             extractor: str = typer.Option(PIPELINE_STEPS["extractor"], help="extraction stage strategy."),
             verifier: str = typer.Option(PIPELINE_STEPS["verifier"], help="verification stage strategy (trained ones are "
                                                                       "fitted on the train split of DATA)."),
             selector: str = typer.Option(PIPELINE_STEPS["selector"], help="relevance stage strategy."),
             selector_data: Optional[Path] = typer.Option(None, help="relevance labels to fit a trained --selector on "
                                                                     "(its train split)."),
             conditions: str = typer.Option("pipeline,verified-all,no-profile,gold-preference,random-attribute",
                                            help="pipeline, verified-all (no selection), no-profile, gold-preference, "
                                                 "random-attribute."),
             lm: Optional[str] = LM, seed: int = SEED, n_boot: int = NBOOT, cache_dir: Optional[Path] = CACHE_DIR,
             no_cache: bool = NO_CACHE, tracking_uri: Optional[str] = TRACKING, no_track: bool = NO_TRACK) -> None:
    """From a PrefEval conversation alone: extract -> verify -> select -> answer the PrefEval MCQ; accuracy with 95%
    CIs against no-profile, gold-preference and random-attribute on the same questions (paired differences), LM
    calls and seconds per question."""
    from personalign.runners import run_pipeline

    params = dict(data=str(data), split=split, limit=limit, extractor=extractor, verifier=verifier, selector=selector,
                  selector_data=selector_data, conditions=conditions, lm=lm, seed=seed, n_boot=n_boot)

    def validate():  # the data and every name, before the cache or the store is touched
        from personalign.runners import check_plan, pipeline_examples

        check_plan(_split(conditions), extractor=extractor, verifier=verifier, selector=selector,
                   selector_data=selector_data)
        pipeline_examples(data, split=split, limit=limit, seed=seed)

    _emit("pipeline", lambda: run_pipeline(data, split=split, limit=limit, lm=lm, extractor=extractor,
                                           verifier=verifier, selector=selector, conditions=_split(conditions),
                                           selector_data=selector_data, n_boot=n_boot, seed=seed, progress=True),
          params=params, data=data, inputs=(selector_data,), lm=lm, cache_dir=cache_dir, no_cache=no_cache,
          tracking_uri=tracking_uri, no_track=no_track, validate=validate)


@app.command("personamem")
def personamem(questions: Path, contexts: Optional[Path] = typer.Option(None, help="shared_contexts JSONL "
                                                                              "(default: beside the CSV)."),
               strategies: str = typer.Option("no-profile,gold-preference"), limit: Optional[int] = typer.Option(None, min=1, help=LIMIT_HELP),
               lm: Optional[str] = LM, seed: int = SEED, n_boot: int = NBOOT, cache_dir: Optional[Path] = CACHE_DIR,
               no_cache: bool = NO_CACHE, tracking_uri: Optional[str] = TRACKING, no_track: bool = NO_TRACK) -> None:
    """PersonaMem MCQ accuracy (needs the shared-contexts file)."""
    from personalign.runners import default_contexts_path
    from personalign.runners import run_personamem

    params = dict(questions=str(questions), contexts=contexts, strategies=strategies, limit=limit, lm=lm, seed=seed,
                  n_boot=n_boot)
    _emit("personamem", lambda: run_personamem(questions, contexts, strategies=_split(strategies), limit=limit, lm=lm,
                                               n_boot=n_boot, seed=seed, progress=True),
          params=params, data=questions, inputs=(contexts or default_contexts_path(questions),), lm=lm, uses_lm=lambda: _uses_lm("mcq", strategies),
          cache_dir=cache_dir, no_cache=no_cache, tracking_uri=tracking_uri, no_track=no_track)


@app.command("cupid")
def cupid(data: Path, inferred: Optional[Path] = typer.Option(None, help="JSONL {id, preference}."),
          responses: Optional[Path] = typer.Option(None, help="JSONL {id, response}."),
          no_lm: bool = typer.Option(False, "--no-lm", help="MiniLM similarity only."),
          limit: Optional[int] = typer.Option(None, min=1, help=LIMIT_HELP), lm: Optional[str] = LM, seed: int = SEED,
          n_boot: int = NBOOT, cache_dir: Optional[Path] = CACHE_DIR, no_cache: bool = NO_CACHE,
          tracking_uri: Optional[str] = TRACKING, no_track: bool = NO_TRACK) -> None:
    """Score inferred preferences (checklist coverage, MiniLM cosine) and/or responses (checklist)."""
    from personalign.runners import run_cupid

    params = dict(data=str(data), inferred=inferred, responses=responses, no_lm=no_lm, limit=limit, lm=lm, seed=seed,
                  n_boot=n_boot)
    _emit("cupid", lambda: run_cupid(data, inferred=inferred, responses=responses, lm=lm, use_lm=not no_lm,
                                     limit=limit, n_boot=n_boot, seed=seed),
          params=params, data=data, inputs=(inferred, responses), lm=lm, uses_lm=not no_lm, cache_dir=cache_dir,
          no_cache=no_cache, tracking_uri=tracking_uri, no_track=no_track)


@app.command("judge-agreement")
def judge_agreement(ratings: Path, strategies: str = typer.Option("pairwise,single-order,tie"),
                    split: str = typer.Option("val"), limit: Optional[int] = typer.Option(None, min=1, help=LIMIT_HELP),
                    lm: Optional[str] = LM, seed: int = SEED, n_boot: int = NBOOT,
                    cache_dir: Optional[Path] = CACHE_DIR, no_cache: bool = NO_CACHE,
                    tracking_uri: Optional[str] = TRACKING, no_track: bool = NO_TRACK) -> None:
    """Spearman rho and weighted kappa of judge strategies against human 1-5 ratings."""
    from personalign.runners import run_judge_agreement

    params = dict(ratings=str(ratings), strategies=strategies, split=split, limit=limit, lm=lm, seed=seed,
                  n_boot=n_boot)

    def validate():  # the ratings and every strategy name, before the cache or the store is touched
        from personalign.stages import resolve_stage

        stage = resolve_stage("judge")
        for name in _split(strategies):
            stage.registry.info(name)
        stage.load(ratings, split=split)

    _emit("judge-agreement", lambda: run_judge_agreement(ratings, strategies=_split(strategies), split=split,
                                                         limit=limit, lm=lm, n_boot=n_boot, seed=seed, progress=True),
          params=params, data=ratings, lm=lm, uses_lm=lambda: _uses_lm("judge", strategies), cache_dir=cache_dir,
          no_cache=no_cache, tracking_uri=tracking_uri, no_track=no_track, validate=validate)


@app.command("sft-export")
def sft_export(out: Path, prefeval: Optional[Path] = typer.Option(None, help="PrefEval root (profile = preference)."),
               bank: Optional[Path] = typer.Option(None, help="Profile bank (JSONL or PrefEval folder)."),
               questions: Optional[Path] = typer.Option(None, help="Text file, one question per line (with --bank)."),
               k: int = typer.Option(3, min=1, help="Profiles per question (with --bank)."),
               split: str = typer.Option("train"), limit: Optional[int] = typer.Option(None, min=1, help=LIMIT_HELP),
               explicit: bool = typer.Option(False, "--explicit", help="Allow explicit mentions of the profile."),
               lm: Optional[str] = LM, seed: int = SEED, cache_dir: Optional[Path] = CACHE_DIR,
               no_cache: bool = NO_CACHE, tracking_uri: Optional[str] = TRACKING, no_track: bool = NO_TRACK) -> None:
    """Profile-conditioned teacher answers to chat-format JSONL (restatements of the profile are failures)."""
    from personalign.errors import ConfigurationError
    from personalign.runners import bank_pairs, export_sft, prefeval_pairs

    pairs: list = []

    def validate():  # every input read and checked before the cache, the store or any LM call
        from personalign.data import check_out_file

        check_out_file(out, argument="out")
        if prefeval is not None:
            pairs.extend(prefeval_pairs(prefeval, split=split, limit=limit, seed=seed))
        elif bank is not None and questions is not None:
            from personalign.data import read_text, stratified_limit

            qs = [q.strip() for q in read_text(questions, what="questions file").splitlines() if q.strip()]

            pairs.extend(bank_pairs(bank, stratified_limit(qs, limit, None, seed), k=k))
        else:
            raise ConfigurationError("give --prefeval ROOT, or --bank BANK with --questions FILE")

    def run():
        return export_sft(pairs, out, lm=lm, implicit=not explicit, progress=True)

    params = dict(out=str(out), prefeval=prefeval, bank=bank, questions=questions, k=k, split=split, limit=limit,
                  explicit=explicit, lm=lm, seed=seed)
    _emit("sft-export", run, params=params, data=prefeval or bank, inputs=(questions,), lm=lm, cache_dir=cache_dir,
          no_cache=no_cache, tracking_uri=tracking_uri, no_track=no_track, validate=validate)


if __name__ == "__main__":
    from personalign.errors import find_personalign_error

    try:
        app()
    except Exception as exc:  # noqa: BLE001 -- a flag callback's error (e.g. --lm ''): one line, exit 2
        ours = find_personalign_error(exc)
        if ours is None:
            raise
        sys.stderr.write(f"error: {ours}\n")
        raise SystemExit(ours.exit_code) from None
