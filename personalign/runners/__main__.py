"""``python -m personalign.runners COMMAND``: Stage 3 benchmark runners and the SFT export.

Each command prints one JSON object on stdout; an input or configuration error
(:class:`personalign.errors.PersonalignError`) prints one line on stderr and exits with code 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from personalign.cli._checks import lm_option

app = typer.Typer(name="personalign-runners", no_args_is_help=True, add_completion=False,
                  pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Stage 3 runners: PrefEval MCQ / generation, PersonaMem, CUPID, SFT export.")

LM = typer.Option(None, "--lm", help="Model string (default local/smollm2-135m-instruct).", callback=lm_option)
SEED = typer.Option(0, "--seed")
NBOOT = typer.Option(1000, "--n-boot", min=1)


def _emit(fn, *args, **kwargs) -> None:
    from personalign.errors import PersonalignError, find_personalign_error

    try:
        out = fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 -- user errors: one line, exit 2
        ours = exc if isinstance(exc, PersonalignError) else find_personalign_error(exc)
        if ours is None:
            raise
        sys.stderr.write(f"error: {ours}\n")
        raise typer.Exit(2) from None
    sys.stdout.write(json.dumps(out) + "\n")


@app.command("prefeval-mcq")
def prefeval_mcq(data: Path, strategies: str = typer.Option("no-profile,gold-preference,extracted-attributes"),
                 split: str = typer.Option("val"), limit: Optional[int] = typer.Option(None),
                 attributes: Optional[Path] = typer.Option(None, help="JSONL of user attributes (user_id, attributes)."),
                 lm: Optional[str] = LM, seed: int = SEED, n_boot: int = NBOOT) -> None:
    """PrefEval MCQ accuracy with 95% CIs per strategy."""
    from personalign.runners.prefeval import run_prefeval_mcq

    _emit(run_prefeval_mcq, data, strategies=[s.strip() for s in strategies.split(",") if s.strip()], split=split,
          limit=limit, attributes=attributes, lm=lm, n_boot=n_boot, seed=seed)


@app.command("prefeval-generation")
def prefeval_generation(data: Path, strategies: str = typer.Option("generic,personalized,personalized-implicit"),
                        split: str = typer.Option("val"), limit: int = typer.Option(10, min=1),
                        lm: Optional[str] = LM, seed: int = SEED, n_boot: int = NBOOT) -> None:
    """Preference-violation rate of generated responses (typed judge), per strategy."""
    from personalign.runners.prefeval import run_prefeval_generation

    _emit(run_prefeval_generation, data, strategies=[s.strip() for s in strategies.split(",") if s.strip()],
          split=split, limit=limit, lm=lm, n_boot=n_boot, seed=seed)


@app.command("personamem")
def personamem(questions: Path, contexts: Optional[Path] = typer.Option(None, help="shared_contexts JSONL "
                                                                              "(default: beside the CSV)."),
               strategies: str = typer.Option("no-profile,gold-preference"), limit: Optional[int] = typer.Option(None),
               lm: Optional[str] = LM, seed: int = SEED, n_boot: int = NBOOT) -> None:
    """PersonaMem MCQ accuracy (needs the shared-contexts file)."""
    from personalign.runners.personamem import run_personamem

    _emit(run_personamem, questions, contexts, strategies=[s.strip() for s in strategies.split(",") if s.strip()],
          limit=limit, lm=lm, n_boot=n_boot, seed=seed)


@app.command("cupid")
def cupid(data: Path, inferred: Optional[Path] = typer.Option(None, help="JSONL {id, preference}."),
          responses: Optional[Path] = typer.Option(None, help="JSONL {id, response}."),
          no_lm: bool = typer.Option(False, "--no-lm", help="MiniLM similarity only."),
          limit: Optional[int] = typer.Option(None), lm: Optional[str] = LM, seed: int = SEED,
          n_boot: int = NBOOT) -> None:
    """Score inferred preferences (checklist coverage, MiniLM cosine) and/or responses (checklist)."""
    from personalign.runners.cupid import run_cupid

    _emit(run_cupid, data, inferred=inferred, responses=responses, lm=lm, use_lm=not no_lm, limit=limit,
          n_boot=n_boot, seed=seed)


@app.command("judge-agreement")
def judge_agreement(ratings: Path, strategies: str = typer.Option("pairwise,single-order,tie"),
                    split: str = typer.Option("val"), limit: Optional[int] = typer.Option(None),
                    lm: Optional[str] = LM, seed: int = SEED, n_boot: int = NBOOT) -> None:
    """Spearman rho and weighted kappa of judge strategies against human 1-5 ratings."""
    from personalign.runners.judge import run_judge_agreement

    _emit(run_judge_agreement, ratings, strategies=[s.strip() for s in strategies.split(",") if s.strip()],
          split=split, limit=limit, lm=lm, n_boot=n_boot, seed=seed)


@app.command("sft-export")
def sft_export(out: Path, prefeval: Optional[Path] = typer.Option(None, help="PrefEval root (profile = preference)."),
               bank: Optional[Path] = typer.Option(None, help="Profile bank (JSONL or PrefEval folder)."),
               questions: Optional[Path] = typer.Option(None, help="Text file, one question per line (with --bank)."),
               k: int = typer.Option(3, min=1, help="Profiles per question (with --bank)."),
               split: str = typer.Option("train"), limit: Optional[int] = typer.Option(None),
               explicit: bool = typer.Option(False, "--explicit", help="Allow explicit mentions of the profile."),
               lm: Optional[str] = LM, seed: int = SEED) -> None:
    """Profile-conditioned teacher answers to chat-format JSONL."""
    from personalign.errors import ConfigurationError
    from personalign.runners.sft import bank_pairs, export_sft, prefeval_pairs

    def run():
        from personalign._paths import check_out_file

        check_out_file(out, flag="OUT")  # before any LM call
        if prefeval is not None:
            pairs = prefeval_pairs(prefeval, split=split, limit=limit, seed=seed)
        elif bank is not None and questions is not None:
            from personalign.data._io import read_text

            qs = [q.strip() for q in read_text(questions, what="questions file").splitlines() if q.strip()]
            pairs = bank_pairs(bank, qs[:limit] if limit else qs, k=k)
        else:
            raise ConfigurationError("give --prefeval ROOT, or --bank BANK with --questions FILE")
        return export_sft(pairs, out, lm=lm, implicit=not explicit)

    _emit(run)


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
