"""What a stage declared by its fields (``[inputs]``, ``[output]``) gets without code of its own:
its ``dspy.Signature``, the canonical-JSONL loader, the exact-match metric, and the checks of its
data (:func:`check_data`) and of its ``default_strategies``.

Canonical JSONL: one object a line with ``id`` and ``split`` (strings), each input (a string), the
label (of the output type) and the group and decision fields (strings or integers).
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from personalign.errors import DataError

_PY = {"bool": bool, "int": int, "float": float, "str": str}


def make_signature(spec) -> type:
    """The ``dspy.Signature`` of ``spec``: its inputs (str, described) in order, then the output
    with its type (a list of labels is a ``Literal``), the instructions as the docstring."""
    import dspy

    typ = spec.output.type
    out_type = Literal[tuple(typ)] if isinstance(typ, list) else _PY[typ]
    fields: dict[str, Any] = {k: (str, dspy.InputField(desc=v)) for k, v in spec.inputs.items()}
    fields[spec.output.name] = (out_type, dspy.OutputField(desc=spec.output.description or spec.output.name))
    name = "".join(p.capitalize() for p in spec.name.replace("-", "_").replace(".", "_").split("_")) + "Signature"
    return dspy.make_signature(fields, spec.instructions, signature_name=name)


def check_value(value: Any, typ, path, line: int, field: str) -> None:
    """``value`` is of the output type ``typ`` (``bool``, ``int``, ``float`` -- finite --, ``str`` or
    a list of allowed labels).

    Raises:
        DataError: naming the file, line and field."""
    ok = {"bool": lambda v: isinstance(v, bool), "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
          "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
          "str": lambda v: isinstance(v, str)}
    if isinstance(typ, list):
        if value not in typ:
            raise DataError(path, line, field, f"{value!r:.60} is not one of the allowed labels {typ}")
    elif typ is not None and not ok[typ](value):
        what = "a finite number" if typ == "float" else typ
        raise DataError(path, line, field, f"expected {what}, got {type(value).__name__} {value!r:.60}")


def _input_names(spec) -> tuple[str, ...]:
    if spec.inputs is not None:
        return tuple(spec.inputs)
    from personalign.registry import resolve

    return tuple(resolve(spec.signature).input_fields)


def load_rows(path: str | Path, *, spec) -> list:
    """Examples of the canonical JSONL ``path`` for ``spec``; inputs are marked.

    Raises:
        DataError: the first bad row (file, line, field).
    """
    import dspy

    from personalign.data.files import iter_jsonl
    from personalign.data.inputs import check_group_fields

    inputs = _input_names(spec)
    typ = spec.output.type if spec.output is not None else None
    required = [k for k in (spec.group_key, *(spec.decision_keys or ())) if k]
    out = []
    for line, rec in iter_jsonl(path):
        if not isinstance(rec, dict):
            raise DataError(path, line, None, "expected a JSON object")
        for key in ("id", "split", *inputs):
            if key not in rec:
                raise DataError(path, line, key, "missing" + _misspelt(key, rec))
            if not isinstance(rec[key], str):
                raise DataError(path, line, key, f"expected a string, got {type(rec[key]).__name__}")
        if spec.label not in rec:
            raise DataError(path, line, spec.label, "missing (the stage's label field)" + _misspelt(spec.label, rec))
        check_value(rec[spec.label], typ, path, line, spec.label)
        check_group_fields(rec, required, path, line)
        out.append(dspy.Example(**rec).with_inputs(*inputs))
    return out


def _misspelt(key: str, rec: dict) -> str:
    """``"; the row has 'lable' (a misspelling of 'label'?)"`` when a key of ``rec`` is close to the
    missing ``key`` (difflib), else ``""``."""
    import difflib

    close = difflib.get_close_matches(key, [k for k in rec if isinstance(k, str)], n=1, cutoff=0.75)
    return f"; the row has '{close[0]}' (a misspelling of '{key}'?)" if close else ""


def loader_for(spec):
    """The canonical loader of ``spec``: ``path -> list[dspy.Example]``."""
    return functools.partial(load_rows, spec=spec)


class ExactMatch:
    """DSPy metric ``(example, pred, trace=None)``: the prediction's ``output`` equals the
    example's ``label`` (bools compared after :func:`personalign.metrics.dspy_metrics.to_bool`).
    Returns a bool with a trace (bootstrap's demo filter), else 1.0 / 0.0."""

    def __init__(self, label: str, output: str, boolean: bool = False) -> None:
        self.label, self.output, self.boolean = label, output, boolean
        self.__name__ = f"exact_match_{label}"

    def __call__(self, example, pred, trace=None, *args: Any, **kwargs: Any):
        gold, got = getattr(example, self.label), getattr(pred, self.output, None)
        if self.boolean:
            from personalign.metrics.dspy_metrics import to_bool

            gold, got = to_bool(gold), to_bool(got)
        ok = got is not None and gold == got
        return ok if trace is not None else float(ok)


def exact_match(spec) -> ExactMatch | None:
    """The exact-match metric of a stage with an ``[output]`` (None without one)."""
    if spec.output is None:
        return None
    return ExactMatch(spec.label, spec.output.name, boolean=spec.kind == "binary")


def check_defaults(text: str, names: list[str], source: Any) -> None:
    """``default_strategies`` names the stage's strategies, each optionally ``@OPTIMIZER`` by name
    (a registered or installed optimizer): never a code reference, which a verb would import on the
    file's say-so.

    Raises:
        DataError: an unknown strategy, or an optimizer given as a code reference."""
    for item in [s.strip() for s in text.split(",") if s.strip()]:
        name, _, opt = item.partition("@")
        if name not in names:
            raise DataError(source, None, "default_strategies", f"'{name}' is not a strategy of the stage "
                                                                f"(strategies: {', '.join(names)})")
        if ":" in opt or "/" in opt:
            raise DataError(source, None, "default_strategies",
                            f"'{item}': a stage file names an optimizer by name (bootstrap, mipro, ... or an "
                            "installed entry point), never by a code reference")


def check_data(stage, path: str | Path, *, train_split: str = "train") -> dict[str, Any]:
    """Load ``path`` with ``stage`` and check what compile needs: a ``train_split`` split, and for
    binary stages both classes in it. Returns ``{"n", "splits": {split: n}, "labels": {label: n},
    "warnings": [DataWarning]}`` (:func:`stage_data_warnings`; they do not fail the check).

    Raises:
        DataError: a bad row (file, line, field), no train split, one class in train.
    """
    from personalign.data.splits import split_of

    examples = stage.load(path)
    if not examples:
        raise DataError(path, None, None, "no rows")
    splits = Counter(split_of(ex) for ex in examples)
    train = [ex for ex in examples if split_of(ex) == train_split]
    if not train:
        raise DataError(path, None, "split", f"no '{train_split}' rows to compile on (splits present: "
                                             f"{', '.join(sorted(map(str, splits)))})")
    stage.check_fittable(train, path, train_split)
    labels = Counter(str(stage.gold(ex)) for ex in examples)
    warnings = stage_data_warnings(stage, path, train_split=train_split)
    return {"n": len(examples), "splits": dict(splits), "labels": dict(labels), "warnings": warnings}


def stage_data_warnings(stage, path, *, train_split: str = "train") -> list:
    """:func:`personalign.data.lint.data_warnings` of ``path`` for ``stage``: duplicate ids, a split
    that is not ``train``/``val``/``test``/``train_split``, a single-example group of a declared
    ``group_key`` (undeclared, ``id``: every row its own group, no check)."""
    from personalign.data.lint import KNOWN_SPLITS, data_warnings

    group_key = stage.group_key if stage.group_key != "id" else None
    return data_warnings(path, group_key=group_key, splits=(*KNOWN_SPLITS, train_split))


__all__ = ["ExactMatch", "check_data", "check_defaults", "check_value", "exact_match", "load_rows", "loader_for",
           "make_signature", "stage_data_warnings"]
