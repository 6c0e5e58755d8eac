"""The schema of the search-space language (pydantic), and the bounded reader of space files.

One model, :class:`SpaceFile`, says what a space file may contain; every section forbids unknown
keys. A *dimension* (a value a trial samples) is one of

* a list -- a categorical choice of scalars (string, number, boolean, null; never a list or table);
* ``{low, high[, log][, step]}`` -- an int range when both bounds are integers, else a float range;
  finite bounds, ``low <= high``, ``log`` needs ``low > 0``, ``step > 0`` and not with ``log``;
* ``{value = ...}`` -- a fixed value of any type (e.g. a list: ``features = { value = ["attribute"] }``);
* any other scalar -- a fixed value.

Floats are finite everywhere (no NaN, no inf). A file is read whole (at most 1 MiB); YAML is read
with PyYAML's safe loader with aliases refused, so a "billion laughs" file fails at once.

Errors: :func:`validate_space` raises :class:`~personalign.errors.ConfigurationError` with one line
``<file>: <key> = <value>: <problem>``, e.g. ``space.toml: [pruner] n_startup_trials = -1: must be
>= 0``. Which strategy, teleprompter or setting a name refers to is checked against the stage by
:class:`~personalign.sweeps.space.SearchSpace`, not here.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import (AfterValidator, BaseModel, ConfigDict, Discriminator, Field, StrictBool, StrictInt, StrictStr,
                      StringConstraints, Tag, ValidationError, model_validator)

from personalign.errors import ConfigurationError, DataError

MAX_BYTES = 1024**2  # a space file is read whole; larger files are refused


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be a finite number (not NaN or infinity)")
    return value


def _scalar(value: Any) -> Any:
    if value is not None and not isinstance(value, (bool, int, float, str)):
        kind = "list" if isinstance(value, list) else "table" if isinstance(value, dict) else type(value).__name__
        raise ValueError(f"a choice is a string, number, boolean or null, not a {kind}")
    return _finite(value)


Number = Annotated[Union[StrictInt, Annotated[float, Field(strict=True)]], AfterValidator(_finite)]
Scalar = Annotated[Any, AfterValidator(_scalar)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class RangeSpec(_Strict):
    """``{low, high[, log][, step]}``: an int range when both bounds are ints, else a float range."""

    low: Number
    high: Number
    log: StrictBool = False
    step: Number | None = None

    @model_validator(mode="after")
    def _check(self) -> "RangeSpec":
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) > high ({self.high})")
        if self.log and self.low <= 0:
            raise ValueError("a log range needs low > 0")
        if self.step is not None:
            if self.step <= 0:
                raise ValueError(f"step must be > 0, got {self.step}")
            if self.log:
                raise ValueError("a log range takes no step")
            if self.is_int and not isinstance(self.step, int):
                raise ValueError(f"an int range (integer low and high) needs an integer step, got {self.step}")
            steps = (self.high - self.low) / self.step
            if not math.isclose(steps, round(steps), rel_tol=0, abs_tol=1e-9):  # Optuna would move high
                raise ValueError(f"high - low ({self.high} - {self.low}) is not a multiple of step ({self.step})")
        return self

    @property
    def is_int(self) -> bool:
        return isinstance(self.low, int) and isinstance(self.high, int)


class FixedSpec(_Strict):
    """``{value = ...}``: a fixed value of any type (lists included)."""

    value: Any

    @model_validator(mode="after")
    def _check(self) -> "FixedSpec":
        _deep_finite(self.value)
        return self


def _deep_finite(value: Any) -> None:
    if isinstance(value, dict):
        for v in value.values():
            _deep_finite(v)
    elif isinstance(value, list):
        for v in value:
            _deep_finite(v)
    else:
        _finite(value)


def _dimension_kind(value: Any) -> str:
    if isinstance(value, list):
        return "choices"
    if isinstance(value, dict):
        return "fixed" if "value" in value else "range"
    return "scalar"


DimensionSpec = Annotated[
    Union[Annotated[Annotated[list[Scalar], Field(min_length=1)], Tag("choices")],
          Annotated[RangeSpec, Tag("range")], Annotated[FixedSpec, Tag("fixed")], Annotated[Scalar, Tag("scalar")]],
    Discriminator(_dimension_kind)]
"""One dimension: choices, a range, ``{value = ...}`` or a fixed scalar."""

Key = Annotated[StrictStr, StringConstraints(pattern=r"^[\w.:/@+-]{1,100}$")]
"""A name used as a key (strategy, teleprompter, setting): printable, no spaces, at most 100 characters."""

Settings = dict[Key, DimensionSpec]


class EvaluationSpec(_Strict):
    minibatch_size: Annotated[StrictInt, Field(ge=1)] = 8


class PrunerSpec(_Strict):
    """Optuna's ``MedianPruner`` settings, or ``kind = "none"`` (``NopPruner``)."""

    kind: Literal["median", "none"] = "median"
    n_startup_trials: Annotated[StrictInt, Field(ge=0)] = 4
    n_warmup_steps: Annotated[StrictInt, Field(ge=0)] = 1
    interval_steps: Annotated[StrictInt, Field(ge=1)] = 1
    n_min_trials: Annotated[StrictInt, Field(ge=1)] = 1


def _temperature(spec: Any) -> Any:
    values = (spec if isinstance(spec, list) else [spec.low, spec.high] if isinstance(spec, RangeSpec)
              else [spec.value] if isinstance(spec, FixedSpec) else [spec])
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise ValueError(f"a temperature is a finite number >= 0, got {v!r}")
    return spec


class LMSpec(_Strict):
    temperature: Annotated[DimensionSpec, AfterValidator(_temperature)] | None = None
    optimizer: Union[StrictStr, Annotated[list[StrictStr], Field(min_length=1)]] | None = None


class SpaceFile(_Strict):
    """The whole space language (see the module docstring and ``docs/sweeps.md``)."""

    strategies: Union[StrictStr, list[StrictStr]] | None = None
    evaluation: EvaluationSpec = EvaluationSpec()
    pruner: PrunerSpec = PrunerSpec()
    lm: LMSpec = LMSpec()
    optimizer: dict[Key, Settings] = {}
    fit: Settings = {}
    strategy: dict[Key, Settings] = {}


# --- errors: one line naming the file, the key and the value ----------------------------------------

_SECTIONS = ("evaluation", "pruner", "lm", "optimizer", "fit", "strategy")
_TAGS = {"choices", "range", "fixed", "scalar"}


_TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict"}
_UNION_MESSAGES = {
    "strategies": "must be a list of strategy names (or one comma-separated string)",
    "lm.optimizer": "must be a teleprompter name or a list of them",
}


def _key_parts(loc: tuple) -> list[str]:
    """The keys of a pydantic error location: list indices, union members and dimension tags dropped."""
    return [p if p.isprintable() and len(p) <= 60 else repr(p)[:60] for p in map(str, (
        p for p in loc if not isinstance(p, int) and p not in _TAGS and p not in _TYPE_TAGS and "[" not in str(p)))]


def key_name(loc: tuple) -> str:
    """``("strategy", "minilm-logreg", "C", "low")`` -> ``"[strategy.minilm-logreg] C.low"``."""
    parts = _key_parts(loc)
    if not parts:
        return "(top level)"
    if parts[0] in ("optimizer", "strategy") and len(parts) == 2:
        return f"[{parts[0]}.{parts[1]}]"
    if parts[0] in _SECTIONS and len(parts) > 1:
        head = 2 if parts[0] in ("optimizer", "strategy") else 1
        return f"[{'.'.join(parts[:head])}] {'.'.join(parts[head:])}"
    if parts[0] in _SECTIONS:
        return f"[{parts[0]}]"
    return ".".join(parts)


def show(value: Any, limit: int = 60) -> str:
    """A value for an error line: repr, shortened."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _message(err: dict) -> str:
    msg = err["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    if err["type"] == "extra_forbidden":
        return "unknown key"
    if err["type"] in ("model_type", "model_attributes_type", "dict_type"):
        return "must be a table"
    if err["type"] == "string_pattern_mismatch":
        return "a name is 1 to 100 letters, digits or _ . : / @ + -"
    if err["type"] in ("int_type", "int_parsing", "int_from_float"):
        return "must be an integer"
    if err["type"] in ("float_type", "float_parsing"):
        return "must be a number"
    return msg.replace("Input should be", "must be")


def first_error(exc: ValidationError, source: str, raw: Any) -> ConfigurationError:
    """The first error of ``exc`` (validating ``raw``) as one line naming ``source``, key and value."""
    err = exc.errors(include_url=False)[0]
    loc = err["loc"]
    if err["type"] == "extra_forbidden" and len(loc) == 1:
        return ConfigurationError(f"{source}: unknown section '{loc[0]}' = {show(err.get('input'))}; known: "
                                  f"{', '.join(SpaceFile.model_fields)}")
    field = ".".join(_key_parts(loc))
    union = any(p in _TYPE_TAGS or "[" in str(p) for p in loc if isinstance(p, str))
    message = _UNION_MESSAGES.get(field) if union else None
    value = _value_at(raw, _key_parts(loc)) if union and field in _UNION_MESSAGES else err.get("input")
    return ConfigurationError(f"{source}: {key_name(loc)} = {show(value)}: {message or _message(err)}")


def _value_at(raw: Any, keys: list[str]) -> Any:
    for key in keys:
        if not isinstance(raw, dict) or key not in raw:
            return raw
        raw = raw[key]
    return raw


def validate_space(raw: Any, source: str) -> SpaceFile:
    """``raw`` (a parsed space file) as a :class:`SpaceFile`.

    Raises:
        ConfigurationError: one line ``<source>: <key> = <value>: <problem>``.
    """
    if not isinstance(raw, dict):
        raise ConfigurationError(f"{source}: a search space is a table of sections, got {type(raw).__name__}")
    try:
        return SpaceFile.model_validate(raw)
    except ValidationError as exc:
        raise first_error(exc, source, raw) from None


# --- reading a file --------------------------------------------------------------------------------

def _safe_yaml_loader():
    import yaml

    class NoAliasSafeLoader(yaml.SafeLoader):
        """PyYAML's safe loader that refuses aliases (``*name``): no entity expansion ("billion laughs")."""

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed in a search space",
                                                  event.start_mark)
            return super().compose_node(parent, index)

    return NoAliasSafeLoader


def read_space_file(path: str | Path) -> dict[str, Any]:
    """The parsed content of a ``.toml`` or ``.yaml``/``.yml`` space file (not yet validated).

    Raises:
        DataError: unreadable, too large or unparsable file (with the line when the parser gives one).
        ConfigurationError: another suffix.
    """
    from personalign.data.files import read_text

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".yaml", ".yml"):
        raise ConfigurationError(f"{path}: a search space is a .toml or .yaml file")
    text = read_text(path, what="search space file", max_bytes=MAX_BYTES)
    if suffix == ".toml":
        import re
        import tomllib

        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            m = re.search(r"\s*\(at line (\d+), column (\d+)\)", str(exc))
            line = getattr(exc, "lineno", None) or (int(m.group(1)) if m else None)
            msg = str(exc)[: m.start()] + f" (column {m.group(2)})" if m else str(exc)
            raise DataError(path, line, None, f"invalid TOML: {msg}") from None
        except (RecursionError, ValueError) as exc:  # nesting too deep, an integer too long
            raise DataError(path, None, None, f"invalid TOML: {type(exc).__name__}") from None
    import yaml

    try:
        raw = yaml.load(text, Loader=_safe_yaml_loader())  # noqa: S506 -- a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise DataError(path, None if mark is None else mark.line + 1, None,
                        f"invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    except (RecursionError, ValueError) as exc:
        raise DataError(path, None, None, f"invalid YAML: {type(exc).__name__}") from None
    return {} if raw is None else raw


__all__ = ["DimensionSpec", "FixedSpec", "LMSpec", "MAX_BYTES", "PrunerSpec", "RangeSpec", "SpaceFile",
           "key_name", "read_space_file", "show", "validate_space"]
