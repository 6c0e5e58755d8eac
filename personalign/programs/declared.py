"""Declared stages: a :class:`~personalign.programs.stage_file.StageSpec` made into a
:class:`~personalign.programs.stages.Stage` -- signature, canonical-JSONL loader, metric, set
objective and strategies (:func:`personalign.programs.common.generic.signature_strategies` plus the
user's own).

:func:`declare_stage` is the Python form of a stage file (``my_task.py``: ``STAGE =
declare_stage(name=..., inputs={...}, output={...}, strategies={"mine": MyJudge})``).
A ``multiclass`` stage is a ``scored`` Stage whose per-example metric is exact match (reported as
``accuracy``) and whose set objective defaults to macro-F1.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Literal

from personalign.errors import ConfigurationError, DataError

_SO = "personalign.programs.common.set_objectives"
STRATEGY_GROUP = "personalign.strategies"


def make_signature(spec) -> type:
    """The ``dspy.Signature`` of ``spec``: its inputs (str, described) in order, then the output
    with its type (a list of labels is a ``Literal``), the instructions as the docstring."""
    import dspy

    typ = spec.output.type
    out_type = Literal[tuple(typ)] if isinstance(typ, list) else {"bool": bool, "int": int, "float": float,
                                                                    "str": str}[typ]
    fields: dict[str, Any] = {k: (str, dspy.InputField(desc=v)) for k, v in spec.inputs.items()}
    fields[spec.output.name] = (out_type, dspy.OutputField(desc=spec.output.description or spec.output.name))
    name = "".join(p.capitalize() for p in spec.name.replace("-", "_").replace(".", "_").split("_")) + "Signature"
    return dspy.make_signature(fields, spec.instructions, signature_name=name)


def _check_value(value: Any, typ, path, line: int, field: str) -> None:
    ok = {"bool": lambda v: isinstance(v, bool), "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
          "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
          "str": lambda v: isinstance(v, str)}
    if isinstance(typ, list):
        if value not in typ:
            raise DataError(path, line, field, f"{value!r} is not one of the allowed labels {typ}")
    elif not ok[typ](value):
        raise DataError(path, line, field, f"expected {typ}, got {type(value).__name__} {value!r:.60}")


def load_rows(path: str | Path, *, spec) -> list:
    """Examples of the canonical JSONL ``path`` for ``spec``: every row needs ``id`` and ``split``
    (strings), each input (a string), the label (of the output type) and the group and decision
    fields; inputs are marked.

    Raises:
        DataError: the first bad row (file, line, field).
    """
    import dspy

    from personalign.data.files import iter_jsonl

    required = [k for k in (spec.group_key, *(spec.decision_keys or ())) if k]
    out = []
    for line, rec in iter_jsonl(path):
        if not isinstance(rec, dict):
            raise DataError(path, line, None, "expected a JSON object")
        for key in ("id", "split", *spec.inputs):
            if key not in rec:
                raise DataError(path, line, key, "missing")
            if not isinstance(rec[key], str):
                raise DataError(path, line, key, f"expected a string, got {type(rec[key]).__name__}")
        if spec.label not in rec:
            raise DataError(path, line, spec.label, "missing (the stage's label field)")
        _check_value(rec[spec.label], spec.output.type, path, line, spec.label)
        for key in required:
            if rec.get(key) is None:
                raise DataError(path, line, key, "missing (the stage's group field)")
        out.append(dspy.Example(**rec).with_inputs(*spec.inputs))
    return out


def _objective(spec, base_dir: Path) -> str:
    """The Stage's objective spec string for the file's ``objective`` (a reference is checked, not
    imported: :func:`personalign.registry.check_ref`)."""
    from personalign.registry import check_ref

    obj = spec.objective
    if obj is None:
        return {"binary": "f1", "multiclass": f"{_SO}:macro_f1", "scored": "mean"}[spec.kind]
    if obj in ("kappa", "accuracy", "macro_f1"):
        return f"{_SO}:{obj}"
    if obj == "f1" or obj.startswith("fbeta:") or obj == "mean":
        return obj
    return check_ref(obj, base_dir, key="objective")


def _strategy_info(name: str, target: Any, ref: str | None = None):
    """The registry entry of a user's strategy class ``target`` (imported already), read from its
    class attributes: ``uses_lm`` (default true) and ``optimizer`` (its fit, when trainable).

    Raises:
        ConfigurationError: ``target`` is not a ``dspy.Module`` subclass (a function such as
            ``os.system``, an instance: it would be *called* to build the program)."""
    import dspy

    from personalign.registry import StrategyInfo

    if not (isinstance(target, type) and issubclass(target, dspy.Module)):
        shown = f" = {ref!r}" if ref is not None else ""
        raise ConfigurationError(f"strategies.{name}{shown}: a {type(target).__name__}, not a dspy.Module subclass")
    optimizer = getattr(target, "optimizer", None)
    doc = ((getattr(target, "__doc__", None) or "").strip().splitlines() or [f"user strategy {name}"])[0]
    return StrategyInfo(name, target, doc, uses_lm=bool(getattr(target, "uses_lm", True)),
                        trainable=bool(optimizer), optimizer=optimizer if isinstance(optimizer, str) else None)


def _user_strategy(name: str, target: Any, base_dir: Path):
    """A user's strategy: a class given in Python, or a reference checked now (nothing imported)
    and imported when the strategy is first used (:class:`personalign.registry.Deferred`)."""
    from personalign.registry import Deferred, check_ref, resolve

    if not isinstance(target, str):
        return _strategy_info(name, target)
    checked = check_ref(target, base_dir, key=f"strategies.{name}", kind="class", entry_group=STRATEGY_GROUP)

    def make():
        try:
            obj = resolve(checked)
        except (ImportError, AttributeError) as exc:
            raise ConfigurationError(f"strategies.{name} = {target!r}: {type(exc).__name__}: {exc}") from None
        return _strategy_info(name, obj, target)

    return Deferred(name, make)


def build_stage(spec, *, source: Any = "stage", base_dir: str | Path | None = None, ref: str | None = None,
                extra_strategies: dict[str, Any] | None = None):
    """The :class:`~personalign.programs.stages.Stage` of ``spec`` (module docstring).

    Raises:
        DataError: a metric, objective or strategy reference that does not import (names
            ``source`` and the key).
    """
    from personalign.programs.common.generic import signature_strategies
    from personalign.programs.common.set_objectives import ExactMatch
    from personalign.programs.stages import Stage
    from personalign.registry import Registry, check_ref

    base = Path(base_dir) if base_dir is not None else Path.cwd()
    try:
        signature = make_signature(spec)
        entries = signature_strategies(signature, stage=spec.name, label=spec.label, positive=spec.positive)
        own = {**spec.strategies, **(extra_strategies or {})}
        names = {e.name for e in entries}
        entries = [e for e in entries if e.name not in own] + [_user_strategy(n, t, base) for n, t in own.items()]
        metric = check_ref(spec.metric, base, key="metric") if spec.metric else \
            ExactMatch(spec.label, spec.output.name, boolean=spec.kind == "binary")
        objective = _objective(spec, base)
    except ConfigurationError as exc:
        key = str(exc).split(" = ", 1)[0] if " = " in str(exc) else None
        raise DataError(source, None, key, str(exc).split(": ", 1)[-1] if key else str(exc)) from None
    binary = spec.kind == "binary"
    if spec.default_strategies:
        _check_defaults(spec.default_strategies, [getattr(e, "name") for e in entries], source)
    default = spec.default_strategies or ",".join(
        n for n in (("majority", "minilm-logreg", "predict") if binary else ("majority", "predict")) if n in names)
    positive_name = spec.positive_name or (spec.output.name if spec.positive else f"not {spec.output.name}")
    return Stage(
        name=spec.name, summary=spec.summary or spec.instructions, signature=signature,
        strategies=Registry(f"{spec.name} strategy", entries), default_strategies=default,
        loader=functools.partial(load_rows, spec=spec), label=spec.label,
        kind="binary" if binary else "scored", positive=spec.positive, positive_name=positive_name,
        metric=metric, metric_name="f1" if binary else ("accuracy" if spec.kind == "multiclass"
                                                        else metric.rpartition(":")[2]),
        group_key=spec.group_key or "id", objective=objective,
        decision_keys=tuple(spec.decision_keys) if spec.decision_keys else None, ref=ref,
        sweep_space=spec.sweep)


def _check_defaults(text: str, names: list[str], source: Any) -> None:
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


def declare_stage(**fields: Any):
    """A Stage from the stage file's keys as keyword arguments; ``strategies`` values may be classes.
    ``ref`` is set when the stage is resolved as ``file.py:ATTR``.

    Raises:
        DataError: as a stage file would (the key is named).
    """
    import sys

    from personalign.programs.stage_file import spec_from_dict

    strategies = dict(fields.pop("strategies", None) or {})
    refs = {k: v for k, v in strategies.items() if isinstance(v, str)}
    caller = Path(sys._getframe(1).f_code.co_filename).resolve()
    spec = spec_from_dict({**fields, "strategies": refs}, caller)
    return build_stage(spec, source=caller, base_dir=caller.parent,
                       extra_strategies={k: v for k, v in strategies.items() if k not in refs})


def check_data(stage, path: str | Path, *, train_split: str = "train") -> dict[str, Any]:
    """Load ``path`` with ``stage`` and check what compile needs: a ``train_split`` split, and for
    binary stages both classes in it. Returns ``{"n", "splits": {split: n}, "labels": {label: n},
    "warnings": [DataWarning]}``; the warnings (:func:`personalign.data.lint.data_warnings`: duplicate
    ids, a split that is not ``train``/``val``/``test``/``train_split``, a single-example group of
    the stage's ``group_key``) do not fail the check.

    Raises:
        DataError: a bad row (file, line, field), no train split, one class in train.
    """
    from collections import Counter

    from personalign.programs.stages import split_of

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
    """:func:`personalign.data.lint.data_warnings` of ``path`` for ``stage``: its declared
    ``group_key`` (undeclared, ``id``: every row its own group, no check) and the known splits
    plus ``train_split``."""
    from personalign.data.lint import KNOWN_SPLITS, data_warnings

    group_key = stage.group_key if stage.group_key != "id" else None
    return data_warnings(path, group_key=group_key, splits=(*KNOWN_SPLITS, train_split))


__all__ = ["build_stage", "check_data", "declare_stage", "load_rows", "make_signature", "stage_data_warnings"]
