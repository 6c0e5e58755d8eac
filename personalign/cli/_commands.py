"""``compare``, ``compile``, ``eval`` and ``stages``: each calls its public verb
(:func:`personalign.compare`, :func:`personalign.compile`, :func:`personalign.evaluate`) with the
callbacks its flags ask for, and prints the result (``--json``: one JSON object)."""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path

from personalign.cli._options import callbacks, cost_hook, model_args
from personalign.cli._output import failing_on, print_json


def _console():
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=180)


def _say(lines) -> None:
    console = _console()
    for line in lines:
        console.print(line, markup=False, highlight=False) if isinstance(line, str) else console.print(line)


def run_stages(*, json_out: bool) -> None:
    """The built-in stages (strategies, metric, summary) and the installed ones, by name only."""
    from personalign.stages import ENTRY_POINT_GROUP, all_stages, installed_entry_points

    rows = []
    for name, st in all_stages().items():
        rows.append({"stage": name, "source": "built-in", "summary": st.summary, "kind": st.kind,
                     "metric": st.metric_name, "objective": st.objective.name,
                     "default_strategies": st.default_strategies, "strategies": st.registry.names()})
    # installed stages are listed by name and target only: importing them would run their code
    for name, target in installed_entry_points().items():
        rows.append({"stage": name, "source": f"entry point {ENTRY_POINT_GROUP}: {target}", "summary": None,
                     "kind": None, "metric": None, "objective": None, "default_strategies": None, "strategies": None})
    if json_out:
        print_json(rows)
        return
    from rich.table import Table

    table = Table(title="stages")
    for col in ("stage", "metric", "strategies", "summary"):
        table.add_column(col)
    for r in rows:
        if r["source"] != "built-in":
            table.add_row(r["stage"], "-", f"(not imported: `personalign stage validate {r['stage']}`)", r["source"])
            continue
        table.add_row(r["stage"], f"{r['metric']} ({r['kind']})", ", ".join(r["strategies"]), r["summary"])
    _console().print(table)


def run_compare(*, stage, data, split, train_split, strategies, model, seed, n_boot, limit, cv, repeats, temperature,
                json_out, tracking, html: bool = False, train_limit=None, cost=()) -> None:
    """Run the comparison, then show it: the table (or ``--json``), the page (``--html``), the files.

    The result file is written by the verb before anything here reads it back: a page or a chart
    that fails is one ``error: FILE: ...`` line naming it (exit 2), after everything else was shown.
    """
    import personalign
    from personalign.errors import DataError, PersonalignError
    from personalign.settings import runs_dir

    report = personalign.compare(stage, strategies, data, split=split, train_split=train_split, cv=cv,
                                 **model_args(*model), seed=seed, n_boot=n_boot, limit=limit, repeats=repeats,
                                 temperature=temperature, out_dir=runs_dir() / "compare", callbacks=callbacks(**tracking),
                                 progress=not json_out, train_limit=train_limit, on_cost=cost_hook(*cost))
    result = report.to_dict()
    file = result.get("result_file")
    page, failed = None, None
    if html and file:
        from personalign.cli.view import write_page

        try:
            page = write_page(file)
        except PersonalignError as exc:  # shown last: the table and the files come first
            failed = exc
    if json_out:
        per_row = ("predictions", "scores", "correct", "row_errors")  # every row's: in the result file
        summary = {**{k: v for k, v in result.items() if k != "rows"}, **({"results_page": str(page)} if page else {}),
                   "strategies": [{k: v for k, v in row.items() if k not in per_row} for row in result["strategies"]]}
        print_json(summary, default=str)
    else:
        with failing_on(file, "printing the table"):
            _show_compare(report, result, page, tracking)
    if failed is not None:
        raise failed
    if result.get("chart_error"):
        raise DataError(file, None, "chart_file", f"the chart could not be drawn: {result['chart_error']}")


def _show_compare(report, result: dict, page, tracking: dict) -> None:
    """The comparison's table, each row's first errors and warnings, and the files it wrote."""
    _say(report.renderables())
    for row in result["strategies"]:
        if result.get("cv") != "groups":
            for line in row.get("errors", [])[:3] + row.get("warnings", []):
                sys.stderr.write(f"{row['name']}: {line}\n")
    results = tracking.get("results")
    lines = [f"results: {result.get('result_file')}", f"chart: {result.get('chart_file')}"]
    lines += [f"results page: {page}"] if page is not None else []
    lines += [f"run record: {results}"] if results is not None else []
    if result.get("mlflow_run_id"):
        from personalign.redaction import redact

        uri = redact(tracking.get("tracking_uri")) if tracking.get("tracking_uri") else None
        lines.append(f"MLflow run {result['mlflow_run_id']}" + (f" in {uri}" if uri else "")
                     + f" (view: personalign ui{f' --tracking-uri {uri}' if uri else ''})")
    _say(lines)


def run_compile(*, stage, strategy, optimizer, data, train_split, model, seed, out, json_out, tracking,
                train_limit=None, cost=()) -> None:
    import personalign
    from personalign.data import check_out_dir
    from personalign.settings import runs_dir

    check_out_dir(out)
    if out is None:  # the default folder: the stage and strategy, stamped (never an existing one)
        st = personalign.resolve_stage(stage)
        name = (strategy or st.default_strategies.split(",")[0].strip()) + (f"-{optimizer}" if optimizer else "")
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        out = runs_dir() / "programs" / f"{st.name}-{name.replace('@', '-')}-{stamp}"
    compiled = personalign.compile(stage, strategy, data, optimizer=optimizer, train_split=train_split,
                                   **model_args(*model), seed=seed, out=out, callbacks=callbacks(**tracking),
                                   train_limit=train_limit, progress=not json_out, on_cost=cost_hook(*cost))
    if json_out:
        print_json(compiled.to_dict(), default=str)
        return
    _say([str(compiled)])


def run_eval(*, stage, program: Path, data, split, model, seed, n_boot, limit, json_out, tracking, cost=()) -> None:
    import personalign

    report = personalign.evaluate(stage, program, data, split=split, **model_args(*model), seed=seed, n_boot=n_boot,
                                  limit=limit, callbacks=callbacks(**tracking), progress=not json_out,
                                  on_cost=cost_hook(*cost))
    for warning in report.data.get("warnings", []):
        sys.stderr.write(warning + "\n")
    if json_out:
        print_json(report.to_dict(), default=str)
        return
    _say(report.renderables()[len(report.data.get("warnings", [])):])


__all__ = ["run_compare", "run_compile", "run_eval", "run_stages"]
