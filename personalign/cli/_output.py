"""The command line's one JSON writer: ``--json`` output is strict JSON (no ``NaN`` or
``Infinity`` literal: such a value is written as null and listed under ``non_finite_as_null``;
:func:`personalign.data.dumps`), written to stdout in one go."""

from __future__ import annotations

import sys
from typing import Any


def print_json(obj: Any, **kwargs: Any) -> None:
    """Write ``obj`` as one line of strict JSON on stdout (``kwargs`` go to :func:`personalign.data.dumps`)."""
    from personalign.data import dumps

    sys.stdout.write(dumps(obj, **kwargs) + "\n")


def print_jsonl(rows: list, **kwargs: Any) -> None:
    """Write ``rows`` as JSONL on stdout, rendered whole first: a row that cannot be written leaves no
    partial output."""
    from personalign.data import dumps

    sys.stdout.write("".join(dumps(row, **kwargs) + "\n" for row in rows))


__all__ = ["print_json", "print_jsonl"]
