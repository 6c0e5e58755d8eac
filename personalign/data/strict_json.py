"""Strict JSON: a data file holds finite numbers and valid Unicode, and a run writes no other.

Python's ``json`` reads and writes ``NaN``, ``Infinity`` and ``-Infinity`` (and reads ``1e309`` as
infinity), none of which is JSON (RFC 8259): other tools refuse such a file. It also reads
``"\\ud800"``, a lone UTF-16 surrogate, into a ``str`` that cannot be encoded as UTF-8: the
first write of it (MLflow's store, stdout, an output file) fails mid-run. Reading,
:func:`check_json_values` refuses both with one line naming the file, the line and the field
(:func:`personalign.data.files.iter_jsonl`, :func:`~personalign.data.files.loads_json`). Writing,
:func:`finite_json` turns each non-finite float into ``null`` and :func:`dumps` says so in the
document: a top-level object gets the key :data:`NOTE_KEY` listing the dotted keys set to null;
``allow_nan=False`` makes any slip an error instead of a broken file.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from personalign.errors import DataError, printable  # printable: re-exported

NOTE_KEY = "non_finite_as_null"  # top-level key listing the values written as null (NaN or infinity)

_BIG_EXPONENT = re.compile(r"[0-9][eE]\+?[0-9]{3}")  # 1e309 parses as infinity
_SURROGATE = re.compile("[\ud800-\udfff]")


def nonfinite_at(value: Any, key: str = "") -> str | None:
    """The dotted key of the first NaN or infinite float in ``value`` (``"score"``,
    ``"scores.2"``; ``""`` for ``value`` itself), or None when every number is finite."""
    if isinstance(value, float):
        return None if math.isfinite(value) else key
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        found = nonfinite_at(v, f"{key}.{k}" if key else str(k))
        if found is not None:
            return found
    return None


def surrogate_at(value: Any, key: str = "") -> str | None:
    """The dotted key of the first string (or object key) in ``value`` holding a lone UTF-16
    surrogate (U+D800-U+DFFF: not text, cannot be written as UTF-8), or None."""
    if isinstance(value, str):
        return key if _SURROGATE.search(value) else None
    if isinstance(value, dict):
        for k, v in value.items():
            sub = f"{key}.{k}" if key else str(k)
            if isinstance(k, str) and _SURROGATE.search(k):
                return sub
            found = surrogate_at(v, sub)
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = surrogate_at(v, f"{key}.{i}" if key else str(i))
            if found is not None:
                return found
    return None


def check_json_values(obj: Any, text: str | bytes, path, line: int | None) -> None:
    """Refuse, in the parsed ``obj`` of ``text``, ``NaN``, ``Infinity`` and numbers too large for
    a float (``1e309``: not JSON numbers, though Python's parser takes them) and lone surrogates
    (``"\\ud800"``: not text). Scans only when ``text`` may hold one (a cheap substring test).

    Raises:
        DataError: one line naming ``path``, ``line`` and the field.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    numbers = "NaN" in text or "Infinity" in text or bool(_BIG_EXPONENT.search(text))
    escapes = "\\ud" in text or "\\uD" in text
    if not numbers and not escapes:
        return
    try:
        at = nonfinite_at(obj) if numbers else None
        if at is not None:
            raise DataError(path, line, printable(at) or None, "not a finite number (NaN or infinity is not a JSON number)")
        at = surrogate_at(obj) if escapes else None
    except RecursionError:
        raise DataError(path, line, None, "invalid JSON: nested too deeply") from None
    if at is not None:
        raise DataError(path, line, printable(at) or None, "a lone UTF-16 surrogate escape (\\ud800-\\udfff without its pair) "
                                                "is not text")


def finite_json(value: Any, key: str = "") -> tuple[Any, list[str]]:
    """``(copy of value with every NaN / infinite float as None, dotted keys replaced)``; dicts,
    lists and tuples are copied, other values kept as they are."""
    found: list[str] = []

    def walk(v: Any, k: str) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            found.append(k)
            return None
        if isinstance(v, dict):
            return {kk: walk(vv, f"{k}.{kk}" if k else str(kk)) for kk, vv in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(vv, f"{k}.{i}" if k else str(i)) for i, vv in enumerate(v)]
        return v

    return walk(value, key), found


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps(value, allow_nan=False, **kwargs)`` after :func:`finite_json`: a NaN or an
    infinity is written as ``null``, and a top-level object lists those keys under
    :data:`NOTE_KEY` (a number that was not finite, e.g. F1 of an empty class)."""
    clean, found = finite_json(value)
    if found and isinstance(clean, dict):
        clean[NOTE_KEY] = found[:100]
    return json.dumps(clean, allow_nan=False, **kwargs)


__all__ = ["NOTE_KEY", "check_json_values", "dumps", "finite_json", "nonfinite_at", "printable", "surrogate_at"]
