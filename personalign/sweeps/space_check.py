"""Checks of a search space against its stage: names it refers to, and the values of settings.

The schema (:mod:`personalign.sweeps.space_schema`) checks shapes and types; this module checks
what only the stage knows, each failure one line ``<file>: <key> = <value>: <problem>``:

* a strategy or teleprompter is a name registered with the stage or with
  :data:`personalign.optimizers.OPTIMIZERS`. A space file never names code: a ``module:attr`` or
  ``file.py:ATTR`` reference that is not registered is refused, never imported (a user's own
  strategy is registered by their stage file or named on the command line);
* a setting never chooses a model (``model``, ``lm``, ``*_lm``, ``*_model``): the model is the
  one the user names with ``--lm``;
* every value a setting can take (each choice, both bounds of a range, a fixed value) is checked
  against the setting's annotation (pydantic, strict) and by building the object with it, so a
  constructor's own check (``C > 0``, known feature names, ``k >= 0``) fails the file, not a trial.
"""

from __future__ import annotations

import inspect
import re
import typing
from typing import Any, Callable

from personalign.errors import ConfigurationError

TELEPROMPTER_COMMON = {"metric", "lm", "seed", "num_threads", "calls_per_run", "score", "label_field", "n_boot",
                       "on_event", "feedback_metric"}
"""Arguments of every teleprompter that the sweep sets itself (not settable from a space)."""

_MODEL_SETTING = re.compile(r"(^|_)(model|lm)$")
_REFERENCE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$|\.py:|^[^:]*[/\\][^:]*:")


def is_reference(value: Any) -> bool:
    """Whether ``value`` looks like a code reference: ``module:attr`` or ``path/file.py:ATTR``."""
    return isinstance(value, str) and bool(_REFERENCE.search(value.strip()))


def refuse_reference(source: str, key: str, value: str) -> ConfigurationError:
    return ConfigurationError(
        f"{source}: {key} = {value!r}: a search space cannot name code (module:attr, file.py:ATTR); register it "
        "in your stage file or name it on the command line")


def check_name(source: str, key: str, name: str, known: Callable[[str], bool], unknown_message: Callable[[], str]) -> None:
    """``name`` is registered (``known(name)``); a code reference is refused, never imported.

    Raises:
        ConfigurationError: ``<source>: <key> = <name>: <why>``.
    """
    if known(name):
        return
    if is_reference(name):
        raise refuse_reference(source, key, name)
    raise ConfigurationError(f"{source}: {key} = {name!r}: {unknown_message()}")


def init_params(cls) -> set[str]:
    """Keyword parameters of ``cls.__init__`` (not ``self``/``**kwargs``)."""
    sig = inspect.signature(cls.__init__)
    return {n for n, p in sig.parameters.items()
            if n != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}


def _annotation(cls, name: str) -> Any:
    """The annotation of ``cls.__init__``'s parameter ``name`` (from the class in ``cls``'s MRO
    whose ``__init__`` declares it), resolved by ``typing.get_type_hints``; None when absent or
    unresolvable."""
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or name not in inspect.signature(init).parameters:
            continue
        try:
            return typing.get_type_hints(init).get(name)
        except Exception:  # noqa: BLE001 -- a forward reference that does not resolve: no type check
            return None
    return None


def _type_problem(cls, name: str, value: Any) -> str | None:
    ann = _annotation(cls, name)
    if ann is None or ann is Any:
        return None
    from pydantic import TypeAdapter, ValidationError

    try:
        adapter = TypeAdapter(ann)
    except Exception:  # noqa: BLE001 -- an annotation pydantic cannot check (an object type): constructor only
        return None
    try:
        adapter.validate_python(value, strict=True)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        problem = f"{err['msg'].replace('Input should be', 'must be')} ({name} takes {_type_text(ann)})"
        if isinstance(value, str) and "Sequence" in str(ann):
            problem += "; a list in a space is a choice: write a fixed list as { value = [...] }"
        return problem
    return None


def _type_text(ann: Any) -> str:
    text = getattr(ann, "__name__", None) or str(ann)
    return text.replace("typing.", "").replace("collections.abc.", "")


def check_setting(source: str, key: str, cls, name: str, values: list, build: Callable[[dict], Any]) -> None:
    """Check each of ``values`` of setting ``name`` of ``cls``: not a model choice, not a code
    reference, of the annotated type, and accepted by ``build({name: value})``.

    Raises:
        ConfigurationError: ``<source>: <key> = <value>: <problem>``.
    """
    from personalign.sweeps.space_schema import show

    if _MODEL_SETTING.search(name):
        raise ConfigurationError(f"{source}: {key}: a search space does not choose the model; the model is the one "
                                 "named with --lm")
    for value in values:
        if is_reference(value):
            raise refuse_reference(source, key, value)
        problem = _type_problem(cls, name, value)
        if problem is None:
            try:
                build({name: value})
            except Exception as exc:  # noqa: BLE001 -- a constructor's own check, whatever it raises
                problem = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        if problem:
            raise ConfigurationError(f"{source}: {key} = {show(value)}: {problem}")


__all__ = ["TELEPROMPTER_COMMON", "check_name", "check_setting", "init_params", "is_reference", "refuse_reference"]
