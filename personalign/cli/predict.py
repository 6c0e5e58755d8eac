"""``personalign predict``: ``relevance`` (a user's attributes against one prompt, compiled on the fly or
saved) and ``batch`` (a saved program of any stage, yours included, on an unlabelled JSONL). Imports
typer only at module level."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from personalign.cli._checks import api_base_option, lm_option

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
    from personalign.errors import ConfigurationError

    from personalign.predict import check_attributes

    attrs = check_attributes(attribute or [])
    if attributes_file is not None:
        from personalign.data.files import read_text

        text = read_text(attributes_file, what="attributes file", max_bytes=64 * 1024**2)
        attrs += [line.strip() for line in text.splitlines() if line.strip()]
    if not attrs:
        raise ConfigurationError("give at least one --attribute or an --attributes-file")
    if program is not None and strategy is not None:
        raise ConfigurationError("give --strategy or --program, not both")
    if save is not None:
        from personalign.programs.saved import check_save_target

        check_save_target(save)

    from personalign.predict import compile_strategy, predict_relevance, save_program

    compiled = None
    warnings: list[str] = []
    if save is not None and program is None:
        from personalign.lm import default_model, make_lm
        from personalign.programs.relevance import DEFAULT_PREDICT_STRATEGY, STRATEGIES

        name = strategy or DEFAULT_PREDICT_STRATEGY
        lm_obj = make_lm(lm or default_model()) if STRATEGIES.info(name).uses_lm else None
        compiled, info = compile_strategy(name, data=data, split=fit_split, lm=lm_obj, seed=seed)
        save_program(compiled, save, strategy=name, lm=lm_obj.model if lm_obj else None, compile_info=info)
        held = [s for s in (info or {}).get("fit_splits", []) if s not in ("train", "None")]
        if held:
            warnings.append(f"warning: {save} was fitted on every row of {info['data']}, including split(s) "
                            f"{', '.join(held)}; `personalign eval` on them scores rows it was fitted on "
                            "(pass --fit-split train to hold them out)")
        program = save
    elif program is None and data is None:
        from personalign.programs.relevance import DEFAULT_PREDICT_STRATEGY, STRATEGIES

        if STRATEGIES.info(strategy or DEFAULT_PREDICT_STRATEGY).trainable:
            warnings.append("note: fitted on the demo labels packaged with personalign (7 prompts); "
                            "pass --data FILE to fit on your own labels")
    for line in warnings:
        sys.stderr.write(line + "\n")
    rows = predict_relevance(attrs, prompt, strategy=strategy, program=program, lm=lm, data=data, seed=seed,
                             split=fit_split)
    if json_out:
        out = {"prompt": prompt, "strategy": strategy, "program": str(program) if program else None,
               "predictions": rows, "warnings": warnings}
        from personalign.data.strict_json import dumps

        sys.stdout.write(dumps(out) + "\n")
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
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="DSPy cache directory (default runs/cache)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Disable the LM cache."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object (the summary; the rows too without --out)."),
) -> None:
    """Run a saved program of any stage on unlabelled rows: one prediction per row (output field, score, decision, error)."""
    from personalign.lm import configure_cache
    from personalign.programs.stage_ref import resolve_stage
    from personalign.workflows import predict_file

    st = resolve_stage(stage)
    if out == "-":
        out = None
    result = predict_file(st, program, data, out=out, lm=lm, progress=out is not None and not json_out,
                          on_ready=lambda: configure_cache(cache_dir, enabled=not no_cache))
    from personalign.data.strict_json import dumps

    rows = result["predictions"]
    failed = bool(result["n"]) and result["failures"] == result["n"]  # a script can tell: exit 1
    if json_out:
        summary = result if out is None else {k: v for k, v in result.items() if k != "predictions"}
        sys.stdout.write(dumps(summary) + "\n")
        if failed:
            raise typer.Exit(1)
        return
    if out is None:  # rendered whole, then written once: a row that cannot be written leaves no partial output
        sys.stdout.write("".join(dumps(row, ensure_ascii=False) + "\n" for row in rows))
    line = (f"{result['strategy']} on {result['n']} rows of {data}: failures {result['failures']}, "
            f"LM calls {result['lm_calls']}")
    if "positives" in result:
        line += f", {st.positive_name} {result['positives']}"
    if failed:
        line += " (every row failed: see the 'error' field)"
    if out is not None:
        line += f"; written to {out}"
    # the rows on stdout stay pure JSONL: the summary goes to stderr then
    say = typer.echo if out is not None else (lambda text: sys.stderr.write(text + "\n"))
    if result["rule"]:
        say(f"rule: {result['rule']}")
    for note in dict.fromkeys(r["decision"] for r in rows if r.get("decision")):
        say(f"decision: {note}")
    say(line)
    if failed:
        raise typer.Exit(1)
