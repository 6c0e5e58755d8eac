"""Write the results page: one self-contained HTML file (inline CSS and JavaScript, the chart as a
``data:`` PNG, the rows as an inline JSON block) that opens from disk and makes no request: its
Content-Security-Policy allows no source but the page itself (``default-src 'none'``; images only
from ``data:``; only the page's own script, by a per-page nonce, runs). Every piece of text from
the result or the data is escaped (HTML-escaped in the tables; in the JSON block ``<``, ``>`` and
``&`` are ``\\u`` escapes; the grid sets ``textContent``), so an input holding ``<script>`` shows
as text."""

from __future__ import annotations

import base64
import html
import json
import secrets
from importlib import resources
from typing import Any

from personalign.results_page.chart import chart_png
from personalign.results_page.rows import number
from personalign.results_page.tables import group_table, is_cv, summary_table

__all__ = ["page_html", "grid_data", "display"]


def display(value: Any) -> str:
    """A row value as the grid shows it: text as is, ``true``/``false``/``null``, numbers, and
    lists/objects as JSON text."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _asset(name: str) -> str:
    return resources.files("personalign.results_page").joinpath("assets", name).read_text(encoding="utf-8")


def _json_block(obj: Any) -> str:
    """``obj`` as JSON safe inside ``<script type="application/json">`` (no ``</script>``, no ``<!--``)."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e") \
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def grid_data(result: dict) -> dict[str, Any]:
    """The grid's data (columnar, display strings made here): ``fields`` (input names), ``gold_name``,
    ``group_name``, ``strategies`` ``[{"name", "has_scores", "has_correct"}]``, per row ``ids``,
    ``groups``, ``inputs`` (list per row), ``gold``, and per strategy ``pred``, ``score``,
    ``correct``, ``failed`` (row indices) and ``err`` (``{index: message}``). ``result`` must hold
    the rows contract (:func:`personalign.results_page.rows.with_rows`)."""
    from personalign.redaction import redactor

    redact = redactor()

    rows, fields = result["rows"], result.get("row_fields") or {}
    names = fields.get("inputs") or list(dict.fromkeys(k for r in rows[:1] for k in r["inputs"]))
    strategies, pred, score, correct, failed, err = [], [], [], [], [], []
    for s in result["strategies"]:
        preds = s["predictions"]
        errors = {str(k): str(v) for k, v in (s.get("row_errors") or {}).items()}
        pred.append([None if p is None else redact(display(p)) for p in preds])
        score.append(None if s.get("scores") is None else [number(v) for v in s["scores"]])  # NaN: none
        correct.append(None if s.get("correct") is None else [number(v) for v in s["correct"]])
        failed.append([i for i, p in enumerate(preds) if p is None or str(i) in errors])
        err.append(errors)
        strategies.append({"name": s["name"], "has_scores": any(v is not None for v in s.get("scores") or []),
                           "has_correct": any(v is not None for v in s.get("correct") or [])})
    return {"kind": result.get("kind", "binary"), "cv": is_cv(result), "fields": names,
            "gold_name": fields.get("gold") or "gold", "group_name": fields.get("group") or result.get("group_key"),
            "output_name": fields.get("output") or "output", "strategies": strategies,
            "ids": [str(r["id"]) for r in rows], "groups": [r.get("group") for r in rows],
            "inputs": [[redact(display(r["inputs"].get(k))) for k in names] for r in rows],
            "gold": [redact(display(r.get("gold"))) for r in rows],
            "pred": pred, "score": score, "correct": correct, "failed": failed, "err": err,
            "source": result.get("rows_source")}


def _cell_html(c: dict, tag: str = "td") -> str:
    style = ""
    value = c.get("value")
    if isinstance(value, (int, float)) and value == value:
        style = f' style="--v:{max(0.0, min(1.0, float(value))):.3f}"'
    sub = f'<span class="sub">{html.escape(c["sub"])}</span>' if c.get("sub") else ""
    cls = f' class="{html.escape(c["cls"] + (" shade" if style else ""))}"' if c.get("cls") or style else ""
    return f"<{tag}{cls}{style}>{html.escape(c['text'])}{sub}</{tag}>"


def _table_html(table: dict, tid: str) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table["columns"])
    body = "".join("<tr>" + _cell_html(r[0], "th") + "".join(_cell_html(c) for c in r[1:]) + "</tr>"
                   for r in table["rows"])
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in table.get("notes") or [])
    box = "scroll tall" if table.get("tall") else "scroll"
    return (f'<p class="caption">{html.escape(table["title"])}</p><div class="{box}"><table id="{tid}" class="figs">'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
            + (f'<ul class="notes">{notes}</ul>' if notes else ""))


def _meta(result: dict, source: str | None) -> str:
    rec = result.get("run_record") or {}
    uses_lm = result.get("adapter") or (is_cv(result) and result.get("lm"))
    items = [("evaluated", "every row, leave-one-group-out by " + str(result.get("group_key")) if is_cv(result)
              else f"split {result.get('split')}; fitted on {result.get('train_split')} (n={result.get('n_train')})"),
             ("model", result.get("lm") if uses_lm else "none (no strategy calls an LM)"),
             ("seed", result.get("seed")), ("run", result.get("started") or rec.get("date")),
             ("commit", str(rec.get("git_commit") or "")[:10] or None),
             ("data", f"{result.get('data')} (sha256 {str(result.get('data_sha256') or '')[:12]})"),
             ("command", rec.get("command")), ("result", source or result.get("result_file"))]
    wide = {"data", "command", "result"}
    return "".join(f'<div{" class=wide" if k in wide else ""}><dt>{html.escape(k)}</dt><dd>{html.escape(str(v))}</dd></div>'
                   for k, v in items if v not in (None, ""))


def page_html(result: dict, *, source: str | None = None) -> str:
    """The whole page for ``result`` (a compare result holding the rows contract). ``source``: the
    result file's path, shown in the header."""
    nonce = secrets.token_urlsafe(16)
    summary = summary_table(result)
    groups = group_table(result)
    png = base64.b64encode(chart_png(result)).decode("ascii")
    grid = grid_data(result)
    kind = "leave-one-group-out" if is_cv(result) else "single split"
    title = f"{result.get('stage')} · compare ({kind}) · personalign"
    csp = f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'nonce-{nonce}'"
    group_section = "" if groups is None else f'<section id="groups"><h2>Per group</h2>{_table_html(groups, "group-table")}</section>'
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="personalign view">
<title>{html.escape(title)}</title>
<style>{_asset("page.css")}</style></head>
<body>
<header><h1>{html.escape(str(result.get("stage")))} <span class="kind">compare · {html.escape(kind)} · n={html.escape(str(result.get("n")))}</span></h1>
<dl class="meta">{_meta(result, source)}</dl>
<nav><a href="#summary">Summary</a>{'' if groups is None else '<a href="#groups">Per group</a>'}<a href="#chart">Chart</a><a href="#rows">Rows</a></nav></header>
<main>
<section id="summary"><h2>Summary</h2>{_table_html(summary, "summary-table")}</section>
{group_section}
<section id="chart"><h2>Chart</h2><img class="chart" alt="{html.escape(summary["title"])}: one bar per strategy with its interval, one dot per group" src="data:image/png;base64,{png}"></section>
<section id="rows"><h2>Rows</h2>
<div class="controls" id="controls"></div>
<p class="legend"><span class="mark ok">✓</span> right <span class="mark bad">✗</span> wrong <span class="mark part">~</span> partly right (score in (0, 1)) <span class="mark fail">⚠</span> failed (no output; scored as wrong) <span class="mark unk">?</span> not scored in this result · click a row to show its full text</p>
<p id="grid-count" class="count" data-count="0"></p>
<div class="scroll grid-wrap"><table id="grid"><thead></thead><tbody></tbody></table></div>
<div class="pager" id="pager"></div>
<noscript><p>The row grid needs JavaScript; the tables above do not.</p></noscript>
</section></main>
<script type="application/json" id="page-data">{_json_block(grid)}</script>
<script nonce="{nonce}">{_asset("grid.js")}</script>
</body></html>
"""
