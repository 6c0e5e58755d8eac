"""Checks of what the results page reads and writes, for a result file that may be hostile:

* :func:`check_types` -- every field the page reads has its type (:data:`RESULT_FIELDS`,
  :data:`STRATEGY_FIELDS`, :data:`ROW_FIELDS`, :data:`RUN_RECORD_FIELDS`): ``row_fields`` an object
  of names, ``strategies.0.row_errors`` an object, ``warnings`` a list, ``stage`` text, ...;
* :func:`check_figures` -- the result's figures are numbers (finite int/float, or null) where the
  tables and the chart format them as numbers; ``kind`` and ``cv`` are known values;
* :func:`check_data_file` -- the data file a result names is a regular file (or a data folder), never
  a FIFO, device or socket (reading one blocks forever or never ends);
* :func:`check_not_an_input` -- the page's ``--out`` is none of the files the page reads (the result
  file, the data file, the stage file): writing it would replace them; :func:`page_inputs` lists
  those files for a result (and the run's chart, which the result names).

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

__all__ = ["check_types", "check_figures", "check_data_file", "check_not_an_input", "page_inputs", "KINDS",
           "RESULT_FIELDS", "STRATEGY_FIELDS", "ROW_FIELDS", "RUN_RECORD_FIELDS", "NUMBER_FIELDS", "INTERVAL_FIELDS",
           "FREE_FIELDS"]

KINDS = ("binary", "multiclass", "scored")
"""The stage kinds a result may record (``StageSpec.kind``); the page's tables differ by kind."""

INTEGER_FIELDS = frozenset({"n", "seed", "n_boot"})
"""Fields the page turns into an int (the row count, the sampling seed)."""

INTERVAL_FIELDS = ("ci", "range")
"""Fields (also as a ``_ci`` / ``_range`` suffix) holding null or ``[low, high]``, two numbers."""

FREE_FIELDS = frozenset({"compile", "run_record", "predictions", "scores", "correct", "row_errors", "errors",
                         "warnings", "config", "details", "groups", "group", "name", "metric", "against", "unit", "test",
                         "statistic", "decision_rules"})
"""Fields not checked as figures: free values (``compile.details``), per-row arrays (the grid
reads those with :func:`personalign.results_page.rows.number`, tolerating anything) and names."""

_COMPARISONS = frozenset({"vs_first", "vs_uncompiled", "compile_summary"})  # their "objective" is a name

_NONE = type(None)
_TEXT = (str, _NONE)
_OBJECT = (dict, _NONE)
_LIST = (list, _NONE)

RESULT_FIELDS: dict[str, tuple[type, ...]] = {
    "stage": (str,), "objective": _TEXT, "positive_name": (str, int, float, bool, _NONE), "data": _TEXT,
    "data_sha256": _TEXT, "lm": _TEXT, "reference": _TEXT, "stage_ref": _TEXT, "started": _TEXT, "split": _TEXT,
    "train_split": _TEXT, "adapter": _TEXT, "chart_file": _TEXT, "result_file": _TEXT,
    "group_key": _TEXT, "rows_source": _TEXT, "strategy_names": _LIST, "groups": _LIST, "rows_files": _LIST,
    "row_fields": _OBJECT, "run_record": _OBJECT, "complete": (bool, _NONE)}
"""The types of a result's top-level fields the page reads (absent is allowed; ``rows`` is
checked by :func:`personalign.results_page.rows.check_rows`, figures by :func:`check_figures`)."""

STRATEGY_FIELDS: dict[str, tuple[type, ...]] = {
    "name": (str,), "predictions": (list,), "scores": _LIST, "correct": _LIST, "row_errors": _OBJECT,
    "errors": _LIST, "warnings": _LIST, "compile": _OBJECT, "repeat_note": _TEXT, "resampling": _OBJECT,
    "vs_first": _OBJECT, "vs_uncompiled": _OBJECT, "decision_rules": _LIST, "by_group": _LIST, "headline": (dict,),
    "pooled": (dict,)}
"""The types of a strategy row's fields (``*_by_group`` figures: an object or null, see :func:`check_figures`)."""

ROW_FIELDS: dict[str, tuple[type, ...]] = {"inputs": _LIST, "gold": _TEXT, "group": _TEXT, "output": _TEXT}
"""The types of ``row_fields`` (the grid's column names)."""

RUN_RECORD_FIELDS: dict[str, tuple[type, ...]] = {"command": _TEXT, "git_commit": _TEXT, "date": _TEXT}
RESAMPLING_FIELDS: dict[str, tuple[type, ...]] = {"unit": (str,), "n_clusters": (int, _NONE), "n_boot": (int, _NONE)}
"""The types of a ``resampling`` object's fields (the page names its unit)."""
MAX_NAME = 200
"""Characters of a strategy's name the page accepts (it is a column, a label and an id)."""
"""The types of the ``run_record`` fields the page shows."""

_ITEMS: dict[str, type] = {"strategy_names": str, "row_fields.inputs": str, "rows_files": str, "by_group": dict}
"""The item type of the list fields whose items the page uses as names or objects."""

_WANTED = {str: "text", dict: "an object", list: "a list", bool: "a boolean", int: "a whole number",
           float: "a number", _NONE: "null"}


MAX_FIGURE = 1e15
"""The largest magnitude of a figure the page draws (a score, a count, seconds): beyond it a chart's
error bars overflow (``1e308`` gave matplotlib's ``ValueError``)."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and abs(value) <= MAX_FIGURE


def _type(value: Any) -> str:
    return {str: "a string", bool: "a boolean", list: "a list", dict: "an object", int: "a whole number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _fields(obj: dict, schema: dict[str, tuple[type, ...]], path: str, where) -> None:
    for key, types in schema.items():
        if key not in obj:
            continue
        value, field = obj[key], f"{path}{key}"
        if not isinstance(value, types):
            wanted = " or ".join(_WANTED[t] for t in types)
            raise DataError(where, None, field, f"expected {wanted}, got {_type(value)}")
        item = _ITEMS.get(field.split(".", 2)[-1] if path.startswith("strategies.") else field)
        for i, v in enumerate(value if item is not None and isinstance(value, list) else []):
            if not isinstance(v, item):
                raise DataError(where, None, f"{field}.{i}", f"expected {_WANTED[item]}, got {_type(v)}")


def check_types(result: dict, where: str | os.PathLike = "result") -> None:
    """Check the type of every field of ``result`` the page reads (an absent field is left to the
    caller): the top level by :data:`RESULT_FIELDS`, ``row_fields`` by :data:`ROW_FIELDS`,
    ``run_record`` by :data:`RUN_RECORD_FIELDS`, each strategy row by :data:`STRATEGY_FIELDS`
    (and its ``*_by_group`` an object or null).

    Raises:
        DataError: naming ``where`` and the dotted field (``strategies.0.row_errors``), what it
            should be and what it is.
    """
    _fields(result, RESULT_FIELDS, "", where)
    _fields(result.get("row_fields") or {}, ROW_FIELDS, "row_fields.", where)
    _fields(result.get("run_record") or {}, RUN_RECORD_FIELDS, "run_record.", where)
    if isinstance(result.get("resampling"), dict):
        _fields(result["resampling"], RESAMPLING_FIELDS, "resampling.", where)
    for k, row in enumerate(result["strategies"]):
        _fields(row, STRATEGY_FIELDS, f"strategies.{k}.", where)
        if isinstance(row.get("resampling"), dict):
            _fields(row["resampling"], RESAMPLING_FIELDS, f"strategies.{k}.resampling.", where)
        if isinstance(row.get("name"), str) and len(row["name"]) > MAX_NAME:
            raise DataError(where, None, f"strategies.{k}.name", f"longer than {MAX_NAME} characters "
                                                                 f"({len(row['name']):,})")
        for key, value in row.items():
            if str(key).endswith("_by_group") and not isinstance(value, (dict, _NONE)):
                raise DataError(where, None, f"strategies.{k}.{key}", f"expected an object or null, got {_type(value)}")


def _figure(value: Any, field: str, where) -> None:
    if value is None or _is_number(value):
        return
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        raise DataError(where, None, field, f"{value:g} is beyond ±{MAX_FIGURE:g}")
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
    _walk({k: result[k] for k in ("n", "seed", "n_boot", "n_groups", "n_train", "gold_yes_rate") if k in result}, "",
          numbers,
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
        except (OSError, ValueError):  # unreadable, or a NUL in a recorded path: not the same file
            same = False
        if same:
            raise ArgumentError(argument, f"{out} is {p}, a file the page reads or the run wrote; give another "
                                          "path for the page")


def _stage_file(ref: str) -> Path | None:
    """The file a stage reference reads: ``x.toml``, the ``file.py`` of ``file.py:ATTR``, or a
    built-in stage's ``stage.toml`` (by name); None for anything else (``module:ATTR``)."""
    from personalign.stages.ref import BUILTIN_DIR

    left = ref.rpartition(":")[0]
    if left.endswith(".py"):
        return Path(left)
    if ref.endswith(".toml"):
        return Path(ref)
    return BUILTIN_DIR / ref / "stage.toml" if ref.isidentifier() else None


def page_inputs(result: dict, source: str | os.PathLike | None, *, data: str | os.PathLike | None = None,
                stage: str | None = None) -> list[Path]:
    """The files of a run that the page's ``--out`` must never be (for :func:`check_not_an_input`):
    the result file (``source`` and its recorded ``result_file``), the run's chart (``chart_file``),
    its data file (``data``, as given and the result's ``data`` as recorded) and stage file
    (``stage``, the result's ``stage_ref`` and ``stage`` name), each relative path both from the
    current folder and from the three folders above the result file (where the page looks for
    them, :func:`personalign.results_page.rows.with_rows`)."""
    above = list(Path(source).resolve().parents)[:3] if source is not None else []

    def where(text: str | os.PathLike | None) -> list[Path]:
        try:
            p = Path(text).expanduser() if text else None
        except (RuntimeError, ValueError):  # ~unknown-user
            return []
        if p is None:
            return []
        return [p] if p.is_absolute() else [p, *(base / p for base in above)]

    out = where(source) + where(data)
    for key in ("result_file", "chart_file", "data"):
        out += where(result.get(key) if isinstance(result.get(key), str) else None)
    for ref in (stage, result.get("stage_ref"), result.get("stage")):
        file = _stage_file(ref) if isinstance(ref, str) and ref else None
        out += where(file)
    return out
