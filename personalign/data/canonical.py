"""The project's canonical JSONL: one example per line, the fields of its pydantic model.

``write_examples`` writes atomically (nothing is left behind on failure); ``iter_examples``
streams and validates, raising a one-line :class:`~personalign.errors.DataError` that names
the file, the line and the field (including duplicate ids).
"""

from __future__ import annotations

import os
from typing import Iterable, Iterator

from pydantic import ValidationError

from personalign.data.files import iter_jsonl, validation_to_data_error, write_jsonl
from personalign.data.schemas import EXAMPLE_TYPES, TaskExample
from personalign.errors import DataError

__all__ = ["iter_examples", "read_examples", "validate_row", "write_examples", "example_type"]


def example_type(kind: str) -> type[TaskExample]:
    """The example class of a kind name (``relevance``, ``verification``, ``extraction``,
    ``rating``, ``mcq``, ``profile``). Raises DataError for an unknown kind."""
    try:
        return EXAMPLE_TYPES[kind]
    except KeyError:
        raise DataError("--kind", None, None, f"unknown kind '{kind}'; choose from {', '.join(sorted(EXAMPLE_TYPES))}") from None


def validate_row(cls: type, obj: dict, path, lineno: int, seen: dict, key: str = "id"):
    """Line ``lineno`` of ``path`` as a ``cls`` (a pydantic model), its ``key`` not on an earlier line
    (``seen``: key value -> line, updated).

    Raises:
        DataError: one line naming the file, the line and the field (a duplicate names ``key``).
    """
    try:
        ex = cls.model_validate(obj)
    except ValidationError as exc:
        raise validation_to_data_error(exc, path, lineno) from None
    value = getattr(ex, key)
    if value in seen:
        raise DataError(path, lineno, key, f"duplicate {key} '{value}' (first on line {seen[value]})")
    seen[value] = lineno
    return ex


def iter_examples(path: str | os.PathLike, kind: str | type[TaskExample]) -> Iterator[TaskExample]:
    """Stream validated examples of one kind from canonical JSONL.

    Raises:
        DataError: malformed line, missing/mistyped/unknown field, duplicate ``id``, empty file.
    """
    cls = example_type(kind) if isinstance(kind, str) else kind
    seen: dict[str, int] = {}
    for lineno, obj in iter_jsonl(path):
        yield validate_row(cls, obj, path, lineno, seen)


def read_examples(path: str | os.PathLike, kind: str | type[TaskExample]) -> list[TaskExample]:
    """All examples of a canonical JSONL file (see :func:`iter_examples`)."""
    return list(iter_examples(path, kind))


def write_examples(path: str | os.PathLike, examples: Iterable[TaskExample]) -> int:
    """Write examples as canonical JSONL (atomic; returns the count). Duplicate ids raise
    DataError before anything is written."""
    examples = list(examples)
    seen: set[str] = set()
    for i, ex in enumerate(examples, start=1):
        if ex.id in seen:
            raise DataError(path, i, "id", f"duplicate id '{ex.id}' in the examples to write")
        seen.add(ex.id)
    return write_jsonl(path, examples)
