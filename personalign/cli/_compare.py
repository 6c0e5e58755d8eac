"""``personalign compare STAGE`` and ``personalign stages``: table, JSON file, MLflow run."""

from __future__ import annotations

import json
import sys
from pathlib import Path



def _fmt_ci(value, ci) -> str:
    if ci is None or value is None:
        return "-" if value is None else f"{value:.3f}"
    return f"{value:.3f} [{ci[0]:.2f}, {ci[1]:.2f}]"


def _vs_first(row: dict) -> tuple[str, str]:
    vs = row.get("vs_first")
    if not vs:
        return "(reference)", "-"
    d = vs["diff"]
    p = vs.get("mcnemar")
    return f"{d['diff']:+.3f} [{d['ci'][0]:+.2f}, {d['ci'][1]:+.2f}]", "-" if p is None else f"{p['p_value']:.3g}"


def render_table(result: dict):
    from rich.table import Table

    binary = result.get("kind", "binary") == "binary"
    key = result.get("metric", "f1")
    head = f"{result.get('stage', 'relevance')} on {result['split']} (n={result['n']}"
    if binary:
        head += f", human {result.get('positive_name', 'yes')}-rate {result['gold_yes_rate']:.1%}"
    adapter = f", adapter {result['adapter']}" if result.get("adapter") else ""
    table = Table(title=head + f", lm {result['lm']}{adapter})")
    objective = result.get("objective")
    extra = objective not in (None, key)  # the objective is not the metric shown: its own column
    cols = ["strategy", f"{key} [95% CI]"] + ([f"{objective} (objective)"] if extra else [])
    if binary:
        cols += ["precision", "recall", f"{result.get('positive_name', 'yes')}-rate"]
    cols += ["LM calls eval+compile", "seconds", "failures", f"Δ{key} vs first [95% CI]", "McNemar p"]
    for col in cols:
        table.add_column(col, justify="left" if col == "strategy" else "right", no_wrap=True)
    for row in result["strategies"]:
        cells = [row["name"], _fmt_ci(row[key], row.get(f"{key}_ci"))]
        if extra:
            value = row.get("objective")
            cells.append("-" if value is None or value != value else f"{value:.3f}")
        if binary:
            cells += [f"{row['precision']:.3f}", f"{row['recall']:.3f}", f"{row['yes_rate']:.1%}"]
        cells += [f"{row['lm_calls']}+{row.get('compile_lm_calls', 0)}", f"{row['seconds']:.1f}", str(row["failures"]),
                  *_vs_first(row)]
        table.add_row(*cells)
    return table


def run_stages(*, json_out: bool) -> None:
    from personalign.programs.stages import all_stages

    rows = []
    for name, st in all_stages().items():
        reg = st.registry
        rows.append({"stage": name, "summary": st.summary, "kind": st.kind, "metric": st.metric_name,
                     "default_strategies": st.default_strategies, "strategies": reg.names()})
    if json_out:
        sys.stdout.write(json.dumps(rows) + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="stages")
    for col in ("stage", "metric", "strategies", "summary"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["stage"], f"{r['metric']} ({r['kind']})", ", ".join(r["strategies"]), r["summary"])
    Console().print(table)


def run_compare(*, stage: str, data: Path, split, train_split, strategies, lm, seed, n_boot, limit, cache_dir,
                no_cache, tracking_uri, no_track, json_out) -> None:
    from rich.console import Console

    from personalign.compare import compare_stage
    from personalign.data.files import check_input
    from personalign.lm import configure_cache
    from personalign.settings import runs_dir
    from personalign.programs.stages import get_stage
    from personalign.tracking import Tracker

    get_stage(stage)  # an unknown stage fails before anything else
    check_input(data, allow_dir=True)
    tracker = None if no_track else Tracker(tracking_uri)
    err = Console(stderr=True, soft_wrap=True)
    result = compare_stage(stage, data=data, split=split, train_split=train_split, strategies=strategies, lm=lm,
                           seed=seed, n_boot=n_boot, limit=limit, tracker=tracker, progress=not json_out,
                           out_dir=runs_dir() / "compare",
                           on_ready=lambda: configure_cache(cache_dir, enabled=not no_cache))
    path = result["result_file"]
    if json_out:
        summary = dict(result)
        summary["strategies"] = [{k: v for k, v in row.items() if k != "predictions"} for row in result["strategies"]]
        sys.stdout.write(json.dumps(summary, default=str) + "\n")
        return
    console = Console() if sys.stdout.isatty() else Console(width=180)
    console.print(render_table(result))
    from personalign.compile_service import summary_line

    key = result.get("metric", "f1")
    for row in result["strategies"]:
        line = summary_line(row["name"], row.get("compile"))
        if line:
            console.print(line, markup=False, highlight=False)
        vs = row.get("vs_uncompiled")
        if vs:
            d, p = vs["diff"], vs.get("mcnemar")
            console.print(f"{row['name']} vs {vs['against']} (compiled vs uncompiled, paired on the same examples): "
                          f"Δ{key} {d['diff']:+.3f} [{d['ci'][0]:+.2f}, {d['ci'][1]:+.2f}]"
                          + (f", McNemar p = {p['p_value']:.3g}" if p else ""), markup=False, highlight=False)
    for row in result["strategies"]:
        for line in row["errors"][:3] + row.get("warnings", []):
            err.print(f"{row['name']}: {line}", style="yellow", markup=False, highlight=False)
    console.print(f"results: {path}\nchart: {result['chart_file']}")
    if tracker is not None:
        console.print(f"MLflow run {result.get('mlflow_run_id')} in {tracker.tracking_uri} "
                      f"(view: personalign ui --tracking-uri {tracker.tracking_uri})")
