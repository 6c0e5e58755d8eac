"""What the verbs' results print: the tables and lines ``print(result)`` shows and the command
line prints (rich renderables; :func:`as_text` renders them to plain text)."""

from __future__ import annotations

from typing import Any

from personalign.record import group_noun, plural


def fmt_ci(value, ci, rng=None, sign: str = "") -> str:
    """``0.512 [0.40, 0.61]``; without an interval, the per-group range ``0.512 (range 0.30–0.70)``
    (:func:`personalign.metrics.cluster.format_figure`)."""
    from personalign.metrics.cluster import format_figure

    return format_figure(value, ci, rng, sign)


def p_cell(vs: dict, mcnemar: dict | None = None) -> str:
    """The p of a comparison (a row's ``vs_first`` / ``vs_uncompiled``, or its difference dict) as
    the command line prints it: ``0.031 (Holm; min 0.0156)``
    (:func:`personalign.metrics.paired.p_parts`, the results page's too)."""
    from personalign.metrics.paired import p_parts

    text, notes = p_parts(vs, mcnemar)
    return text + (f" ({'; '.join(notes)})" if notes else "")


def vs_line_p(vs: dict) -> str:
    """``p 0.031 (min 0.0156; paired permutation of f1, prompts swapped)``: a comparison's p with its test named."""
    from personalign.metrics.paired import comparison_test, p_parts, describe_test

    text, notes = p_parts(vs)
    label = describe_test(comparison_test(vs)[0], vs.get("mcnemar"))
    notes = notes + ([label] if label and label not in notes else [])
    return f"p {text}" + (f" ({'; '.join(notes)})" if notes else "")


def _vs_first(row: dict) -> tuple[str, str]:
    vs = row.get("vs_first")
    if not vs:
        return "(reference)", "-"
    d = vs["diff"]
    return fmt_ci(d["diff"], d.get("ci"), d.get("range"), "+"), p_cell(vs)


def spent_text(row: dict) -> str:
    """``"9,120+480 $0.0016"`` (``$0`` without a price on file; ``-`` for an LM-free row): the tokens
    and dollars a strategy's responses reported (:func:`personalign.lm.spend.spent_fields`)."""
    if "spent_input_tokens" not in row or not row.get("uses_lm", True):
        return "-"
    paid = f"${row['spent_dollars']:.4f}" if row.get("priced") else "$0"
    return f"{row['spent_input_tokens']:,}+{row['spent_output_tokens']:,} {paid}"


def render_table(result: dict):
    from rich.table import Table

    from personalign.metrics.paired import p_header
    from personalign.results_page.tables import SHARE_COLUMN, lm_calls_text, share_text

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
    cols += ["LM calls eval+compile", "tokens in+out, $", "seconds", "failures", f"Δ{key} vs first [95% CI]",
             p_header(result)]
    cols += [SHARE_COLUMN] if result.get("human") else []
    for col in cols:
        table.add_column(col, justify="left" if col == "strategy" else "right",
                         no_wrap=not col.startswith(("p (", f"Δ{key}")), min_width=len(col) if col == "strategy" else None)
    for row in result["strategies"]:
        cells = [row["name"], fmt_ci(row[key], row.get(f"{key}_ci"), row.get(f"{key}_range"))]
        if extra:
            value = row.get("objective")
            cells.append("-" if value is None or value != value else f"{value:.3f}")
        if binary:
            cells += [f"{row['precision']:.3f}", f"{row['recall']:.3f}", f"{row['yes_rate']:.1%}"]
        cells += [lm_calls_text(row), spent_text(row), f"{row['seconds']:.1f}", str(row["failures"]),
                  *_vs_first(row)]
        table.add_row(*cells, *([share_text(row)] if result.get("human") else []))
    _add_human(table, result, cols)
    return table


def _add_human(table, result: dict, cols: list[str]) -> None:
    """The human row (:func:`personalign.results_page.tables.human_entries`), below a line."""
    from personalign.results_page.tables import human_entries

    if result.get("human"):
        table.add_section()
        table.add_row(*[fmt_ci(*e) if isinstance(e, tuple) else e for e in human_entries(result, cols)])


def resampling_line(result: dict) -> str:
    """What the intervals of a single-split result resample, and how many top-level clusters
    (:func:`personalign.metrics.cluster.resampling_note`)."""
    from personalign.metrics.cluster import resampling_note

    return resampling_note(next((r.get("resampling") for r in result["strategies"] if r.get("resampling")), None))


def _short(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _group_cell(g: dict, key: str) -> str:
    """One held-out group's figure: ``0.55 [0.34, 0.64]``."""
    ci = g.get(f"{key}_ci")
    return f"{g[key]:.2f}" + (f" [{_short(ci[0])}, {_short(ci[1])}]" if ci else "")


def groups_renderables(result: dict) -> list:
    """The headline table (mean per-group metric, pooled, worst group, vs the first strategy), the
    per-group table (each group's figure with its interval) and what the intervals resample."""
    from rich.table import Table

    from personalign.metrics.paired import p_header
    from personalign.results_page.tables import SHARE_COLUMN, lm_calls_text, share_text

    out: list = []

    key, ng = result.get("metric", "f1"), result["n_groups"]
    gk = group_noun(result["group_key"])
    title = (f"{result['stage']}: leave-one-{gk}-out over {ng} {plural(gk)} (n={result['n']}"
             + (f", lm {result['lm']})" if result.get("lm") else ")"))
    head = Table(title=title)
    cols = ["strategy", f"mean per-{gk} {key} (headline)", f"pooled {key}", f"worst {gk}",
            f"Δ mean {key} vs first", p_header(result), "LM calls eval+compile", "seconds"]
    cols += [SHARE_COLUMN] if result.get("human") else []
    for c in cols:
        head.add_column(c, justify="left" if c == "strategy" else "right", no_wrap=c in cols[:3])
    for row in result["strategies"]:
        h, vs = row["headline"], row.get("vs_first")
        head.add_row(row["name"], fmt_ci(h["value"], h["ci"], h["range"]),
                     fmt_ci(row["pooled"]["value"], row["pooled"]["ci"], row["pooled"].get("range")),
                     f"{row['worst']['value']:.3f} ({row['worst']['group']})",
                     "(reference)" if not vs else fmt_ci(vs["diff"], vs["ci"], vs["range"], "+"),
                     "-" if not vs else p_cell(vs), lm_calls_text(row),
                     f"{row['seconds']:.1f}", *([share_text(row)] if result.get("human") else []))
    _add_human(head, result, cols)
    out.append(head)
    groups = Table(title=f"{key} on each held-out {gk} (fitted on the other {ng - 1}) [95% CI]")
    groups.add_column("strategy", no_wrap=True)
    for g in result["groups"]:
        groups.add_column(str(g), justify="right", no_wrap=True)
    for row in result["strategies"]:
        groups.add_row(row["name"], *[_group_cell(g, key) for g in row["by_group"]])
    human = result.get("human")
    if human and human["metric"] == key:
        per = {str(g["group"]): g for g in human["by_group"]}
        groups.add_section()
        groups.add_row("human", *[_group_cell(per[str(g)], key) if str(g) in per else "-" for g in result["groups"]])
    out.append(groups)
    for row in result["strategies"]:
        if row.get("repeat_note"):
            out.append(f"{row['name']}: {row['repeat_note']}")
        if row.get("warnings"):
            out.append(f"{row['name']}: {len(row['warnings'])} note(s) from fitting, in the results file "
                       "(strategies[].warnings)")
    from personalign.results_page.tables import cv_notes, decision_lines

    return out + decision_lines(result) + cv_notes(result)


def single_renderables(result: dict) -> list:
    """A single-split comparison: the table, what its intervals resample, each compile's summary
    line, compiled-vs-uncompiled pairs and repeat notes."""
    key = result.get("metric", "f1")
    from personalign.metrics.paired import p_note
    from personalign.results_page.tables import decision_lines, human_note

    out: list = [render_table(result)]
    out += [line for line in (resampling_line(result), p_note(result), human_note(result)) if line]
    for row in result["strategies"]:
        summary = compile_summary_line(row["name"], row.get("compile"))
        if summary:
            out.append(summary)
        vs = row.get("vs_uncompiled")
        if vs:
            d = vs["diff"]
            out.append(f"{row['name']} vs {vs['against']} (compiled vs uncompiled, paired on the same examples): "
                       f"Δ{key} {fmt_ci(d['diff'], d.get('ci'), d.get('range'), '+')}, {vs_line_p(vs)}")
    out += [f"{row['name']}: {row['repeat_note']}" for row in result["strategies"] if row.get("repeat_note")]
    return out + decision_lines(result)


def comparison_renderables(result: dict) -> list:
    """What ``print(personalign.compare(...))`` and ``personalign compare`` show."""
    return groups_renderables(result) if result.get("cv") == "groups" else single_renderables(result)


def compile_summary_line(name: str, compile_info: dict | None) -> str | None:
    """:func:`personalign.compile_service.summary_line` (one line on what compile chose)."""
    from personalign.compile_service import summary_line

    return summary_line(name, compile_info)


def eval_line(out: dict, *, metric: str, kind: str, positive_name: str) -> str:
    """``STRATEGY on SPLIT (n=N): f1 0.512 [0.40, 0.61], precision ..., LM calls N, failures N (...)``."""
    from personalign.lm import calls_text

    line = (f"{out['strategy']} on {out['split']} (n={out['n']}): {metric} "
            f"{fmt_ci(out[metric], out.get(metric + '_ci'), out.get(metric + '_range'))}")
    if kind == "binary":
        line += (f", precision {out['precision']:.3f}, recall {out['recall']:.3f}, "
                 f"{positive_name}-rate {out['yes_rate']:.1%}")
    res = out.get("resampling") or {}
    line += f", LM calls {calls_text(out['lm_calls'], out.get('cached_lm_calls') or 0)}, failures {out['failures']}"
    if res:
        n = res["n_clusters"]
        line += f" (intervals resample {res['unit']}: {n} top-level cluster{'s' if n != 1 else ''})"
    h = out.get("human")
    if h:
        from personalign.labels.ceiling import duplicates_text
        from personalign.results_page.tables import share_text

        m = h["metric"]
        line += (f"\nhuman: {m} {fmt_ci(h[m], h.get(m + '_ci'), h.get(m + '_range'))}: each annotator against the "
                 f"strict majority of the others on the {h['rows_covered']} of {h['rows']} rows with >= "
                 f"{h['min_annotators']} annotators ({h['n']} judgments, {h['n_annotators']} annotators"
                 f"{duplicates_text(h.get('duplicates'))}); "
                 f"{out['strategy']} on those rows: {share_text(out)} of it")
    return line


def sweep_lines(result: dict) -> list[str]:
    """The summary of a sweep: the study's counts, the best trial with its interval, the program."""
    from personalign.metrics.cluster import format_figure, resampling_note

    metric = result.get("objective") or result["metric"]
    reused = result.get("n_reused") or 0
    counted = f"; {result['n_counted']} counted" if "n_counted" in result else ""
    out = [f"study {result['study']} in {result['storage']}: {result['n_complete']} complete"
           f"{f' ({reused} of them reused)' if reused else ''}, {result['n_pruned']} pruned, "
           f"{result['n_fail']} failed{counted} of {result['n_trials']} requested "
           f"(this run: {result['ran']} trials, {result['seconds']:.1f} s, {result['lm_calls']} LM calls)"]
    if "n_distinct" in result:
        size = result.get("space_size")
        line = (f"{result['n_distinct']} distinct configurations ran"
                + (f" of the {size} in the search space" if size is not None else " (the search space is unbounded)"))
        if result.get("n_reused"):
            n = result["n_reused"]
            line += (f"; {n} trial{'s' if n != 1 else ''} repeated a finished configuration: its value reused, "
                     "not counted toward the trials requested")
        out.append(line)
    if result.get("stop_reason"):
        out.append(f"stopped: {result['stop_reason']}")
    if result.get("seed_ignored") is not None:
        out.append(f"seed {result['seed']}: the study's own (--seed {result['seed_ignored']} ignored)")
    if result.get("stale_failed"):
        out.append(f"stale trials of killed workers failed and re-queued: {result['stale_failed']}")
    best = result.get("best")
    if best:
        report = best.get("report") or {}
        figure = format_figure(best["value"], report.get(f"{metric}_ci"), report.get(f"{metric}_range"),
                               by_group=report.get(f"{metric}_by_group"))
        out.append(f"best: trial {best['number']} {metric} {figure} {best['params']}")
        if resampling_note(report.get("resampling")):
            out.append(resampling_note(report.get("resampling")))
    ref = result.get("reference")
    if ref and "value" in ref:
        interval = f" [{ref['low']:.3f}, {ref['high']:.3f}] ({ref['interval']})" if ref.get("interval") else ""
        out.append(f"reference: the constant {ref['strategy']} {ref['objective']} {ref['value']:.3f}{interval} "
                   f"on the same {ref['n']} rows" + (" -- the best beats it" if ref.get("best_beats_it") else ""))
        if ref.get("note"):
            out.append(f"note: {ref['note']}")
    elif ref and ref.get("error"):
        out.append(f"reference {ref['strategy']}: not scored ({ref['error']})")
    if result.get("program"):
        out += [f"program: {result['program']}", f"readable prompt: {result['prompt_file']}"]
    out.append(f"view: {result['dashboard']}")
    return out


def as_text(renderables: list, width: int = 160) -> str:
    """Plain text of rich renderables and strings (no colour, ``width`` columns)."""
    import io

    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=False, color_system=None)
    for r in renderables:
        console.print(r, markup=False, highlight=False) if isinstance(r, str) else console.print(r)
    return buf.getvalue().rstrip("\n")
