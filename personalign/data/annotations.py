"""Per-annotator labels on a canonical row: ``"annotations": {"<annotator>": <label>, ...}``.

A row of any stage may carry the labels of the people who judged it, one per annotator, each a
value of the stage's output type (relevance and verification: booleans; a stage file's
``["low", "high"]``: one of those strings). From them :func:`majority` derives the row's label,
:func:`yes_rate` the share of yes (``True``) answers, and ``n_annotators`` is ``len(annotations)``.

**Tie rule** (``ties``; the option ``--ties`` of ``personalign label merge``):

* ``"negative"`` (default): an even split counts as *not* the stage's positive class -- what the
  released recenter labels do (``relevant`` iff ``human_yes_rate > 0.5``, so 2 of 4 is not
  relevant);
* ``"positive"``: an even split counts as the positive class;
* ``"drop"``: an even split has no label (the row is left out).

For labels that are not booleans the majority is the most chosen label; a tie among the most
chosen labels has no positive class to fall to, so it needs ``"drop"`` (the others raise).

:func:`check_annotations` validates one row's mapping and raises a one-line
:class:`~personalign.errors.DataError` naming the file, the line and the field
(``annotations.<annotator>`` for a bad label).
"""

from __future__ import annotations

import typing
from collections import Counter
from typing import Any, Callable, Iterable, Mapping

from personalign.errors import DataError

__all__ = ["FIELD", "MAX_PER_ROW", "TIE_RULES", "label_checker", "check_annotations", "majority", "yes_rate",
           "others_majority"]

FIELD = "annotations"
MAX_PER_ROW = 1000  # annotators of one row (crowd studies use 3-10; the agreement figures are pairwise)
TIE_RULES = ("negative", "positive", "drop")


def _json_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(value), type(value).__name__)


def label_checker(output_type: Any) -> Callable[[Any], str | None]:
    """A check of one label value against a stage's output type: returns None when the value fits,
    else the problem in words.

    Args:
        output_type: ``bool``, ``int``, ``float``, ``str``, a ``typing.Literal[...]`` (its values
            are the allowed labels) or a list/tuple of allowed labels.
    """
    if typing.get_origin(output_type) is typing.Literal:
        output_type = list(typing.get_args(output_type))
    if isinstance(output_type, (list, tuple)):
        allowed = list(output_type)

        def one_of(value: Any) -> str | None:
            if any(value == a and type(value) is type(a) for a in allowed):
                return None
            return f"{value!r} is not one of the allowed labels {allowed}"

        return one_of
    checks = {bool: lambda v: isinstance(v, bool),
              int: lambda v: isinstance(v, int) and not isinstance(v, bool),
              float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
              str: lambda v: isinstance(v, str)}
    if output_type not in checks:
        raise ValueError(f"no label check for output type {output_type!r}")
    ok = checks[output_type]
    name = {bool: "boolean", int: "integer", float: "number", str: "string"}[output_type]

    def typed(value: Any) -> str | None:
        return None if ok(value) else f"expected a {name} label, got {_json_name(value)} {value!r:.60}"

    return typed


def check_annotations(value: Any, path, line: int | None, check: Callable[[Any], str | None]) -> dict[str, Any]:
    """The validated ``annotations`` of one row: a non-empty object of annotator name -> label.

    Args:
        value: the row's ``annotations`` value.
        path, line: where the row is (for the error message).
        check: :func:`label_checker` of the stage's output type.

    Raises:
        DataError: not an object; empty; more than :data:`MAX_PER_ROW` annotators; an empty
            annotator name; a label ``check`` refuses
            (field ``annotations.<annotator>``).
    """
    if not isinstance(value, dict):
        raise DataError(path, line, FIELD, f"expected an object {{annotator: label}}, got {_json_name(value)}")
    if not value:
        raise DataError(path, line, FIELD, "empty: give at least one annotator's label")
    if len(value) > MAX_PER_ROW:  # agreement figures compare annotators pairwise: quadratic in this
        raise DataError(path, line, FIELD, f"{len(value):,} annotators on one row; at most {MAX_PER_ROW:,}")
    for name, label in value.items():
        if not name.strip():
            raise DataError(path, line, FIELD, "an annotator name is empty")
        problem = check(label)
        if problem is not None:
            raise DataError(path, line, f"{FIELD}.{name}", problem)
    return dict(value)


def majority(labels: Mapping[str, Any] | Iterable[Any], *, ties: str = "negative", positive: Any = True) -> Any:
    """The majority label of one row's annotations (a mapping annotator -> label, or the labels).

    Boolean labels: the positive class (``positive``; verification's is ``False``, "rejected")
    when strictly more than half chose it, the other value when strictly fewer did, and on an even
    split what ``ties`` says (see the module doc). Other labels: the most chosen label; a tie among
    the most chosen needs ``ties="drop"``.

    Returns:
        the label, or None (a tie under ``"drop"``).

    Raises:
        ValueError: no labels; an unknown tie rule; a tie of non-boolean labels without ``"drop"``.
    """
    if ties not in TIE_RULES:
        raise ValueError(f"tie rule must be one of {', '.join(TIE_RULES)}, got {ties!r}")
    values = list(labels.values()) if isinstance(labels, Mapping) else list(labels)
    if not values:
        raise ValueError("no labels")
    if all(isinstance(v, bool) for v in values):
        yes = sum(v == positive for v in values)
        no = len(values) - yes
        if yes != no:
            return positive if yes > no else (not positive)
        return {"negative": not positive, "positive": positive, "drop": None}[ties]
    counts = Counter(values).most_common()
    top = [v for v, c in counts if c == counts[0][1]]
    if len(top) == 1:
        return top[0]
    if ties == "drop":
        return None
    raise ValueError(f"tie between {', '.join(repr(v) for v in top)} ({counts[0][1]} each); "
                     "--ties negative/positive apply to yes/no labels: use --ties drop")


def others_majority(labels: Mapping[str, Any], annotator: str, *, ties: str = "negative",
                    positive: Any = True, min_others: int = 2) -> tuple[bool, Any]:
    """The majority of the annotators of one row other than ``annotator``: ``(defined, label)``.

    ``defined`` is False when fewer than ``min_others`` others labelled the row, or the others tie
    under ``ties="drop"`` (``label`` is then None)."""
    others = [v for a, v in labels.items() if a != annotator]
    if len(others) < min_others:
        return False, None
    label = majority(others, ties=ties, positive=positive)
    return label is not None, label


def yes_rate(labels: Mapping[str, Any] | Iterable[Any]) -> float | None:
    """Share of ``True`` among boolean labels (the recenter data's ``human_yes_rate``); None when a
    label is not a boolean or there are none."""
    values = list(labels.values()) if isinstance(labels, Mapping) else list(labels)
    if not values or not all(isinstance(v, bool) for v in values):
        return None
    return sum(values) / len(values)
