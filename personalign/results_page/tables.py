"""The results page's tables, as cells: the summary table (what ``personalign compare`` prints) and
the per-group table, for single-split and ``--cv groups`` results.

A table is ``{"title", "columns": [str], "rows": [[cell, ...]], "notes": [str]}``; a cell is
``{"text", "sub" (a second, smaller line or None), "cls" (CSS classes) }`` -- plain text, escaped
when the page is written. The figures are formatted by
:func:`personalign.metrics.cluster.format_figure` (the CLI's format).
"""

from __future__ import annotations

from typing import Any

from personalign.metrics.cluster import format_figure, resampling_note
from personalign.metrics.paired import comparison_test, p_header, p_note, p_parts, describe_test
from personalign.record import group_noun, plural

__all__ = ["WIDE_GROUPS", "summary_table", "group_table", "cell", "figure_cell", "p_cell", "is_cv", "human_note",
           "share_text", "human_entries", "SHARE_COLUMN", "lm_calls_text", "cv_notes", "decision_lines"]


def cell(text: Any, sub: str | None = None, cls: str = "") -> dict[str, Any]:
    """One table cell: ``text`` (None and NaN print ``-``), an optional second line ``sub``, CSS ``cls``."""
    if text is None or (isinstance(text, float) and text != text):
        text = "-"
    return {"text": str(text), "sub": sub, "cls": cls}


def figure_cell(value, ci=None, rng=None, sign: str = "") -> dict[str, Any]:
    """A figure as the CLI prints it (:func:`personalign.metrics.cluster.format_figure`), the value
    on the first line and its interval or range on the second."""
    text, _, rest = format_figure(value, ci, rng, sign).partition(" ")
    return cell(text, rest or None, "fig")


def is_cv(result: dict) -> bool:
    return result.get("cv") == "groups"


def _num(value, fmt: str = ".3f") -> str:
    return "-" if value is None or value != value else f"{value:{fmt}}"


def p_cell(vs: dict, mcnemar: dict | None = None) -> dict[str, Any]:
    """The p of a comparison with the first strategy (a row's ``vs_first`` / ``vs_uncompiled``, or
    its difference dict), its notes on the second line: the command line's cell
    (:func:`personalign.metrics.paired.p_parts`; the column header names the test)."""
    text, notes = p_parts(vs, mcnemar)
    if text == "-":
        return cell("-", "; ".join(notes) or None)
    return cell(text, "; ".join(notes) or None, "p sig" if float(text) < 0.05 else "p")


def _binary_cells(row: dict) -> list[dict]:
    return [cell(_num(row.get("precision"))), cell(_num(row.get("recall"))),
            cell("-" if row.get("yes_rate") is None else f"{row['yes_rate']:.1%}")]


def lm_calls_text(row: dict) -> str:
    """A row's ``LM calls eval+compile`` cell, the command line's and the page's: ``"20+511"``
    (model calls of evaluation + compile), ``"20+511 (+40 cached)"`` when a cache answered some
    (:func:`personalign.lm.calls_text`; :class:`personalign.lm.CallCounter`)."""
    from personalign.lm import calls_text

    cached = int(row.get("cached_lm_calls") or 0) + int(row.get("compile_cached_lm_calls") or 0)
    return calls_text(f"{row.get('lm_calls', 0)}+{row.get('compile_lm_calls', 0)}", cached)


def _cost_cells(row: dict) -> list[dict]:
    return [cell(lm_calls_text(row)),
            cell(_num(row.get("seconds"), ".1f")), cell(row.get("failures", 0), cls="bad" if row.get("failures") else "")]


def _single_summary(result: dict) -> dict[str, Any]:
    key, binary = result.get("metric", "f1"), result.get("kind", "binary") == "binary"
    objective = result.get("objective")
    extra = objective not in (None, key)
    pos = result.get("positive_name", "yes")
    cols = ["strategy", f"{key} [95% CI]"] + ([f"{objective} (objective)"] if extra else [])
    cols += ["precision", "recall", f"{pos}-rate"] if binary else []
    cols += ["LM calls eval+compile", "seconds", "failures", f"Δ{key} vs first [95% CI]", p_header(result)]
    cols += [SHARE_COLUMN] if result.get("human") else []
    rows = []
    for r in result["strategies"]:
        cells = [cell(r["name"], cls="name"), figure_cell(r.get(key), r.get(f"{key}_ci"), r.get(f"{key}_range"))]
        if extra:
            cells.append(cell(_num(r.get("objective"))))
        cells += _binary_cells(r) if binary else []
        cells += _cost_cells(r)
        vs = r.get("vs_first")
        if not vs:
            cells += [cell("(reference)", cls="muted"), cell("-")]
        else:
            d = vs["diff"]
            cells += [figure_cell(d["diff"], d.get("ci"), d.get("range"), "+"), p_cell(vs)]
        rows.append(cells + ([cell(share_text(r))] if result.get("human") else []))
    rows += _human_rows(result, cols)
    head = f"{result.get('stage')} on {result.get('split')} (n={result.get('n')}"
    if binary and result.get("gold_yes_rate") is not None:
        head += f", human {pos}-rate {result['gold_yes_rate']:.1%}"
    if result.get("adapter"):
        head += f", lm {result.get('lm')}, adapter {result['adapter']}"
    notes = [resampling_note(next((r.get("resampling") for r in result["strategies"] if r.get("resampling")), None)),
             p_note(result), human_note(result)]
    for r in result["strategies"]:
        vs = r.get("vs_uncompiled")
        if vs:
            d = vs["diff"]
            notes.append(f"{r['name']} vs {vs['against']} (compiled vs uncompiled, same rows): Δ{key} "
                         f"{format_figure(d['diff'], d.get('ci'), d.get('range'), '+')}, "
                         f"p {p_cell(vs)['text']} ({describe_test(comparison_test(vs)[0], vs.get('mcnemar'))})")
    return {"title": head + ")", "columns": cols, "rows": rows, "notes": [n for n in notes if n] + _row_notes(result)}


def _cv_summary(result: dict) -> dict[str, Any]:
    key, binary, ng = result.get("metric", "f1"), result.get("kind", "binary") == "binary", result.get("n_groups")
    gk = group_noun(result["group_key"])
    pos = result.get("positive_name", "yes")
    cols = ["strategy", f"mean per-{gk} {key} (headline)", f"pooled {key}"]
    cols += ["precision", "recall", f"{pos}-rate"] if binary else []
    cols += [f"worst {gk}", "LM calls eval+compile", "seconds", "failures", f"Δ mean {key} vs first", p_header(result)]
    cols += [SHARE_COLUMN] if result.get("human") else []
    rows = []
    for r in result["strategies"]:
        h, pooled, vs = r["headline"], r["pooled"], r.get("vs_first")
        cells = [cell(r["name"], cls="name"), figure_cell(h["value"], h.get("ci"), h.get("range")),
                 figure_cell(pooled["value"], pooled.get("ci"), pooled.get("range"))]
        cells += _binary_cells(pooled) if binary else []
        cells += [cell(_num(r["worst"]["value"]), str(r["worst"]["group"]), "fig"), *_cost_cells(r)]
        cells += ([cell("(reference)", cls="muted"), cell("-")] if not vs else
                  [figure_cell(vs["diff"], vs.get("ci"), vs.get("range"), "+"), p_cell(vs)])
        rows.append(cells + ([cell(share_text(r))] if result.get("human") else []))
    rows += _human_rows(result, cols)
    title = f"{result.get('stage')}: leave-one-{gk}-out over {ng} {plural(gk)} (n={result.get('n')}" + \
        (f", lm {result['lm']})" if result.get("lm") else ")")
    return {"title": title, "columns": cols, "rows": rows,
            "notes": cv_notes(result, pooled_rates=binary) + _row_notes(result)}


def cv_notes(result: dict, *, pooled_rates: bool = False) -> list[str]:
    """The lines under a leave-one-group-out table, the command line's and the page's: what the
    headline, the pooled figure and their intervals are (what the per-group intervals resample),
    the p and its MDE, the human row, what is reproducible, a partial result; ``pooled_rates``
    (the page's binary table) says its precision, recall and rate are of the pooled predictions."""
    key, ng = result.get("metric", "f1"), result.get("n_groups")
    gk = group_noun(result["group_key"])
    units = sorted({(g.get("resampling") or {}).get("unit", "item") for r in result["strategies"] for g in r["by_group"]})
    out = [f"headline: the mean of the {ng} per-{gk} {key}s, each on a {gk} the strategy was not fitted on; "
           + (f"interval: percentile bootstrap over {plural(gk)} ({result.get('n_boot')} resamples)" if (ng or 0) >= 5
              else f"fewer than 5 {plural(gk)}: the range of the per-{gk} figures, no percentile interval"),
           f"pooled: {key} of all out-of-{gk} predictions together; per-{gk} intervals resample {', '.join(units)}"
           + ("; precision, recall and rate are of the pooled predictions" if pooled_rates else "")]
    p = p_note(result)
    out += [p + "; MDE = (1.96 + 0.84) × SE of the difference over resampled groups"] if p else []
    out += [human_note(result)] if result.get("human") else []
    out.append(f"reproducible: the same data, seed ({result.get('seed')}) and model give the same figures (LM calls "
               "at temperature 0, in a fixed order; bootstrap seeded); what varies run to run is the seconds and how "
               "many model calls a cache answered (shown apart: +N cached)")
    if result.get("complete") is False:
        out.append("partial result: not every strategy has run yet")
    return out


def _human_rows(result: dict, columns: list[str]) -> list[list[dict]]:
    """The human row's cells (:func:`human_entries`), or none without a human row."""
    if not result.get("human"):
        return []
    entries = human_entries(result, columns)
    return [[cell(e, cls="name human") if c == "strategy" else figure_cell(*e) if isinstance(e, tuple) else
             cell(e, cls="muted" if e in ("-", "(ceiling)") else "")
             for c, e in zip(columns, entries)]]


def _row_notes(result: dict) -> list[str]:
    """Per strategy: the compile summary, the repeat note, its warnings and first errors."""
    from personalign.compile_service import summary_line

    out = []
    for r in result["strategies"]:
        line = summary_line(r["name"], r.get("compile")) if isinstance(r.get("compile"), dict) else None
        out += [line] if line else []
        out += [f"{r['name']}: {r['repeat_note']}"] if r.get("repeat_note") else []
        out += [f"{r['name']}: {w}" for w in (r.get("errors") or [])[:3] + (r.get("warnings") or [])]
    return out + decision_lines(result)


def decision_lines(result: dict) -> list[str]:
    """One line per strategy whose compile fitted a decision rule: the rule and why it was chosen
    (over folds: how many folds chose each rule, and the first fold's reason); the command line
    prints them under its table, the page among its notes."""
    from collections import Counter

    out = []
    for row in result["strategies"]:
        rules = [r for r in row.get("decision_rules") or [] if isinstance(r, dict)]
        if not rules:
            continue
        first = rules[0]
        if len(rules) == 1:
            head = f"{row['name']}: decision rule {first.get('rule')} ({first.get('describe')})"
        else:
            counts = ", ".join(f"{k} x{n}" for k, n in Counter(str(r.get("rule")) for r in rules).most_common())
            head = f"{row['name']}: decision rule fitted in each of {len(rules)} folds: {counts}"
            head += f"; fold {first.get('group')}: {first.get('describe')}"
        out.append(head + (f"; why: {first['reason']}" if first.get("reason") else ""))
    return out


def summary_table(result: dict) -> dict[str, Any]:
    """The summary table of a compare result (single split or ``--cv groups``), columns as the CLI
    prints them, with the notes printed under it."""
    return _cv_summary(result) if is_cv(result) else _single_summary(result)


WIDE_GROUPS = 12
"""Up to this many groups the per-group table has a column per group; more, a row per group."""


def group_table(result: dict) -> dict[str, Any] | None:
    """The per-group figures: ``--cv groups``, each held-out group's figure with its interval (the
    group's size in its label); single split, the per-group figures when the result has them
    (``<metric>_by_group``). None when there are none. Strategies are rows and groups columns up to
    :data:`WIDE_GROUPS` groups, the other way round beyond (``"tall": True``). Cells carry ``value``
    (for shading)."""
    key = result.get("metric", "f1")
    names = [r["name"] for r in result["strategies"]]
    figures: dict[str, dict[str, dict]] = {}  # group -> strategy -> cell
    if is_cv(result):
        gk = group_noun(result["group_key"])
        sizes = {str(g["group"]): g.get("n") for r in result["strategies"] for g in r["by_group"]}
        labels = {str(g): f"{g} (n={sizes.get(str(g))})" for g in result["groups"]}
        for r in result["strategies"]:
            for g in r["by_group"]:
                ci = g.get(f"{key}_ci")
                c = cell(_num(g.get(key)), None if not ci else f"[{_num(ci[0], '.2f')}, {_num(ci[1], '.2f')}]", "fig")
                figures.setdefault(str(g["group"]), {})[r["name"]] = {**c, "value": g.get(key)}
        title = f"{key} on each held-out {gk} (fitted on the other {len(labels) - 1}) [95% CI]"
    else:
        for r in result["strategies"]:
            for g, v in (r.get(f"{key}_by_group") or {}).items():
                figures.setdefault(str(g), {})[r["name"]] = {**cell(_num(v)), "value": v}
        if not figures:
            return None
        labels = {g: g for g in figures}
        gk = (next((r.get("resampling") for r in result["strategies"] if r.get("resampling")), None) or {}).get("unit")
        title = (f"{key} per {gk or 'group'} on {result.get('split')} (single split: each group is scored by strategies "
                 "fitted on the train split)")
    h = result.get("human")
    if h and h["metric"] == key:  # the human ceiling per group, where the group has annotated rows
        per = ({str(g["group"]): (g[key], g.get(f"{key}_ci")) for g in h["by_group"]} if is_cv(result) else
               {str(g): (v, None) for g, v in (h.get(f"{key}_by_group") or {}).items()})
        for g, (v, ci) in per.items():
            if g in labels:
                c = cell(_num(v), None if not ci else f"[{_num(ci[0], '.2f')}, {_num(ci[1], '.2f')}]", "fig")
                figures.setdefault(g, {})["human"] = {**c, "value": v}
        names.append("human")
    empty = cell("-")
    if len(labels) <= WIDE_GROUPS:
        rows = [[cell(n, cls="name")] + [figures.get(g, {}).get(n, empty) for g in labels] for n in names]
        return {"title": title, "columns": ["strategy", *labels.values()], "rows": rows, "notes": [], "tall": False}
    rows = [[cell(label, cls="name")] + [figures.get(g, {}).get(n, empty) for n in names] for g, label in labels.items()]
    return {"title": title + f"; {len(labels)} groups", "columns": [gk or "group", *names], "rows": rows, "notes": [],
            "tall": True}


# --- the human row (the human ceiling, where the evaluated rows carry annotations of >= 3 people) ---


def share_text(row: dict) -> str:
    """A strategy's objective as a share of the human ceiling (``share_of_human``): ``91%``, else ``-``."""
    share = row.get("share_of_human")
    return "-" if share is None else f"{share:.0%}"


def human_note(result: dict) -> str | None:
    """The line under a table with a human row: what the ceiling is, on which rows or groups, what
    its interval resamples, and what "of human" divides (None without a human row)."""
    h = result.get("human")
    if not h:
        return None
    metric = h["metric"]
    from personalign.labels.ceiling import duplicates_text

    who = (f"{h['n']} judgments by {h['n_annotators']} annotators, ties {h.get('ties', 'negative')}"
           f"{duplicates_text(h.get('duplicates'))}")
    if is_cv(result):
        gk = group_noun(result["group_key"])
        without = h.get("groups_without") or []
        return (f"human: on the held-out rows of each {gk} with >= {h['min_annotators']} annotators, each annotator's "
                f"{metric} against the strict majority of the others ({who}); headline: the mean of the "
                f"{len(h['groups'])} per-{gk} ceilings" + (f" (no annotations: {', '.join(map(str, without))})"
                                                          if without else "")
                + f"; of human: each strategy's mean per-{gk} {metric} on the same rows / the human headline")
    unit = (h.get("resampling") or {}).get("unit", "item")
    return (f"human: each annotator's {metric} against the strict majority of the others on the {h['rows_covered']} "
            f"of {h['rows']} rows with >= {h['min_annotators']} annotators ({who}); its interval resamples {unit}; "
            f"of human: each strategy's {metric} on those rows / the human {metric}")


SHARE_COLUMN = "of human"
"""The summary table's column of each strategy's objective as a share of the human ceiling."""


def human_entries(result: dict, columns: list[str]) -> list:
    """The human row of the summary table, one entry per column of ``columns``: a figure ``(value,
    ci, range)`` (printed with :func:`~personalign.metrics.cluster.format_figure`) or a text. The
    ceiling goes in the metric's column (single split: the objective's column when the objective is
    not the metric; ``--cv groups``: the headline, pooled and worst columns, its metric named when it
    is not the table's); the rate column holds the annotators' own yes-rate."""
    h, key = result["human"], result.get("metric", "f1")
    metric, pos = h["metric"], result.get("positive_name", "yes")
    named = "" if metric == key else f" ({metric})"
    if is_cv(result):
        gk = group_noun(result["group_key"])
        hd, pooled = h["headline"], h["pooled"]
        known = {f"mean per-{gk} {key} (headline)": (hd["value"], hd["ci"], hd["range"]),
                 f"pooled {key}": (pooled["value"], pooled["ci"], pooled["range"]),
                 f"worst {gk}": f"{h['worst']['value']:.3f} ({h['worst']['group']}){named}"}
        if named:
            known = {c: (format_figure(*v) + named if isinstance(v, tuple) else v) for c, v in known.items()}
    else:
        known = {f"{key} [95% CI]": (h[metric], h.get(f"{metric}_ci"), h.get(f"{metric}_range")) if not named else "-",
                 f"{result.get('objective')} (objective)": format_figure(h[metric], h.get(f"{metric}_ci"),
                                                                           h.get(f"{metric}_range"))}
    known.update({"strategy": "human", SHARE_COLUMN: "(ceiling)",
                  f"{pos}-rate": "-" if h.get("yes_rate") is None else f"{h['yes_rate']:.1%}"})
    return [known.get(c, "-") for c in columns]
