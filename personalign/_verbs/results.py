"""The files and records of a comparison: its run-record figures, the result JSON under
``runs/compare/`` and its chart (matplotlib, PNG)."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def result_figures(result: dict) -> list[dict]:
    """The run-record figures of a compare result: leave-one-group-out (headline mean per-group
    metric, pooled, worst group; per group) or single split (labelled as such)."""
    from personalign.record import cv_tag, figure, group_noun, plural

    out, stage, key = [], result["stage"], result.get("metric", "f1")
    for row in result.get("strategies", []):
        name = row["name"]
        if result.get("cv") == "groups":
            h, gk, ng = row["headline"], result["group_key"], result["n_groups"]
            unit, rng = group_noun(gk), h.get("range")
            note = None if h["ci"] else f"{ng} {plural(unit)} (< 5): no interval" + (
                f"; per-{unit} range [{rng[0]:.3f}, {rng[1]:.3f}]" if rng else "")
            base = f"{stage}.{cv_tag(gk)}.{name}.{key}"
            out.append(figure(f"{base}_mean", f"{name}: mean per-{unit} {key}, leave-one-{unit}-out", h["value"],
                              metric=f"{key}_mean", strategy=name, ci=h["ci"], n=ng, note=note))
            out.append(figure(f"{base}_pooled", f"{name}: {key} of pooled held-out predictions",
                              row["pooled"]["value"], metric=key, strategy=name, ci=row["pooled"]["ci"], n=result["n"]))
            out.append(figure(f"{base}_worst", f"{name}: worst {unit} ({row['worst']['group']})", row["worst"]["value"],
                              metric=key, strategy=name, n=None, note=str(row["worst"]["group"])))
            for g in row["by_group"]:
                out.append(figure(f"{base}.{unit}={g['group']}", f"{name} on {unit} {g['group']} (fitted on the others)",
                                  g[key], metric=key, strategy=name, ci=g.get(f"{key}_ci"), n=g["n"],
                                  note=(g.get("resampling") or {}).get("unit")))
        else:
            out.append(figure(f"{stage}.{result['split']}.{name}.{key}", f"{name}: {key} on split {result['split']} "
                              "(single split)", row[key], metric=key, strategy=name, ci=row.get(f"{key}_ci"), n=row["n"],
                              note=(row.get("resampling") or {}).get("unit")))
    return out + _human_figures(result)


def _human_figures(result: dict) -> list[dict]:
    """The run-record figures of a result's human row (none without one): the ceiling
    (leave-one-group-out: its mean per group, pooled) and each strategy's share of it."""
    from personalign.record import cv_tag, figure

    h = result.get("human")
    if not h:
        return []
    m, stage = h["metric"], result["stage"]
    note = f"each annotator against the majority of the others; {h['n']} judgments, {h['n_annotators']} annotators"
    if result.get("cv") == "groups":
        base, hd = f"{stage}.{cv_tag(result['group_key'])}.human.{m}", h["headline"]
        out = [figure(f"{base}_mean", f"human ceiling: mean per-group {m}, held-out rows of each group", hd["value"],
                      metric=f"{m}_mean", strategy="human", ci=hd["ci"], n=hd["n_groups"], note=note),
               figure(f"{base}_pooled", f"human ceiling: {m} of all judgments", h["pooled"]["value"], metric=m,
                      strategy="human", ci=h["pooled"]["ci"], n=h["n"], note=note)]
        tag = cv_tag(result["group_key"])
    else:
        tag = result["split"]
        out = [figure(f"{stage}.{tag}.human.{m}", f"human ceiling: {m} on split {tag}", h[m], metric=m,
                      strategy="human", ci=h.get(f"{m}_ci"), n=h["n"], note=note)]
    out += [figure(f"{stage}.{tag}.{r['name']}.share_of_human", f"{r['name']}: {m} as a share of the human ceiling",
                   r["share_of_human"], metric="share", strategy=r["name"], n=None, note="same rows as the ceiling")
            for r in result.get("strategies", []) if r.get("share_of_human") is not None]
    return out


def result_record(result: dict, command: str | None = None) -> dict:
    """The :mod:`personalign.record` run record of a compare result (figures included)."""
    from personalign.lm import adapter_name
    from personalign.record import run_record, slug

    model = result.get("lm")
    uses_lm = result.get("uses_lm", True) and model
    rows = result.get("strategies", [])
    if result.get("cv") == "groups":
        resampling = {"unit": result["group_key"], "n_clusters": result["n_groups"], "n_boot": result["n_boot"]}
    else:
        resampling = next((r.get("resampling") for r in rows if r.get("resampling")), None)
    return run_record(slug(f"compare-{result['stage']}"), result_figures(result), command=command,
                      title=f"compare {result['stage']} ({'leave-one-group-out' if result.get('cv') else 'single split'})",
                      model=model if uses_lm else None,
                      adapter=adapter_name(model) if uses_lm else None, data=result.get("data"),
                      data_sha256=result.get("data_sha256"), resampling=resampling, stage=result["stage"],
                      extra={"seed": result.get("seed"), "n_boot": result.get("n_boot"),
                             "strategies": [r["name"] for r in rows], "complete": result.get("complete", True)})


def plot_groups(result: dict, path) -> Any:
    """Per-strategy chart of a leave-one-group-out result: the headline mean (bar; error bar: its
    interval, else the range of the groups) and every group's figure (dots). PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, key = result["strategies"], result.get("metric", "f1")
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(rows) + 2), 3.6))
    for i, r in enumerate(rows):
        h = r["headline"]
        lo, hi = h["ci"] or h["range"] or [h["value"], h["value"]]
        ax.bar(i, h["value"], yerr=[[h["value"] - lo], [hi - h["value"]]], capsize=4, color="#4c72b0")
        ax.plot([i] * len(r["by_group"]), [g[key] for g in r["by_group"]], "o", color="black", ms=3)
    ax.set_xticks(range(len(rows)), [r["name"] for r in rows], rotation=20, ha="right")
    _ceiling_line(ax, result, (result.get("human") or {}).get("headline", {}).get("value"))
    ax.set_ylim(0, 1)
    ax.set_ylabel(f"mean per-{result['group_key']} {key}")
    ax.set_title(f"{result['stage']}, leave-one-{result['group_key']}-out ({result['n_groups']} groups, n={result['n']})")
    fig.tight_layout()
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _ceiling_line(ax, result: dict, value: float | None) -> None:
    """A dotted line at the human ceiling, when the result has one in the plotted metric."""
    human = result.get("human")
    if human and human["metric"] == result.get("metric", "f1") and value is not None:
        ax.axhline(value, color="#b5651d", ls=":", lw=1.5, label=f"human ceiling ({value:.2f})")
        ax.legend(loc="upper right", fontsize=8)


def plot_result(result: dict[str, Any], path: Path) -> Path:
    """Bar chart of the main metric per strategy with 95% CI error bars (matplotlib, PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["strategies"]
    key = result.get("metric", "f1")
    names = [r["name"] for r in rows]
    f1s = [r[key] for r in rows]
    bars = [r.get(f"{key}_ci") or r.get(f"{key}_range") or [r[key], r[key]] for r in rows]  # CI, else group range
    lo = [r[key] - b[0] for r, b in zip(rows, bars)]
    hi = [b[1] - r[key] for r, b in zip(rows, bars)]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(rows) + 2), 3.6))
    ax.bar(names, f1s, yerr=[lo, hi], capsize=4, color="#4c72b0")
    if key == "f1" and "gold_yes_rate" in result:
        ax.axhline(2 * result["gold_yes_rate"] / (1 + result["gold_yes_rate"]), color="grey", ls="--", lw=1,
                   label=f"all-{result.get('positive_name', 'yes')} F1")
    _ceiling_line(ax, result, (result.get("human") or {}).get(key))
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper right", fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel(f"{key} vs human labels (95% CI)")
    ax.set_title(f"{result.get('stage', 'relevance')} on {result['split']} (n={result['n']})")
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_result(result: dict[str, Any], out_dir: Path, stem: str | None = None) -> Path:
    """Write the result JSON atomically (tmp + rename) under ``out_dir``, as strict JSON (a NaN is
    null, listed under ``non_finite_as_null``: :func:`personalign.record.write_json`); return its path."""
    from personalign.record import write_json

    return write_json(out_dir / f"{stem or result['stage'] + '-' + result['split'] + '-' + stamp()}.json", result)


def progress_display(enabled: bool, seconds_per_call: float | None = None):
    """The one progress display of a cross-validation (stderr, cleared when done): done / total,
    elapsed and the time left -- from the pace so far, or until there is one, ``seconds_per_call``
    (the model's known speed) times the calls left."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    from personalign._verbs.cost import duration

    class Left(ProgressColumn):
        def render(self, task) -> Text:
            left = task.time_remaining
            if left is None and seconds_per_call is not None and task.total is not None:
                left = max(0.0, task.total - task.completed) * seconds_per_call
            return Text("" if left is None else f"~{duration(left)} left", style="progress.remaining")

    console = Console(stderr=True)  # not a terminal (a log file): no bar, not even its closing newline
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("model calls"),
                    TimeElapsedColumn(), Left(), console=console, disable=not enabled or not console.is_terminal,
                    transient=True)


def stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


__all__ = ["plot_groups", "plot_result", "progress_display", "result_figures", "result_record", "stamp",
           "write_result"]
