"""Checks of what the results page reads and writes, for a result file that may be hostile:

* :func:`check_figures` -- the result's figures are numbers (finite int/float, or null) where the
  tables and the chart format them as numbers; ``kind`` and ``cv`` are known values;
* :func:`check_data_file` -- the data file a result names is a regular file (or a data folder), never
  a FIFO, device or socket (reading one blocks forever or never ends);
* :func:`check_not_an_input` -- the page's ``--out`` is none of the files the page reads (the result
  file, the data file, the stage file): writing it would replace them.

Each raises one line: :class:`~personalign.errors.DataError` naming the result file and the dotted
field (``strategies.0.f1``), or :class:`~personalign.errors.ArgumentError` naming the flag.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Iterable

from personalign.errors import ArgumentError, DataError
from personalign.evaluation import NUMBER_FIELDS

__all__ = ["check_figures", "check_data_file", "check_not_an_input", "KINDS", "NUMBER_FIELDS", "INTERVAL_FIELDS",
           "FREE_FIELDS"]

KINDS = ("binary", "multiclass", "scored")
"""The stage kinds a result may record (``StageSpec.kind``); the page's tables differ by kind."""

INTEGER_FIELDS = frozenset({"n", "seed"})
"""Fields the page turns into an int (the row count, the sampling seed)."""

INTERVAL_FIELDS = ("ci", "range")
"""Fields (also as a ``_ci`` / ``_range`` suffix) holding null or ``[low, high]``, two numbers."""

FREE_FIELDS = frozenset({"compile", "run_record", "predictions", "scores", "correct", "row_errors", "errors",
                         "warnings", "config", "details", "groups", "group", "name", "metric", "against", "unit", "test",
                         "statistic"})
"""Fields not checked as figures: free values (``compile.details``), per-row arrays (the grid
reads those with :func:`personalign.results_page.rows.number`, tolerating anything) and names."""

_COMPARISONS = frozenset({"vs_first", "vs_uncompiled"})


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _type(value: Any) -> str:
    return {str: "a string", bool: "a boolean", list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def _figure(value: Any, field: str, where) -> None:
    if value is not None and not _is_number(value):
        raise DataError(where, None, field, f"expected a number or null, got {_type(value)}")


def _interval(value: Any, field: str, where) -> None:
    if value is not None and not (isinstance(value, list) and len(value) == 2 and all(map(_is_number, value))):
        raise DataError(where, None, field, "expected null or [low, high] (two numbers)")


def _walk(obj: Any, path: str, numbers: frozenset, where) -> None:
    """Check every figure field in ``obj`` (a strategy row, the human row, or a part of one)."""
    if isinstance(obj, list):
        for i, item in enumerate(obj):
            _walk(item, f"{path}.{i}", numbers, where)
        return
    if not isinstance(obj, dict):
        return
    for key, value in obj.items():
        field = f"{path}.{key}" if path else str(key)
        if not isinstance(key, str) or key in FREE_FIELDS:
            continue
        if key in INTERVAL_FIELDS or key.endswith(("_ci", "_range")):
            _interval(value, field, where)
        elif key.endswith("_by_group") and isinstance(value, dict):
            for g, v in value.items():
                _figure(v, f"{field}.{g}", where)
        elif key == "diff" and isinstance(value, dict):
            _walk(value, field, numbers, where)
        elif key in numbers:
            _figure(value, field, where)
            if key in INTEGER_FIELDS and value is not None and not isinstance(value, int):
                raise DataError(where, None, field, "expected a whole number")
        elif isinstance(value, (dict, list)):  # a comparison's "objective" is the objective's name
            _walk(value, field, numbers - {"objective"} if key in _COMPARISONS else numbers, where)


def check_figures(result: dict, where: str | os.PathLike = "result") -> None:
    """Check ``result``'s figures before the page formats them: in every strategy row and the human
    row, the fields of :data:`personalign.evaluation.NUMBER_FIELDS` (the result's own list, imported
    here) and the result's ``metric`` are a finite number or
    null, intervals (:data:`INTERVAL_FIELDS`) null or two numbers, ``*_by_group`` values numbers;
    the top-level ``n`` (a whole number >= 0), ``seed``, ``n_groups``, ``n_train``, ``gold_yes_rate``
    likewise; ``kind`` one of :data:`KINDS` (default ``binary``), ``cv`` null or ``"groups"``,
    ``metric`` text.

    Raises:
        DataError: naming ``where`` and the dotted field (``strategies.0.f1``) and what is wrong.
    """
    kind = result.get("kind", "binary")
    if kind not in KINDS:
        raise DataError(where, None, "kind", f"expected one of {', '.join(KINDS)}, got {str(kind)[:40]!r}")
    if result.get("cv") not in (None, "groups"):
        raise DataError(where, None, "cv", f"expected null or 'groups', got {str(result.get('cv'))[:40]!r}")
    metric = result.get("metric", "f1")
    if not isinstance(metric, str):
        raise DataError(where, None, "metric", f"expected the metric's name, got {_type(metric)}")
    numbers = NUMBER_FIELDS | {metric}
    _walk({k: result[k] for k in ("n", "seed", "n_groups", "n_train", "gold_yes_rate") if k in result}, "", numbers,
          where)
    if result["n"] is None or result["n"] < 0:
        raise DataError(where, None, "n", "expected a whole number >= 0")
    for k, row in enumerate(result["strategies"]):
        _walk(row, f"strategies.{k}", numbers, where)
    if result.get("human") is not None:
        if not isinstance(result["human"], dict):
            raise DataError(where, None, "human", f"expected an object or null, got {_type(result['human'])}")
        _walk(result["human"], "human", numbers | {str(result["human"].get("metric"))}, where)


def check_data_file(path: Path, where, field: str = "data") -> Path:
    """``path`` (the data file a result names, found) if it is a regular file or a folder (a data
    folder, as ``compare`` accepts); never opened here.

    Raises:
        DataError: naming the result file ``where``, ``field`` and what ``path`` is (a named pipe,
            a device, a socket: reading it would block or never end).
    """
    from personalign.data.files import check_input

    try:
        return check_input(path, allow_dir=True)
    except DataError as exc:
        raise DataError(where, None, field, f"{path}: {exc.problem}; the rows cannot be rebuilt from it") from None


def check_not_an_input(out: Path, inputs: Iterable[str | os.PathLike | None], argument: str = "out") -> None:
    """Refuse an output path that is one of ``inputs`` (symlinks resolved; the same file by
    :func:`os.path.samefile` when both exist, so a hard link counts too).

    Raises:
        ArgumentError: naming ``argument`` (``--out``) and the input it would replace.
    """
    target = Path(out).resolve()
    for item in inputs:
        if item is None:
            continue
        p = Path(item)
        try:
            same = os.path.samefile(target, p) if target.exists() and p.exists() else target == p.resolve()
        except OSError:
            same = False
        if same:
            raise ArgumentError(argument, f"{out} is {p}, a file the page reads; give another path for the page")
