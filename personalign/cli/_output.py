"""The command line's one JSON writer: ``--json`` output is strict JSON (no ``NaN`` or
``Infinity`` literal: such a value is written as null and listed under ``non_finite_as_null``;
:func:`personalign.data.dumps`), written to stdout in one go."""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Iterator


def print_json(obj: Any, **kwargs: Any) -> None:
    """Write ``obj`` as one line of strict JSON on stdout (``kwargs`` go to :func:`personalign.data.dumps`)."""
    from personalign.data import dumps

    sys.stdout.write(dumps(obj, **kwargs) + "\n")


def print_jsonl(rows: list, **kwargs: Any) -> None:
    """Write ``rows`` as JSONL on stdout, rendered whole first: a row that cannot be written leaves no
    partial output."""
    from personalign.data import dumps

    sys.stdout.write("".join(dumps(row, **kwargs) + "\n" for row in rows))


@contextlib.contextmanager
def failing_on(path: Any, what: str) -> Iterator[None]:
    """Inside, a failure that is not an input error (a bug in a view of a result) is still one line
    naming the file it shows: ``error: PATH: WHAT failed: TypeName: message`` (exit 2, chained).

    Raises:
        DataError: naming ``path`` and ``what``; a :class:`~personalign.errors.PersonalignError`
            passes through as raised.
    """
    from personalign.errors import DataError, PersonalignError, brief

    try:
        yield
    except PersonalignError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise DataError(path, None, None, f"{what} failed: {brief(exc)}") from exc


__all__ = ["failing_on", "print_json", "print_jsonl"]
