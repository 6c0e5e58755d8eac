"""The values of a saved program's state, checked before use: type, range, finiteness, readiness.

:func:`personalign.programs.saved.validate_state` checks that a saved state has the keys and JSON
types of the strategy's own fresh state; a fresh state holds ``None`` where a fitted value goes (a
threshold, a majority label), so that check alone admits anything there. This module adds:

* :class:`CommonState` -- the keys strategies share, wherever they occur in the state (nested
  member states too): ``threshold`` a finite number, ``top_fraction`` in [0, 1], ``C`` and ``lr``
  > 0, ``min_group``/``epochs``/``max_length``/``batch_size``/``n_embd`` integers >= 1,
  ``fitted`` a boolean, ``features``/``corpus`` lists of strings, ``model`` a string;
* the strategy's own schema, when its class defines ``state_schema()`` (a pydantic model of the
  whole state, e.g. :class:`~personalign.programs.common.generic.Majority`: ``value`` of the
  stage's output type);
* :func:`check_ready` -- after loading, a program that must be fitted to predict is fitted
  (``fitted: false`` or a missing threshold is refused at load, not as a traceback per row).

Every refusal is a one-line :class:`~personalign.errors.DataError` naming the file and the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from personalign.errors import DataError

Finite = Annotated[float, Field(allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=1)]


class CommonState(BaseModel):
    """State keys shared by strategies, checked strictly where present (other keys pass)."""

    model_config = ConfigDict(extra="allow", strict=True)
    threshold: Optional[Finite] = None
    top_fraction: Optional[Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]] = None
    C: Optional[Positive] = None
    lr: Optional[Positive] = None
    min_group: Optional[Count] = None
    epochs: Optional[Count] = None
    max_length: Optional[Count] = None
    batch_size: Optional[Count] = None
    n_embd: Optional[Count] = None
    fitted: Optional[bool] = None
    features: Optional[list[str]] = None
    corpus: Optional[list[str]] = None
    model: Optional[str] = None


def _first_error(exc: ValidationError, path: Path, key: str) -> DataError:
    err = exc.errors()[0]
    loc = ".".join(str(x) for x in err["loc"])
    value = err.get("input")
    shown = f" (got {value!r:.60})" if not isinstance(value, (dict, list)) else ""
    return DataError(path, None, f"{key}.{loc}" if loc else key, f"{err['msg']}{shown}")


def _check_common(state: Any, path: Path, key: str) -> None:
    if not isinstance(state, dict):
        return
    try:
        CommonState.model_validate({k: v for k, v in state.items() if k in CommonState.model_fields})
    except ValidationError as exc:
        raise _first_error(exc, path, key) from None
    for k, v in state.items():
        if isinstance(v, dict) and k != "demos":
            _check_common(v, path, f"{key}.{k}")


def check_values(program, state: dict, path: Path) -> None:
    """Check ``state``'s values: :class:`CommonState` everywhere in it, then the strategy's own
    ``state_schema()`` when its class has one.

    Raises:
        DataError: one line naming the file, ``state.<key>`` and what the value must be.
    """
    _check_common(state, path, "state")
    schema = getattr(type(program), "state_schema", None)
    if schema is None:
        return
    try:
        schema().model_validate(state)
    except ValidationError as exc:
        raise _first_error(exc, path, "state") from None


def check_ready(program, state: dict, path: Path) -> None:
    """A loaded program can predict: not saved unfitted (``fitted: false`` where the strategy has
    weights), and its ``require_compiled()`` passes (a threshold, a majority label).

    Raises:
        DataError: one line naming the file and the key.
    """
    if state.get("fitted") is False and hasattr(program, "load_weights"):
        raise DataError(path, None, "state.fitted", "false: the program was saved before it was fitted and cannot "
                                                    "predict; compile it again")
    require = getattr(program, "require_compiled", None)
    if require is None:
        return
    try:
        require()
    except RuntimeError as exc:
        raise DataError(path, None, "state", f"the program cannot predict: {str(exc).splitlines()[0][:160]}") from None


__all__ = ["CommonState", "check_ready", "check_values"]
