"""``personalign label merge|next``: labels from annotations, and the next rows to label.

Imports only typer at module level; the work is :mod:`personalign.labels`. Bad input raises a
:class:`~personalign.errors.PersonalignError` (one line naming file, line and field; exit 2) before
anything is written; outputs are written atomically.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from personalign.cli._checks import lm_option
from personalign.cli._output import print_json

app = typer.Typer(help="Humans in the loop: merge annotations into labels, choose the next rows to label.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)

STAGE_HELP = ("Stage: a built-in name (relevance, verification, ...), your stage file path/to/stage.toml, "
              "path/to/file.py:STAGE, module:STAGE, or an installed entry-point name.")


def _fmt(value, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def _print_merge(summary: dict, out: Path | None) -> None:
    from rich.console import Console
    from rich.table import Table

    ag = summary["agreement"]
    console = Console()
    table = Table(title=f"each annotator against the majority of the others (ties: {summary['ties']})")
    for col in ("annotator", "items", "agreement", "Cohen's κ", "yes-rate"):
        table.add_column(col, justify="left" if col == "annotator" else "right")
    for row in ag["annotators"]:
        table.add_row(row["annotator"], str(row["n"]), _fmt(row["agreement"]), _fmt(row["kappa"]),
                      _fmt(row["yes_rate"]))
    console.print(table)
    fl, kr = ag["fleiss"], ag["krippendorff"]
    console.print(f"Fleiss' κ {_fmt(fl['kappa'])} ({fl['n_items']} items with {fl['raters_per_item']} annotators"
                  f"{'; ' + fl['undefined'] if fl['undefined'] else ''})")
    console.print(f"Krippendorff's α {_fmt(kr['alpha'])} (nominal; {kr['n_items']} items, {kr['n_annotators']} "
                  f"annotators{'; ' + kr['undefined'] if kr['undefined'] else ''})")
    pairs = [p for p in ag["pairwise"] if p["n"]]
    if pairs:
        console.print("pairwise Cohen's κ: " + ", ".join(f"{p['a']}-{p['b']} {_fmt(p['kappa'], '.2f')} (n {p['n']})"
                                                          for p in pairs))
    if ag.get("pairwise_skipped"):
        console.print(f"pairwise Cohen's κ skipped: {ag['pairwise_skipped']}")
    if summary["dropped_annotators"]["names"]:
        d = summary["dropped_annotators"]
        console.print(f"left out: {d['labels']} labels of {', '.join(d['names'])} (--drop-annotator)")
    for p in summary["identical"]:
        console.print(f"note: {p['a']} and {p['b']} gave the same label on all {p['n']} rows they share, counted "
                      "as two people (--allow-identical)")
    line = (f"{summary['annotated']} annotated rows ({ag['n_judgments']} judgments by {ag['n_annotators']} annotators"
            f", per row: {', '.join(f'{k}: {v}' for k, v in ag['annotators_per_item'].items())}); "
            f"{summary['unannotated']} without annotations"
            + (f" ({summary['unlabelled']} rows without a label left out)" if summary.get("unlabelled") else "")
            + f"; {summary['dropped_ties']} ties dropped; {summary['changed']} labels changed")
    j = summary.get("joined")
    if j:
        console.print(f"joined: {j['matched']} of {j['raw_items']} raw items match a released row ({j['released_only']} "
                      f"released rows have no vote); on the matched rows the released yes-rate equals the votes' on "
                      f"{j['yes_rate_equal']}, the released label their majority on {j['label_equal']}")
    console.print(line + (f"; {summary['written']} rows written to {out}" if out else "; nothing written (no --out)"))


@app.command("merge")
def merge(
    stage: str = typer.Argument(..., help=STAGE_HELP),
    data: Path = typer.Argument(..., help="JSONL rows with 'annotations': {annotator: label} (the stage's output "
                                          "type), or for relevance the recenter raw_task3_annotations.jsonl with --join."),
    join: Optional[Path] = typer.Option(None, "--join", help="The released relevance_labels.jsonl the recenter raw "
                                                             "votes are joined to (it has the prompt texts)."),
    ties: str = typer.Option("negative", "--ties", help="An even split counts as: negative (not the positive class, "
                                                        "as the released recenter labels), positive, or drop (left out)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the merged rows here (canonical JSONL, atomically; "
                                                           "read back with the stage's loader first)."),
    drop_annotator: Optional[str] = typer.Option(None, "--drop-annotator", help="Comma-separated annotator names "
                                                 "whose labels are left out (e.g. a person's second name)."),
    allow_identical: bool = typer.Option(False, "--allow-identical", help="Count two annotators who gave the same "
                                         "label on every one of 10 or more shared rows as two people (default: "
                                         "refused as one person under two names)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Derive each annotated row's majority label, n_annotators and yes-rate; print the annotators' agreement."""
    from personalign.labels import drop_annotators, merge_labels, read_annotated, refuse_identical, write_merged
    from personalign.stages import resolve_stage

    st = resolve_stage(stage)
    if out is not None:
        from personalign.data import check_output

        check_output(out)  # before any reading: a bad --out is refused first
    rows, joined = read_annotated(st, data, join=join)
    names = [n.strip() for n in (drop_annotator or "").split(",") if n.strip()]
    given, n_dropped = drop_annotators([r for _, r in rows], names, path=data)
    merged, summary = merge_labels(st, given, ties=ties)
    if not allow_identical:
        refuse_identical(given, summary["identical"], path=data)  # before anything is written
    summary["dropped_annotators"] = {"names": names, "labels": n_dropped}
    if out is not None:
        dropped = set(summary["dropped_rows"])
        write_merged(st, merged, out, source=data, lines=[line for i, (line, _) in enumerate(rows) if i not in dropped])
    summary = {**summary, "stage": st.name, "data": str(data), "join": None if join is None else str(join),
               "joined": joined, "out": None if out is None else str(out)}
    if json_out:
        print_json(summary)
        return
    _print_merge(summary, out)


def _pool_rows(st, pool: Path, labelled_ids: set) -> tuple[list, list[dict]]:
    """The pool's examples and their JSON objects (ids required; rows already labelled left out)."""
    from personalign.data import iter_jsonl, read_inputs
    from personalign.errors import DataError

    examples = read_inputs(pool, st, unit_fields=[st.group_key] if st.group_key else [])  # the strata
    objects = dict(iter_jsonl(pool))
    seen: dict[str, int] = {}
    keep_ex, keep_obj = [], []
    for line, ex in examples:
        rid = objects[line].get("id")
        if rid is None:
            raise DataError(pool, line, "id", "missing: label next matches chosen rows to labelled ones by id")
        if rid in seen:
            raise DataError(pool, line, "id", f"duplicate id '{rid}' (first on line {seen[rid]})")
        seen[rid] = line
        if rid not in labelled_ids:
            keep_ex.append(ex)
            keep_obj.append(objects[line])
    return keep_ex, keep_obj


@app.command("next")
def next_(
    stage: str = typer.Argument(..., help=STAGE_HELP),
    labelled: Path = typer.Option(..., "--labelled", help="The labelled rows so far (the stage's labelled JSONL)."),
    pool: Path = typer.Option(..., "--pool", help="Unlabelled rows (JSONL with the stage's inputs, 'id' and group "
                                                  "fields); rows whose id is already labelled are skipped."),
    k: int = typer.Option(20, "--k", help="How many rows to choose."),
    strategies: Optional[str] = typer.Option(None, "--strategies", help="--goal compare: comma-separated strategies "
                                                                         "(at least two); the leading two decide."),
    goal: str = typer.Option("compare", "--goal", help="compare: sharpen the decision between the leading strategies; "
                                                       "compile: rows near a saved program's decision rule."),
    program: Optional[Path] = typer.Option(None, "--program", help="--goal compile: a saved program directory."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the chosen rows here (JSONL, atomically) with "
                                                           "selection_probability, acquisition and selection."),
    floor: float = typer.Option(0.1, "--floor", help="Share of each draw's probability spread uniformly over the "
                                                     "group's rows (0 < floor <= 1): keeps every row reachable."),
    folds: int = typer.Option(5, "--folds", help="Folds (whole groups) of the cross-fitted predictions on the labelled rows."),
    seed: int = typer.Option(0, "--seed", help="Seed of the draw and the fits."),
    lm: Optional[str] = typer.Option(None, "--lm", help="Model of LM strategies.", callback=lm_option),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object (the chosen rows too without --out)."),
) -> None:
    """Choose the next rows to label: sampled where the leading strategies' difference is most at stake, stratified over the stage's groups, each with its selection probability."""
    from personalign.errors import ConfigurationError
    from personalign.stages import resolve_stage

    if k < 1:
        raise ConfigurationError(f"--k must be >= 1, got {k}")
    if not 0 < floor <= 1:
        raise ConfigurationError(f"--floor must be in (0, 1], got {floor}")
    if folds < 2:
        raise ConfigurationError(f"--folds must be >= 2, got {folds}")
    if goal not in ("compare", "compile"):
        raise ConfigurationError(f"--goal must be compare or compile, got {goal!r}")
    st = resolve_stage(stage)
    names = [s.strip() for s in (strategies or "").split(",") if s.strip()]
    if goal == "compare":
        if len(names) < 2:
            raise ConfigurationError("--goal compare needs --strategies with at least two names")
        for name in names:
            st.registry.info(name)  # an unknown strategy: one line listing the known ones
    elif program is None:
        raise ConfigurationError("--goal compile needs --program")
    if out is not None:
        from personalign.data import check_output

        check_output(out)
    rows = st.load(labelled)
    ids = {str(getattr(ex, "id", "")) for ex in rows}
    pool_ex, pool_obj = _pool_rows(st, pool, ids)
    prog = lm_obj = meta = None
    if program is not None:
        from personalign import load_program

        prog, meta = load_program(program, stage=st, with_metadata=True)
    if lm is not None or any(st.registry.info(n).uses_lm for n in names):
        from personalign.lm import resolve_lm

        lm_obj = resolve_lm(lm)  # the model of the strategies compared
    from personalign.labels import next_rows

    result = next_rows(st, rows, pool_ex, k=k, strategies=names, program=prog, goal=goal, seed=seed, floor=floor,
                       folds=folds, lm=lm_obj, program_name=(meta or {}).get("strategy"))
    chosen = [{**pool_obj[c["index"]], **{key: c[key] for key in ("selection_probability", "acquisition", "selection")}}
              for c in result["chosen"]]
    if out is not None:
        from personalign.data import write_jsonl

        write_jsonl(out, chosen)
    summary = {k2: v for k2, v in result.items() if k2 != "chosen"}
    summary.update(stage=st.name, n_chosen=len(chosen), out=None if out is None else str(out))
    if json_out:
        print_json({**summary, **({} if out else {"rows": chosen})})
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if result["objective"]:
        console.print("out-of-sample " + result["metric"] + " on the labelled rows (unweighted): " +
                      ", ".join(f"{n} {v:.3f}" for n, v in sorted(result["objective"].items(), key=lambda x: -x[1])))
    est = result.get("estimate")
    if est and "diff" in est:
        a, b = result["leading"]
        ci = f" [{est['ci'][0]:+.3f}, {est['ci'][1]:+.3f}], p {est['p_value']:.3g}" if est["ci"] else " (no interval yet)"
        console.print(f"weighted estimate from the chosen rows so far: {result['metric']}({a}) - {result['metric']}({b}) "
                      f"= {est['diff']:+.3f}{ci}")
    elif est:
        console.print(est["note"])
    table = Table(title=f"round {result['round']}: {len(chosen)} rows ({goal}: {', '.join(result['leading'])})")
    for col in ("id", "group", "probability", "acquisition"):
        table.add_column(col, justify="left" if col in ("id", "group") else "right")
    for row in chosen:
        table.add_row(str(row.get("id")), str(row["selection"]["stratum"]), f"{row['selection_probability']:.4f}",
                      f"{row['acquisition']:.4f}")
    console.print(table)
    console.print(f"allocation over {st.group_key or 'groups'}: " +
                  ", ".join(f"{g} {n}" for g, n in result["allocation"].items()) +
                  (f"; written to {out}" if out else "; nothing written (no --out)"))
