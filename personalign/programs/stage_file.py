"""The stage file: a stage declared in TOML, for users who write no Python.

    name = "option-follows"
    instructions = "Decide whether the recommended option respects the user's stated preference."
    kind = "binary"          # binary | scored | multiclass
    label = "follows"        # the JSONL field with the gold
    group_key = "topic"      # dev split, CV and --limit strata hold out whole groups
    objective = "f1"         # f1, fbeta:B, kappa, accuracy, macro_f1, mean, module:function

    [inputs]                 # field = description, in prompt order
    preference = "the user's stated preference"

    [output]
    name = "follows"
    type = "bool"            # bool | int | float | str | a list of allowed strings (Literal)

Optional: ``summary``, ``positive`` (binary: the label value that is the positive class, default
true), ``positive_name``, ``decision_keys``, ``metric = "mymod:fn"`` (DSPy metric; required for
``scored``), ``default_strategies``, ``[strategies] name = "file.py:Class"`` (or an entry-point name
of the group ``personalign.strategies``) and ``[sweep]`` (sections added to the default search space).
References are relative to the stage file's folder. :func:`parse_stage_file` validates the file
with :class:`StageSpec` (pydantic, unknown keys refused); :func:`load_stage_file` builds the
:class:`~personalign.programs.stages.Stage` (:mod:`personalign.programs.declared`). Every mistake
is a :class:`~personalign.errors.DataError` naming the file, the line and the key.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator, model_validator

from personalign.errors import DataError

TYPES = ("bool", "int", "float", "str")
NAMED_OBJECTIVES = ("f1", "kappa", "accuracy", "macro_f1", "mean")
_cache: dict[tuple[Path, int, int], Any] = {}
_lock = threading.Lock()


class OutputSpec(BaseModel):
    """``[output]``: the signature's output field."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    type: str | list[str]
    description: str = ""

    @field_validator("type")
    @classmethod
    def _known_type(cls, v):
        if isinstance(v, list):
            if len(v) < 2 or len(set(v)) != len(v) or not all(isinstance(x, str) and x for x in v):
                raise ValueError("a list type needs at least 2 distinct non-empty strings (the allowed labels)")
            return v
        if v not in TYPES:
            raise ValueError(f"unknown type {v!r}; use bool, int, float, str or a list of allowed strings")
        return v


class StageSpec(BaseModel):
    """The whole stage file (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]*$")
    summary: str = ""
    instructions: str = Field(min_length=1)
    kind: Literal["binary", "scored", "multiclass"]
    label: str = Field(min_length=1)
    positive: StrictBool = True  # "yes", "no", 1 are refused: "no" would silently flip the class
    positive_name: str | None = None
    group_key: str | None = None
    decision_keys: list[str] | None = None
    objective: str | None = None
    metric: str | None = None
    default_strategies: str | None = None
    inputs: dict[str, str] = Field(min_length=1)
    output: OutputSpec
    strategies: dict[str, str] = Field(default_factory=dict)
    sweep: dict[str, Any] | None = None

    @field_validator("inputs")
    @classmethod
    def _identifiers(cls, v):
        bad = [k for k in v if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k)]
        if bad:
            raise ValueError(f"input name {bad[0]!r} is not an identifier")
        return v

    @model_validator(mode="after")
    def _consistent(self):
        def bad(key: str, msg: str):  # a whole-file rule, reported at the key it is about
            return ValueError(f"{key}{_SEP}{msg}")

        if self.output.name in self.inputs:
            raise bad("output.name", f"'{self.output.name}' is both an input and the output")
        t = self.output.type
        if self.kind == "binary" and t != "bool":
            raise bad("output.type", f"kind 'binary' needs output type 'bool', got {t!r}")
        if self.kind == "multiclass" and not isinstance(t, list):
            raise bad("output.type", "kind 'multiclass' needs output type = a list of allowed strings")
        if self.kind == "scored" and self.metric is None:
            raise bad("metric", "kind 'scored' needs a metric = \"module:function\" (example, pred, trace=None) -> [0, 1]")
        try:
            check_objective(self.objective, self.kind)
        except ValueError as exc:
            raise bad("objective", str(exc)) from None
        return self


_SEP = "\x1f"


def check_objective(objective: str | None, kind: str) -> None:
    """Raise ValueError when ``objective`` is not one a stage of ``kind`` can maximize."""
    if objective is None or (":" in objective and not objective.startswith("fbeta:")):
        return
    if objective in ("f1",) or objective.startswith("fbeta:"):
        if kind != "binary":
            raise ValueError(f"objective {objective!r} needs kind 'binary'")
        if objective.startswith("fbeta:"):
            try:
                ok = float(objective.split(":", 1)[1]) > 0
            except ValueError:
                ok = False
            if not ok:
                raise ValueError(f"objective {objective!r}: beta must be a number > 0")
        return
    if objective == "mean" and kind != "scored":
        raise ValueError("objective 'mean' needs kind 'scored'")
    if objective not in NAMED_OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; use f1, fbeta:B, kappa, accuracy, macro_f1, mean "
                         "or module:function")


def line_of(text: str, loc: tuple) -> int | None:
    """1-based line of the key ``loc`` (e.g. ``("output", "type")``) in TOML ``text``; for a key
    of a table, its ``[table]`` header when the key is absent; None when not found."""
    keys = [str(k) for k in loc if not isinstance(k, int)]
    if not keys:
        return None
    lines = text.splitlines()
    table, start = "", 0
    if len(keys) > 1:
        header = re.compile(rf"^\s*\[\s*{re.escape(keys[0])}\s*\]")
        start = next((i for i, ln in enumerate(lines) if header.match(ln)), None)
        if start is None:
            return None
        table, keys = keys[0], keys[1:]
    key = re.compile(rf"^\s*\"?{re.escape(keys[0])}\"?\s*=")
    for i in range(start + (1 if table else 0), len(lines)):
        if table and lines[i].lstrip().startswith("["):
            break
        if not table and lines[i].lstrip().startswith("["):
            break
        if key.match(lines[i]):
            return i + 1
    return start + 1 if table else None


def parse_stage_file(path: str | Path) -> StageSpec:
    """Read and validate a stage file.

    Raises:
        DataError: unreadable file, invalid TOML (a duplicate key included), a missing or unknown
            key, a wrong type (names the file, the line and the key).
    """
    import tomllib

    from personalign.data.files import read_text

    path = Path(path)
    text = read_text(path, what="stage file", max_bytes=1024**2)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise DataError(path, int(m.group(1)) if m else None, None,
                        f"invalid TOML: {re.sub(r' [(]at line .*[)]', '', str(exc))}") from None
    return spec_from_dict(raw, path, text)


def spec_from_dict(raw: dict, source: str | Path = "stage", text: str = "") -> StageSpec:
    """:class:`StageSpec` of a mapping (a parsed stage file, or keyword arguments in Python).

    Raises:
        DataError: the first problem, naming ``source``, the line (when ``text`` is given) and the key.
    """
    try:
        return StageSpec.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err.get("loc") or ())
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if _SEP in msg:  # a whole-file rule names its key
            where, msg = msg.split(_SEP, 1)
            loc = tuple(where.split("."))
        key = ".".join(str(k) for k in loc) or None
        if err.get("type") == "missing":
            msg = "missing" + (" (a [output] table with name and type)" if loc == ("output",) else "")
        elif err.get("type") == "extra_forbidden":
            msg = "unknown key"
        return_line = line_of(text, loc) if text else None
        raise DataError(source, return_line, key, msg) from None


def load_stage_file(path: str | Path):
    """The :class:`~personalign.programs.stages.Stage` a stage file declares (cached per file
    version), its ``ref`` the file's absolute path.

    Raises:
        DataError: see :func:`parse_stage_file`; a reference (metric, strategy) that does not import.
    """
    from personalign.data.files import check_input
    from personalign.programs.declared import build_stage

    path = check_input(path, what="stage file").resolve()
    st = path.stat()
    key = (path, st.st_mtime_ns, st.st_size)
    with _lock:
        if key in _cache:
            return _cache[key]
    text_spec = parse_stage_file(path)
    try:
        stage = build_stage(text_spec, source=path, base_dir=path.parent, ref=str(path))
    except DataError as exc:
        if exc.line is not None or not exc.field:
            raise
        line = line_of(path.read_text(encoding="utf-8"), tuple(exc.field.split(".")))
        raise DataError(path, line, exc.field, exc.problem) from None
    with _lock:
        _cache[key] = stage
    return stage


TEMPLATE = '''# personalign stage file: `personalign stage validate {name}.toml --data data.jsonl` checks it.
name = "{name}"
summary = "One line: what the stage decides."
instructions = "The task, as the LLM strategies' instructions: decide whether ..."
kind = "binary"          # binary (bool output) | multiclass (a list of labels) | scored (needs metric)
label = "{label}"        # the JSONL field with the human gold label
positive = true          # binary: the label value that is the positive class
group_key = "group"      # rows of one group stay together in the dev split, CV folds and --limit
objective = "f1"         # what compile and sweep maximize: f1, fbeta:2, kappa, accuracy, macro_f1

# Data: canonical JSONL, one object a line: "id", "split" (train / val / test), every input field,
# the label and the group field, e.g.
# {{"id": "r1", "split": "train", "group": "g1", "text": "...", "{label}": true}}

[inputs]                 # input field = description, in prompt order
text = "the text to judge"

[output]
name = "{label}"
type = "bool"            # bool | int | float | str | ["a", "b", "c"] (allowed labels)
description = "true if ..."

# Your own code (paths relative to this file):
# metric = "my_metric.py:score"        # DSPy metric (example, pred, trace=None) -> [0, 1]
# [strategies]
# mine = "my_task.py:MyJudge"          # a dspy.Module class; `uses_lm`, `optimizer` class attributes
'''


def template(name: str) -> str:
    """A commented stage file for ``personalign stage init NAME`` (valid as written)."""
    label = "label"
    return TEMPLATE.format(name=name, label=label)


__all__ = ["OutputSpec", "StageSpec", "TEMPLATE", "check_objective", "line_of", "load_stage_file",
           "parse_stage_file", "spec_from_dict", "template"]
