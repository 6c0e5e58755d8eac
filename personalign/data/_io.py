"""Low-level reading and writing of data files, with one-line errors.

Every function here raises :class:`~personalign.errors.DataError` naming the file, the
1-based line and the field when the input is malformed. JSONL is read one line at a time
(the file is never held in memory as a whole); JSON documents are parsed whole because the
upstream formats (PrefEval, CUPID) are single JSON arrays of a few hundred records.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from pydantic import BaseModel, ValidationError

from personalign.errors import DataError

__all__ = [
    "iter_jsonl",
    "read_json",
    "write_jsonl",
    "require",
    "array_element_lines",
    "validation_to_data_error",
    "check_file",
]


def check_file(path: str | os.PathLike, *, what: str = "data file") -> Path:
    """Return ``path`` as a :class:`Path`; raise DataError if it is missing or a directory."""
    p = Path(path)
    if not p.exists():
        raise DataError(p, None, None, f"{what} not found")
    if p.is_dir():
        raise DataError(p, None, None, f"expected a file, found a directory")
    return p


def iter_jsonl(path: str | os.PathLike, *, allow_empty: bool = False) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for each non-blank line of a JSONL file.

    Streams: only one line is held at a time. Blank lines are skipped.

    Raises:
        DataError: file missing; bytes not UTF-8 (names the line); a line that is not valid
            JSON (e.g. truncated) or not a JSON object; a file with no records (unless
            ``allow_empty``).
    """
    p = check_file(path)
    n = 0
    with p.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(p, lineno, None, f"not valid UTF-8 (byte {exc.start}: {raw[exc.start:exc.start + 1]!r})") from None
            if lineno == 1 and line.startswith("\ufeff"):
                line = line[1:]
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(p, lineno, None, f"invalid JSON: {exc.msg} (column {exc.colno}); truncated line?") from None
            if not isinstance(obj, dict):
                raise DataError(p, lineno, None, f"expected a JSON object, got {type(obj).__name__}")
            n += 1
            yield lineno, obj
    if n == 0 and not allow_empty:
        raise DataError(p, None, None, "file is empty (no JSON records)")


def read_json(path: str | os.PathLike) -> Any:
    """Parse a whole JSON document. Raises DataError (with the line of a syntax error) on
    missing files, non-UTF-8 bytes, empty files and invalid JSON."""
    p = check_file(path)
    data = p.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(p, line, None, f"not valid UTF-8 (byte offset {exc.start})") from None
    if not text.strip():
        raise DataError(p, None, None, "file is empty")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(p, exc.lineno, None, f"invalid JSON: {exc.msg} (column {exc.colno})") from None


def array_element_lines(path: str | os.PathLike, n: int) -> list[int | None]:
    """1-based line on which each element of a top-level JSON array starts, for error messages
    about pretty-printed JSON arrays (one scan of the text, tracking nesting outside strings).
    Returns ``[None] * n`` if the scan does not find exactly ``n`` elements."""
    text = Path(path).read_text(encoding="utf-8-sig")
    lines: list[int | None] = []
    depth, line, in_str, esc, expect = 0, 1, False, False, False
    for ch in text:
        if ch == "\n":
            line += 1
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if depth == 1 and expect and not ch.isspace() and ch not in ",]":
            lines.append(line)
            expect = False
        if ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth == 1:
                expect = True
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 1:
            expect = True
    return lines if len(lines) == n else [None] * n


def require(rec: Mapping, field: str, types: type | tuple[type, ...], path, line: int | None,
            *, allow_empty: bool = False, where: str = "") -> Any:
    """Return ``rec[field]``; raise DataError if it is missing, of the wrong type, or an empty
    string (unless ``allow_empty``). ``bool`` never passes for ``int``/``float`` and vice versa.
    ``where`` prefixes the field name in the message (e.g. ``"conversation.0."``)."""
    name = f"{where}{field}"
    if not isinstance(rec, Mapping):
        raise DataError(path, line, where.rstrip(".") or None, f"expected an object, got {type(rec).__name__}")
    if field not in rec:
        raise DataError(path, line, name, "missing")
    value = rec[field]
    tt = types if isinstance(types, tuple) else (types,)
    ok = isinstance(value, tt) and not (isinstance(value, bool) and bool not in tt)
    if not ok:
        want = " or ".join(t.__name__ for t in tt)
        raise DataError(path, line, name, f"expected {want}, got {_json_type(value)}")
    if isinstance(value, str) and not allow_empty and not value.strip():
        raise DataError(path, line, name, "empty string")
    return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(value), type(value).__name__)


def validation_to_data_error(exc: ValidationError, path, line: int | None) -> DataError:
    """Turn the first error of a pydantic ValidationError into a one-line DataError."""
    err = exc.errors()[0]
    field = ".".join(str(x) for x in err.get("loc", ())) or None
    msg = err.get("msg", "invalid")
    if err.get("type") == "missing":
        msg = "missing"
    elif err.get("type") == "extra_forbidden":
        msg = "unknown field"
    elif err.get("type") == "value_error":
        msg = msg.removeprefix("Value error, ")
    elif "input" in err:
        msg = f"{msg} (got {_json_type(err['input'])})"
    return DataError(path, line, field, msg)


def write_jsonl(path: str | os.PathLike, records: Iterable[BaseModel | Mapping]) -> int:
    """Write records (pydantic models or mappings) as JSONL, atomically.

    The file is written to a temporary sibling and renamed into place only when every
    record was serialized, so a failure leaves no partial output. Returns the number of
    records written.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    n = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            for rec in records:
                if isinstance(rec, BaseModel):
                    line = rec.model_dump_json()
                else:
                    line = json.dumps(rec, ensure_ascii=False)
                out.write(line + "\n")
                n += 1
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return n
