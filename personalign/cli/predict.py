"""``personalign predict``: ``relevance`` (a user's attributes against one prompt, compiled on the fly or
saved) and ``batch`` (a saved program of any stage, yours included, on an unlabelled JSONL). Imports
typer only at module level."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from personalign.cli._checks import api_base_option, lm_option
from personalign.cli._options import (CONFIRM_OVER_DEFAULT, ConcurrencyOpt, ConfirmOverOpt, MaxCostOpt, YesOpt, callbacks,
                                     cost_hook, model_args)
from personalign.cli._output import print_json, print_jsonl

app = typer.Typer(rich_markup_mode=None, no_args_is_help=True,
                  help="Predict with a strategy (compiled on the fly, or a saved program).")

LM_HELP = "Model: local/qwen2.5-coder-1.5b-instruct (default), local/qwen2.5-coder-0.5b-instruct (fast), local/smollm2-135m-instruct (tiny), or any litellm model string."


@app.command("relevance")
def relevance(
    prompt: str = typer.Option(..., "--prompt", help="The user's new request."),
    attribute: Optional[List[str]] = typer.Option(None, "--attribute", "-a",
                                                  help="A user attribute (repeatable). Give all of a user's attributes together: "
                                                       "a rank strategy decides within them, and fewer than its "
                                                       "smallest set are decided by its fallback threshold "
                                                       "(the output says so)."),
    attributes_file: Optional[Path] = typer.Option(None, "--attributes-file",
                                                   help="A text file with one attribute per line."),
    strategy: Optional[str] = typer.Option(None, "--strategy",
                                           help="Relevance strategy (default minilm-logreg)."),
    program: Optional[Path] = typer.Option(None, "--program", help="A saved program directory (see --save)."),
    lm: Optional[str] = typer.Option(None, "--lm", help=LM_HELP, callback=lm_option),
    api_base: Optional[str] = typer.Option(None, "--api-base", callback=api_base_option, envvar="PERSONALIGN_API_BASE",
                                           help="OpenAI-compatible server for a non-embedded --lm (env PERSONALIGN_API_BASE)."),
    data: Optional[Path] = typer.Option(None, "--data",
                                        help="Labelled relevance JSONL to fit a trainable strategy on "
                                             "(default: the demo labels packaged with personalign)."),
    fit_split: Optional[str] = typer.Option(None, "--fit-split",
                                            help="Fit on this split of --data only (default: every row)."),
    save: Optional[Path] = typer.Option(None, "--save", help="Save the compiled program to this directory."),
    seed: int = typer.Option(0, "--seed", help="Seed of the fit."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Which of a user's attributes should change the answer to a prompt."""
    import warnings

    import personalign
    from personalign.errors import ConfigurationError

    attrs = list(attribute or [])
    if attributes_file is not None:
        from personalign.data import read_text

        text = read_text(attributes_file, what="attributes file", max_bytes=64 * 1024**2)
        attrs += [line.strip() for line in text.splitlines() if line.strip()]
    if not attrs:
        raise ConfigurationError("give at least one --attribute or an --attributes-file")
    if program is not None and strategy is not None:
        raise ConfigurationError("give --strategy or --program, not both")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        rows = personalign.predict_relevance(attrs, prompt, strategy=strategy, program=program, lm=lm, data=data,
                                             seed=seed, split=fit_split, save=save, api_base=api_base)
    notes = [f"{'warning' if 'fitted on every row' in str(w.message) else 'note'}: {w.message}" for w in caught
             if issubclass(w.category, UserWarning) and "site-packages" not in str(w.filename)]
    for line in notes:
        sys.stderr.write(line + "\n")
    if json_out:
        out = {"prompt": prompt, "strategy": strategy, "program": str(program or save) if (program or save) else None,
               "predictions": rows, "warnings": notes}
        print_json(out)
        return
    for row in rows:
        mark = "?" if row["relevant"] is None else ("YES" if row["relevant"] else "no ")
        score = "" if row["score"] is None else f" ({row['score']:.3f})"
        typer.echo(f"{mark}{score}  {row['attribute']}")
    for note in dict.fromkeys(row["decision"] for row in rows if row.get("decision")):
        typer.echo(f"decision: {note}")
    if save is not None:
        typer.echo(f"saved: {save}")


@app.command("batch")
def batch(
    stage: str = typer.Argument(..., help="Stage: a built-in name, your stage file path/to/stage.toml, "
                                           "path/to/file.py:STAGE, module:STAGE, or an installed entry-point name."),
    program: Path = typer.Option(..., "--program", help="A saved program directory (from `compile`)."),
    data: Path = typer.Option(..., "--data", help="JSONL, one object per row with the stage's input fields "
                                                  "(an optional string 'id' is echoed; no label needed)."),
    out: Optional[str] = typer.Option(None, "--out", help="Write one JSON object per row here, atomically "
                                                           "(default or '-': print them as JSONL on stdout). "
                                                           "Exit 1 when every row failed."),
    lm: Optional[str] = typer.Option(None, "--lm", help=LM_HELP + " Default: the program's own when it is an "
                                     "embedded local/ model (a saved program never chooses a remote one).",
                                     callback=lm_option),
    api_base: Optional[str] = typer.Option(None, "--api-base", callback=api_base_option, envvar="PERSONALIGN_API_BASE",
                                           help="OpenAI-compatible server for a non-embedded --lm (env PERSONALIGN_API_BASE)."),
    concurrency: ConcurrencyOpt = None,
    max_cost: MaxCostOpt = None,
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="DSPy cache directory (default runs/cache)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Disable the LM cache."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object (the summary; the rows too without --out)."),
    confirm_over: ConfirmOverOpt = CONFIRM_OVER_DEFAULT,
    yes: YesOpt = False,
) -> None:
    """Run a saved program of any stage on unlabelled rows: one prediction per row (output field, score, decision, error)."""
    import personalign

    if out == "-":
        out = None
    report = personalign.predict(stage, program, data, out=out, **model_args(lm, api_base, None, concurrency, max_cost),
                                 callbacks=callbacks(cache_dir=cache_dir, no_cache=no_cache, no_track=True),
                                 progress=out is not None and not json_out, on_cost=cost_hook(confirm_over, yes))
    result, rows = report.to_dict(), report.rows
    failed = bool(result["n"]) and result["failures"] == result["n"]  # a script can tell: exit 1
    if json_out:
        summary = result if out is None else {k: v for k, v in result.items() if k != "predictions"}
        print_json(summary)
        if failed:
            raise typer.Exit(1)
        return
    if out is None:  # rendered whole, then written once: a row that cannot be written leaves no partial output
        print_jsonl(rows, ensure_ascii=False)
    # the rows on stdout stay pure JSONL: the summary goes to stderr then
    say = typer.echo if out is not None else (lambda text: sys.stderr.write(text + "\n"))
    for line in report.renderables():
        say(line)
    if failed:
        raise typer.Exit(1)
