"""``personalign view RESULT.json``: the results page of a compare run, one self-contained HTML file
(:func:`personalign.results_page.render_results_page`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def view(
    result: Path = typer.Argument(..., metavar="RESULT.json", help="A compare result file (runs/compare/*.json).",
                                  show_default=False),
    out: Optional[Path] = typer.Option(None, "--out", help="The HTML file to write (default: beside the result, .html); never a file the page reads (result, data, stage)."),
    open_: bool = typer.Option(False, "--open", help="Open the page in the default browser once written."),
    data: Optional[Path] = typer.Option(None, "--data", help="The run's data file, for a result written before rows were "
                                        "recorded whose data path no longer resolves (checked against its sha256)."),
    stage: Optional[str] = typer.Option(None, "--stage", help="The run's stage (name, .toml, module:ATTR), when it "
                                        "cannot be found from the result."),
) -> None:
    """Write the results page of a compare run: summary and per-group tables, the chart, and a grid of
    every evaluated row (inputs, gold, each strategy's output, score, right or wrong) with filters.
    Offline: one HTML file, no request; opens from disk."""
    from personalign.data import check_input

    check_input(result, what="result file")
    page = write_page(result, out, data=data, stage=stage)
    typer.echo(f"results page: {page}")
    if open_:
        import webbrowser

        webbrowser.open(page.resolve().as_uri())


def write_page(result: Path | str, out: Path | None = None, *, data: Path | None = None,
               stage: str | None = None) -> Path:
    """The results page of the result file ``result`` (:func:`personalign.results_page.render_results_page`),
    for ``view`` and ``compare --html``; the result file is only read, so it is kept whatever fails.

    Raises:
        PersonalignError: what ``render_results_page`` raises (a :class:`~personalign.errors.DataError`
            names the result file and the field: ``error: FILE: field '...': ...``); any other failure
            as a DataError naming ``result`` (:func:`personalign.cli._output.failing_on`).
    """
    from personalign.cli._output import failing_on
    from personalign.results_page import render_results_page

    with failing_on(result, "the results page"):
        return render_results_page(result, out, data=data, stage=stage)
