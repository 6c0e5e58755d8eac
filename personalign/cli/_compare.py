"""``personalign compare relevance``: table, JSON file, MLflow run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from personalign.errors import DataError


def _fmt_ci(value, ci) -> str:
    if ci is None or value is None:
        return "-" if value is None else f"{value:.3f}"
    return f"{value:.3f} [{ci[0]:.2f}, {ci[1]:.2f}]"


def _vs_first(row: dict) -> tuple[str, str]:
    vs = row.get("vs_first")
    if not vs:
        return "(reference)", "-"
    d = vs["f1_diff"]
    return f"{d['diff']:+.3f} [{d['ci'][0]:+.2f}, {d['ci'][1]:+.2f}]", f"{vs['mcnemar']['p_value']:.3g}"


def render_table(result: dict):
    from rich.table import Table

    table = Table(title=f"relevance on {result['split']} (n={result['n']}, human yes-rate {result['gold_yes_rate']:.1%}, "
                        f"lm {result['lm']})")
    for col in ("strategy", "F1 [95% CI]", "precision", "recall", "yes-rate", "LM calls eval+compile", "seconds", "failures",
                "ΔF1 vs first [95% CI]", "McNemar p"):
        table.add_column(col, justify="left" if col == "strategy" else "right", no_wrap=True)
    for row in result["strategies"]:
        table.add_row(
            row["name"], _fmt_ci(row["f1"], row.get("f1_ci")), f"{row['precision']:.3f}", f"{row['recall']:.3f}",
            f"{row['yes_rate']:.1%}", f"{row['lm_calls']}+{row.get('compile_lm_calls', 0)}", f"{row['seconds']:.1f}",
            str(row["failures"]),
            *_vs_first(row),
        )
    return table


def run_compare_relevance(*, data: Path, split, train_split, strategies, lm, seed, n_boot, limit, cache_dir, no_cache,
                          tracking_uri, no_track, json_out) -> None:
    import personalign  # noqa: F401
    from rich.console import Console

    from personalign.compare import compare_relevance
    from personalign.lm import configure_cache
    from personalign.settings import runs_dir
    from personalign.tracking import Tracker

    if not data.exists():
        raise DataError(data, None, None, "file not found")
    configure_cache(cache_dir, enabled=not no_cache)
    tracker = None if no_track else Tracker(tracking_uri)
    err = Console(stderr=True, soft_wrap=True)
    result = compare_relevance(data=data, split=split, train_split=train_split, strategies=strategies, lm=lm,
                               seed=seed, n_boot=n_boot, limit=limit, tracker=tracker, progress=not json_out,
                               out_dir=runs_dir() / "compare")
    path = result["result_file"]
    if json_out:
        summary = dict(result)
        summary["strategies"] = [{k: v for k, v in row.items() if k != "predictions"} for row in result["strategies"]]
        sys.stdout.write(json.dumps(summary) + "\n")
        return
    console = Console() if sys.stdout.isatty() else Console(width=180)
    console.print(render_table(result))
    for row in result["strategies"]:
        for line in row["errors"][:3] + row.get("warnings", []):
            err.print(f"{row['name']}: {line}", style="yellow", markup=False, highlight=False)
    console.print(f"results: {path}\nchart: {result['chart_file']}")
    if tracker is not None:
        console.print(f"MLflow run {result.get('mlflow_run_id')} in {tracker.tracking_uri} "
                      f"(view: mlflow ui --backend-store-uri {tracker.tracking_uri})")
