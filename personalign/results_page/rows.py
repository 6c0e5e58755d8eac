"""The evaluated rows of a compare result: read from the result (the rows contract, see
:mod:`personalign.results_page`) or, for a result written before it, rebuilt from the data file the
result names -- re-reading the data, re-running nothing.

:func:`page_rows` and :func:`strategy_arrays` are what ``compare`` calls to emit the contract;
:func:`with_rows` is what the page calls to get it.
"""

from __future__ import annotations

import math
import re
import shlex
from pathlib import Path
from typing import Any, Sequence

from personalign.errors import DataError
from personalign.results_page.checks import check_data_file

__all__ = ["page_rows", "row_fields", "strategy_arrays", "with_rows", "rows_from_data", "check_rows", "number"]

_ERROR_LINE = re.compile(r"^example (\d+): (.*)$", re.S)


def page_rows(stage, examples: Sequence, folds: Sequence[str | None] | None = None) -> list[dict[str, Any]]:
    """The contract's top-level ``rows`` for ``examples`` in evaluation order.

    Args:
        stage: a :class:`~personalign.stages.Stage`.
        examples: the evaluated examples, in the order the strategies' ``predictions`` follow.
        folds: per example, the group held out when it was scored (``--cv groups``); None: single split.

    Returns:
        ``[{"id", "group", "fold", "inputs": {field: value}, "gold"}]``: ``id`` is the example's
        ``id`` (else its position, as text), ``group`` its ``stage.group_key`` value as text (None
        without one), ``inputs`` the stage's input fields as JSON values, ``gold`` the label's value.
    """
    from personalign.evaluation import jsonable

    key = stage.group_key
    out = []
    for i, ex in enumerate(examples):
        group = getattr(ex, key, None) if key else None
        try:
            gold = jsonable(stage.gold(ex))
        except Exception:  # noqa: BLE001 -- an unlabelled row has no gold
            gold = None
        out.append({"id": str(getattr(ex, "id", None) or i), "group": None if group is None else str(group),
                    "fold": None if folds is None else folds[i],
                    "inputs": {k: jsonable(getattr(ex, k, None)) for k in stage.inputs}, "gold": gold})
    return out


def row_fields(stage) -> dict[str, Any]:
    """The contract's ``row_fields``: ``{"inputs": [field, ...], "gold": label field, "group":
    group key or None, "output": output field}`` (the names the page's grid shows as headers)."""
    return {"inputs": list(stage.inputs), "gold": stage.label, "group": stage.group_key, "output": stage.output}


def strategy_arrays(report: dict, error_at: dict[int, str] | None = None) -> dict[str, Any]:
    """The per-row arrays of one strategy's row in the contract, from an evaluation report
    (:func:`personalign.evaluation.evaluate_repeats`): ``scores`` (the strategy's own score per row,
    None where it has none), ``correct`` (binary: 1.0/0.0, a failure counts wrong; scored: the stage
    metric in [0, 1]) and ``row_errors`` (``{row index as text: "Type: message"}``, every failure;
    from ``error_at`` -- :attr:`personalign.programs.run.EvalOutcome.error_at` -- else parsed from the
    report's first 20 ``errors``). For ``--cv groups``, concatenate the folds' arrays (and offset
    the indices) in the order of the rows."""
    errors = {str(i): msg for i, msg in (error_at or {}).items()}
    if error_at is None:
        for line in report.get("errors") or []:
            m = _ERROR_LINE.match(str(line))
            if m:
                errors[m.group(1)] = m.group(2)
    scores = report.get("scores")
    return {"scores": None if scores is None else [number(s) for s in scores],
            "correct": None if report.get("correct") is None else [number(c) for c in report["correct"]],
            "row_errors": errors}


def number(value: Any) -> float | None:
    """``value`` as a finite float, else None (a missing, NaN or infinite score)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def check_rows(result: dict, where: str | Path = "result") -> None:
    """Check the rows contract of ``result``: ``rows`` a list of objects with ``id`` and ``inputs``,
    each strategy's ``predictions`` (and ``scores`` / ``correct`` when present) as long as ``rows``.

    Raises:
        DataError: naming ``where`` and the field that is wrong.
    """
    rows = result.get("rows")
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "id" in r and isinstance(r.get("inputs"), dict)
                                             for r in rows):
        raise DataError(where, None, "rows", "expected a list of objects with 'id' and 'inputs'")
    for k, s in enumerate(result["strategies"]):
        for key in ("predictions", "scores", "correct"):
            arr = s.get(key)
            if (key == "predictions" or arr is not None) and (not isinstance(arr, list) or len(arr) != len(rows)):
                raise DataError(where, None, f"strategies[{k}].{key}",
                                f"has {len(arr) if isinstance(arr, list) else 'no'} values for {len(rows)} rows")


_SAFE_REF = re.compile(r"^[A-Za-z0-9_-]+$")


def _candidates(text: str, result_path: Path | None) -> list[Path]:
    """Where a path recorded in a result may be: as given (absolute, or from the current folder),
    then from each of the three folders above the result file (``runs/compare/X.json`` -> the
    folder the run started in, when the runs folder was the default)."""
    p = Path(text).expanduser()
    if p.is_absolute() or result_path is None:
        return [p]
    return [p] + [base / p for base in list(Path(result_path).resolve().parents)[:3]]


def _stage_for(result: dict, stage, result_path: Path | None, where) -> Any:
    """The stage of ``result``: ``stage`` (any reference, the user's choice), else a built-in stage
    of the recorded name, else a stage ``.toml`` the result names (``stage_ref`` or the recorded
    command). A ``module:ATTR`` or ``file.py:ATTR`` reference in a result is not followed (viewing a
    file someone sent must not import their code): ``--stage`` must name it."""
    from personalign.errors import ConfigurationError
    from personalign.stages import resolve_stage
    from personalign.stages.ref import builtin_stage

    if stage is not None:
        return resolve_stage(stage)
    name = str(result.get("stage") or "")
    found = builtin_stage(name) if _SAFE_REF.match(name) else None
    if found is not None:
        return found
    refs = [str(result.get("stage_ref") or "")]
    try:
        argv = shlex.split(str((result.get("run_record") or {}).get("command") or ""))
        refs.append(argv[argv.index("compare") + 1])
    except (ValueError, IndexError):
        pass
    for ref in (r for r in refs if r.endswith(".toml")):
        for path in _candidates(ref, result_path):
            if path.is_file():
                st = resolve_stage(str(path))
                if st.name == name:
                    return st
    raise ConfigurationError(f"{where}: cannot find stage '{name}' to rebuild the rows from its data file "
                             "(not a built-in stage, no stage .toml found); pass --stage REF")


def rows_from_data(result: dict, *, result_path: str | Path | None = None, data: str | Path | None = None,
                   stage=None) -> dict[str, Any]:
    """The rows contract of a result written before it, rebuilt from the data file it names
    (``result["data"]``, or ``data``) and checked against the result.

    The evaluated rows are the ones compare chose: single split, the rows of ``result["split"]``
    (the seeded ``--limit`` sample when ``n`` is smaller); ``--cv groups``, every row, grouped by
    held-out group in ``result["groups"]`` order. ``correct`` is computed for binary stages from the
    predictions and the gold (a failure counts wrong); scored stages keep it None (their metric is
    not re-run); ``scores`` are None (not in such a result); ``row_errors`` are parsed from the
    report's first 20 errors (single split).

    Returns:
        ``{"rows", "row_fields", "strategies": [{"scores", "correct", "row_errors"}, ...], "files"}``
        (``files``: the data file and the stage's file, when it has one: what was read).

    Raises:
        DataError: the data file is missing, a FIFO, device or socket (naming the result file and
            its field ``data``), changed since the run (its sha256 differs from
            ``data_sha256``), or does not reproduce the result (row count, or accuracy per strategy).
        ConfigurationError: the stage cannot be found (:func:`_stage_for`).
    """
    from personalign.data.digest import file_sha256

    where = result_path or "result"
    recorded = data if data is not None else result.get("data")
    if not recorded:
        raise DataError(where, None, "data", "the result names no data file; its rows cannot be rebuilt")
    path = next((p for p in _candidates(str(recorded), None if data is not None else result_path) if p.exists()), None)
    if path is None:
        raise DataError(recorded, None, None, f"data file of {where} not found (from {Path.cwd()}); the rows cannot "
                                              "be rebuilt without it (pass --data PATH)")
    if data is not None:
        path = _check_data_option(path)
    else:
        path = check_data_file(path, where)
    sha = file_sha256(path)
    if result.get("data_sha256") and sha != result["data_sha256"]:
        raise DataError(path, None, None, f"changed since the run (sha256 {sha[:12]}, the result recorded "
                                          f"{str(result['data_sha256'])[:12]}); the rows cannot be rebuilt from it")
    st = _stage_for(result, stage, Path(result_path) if result_path else None, where)
    examples = st.load(path)
    n, seed = int(result["n"]), int(result.get("seed") or 0)
    folds = None
    if result.get("cv") == "groups":
        examples = st.limit(examples, n if n < len(examples) else None, seed)
        key = st.group_key
        examples = [ex for g in result["groups"] for ex in examples if str(getattr(ex, key, None)) == str(g)]
        folds = [str(getattr(ex, key)) for ex in examples]
    else:
        examples = [ex for ex in examples if getattr(ex, "split", None) == result.get("split")]
        examples = st.limit(examples, n if n < len(examples) else None, seed)
    if len(examples) != n:
        raise DataError(path, None, None, f"has {len(examples)} rows for the result's {n}: not the data it was run on")
    out = {"rows": page_rows(st, examples, folds), "row_fields": row_fields(st), "strategies": [],
           "files": [path, *_stage_files(st)]}
    gold = [st.is_positive(st.gold(ex)) for ex in examples] if st.kind == "binary" else None
    for s in result["strategies"]:
        preds = s.get("predictions") or []
        if len(preds) != n:
            raise DataError(where, None, f"{s.get('name')}.predictions", f"has {len(preds)} values for {n} rows")
        correct = None
        if gold is not None:
            correct = [1.0 if p is not None and st.is_positive(p) == bool(g) else 0.0 for p, g in zip(preds, gold)]
            _check_accuracy(s, correct, folds, path)
        arrays = strategy_arrays({"errors": [] if folds else s.get("errors")})
        out["strategies"].append({**arrays, "correct": correct, "scores": None})
    return out


def _check_data_option(path: Path) -> Path:
    """``--data``'s file: a regular file or a data folder (never a FIFO or device: ArgumentError)."""
    from personalign.data.files import check_input
    from personalign.errors import ArgumentError

    try:
        return check_input(path, allow_dir=True)
    except DataError as exc:
        raise ArgumentError("data", f"{path}: {exc.problem}") from None


def _stage_files(st) -> list[Path]:
    """The files a stage was read from: its ``.toml`` (or the ``file.py`` of ``file.py:ATTR``) and
    the ``file.py`` of every code reference its stage file makes (``metric = "my_task.py:score"``)."""
    ref = str(getattr(st, "ref", None) or "")
    left = ref.rpartition(":")[0] if ref.rpartition(":")[0].endswith(".py") else ref
    files = [Path(left)] if left and Path(left).is_file() else []
    spec = getattr(st, "spec", None)
    if files and files[0].suffix == ".toml" and hasattr(spec, "model_dump"):
        stack = [spec.model_dump()]
        while stack:
            item = stack.pop()
            if isinstance(item, (dict, list)):
                stack.extend(item.values() if isinstance(item, dict) else item)
            elif isinstance(item, str) and item.rpartition(":")[0].endswith(".py"):
                code = files[0].parent / item.rpartition(":")[0]
                files += [code] if code.is_file() else []
    return files


def _check_accuracy(row: dict, correct: list[float], folds: list[str] | None, path) -> None:
    """The rebuilt rows reproduce the result: a strategy's accuracy (single split) or each group's
    (``--cv groups``) equals the mean of ``correct`` (single runs only: repeats average over runs)."""
    if (row.get("repeats") or 1) != 1:
        return
    pairs = []
    if folds is None:
        pairs.append((row.get("accuracy"), correct))
    else:
        for g in row.get("by_group") or []:
            pairs.append((g.get("accuracy"), [c for c, f in zip(correct, folds) if f == str(g["group"])]))
    for recorded, values in pairs:
        if recorded is not None and values and abs(recorded - sum(values) / len(values)) > 1e-9:
            raise DataError(path, None, None, f"rows rebuilt from it do not reproduce {row['name']}'s accuracy "
                                              f"({sum(values) / len(values):.4f} vs {recorded:.4f} recorded)")


def with_rows(result: dict, *, result_path: str | Path | None = None, data: str | Path | None = None,
              stage=None) -> dict[str, Any]:
    """``result`` with the rows contract: checked when present (:func:`check_rows`), else rebuilt
    from the data file (:func:`rows_from_data`; then ``rows_files`` lists the files read, as text).
    Returns a new dict; ``result`` is not changed."""
    where = result_path or "result"
    if "rows" in result:
        check_rows(result, where)
        return result
    built = rows_from_data(result, result_path=result_path, data=data, stage=stage)
    strategies = [{**s, **b} for s, b in zip(result["strategies"], built["strategies"])]
    return {**result, "rows": built["rows"], "row_fields": built["row_fields"], "strategies": strategies,
            "rows_source": "rebuilt from the data file (result written before rows were recorded)",
            "rows_files": [str(p) for p in built["files"]]}
