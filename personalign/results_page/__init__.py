"""The results page of a compare run: ``personalign view RESULT.json`` writes one self-contained
HTML file -- the summary table, the per-group table, the chart and a grid of every evaluated row
(inputs, gold, each strategy's output, score and right/wrong, with filters and sorting) -- that
opens from disk with no request (:mod:`personalign.results_page.page`).

Entry points: :func:`render_results_page` (a result dict or file -> the page file) and
:func:`load_result` (read and check a result file).

The rows contract
-----------------
The grid needs every evaluated row. A compare result carries it as (``rows.page_rows``,
``rows.row_fields`` and ``rows.strategy_arrays`` build each part)::

    "row_fields": {"inputs": ["preference", "question", "option"],   # the stage's input fields, in order
                   "gold": "follows",                                # the label field
                   "group": "topic",                                 # the stage's group_key (or null)
                   "output": "follows"},                             # the output field
    "rows": [                                                        # evaluation order
        {"id": "pets-4",                   # the row's id field, else its position (text)
         "group": "pets",                  # its group_key value as text, or null
         "fold": null,                     # --cv groups: the group held out when it was scored
         "inputs": {"preference": "...", "question": "...", "option": "..."},   # JSON values as read
         "gold": true},                    # the label's value as read
        ...],
    "strategies": [{"name": "minilm-logreg",
                    "predictions": [true, false, ...],  # one per row (None: the row failed); first run if --repeats
                    "scores": [0.81, 0.12, ...],        # the strategy's own score per row (EvalOutcome.scores), null when none
                    "correct": [1.0, 0.0, ...],         # binary: 1/0, a failure counts wrong; scored: the metric in [0, 1]
                    "row_errors": {"17": "TimeoutError: ..."},   # every failed row, by index (EvalOutcome.error_at)
                    ...}, ...]

For ``--cv groups`` the rows are the pooled held-out rows, folds in ``groups`` order (the order
the strategies' pooled ``predictions`` already follow), each with ``fold`` = its group; the
strategies' ``scores``/``correct``/``row_errors`` are the folds' concatenated (indices offset).
Every per-row array has exactly ``len(rows)`` values (:func:`personalign.results_page.rows.check_rows`).

A result written before the contract has no ``rows``: the page rebuilds them from the data file
the result names (``data``; relative paths from the current folder, then from the folders above
the result file), refusing with one line when the file is missing or its sha256 differs from
``data_sha256``, and checking the rebuilt rows reproduce each strategy's accuracy. Such rows have
no ``scores``, and ``correct`` only for binary stages (:func:`personalign.results_page.rows.rows_from_data`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from personalign.errors import DataError
from personalign.results_page.checks import check_figures, check_types
from personalign.results_page.rows import check_rows, page_rows, row_fields, rows_from_data, strategy_arrays, with_rows

__all__ = ["render_results_page", "load_result", "check_result", "default_out", "page_rows", "row_fields",
           "strategy_arrays", "rows_from_data", "with_rows", "check_rows"]

_SINGLE = ("n", "predictions", "failures", "lm_calls", "seconds")
_CV = ("headline", "pooled", "worst", "by_group", "predictions")


def check_result(result: Any, where: str | os.PathLike = "result") -> dict:
    """Check ``result`` is a compare result the page can show; return it.

    Raises:
        DataError: naming ``where`` and the first missing or mistyped field (``strategies[1].headline``,
            ``strategies.0.f1`` for a figure that is not a number: :func:`~personalign.results_page.checks.check_figures`;
            ``strategies.0.row_errors`` for a field of another type: :func:`~personalign.results_page.checks.check_types`).
    """
    if not isinstance(result, dict):
        raise DataError(where, None, None, f"not a compare result: expected a JSON object, got {type(result).__name__}")
    for key in ("stage", "n", "strategies"):
        if key not in result:
            raise DataError(where, None, key, "missing: not a compare result (personalign compare writes them under "
                                              "runs/compare/)")
    if not isinstance(result["strategies"], list) or not result["strategies"]:
        raise DataError(where, None, "strategies", "expected a non-empty list of strategy rows")
    cv = result.get("cv") == "groups"
    for key in ("groups", "group_key", "n_groups") if cv else ("split",):
        if key not in result:
            raise DataError(where, None, key, "missing")
    metric = result.get("metric", "f1")
    for k, row in enumerate(result["strategies"]):
        if not isinstance(row, dict) or not isinstance(row.get("name"), str):
            raise DataError(where, None, f"strategies[{k}].name", "missing")
        for key in _CV if cv else (*_SINGLE, metric):
            if key not in row:
                raise DataError(where, None, f"strategies[{k}].{key}", "missing")
        if not isinstance(row["predictions"], list):
            raise DataError(where, None, f"strategies[{k}].predictions", "expected a list")
    check_types(result, where)
    check_figures(result, where)
    return result


def load_result(path: str | os.PathLike) -> dict:
    """Read a compare result file and check it (:func:`check_result`).

    Raises:
        DataError: missing or unreadable file, invalid JSON (with its line), not a compare result.
    """
    from personalign.data.files import read_json

    return check_result(read_json(path), path)


def default_out(result_path: str | os.PathLike) -> Path:
    """The page's default path: beside the result, ``.html`` instead of ``.json``."""
    return Path(result_path).with_suffix(".html")


def render_results_page(result: dict | str | os.PathLike, out: str | os.PathLike | None = None, *,
                        data: str | os.PathLike | None = None, stage=None) -> Path:
    """Write the results page of a compare result; return the page's path.

    Args:
        result: a compare result (the dict ``personalign.compare`` returns) or its JSON file.
        out: the HTML file to write (default: beside the result file, ``.html``; required for a dict
            without ``result_file``). Written atomically: a failure leaves no page. Never one of the
            files of the run (the result file, the data file, the stage file, the chart:
            :func:`~personalign.results_page.checks.page_inputs`).
        data: the data file, when the result has no ``rows`` and its recorded path no longer
            resolves (checked against ``data_sha256``).
        stage: the stage (name, ``.toml``, ``module:ATTR``), when it cannot be found from the result.

    Raises:
        DataError: not a compare result (a figure not a number, an unknown ``kind``); the rows
            contract broken; rows needed and the data file missing, not a regular file (a FIFO, a
            device) or changed since the run.
        ArgumentError: ``out`` is a folder, pipe or device, or one of the files the page reads.
        ConfigurationError: no ``out`` and no result file to put the page beside; stage not found.
    """
    from personalign.data.files import check_output, write_text
    from personalign.errors import ConfigurationError
    from personalign.results_page.checks import check_not_an_input, page_inputs
    from personalign.results_page.page import page_html

    path = None if isinstance(result, dict) else Path(result)
    result = check_result(result) if path is None else load_result(path)
    source = path or (Path(result["result_file"]) if result.get("result_file") else None)
    if out is None:
        if source is None:
            raise ConfigurationError("render_results_page: give out= (the result has no result_file to put the page beside)")
        out = default_out(source)
    target = check_output(out)
    inputs = page_inputs(result, source, data=data, stage=stage if isinstance(stage, str) else None)
    check_not_an_input(out, inputs)
    full = with_rows(result, result_path=source, data=data, stage=stage)
    text = page_html(full, source=None if source is None else str(source))
    check_not_an_input(out, [*inputs, *full.get("rows_files", [])])
    return write_text(target, text)
