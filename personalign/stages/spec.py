"""The stage spec: the one schema every stage is declared in -- a user's ``stage.toml``, Python's
:func:`personalign.declare_stage` and every built-in stage (``personalign/programs/<stage>/stage.toml``).

A user's task declares its signature in the file::

    name = "option-follows"
    instructions = "Decide whether the recommended option respects the user's stated preference."
    kind = "binary"          # binary | multiclass | scored
    label = "follows"        # the JSONL field with the gold
    group_key = "topic"      # dev split, CV and --limit strata hold out whole groups
    objective = "f1"         # f1, fbeta:B, kappa, accuracy, macro_f1, mean, file.py:function

    [inputs]                 # field = description, in prompt order
    preference = "the user's stated preference"

    [output]
    name = "follows"
    type = "bool"            # bool | int | float | str | a list of allowed strings (Literal)

A built-in stage names a typed signature and a loader instead (``signature = "module:Class"``,
``loader = "module:function"``). Optional keys: ``summary``, ``positive`` (binary: the label value
that is the positive class, default true), ``positive_name``, ``decision_keys``, ``strata_key``,
``metric`` (DSPy metric; required for ``scored``), ``metric_name``, ``feedback_metric`` (GEPA),
``default_strategies``, ``[strategies] name = "file.py:Class"`` and ``[sweep]`` (sections added to
the default search space). Code references follow :func:`personalign.stages.ref.check_ref`.
:func:`parse_stage_file` validates a file (pydantic, unknown keys refused); every mistake is a
:class:`~personalign.errors.DataError` naming the file, the line and the key.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator, model_validator

from personalign.errors import DataError

TYPES = ("bool", "int", "float", "str")
RESERVED_OUTPUTS = ("id", "line", "score", "decision", "error")
"""Fields ``predict batch`` writes beside the output on every row: an output may not take their name."""
_IDENT = r"^[A-Za-z_][A-Za-z0-9_]*$"
_SEP = "\x1f"


class OutputSpec(BaseModel):
    """``[output]``: the signature's output field."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=_IDENT)
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

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, v):
        if v in RESERVED_OUTPUTS:
            raise ValueError(f"'{v}' is a field every prediction row carries ({', '.join(RESERVED_OUTPUTS)}); "
                             "name the output otherwise")
        return v


class StrategyRef(BaseModel):
    """A ``[strategies]`` entry with a summary: ``name = { target = "file.py:Class", summary = "..." }``."""

    model_config = ConfigDict(extra="forbid")
    target: str = Field(min_length=1)
    summary: str = ""


class StageSpec(BaseModel):
    """A whole stage declaration (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]*$")
    summary: str = ""
    instructions: str | None = Field(default=None, min_length=1)
    kind: Literal["binary", "scored", "multiclass"]
    label: str = Field(min_length=1)
    positive: StrictBool = True  # "yes", "no", 1 are refused: "no" would silently flip the class
    positive_name: str | None = None
    group_key: str | None = None
    decision_keys: list[str] | None = None
    strata_key: str | None = None
    objective: str | None = None
    metric: str | None = None
    metric_name: str | None = Field(default=None, pattern=_IDENT)
    feedback_metric: str | None = None
    default_strategies: str | None = None
    signature: str | None = None
    loader: str | None = None
    inputs: dict[str, str] | None = None
    output: OutputSpec | None = None
    strategies: dict[str, str | StrategyRef] = Field(default_factory=dict)
    sweep: dict[str, Any] | None = None

    @field_validator("inputs")
    @classmethod
    def _identifiers(cls, v):
        if v is not None:
            if not v:
                raise ValueError("at least one input field")
            bad = [k for k in v if not re.fullmatch(_IDENT, k)]
            if bad:
                raise ValueError(f"input name {bad[0]!r} is not an identifier")
        return v

    @model_validator(mode="after")
    def _consistent(self):
        def bad(key: str, msg: str):  # a whole-file rule, reported at the key it is about
            return ValueError(f"{key}{_SEP}{msg}")

        if self.signature is None:
            for key in ("instructions", "inputs", "output"):
                if getattr(self, key) is None:
                    raise bad(key, "missing" + (" (a [output] table with name and type)" if key == "output" else
                                                " (or signature = \"module:Class\")"))
            if self.output.name in self.inputs:
                raise bad("output.name", f"'{self.output.name}' is both an input and the output")
            t = self.output.type
            if self.kind == "binary" and t != "bool":
                raise bad("output.type", f"kind 'binary' needs output type 'bool', got {t!r}")
            if self.kind == "multiclass" and not isinstance(t, list):
                raise bad("output.type", "kind 'multiclass' needs output type = a list of allowed strings")
        elif self.inputs is not None or self.output is not None:
            raise bad("signature", "give either signature = \"module:Class\" or [inputs] and [output], not both")
        if self.kind == "scored" and self.metric is None:
            raise bad("metric", "kind 'scored' needs a metric = \"file.py:function\" (example, pred, trace=None) -> [0, 1]")
        from personalign.stages.objective import get_objective

        try:
            get_objective(self.objective, self.kind, metric_name=self.metric_name or "score")
        except ValueError as exc:
            raise bad("objective", str(exc)) from None
        return self


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
        if lines[i].lstrip().startswith("["):
            break
        if key.match(lines[i]):
            return i + 1
    return start + 1 if table else None


def shown_key(key: Any) -> str:
    """A key as an error message shows it: control characters and escapes made visible
    (``repr`` without the quotes), so a key holding a newline or an ANSI escape stays one line."""
    text = str(key)
    return text if text.isprintable() else repr(text)[1:-1]


def parse_stage_file(path: str | Path) -> StageSpec:
    """Read and validate a stage file.

    Raises:
        DataError: unreadable file, invalid TOML (a duplicate key, nesting too deep), a missing or
            unknown key, a wrong type (names the file, the line and the key).
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
    except RecursionError:
        raise DataError(path, None, None, "invalid TOML: values nested too deeply") from None
    return spec_from_dict(raw, path, text)


def spec_from_dict(raw: dict, source: str | Path = "stage", text: str = "") -> StageSpec:
    """:class:`StageSpec` of a mapping (a parsed stage file, or keyword arguments in Python).

    Raises:
        DataError: the first problem, naming ``source``, the line (when ``text`` is given) and the
            key; an unknown key is named with the closest known one.
    """
    try:
        return StageSpec.model_validate(raw)
    except RecursionError:
        raise DataError(source, None, None, "values nested too deeply") from None
    except ValidationError as exc:
        errors = exc.errors()
        unknown = [e for e in errors if e.get("type") == "extra_forbidden"]
        err = unknown[0] if unknown else errors[0]  # a misspelt key is named, not only the key it lacks
        loc = tuple(err.get("loc") or ())
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if _SEP in msg:  # a whole-file rule names its key
            where, msg = msg.split(_SEP, 1)
            loc = tuple(where.split("."))
        key = ".".join(shown_key(k) for k in loc) or None
        if err.get("type") == "missing":
            msg = "missing" + (" (a [output] table with name and type)" if loc == ("output",) else "")
        elif err.get("type") == "extra_forbidden":
            msg = "unknown key" + _closest(str(loc[-1]), StageSpec if len(loc) == 1 else OutputSpec)
        raise DataError(source, line_of(text, loc) if text else None, key, msg) from None


def _closest(key: str, model: type[BaseModel]) -> str:
    import difflib

    near = difflib.get_close_matches(key, list(model.model_fields), n=1)
    return f" (did you mean '{near[0]}'?)" if near else ""


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

# Your own code, in files of this folder (a stage file names no other code):
# metric = "my_metric.py:score"        # DSPy metric (example, pred, trace=None) -> [0, 1]
# [strategies]
# mine = "my_task.py:MyJudge"          # a dspy.Module class; `uses_lm`, `optimizer` class attributes
'''


def template(name: str) -> str:
    """A commented stage file for ``personalign stage init NAME`` (valid as written)."""
    return TEMPLATE.format(name=name, label="label")


__all__ = ["OutputSpec", "RESERVED_OUTPUTS", "StageSpec", "StrategyRef", "TEMPLATE", "TYPES", "line_of", "parse_stage_file",
           "shown_key", "spec_from_dict", "template"]
