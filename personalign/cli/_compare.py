"""``personalign compare STAGE`` and ``personalign stages``: table, JSON file, MLflow run."""

from __future__ import annotations

import sys
from pathlib import Path



def _fmt_ci(value, ci, rng=None, sign: str = "") -> str:
    """``0.512 [0.40, 0.61]``; without an interval, the per-group range ``0.512 (range 0.30–0.70)``
    (:func:`personalign.metrics.cluster.format_figure`)."""
    from personalign.metrics.cluster import format_figure

    return format_figure(value, ci, rng, sign)


def _p_cell(d: dict, mcnemar: dict | None = None) -> str:
    """Sign-flip p over clusters (Holm-adjusted when present, with the smallest reachable p and, when
    not significant, the minimum detectable effect); else the item-level McNemar p, labelled."""
    perm = d.get("permutation")
    if perm is None:
        return "-" if mcnemar is None else f"{mcnemar['p_value']:.3g} (McNemar, item-level)"
    p = d.get("p_holm", perm["p_value"])
    cell = f"{p:.3g}{' Holm' if 'p_holm' in d else ''} (min {perm['p_min']:.3g})"
    if p >= 0.05 and perm["p_min"] >= 0.05:  # too few clusters: no test here could reach 0.05
        cell += "; too few clusters to show a difference"
    elif p >= 0.05 and d.get("mde") is not None and d.get("ci") is not None:  # an MDE needs >= 5 clusters' SE
        cell += f"; no difference shown, MDE ±{d['mde']:.2f}"
    return cell


def _vs_first(row: dict) -> tuple[str, str]:
    vs = row.get("vs_first")
    if not vs:
        return "(reference)", "-"
    d = vs["diff"]
    return _fmt_ci(d["diff"], d.get("ci"), d.get("range"), "+"), _p_cell(d, vs.get("mcnemar"))


def render_table(result: dict):
    from rich.table import Table

    binary = result.get("kind", "binary") == "binary"
    key = result.get("metric", "f1")
    head = f"{result.get('stage', 'relevance')} on {result['split']} (n={result['n']}"
    if binary:
        head += f", human {result.get('positive_name', 'yes')}-rate {result['gold_yes_rate']:.1%}"
    # an LM-free compare names no model (its strategies never called one)
    lm = f", lm {result['lm']}, adapter {result['adapter']}" if result.get("adapter") else ""
    table = Table(title=head + f"{lm})")
    objective = result.get("objective")
    extra = objective not in (None, key)  # the objective is not the metric shown: its own column
    cols = ["strategy", f"{key} [95% CI]"] + ([f"{objective} (objective)"] if extra else [])
    if binary:
        cols += ["precision", "recall", f"{result.get('positive_name', 'yes')}-rate"]
    cols += ["LM calls eval+compile", "seconds", "failures", f"Δ{key} vs first [95% CI]", "p (sign-flip over clusters)"]
    for col in cols:
        table.add_column(col, justify="left" if col == "strategy" else "right",
                         no_wrap=not col.startswith(("p (", f"Δ{key}")), min_width=len(col) if col == "strategy" else None)
    for row in result["strategies"]:
        cells = [row["name"], _fmt_ci(row[key], row.get(f"{key}_ci"), row.get(f"{key}_range"))]
        if extra:
            value = row.get("objective")
            cells.append("-" if value is None or value != value else f"{value:.3f}")
        if binary:
            cells += [f"{row['precision']:.3f}", f"{row['recall']:.3f}", f"{row['yes_rate']:.1%}"]
        cells += [f"{row['lm_calls']}+{row.get('compile_lm_calls', 0)}", f"{row['seconds']:.1f}", str(row["failures"]),
                  *_vs_first(row)]
        table.add_row(*cells)
    return table


def resampling_line(result: dict) -> str:
    """What the intervals of a single-split result resample, and how many top-level clusters
    (:func:`personalign.metrics.cluster.resampling_note`)."""
    from personalign.metrics.cluster import resampling_note

    return resampling_note(next((r.get("resampling") for r in result["strategies"] if r.get("resampling")), None))


def check_results_path(path: Path) -> None:
    """``--results FILE``: refused before anything runs unless FILE is ``<name>.json`` in an existing
    folder, ``name`` a record name (:data:`personalign.record.NAME`).

    Raises:
        ConfigurationError: naming the path and what is wrong with it."""
    from personalign.errors import ConfigurationError
    from personalign.record import NAME

    if path.suffix != ".json" or not NAME.match(path.stem):
        raise ConfigurationError(f"--results {path}: must be NAME.json with NAME lower-case letters, digits and "
                                 "single hyphens (the record's name)")
    if not path.parent.is_dir():
        raise ConfigurationError(f"--results {path}: folder {path.parent} does not exist")


def write_results_file(path: Path, result: dict) -> Path:
    """Write the compare result's run record to ``path`` (name = the file's stem; ``extra`` gains the
    per-strategy rows without predictions, so the figures can be rebuilt from the file), atomically."""
    from personalign.record import write_record

    rows = [{k: v for k, v in r.items() if k not in ("predictions", "predictions_by_repeat")}
            for r in result["strategies"]]
    record = {**result["run_record"], "name": path.stem,
              "extra": {**result["run_record"]["extra"], "groups": result.get("groups"), "strategies": rows}}
    return write_record(path, record)


def run_stages(*, json_out: bool) -> None:
    from personalign.programs.stage_ref import ENTRY_POINT_GROUP, installed_entry_points
    from personalign.programs.stages import all_stages

    rows = []
    for name, st in all_stages().items():
        reg = st.registry
        rows.append({"stage": name, "source": "built-in", "summary": st.summary, "kind": st.kind,
                     "metric": st.metric_name, "default_strategies": st.default_strategies,
                     "strategies": reg.names()})
    # installed stages are listed by name and target only: importing them would run their code
    for name, target in installed_entry_points().items():
        rows.append({"stage": name, "source": f"entry point {ENTRY_POINT_GROUP}: {target}", "summary": None,
                     "kind": None, "metric": None, "default_strategies": None, "strategies": None})
    if json_out:
        from personalign.data.strict_json import dumps

        sys.stdout.write(dumps(rows) + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="stages")
    for col in ("stage", "metric", "strategies", "summary"):
        table.add_column(col)
    for r in rows:
        if r["source"] != "built-in":
            table.add_row(r["stage"], "-", f"(not imported: `personalign stage validate {r['stage']}`)", r["source"])
            continue
        table.add_row(r["stage"], f"{r['metric']} ({r['kind']})", ", ".join(r["strategies"]), r["summary"])
    Console().print(table)


def run_compare(*, stage: str, data: Path, split, train_split, strategies, lm, seed, n_boot, limit, cache_dir,
                no_cache, tracking_uri, no_track, json_out, cv=None, repeats=1, temperature=None,
                results: Path | None = None) -> None:
    from rich.console import Console

    from personalign.compare import compare_stage
    from personalign.data.files import check_input
    from personalign.lm import configure_cache
    from personalign.settings import runs_dir
    from personalign.programs.stages import get_stage
    from personalign.tracking import Tracker

    get_stage(stage)  # an unknown stage fails before anything else
    check_input(data, allow_dir=True)
    if results is not None:
        check_results_path(results)
    tracker = None if no_track else Tracker(tracking_uri)
    err = Console(stderr=True, soft_wrap=True)
    result = compare_stage(stage, data=data, split=split, train_split=train_split, strategies=strategies, lm=lm,
                           seed=seed, n_boot=n_boot, limit=limit, tracker=tracker, progress=not json_out,
                           out_dir=runs_dir() / "compare", cv=cv, repeats=repeats, temperature=temperature,
                           on_ready=lambda: configure_cache(cache_dir, enabled=not no_cache))
    path = result["result_file"]
    if results is not None:
        write_results_file(results, result)
    if json_out:
        summary = dict(result)
        summary["strategies"] = [{k: v for k, v in row.items() if k != "predictions"} for row in result["strategies"]]
        from personalign.data.strict_json import dumps

        sys.stdout.write(dumps(summary, default=str) + "\n")
        return
    console = Console() if sys.stdout.isatty() else Console(width=180)
    if result.get("cv") == "groups":
        from personalign.cli._crossval import print_groups

        print_groups(console, result)
        console.print(f"results: {path}\nchart: {result.get('chart_file')}"
                      + (f"\nrun record: {results}" if results is not None else ""), markup=False, highlight=False)
        if tracker is not None:
            console.print(f"MLflow run {result.get('mlflow_run_id')} in {tracker.tracking_uri}", markup=False,
                          highlight=False)
        return
    console.print(render_table(result))
    line = resampling_line(result)
    if line:
        console.print(line, markup=False, highlight=False)
    from personalign.compile_service import summary_line

    key = result.get("metric", "f1")
    for row in result["strategies"]:
        line = summary_line(row["name"], row.get("compile"))
        if line:
            console.print(line, markup=False, highlight=False)
        vs = row.get("vs_uncompiled")
        if vs:
            d = vs["diff"]
            console.print(f"{row['name']} vs {vs['against']} (compiled vs uncompiled, paired on the same examples): "
                          f"Δ{key} {_fmt_ci(d['diff'], d.get('ci'), d.get('range'), '+')}, p {_p_cell(d, vs.get('mcnemar'))}",
                          markup=False, highlight=False)
    for row in result["strategies"]:
        if row.get("repeat_note"):
            console.print(f"{row['name']}: {row['repeat_note']}", markup=False, highlight=False)
    for row in result["strategies"]:
        for line in row["errors"][:3] + row.get("warnings", []):
            err.print(f"{row['name']}: {line}", style="yellow", markup=False, highlight=False)
    console.print(f"results: {path}\nchart: {result['chart_file']}"
                  + (f"\nrun record: {results}" if results is not None else ""), markup=False, highlight=False)
    if tracker is not None:
        console.print(f"MLflow run {result.get('mlflow_run_id')} in {tracker.tracking_uri} "
                      f"(view: personalign ui --tracking-uri {tracker.tracking_uri})")
