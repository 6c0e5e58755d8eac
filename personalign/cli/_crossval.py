"""``personalign compare STAGE --cv groups``: the leave-one-group-out tables."""

from __future__ import annotations

from personalign.cli._compare import _fmt_ci, _p_cell
from personalign.record import group_noun


def _short(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def print_groups(console, result: dict) -> None:
    """Print the headline table (mean per-group metric, pooled, worst group, vs the first strategy),
    the per-group table (each group's figure with its interval) and what the intervals resample."""
    from rich.table import Table

    key, ng = result.get("metric", "f1"), result["n_groups"]
    gk = group_noun(result["group_key"])
    title = (f"{result['stage']}: leave-one-{gk}-out over {ng} {gk}s (n={result['n']}"
             + (f", lm {result['lm']})" if result.get("lm") else ")"))
    head = Table(title=title)
    cols = ["strategy", f"mean per-{gk} {key} (headline)", f"pooled {key}", f"worst {gk}",
            f"Δ mean {key} vs first", "p (sign-flip over groups)", "LM calls eval+compile", "seconds"]
    for c in cols:
        head.add_column(c, justify="left" if c == "strategy" else "right", no_wrap=c != cols[5])
    for row in result["strategies"]:
        h, vs = row["headline"], row.get("vs_first")
        head.add_row(row["name"], _fmt_ci(h["value"], h["ci"], h["range"]),
                     _fmt_ci(row["pooled"]["value"], row["pooled"]["ci"], row["pooled"].get("range")),
                     f"{row['worst']['value']:.3f} ({row['worst']['group']})",
                     "(reference)" if not vs else _fmt_ci(vs["diff"], vs["ci"], vs["range"], "+"),
                     "-" if not vs else _p_cell(vs), f"{row['lm_calls']}+{row['compile_lm_calls']}",
                     f"{row['seconds']:.1f}")
    console.print(head)
    groups = Table(title=f"{key} on each held-out {gk} (fitted on the other {ng - 1}) [95% CI]")
    groups.add_column("strategy", no_wrap=True)
    for g in result["groups"]:
        groups.add_column(str(g), justify="right", no_wrap=True)
    for row in result["strategies"]:
        cells = []
        for g in row["by_group"]:
            ci = g.get(f"{key}_ci")
            cells.append(f"{g[key]:.2f}" + (f" [{_short(ci[0])}, {_short(ci[1])}]" if ci else ""))
        groups.add_row(row["name"], *cells)
    console.print(groups)
    for row in result["strategies"]:
        if row.get("repeat_note"):
            console.print(f"{row['name']}: {row['repeat_note']}", markup=False, highlight=False)
        if row.get("warnings"):
            console.print(f"{row['name']}: {len(row['warnings'])} note(s) from fitting, in the results file "
                          "(strategies[].warnings)", markup=False, highlight=False)
    for line in notes(result):
        console.print(line, markup=False, highlight=False)


def notes(result: dict) -> list[str]:
    """What each figure is and what its interval resamples (printed under the tables)."""
    key, ng = result.get("metric", "f1"), result["n_groups"]
    gk = group_noun(result["group_key"])
    first = result["strategies"][0] if result["strategies"] else None
    units = sorted({(g.get("resampling") or {}).get("unit", "item") for r in result["strategies"] for g in r["by_group"]})
    out = [f"headline: the mean of the {ng} per-{gk} {key}s, each on a {gk} the strategy was not fitted on; "
           + (f"interval: percentile bootstrap over {gk}s ({result['n_boot']} resamples)" if ng >= 5 else
              f"fewer than 5 {gk}s: the range of the per-{gk} figures, no percentile interval"),
           f"pooled: {key} of all out-of-{gk} predictions together; per-{gk} intervals resample {', '.join(units)}"]
    if first and len(result["strategies"]) > 1:
        p_min = 2.0 / 2 ** ng if ng <= 16 else None
        out.append(f"p: sign-flip permutation of the per-{gk} differences, exact over 2^{ng} sign vectors"
                   + (f" (smallest reachable p = {p_min:.3g})" if p_min else "")
                   + ("; Holm-adjusted over the comparisons" if len(result["strategies"]) > 2 else "")
                   + "; MDE = (1.96 + 0.84) × SE of the difference over resampled groups")
    out.append(f"reproducible: the same data, seed ({result.get('seed')}) and model give the same figures (LM calls "
               "at temperature 0, in a fixed order; bootstrap seeded); what varies run to run is the seconds and the LM "
               "call counts (0 when the DSPy cache already holds a call)")
    if result.get("complete") is False:
        out.append("partial result: not every strategy has run yet")
    return out
