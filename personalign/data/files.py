"""Low-level reading and writing of data files, with one-line errors.

Every function here raises :class:`~personalign.errors.DataError` naming the file, the
1-based line and the field when the input is malformed. JSONL is read one line at a time
(the file is never held in memory as a whole); JSON documents are parsed whole because the
upstream formats (PrefEval, CUPID) are single JSON arrays of a few hundred records.

Readers are bounded: they accept regular files only (a named pipe, ``/dev/zero`` or a socket is
refused before it is opened, so nothing blocks or reads forever), read at most
:data:`MAX_FILE_BYTES` (whole documents) or :data:`MAX_LINE_BYTES` (one JSONL line), and turn
oversized integers, too-deep nesting, unreadable files and binary (NUL-containing) text into
one-line DataErrors.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from pydantic import BaseModel, ValidationError

from personalign.data.strict_json import check_json_values, dumps
from personalign.errors import ArgumentError, ConfigurationError, DataError

__all__ = [
    "reading",
    "iter_jsonl",
    "read_json",
    "write_jsonl",
    "write_text",
    "atomic_text",
    "require",
    "array_element_lines",
    "validation_to_data_error",
    "check_file",
    "check_input",
    "check_output",
    "read_text",
    "read_bounded",
    "loads_json",
    "MAX_FILE_BYTES",
    "MAX_LINE_BYTES",
]

MAX_FILE_BYTES = 2 * 1024**3  # whole-document reads
MAX_LINE_BYTES = 256 * 1024**2  # one JSONL line


@contextlib.contextmanager
def reading(path: str | os.PathLike, *, what: str = "file") -> Iterator[None]:
    """The one place an input's I/O error becomes a one-line error: any :class:`OSError` raised
    inside the block (EIO, ESTALE, a file vanishing, permission lost mid-read) is re-raised as a
    :class:`~personalign.errors.DataError` naming ``path``.

        with reading(path, what="data file"), open(path, "rb") as fh: ...
    """
    try:
        yield
    except OSError as exc:
        raise DataError(path, None, None, f"cannot read {what}: {exc.strerror or exc}") from None


def _file_kind(mode: int) -> str:
    """What a non-regular file is, for an error message ("a named pipe", "a device", ...)."""
    return ("a directory" if stat.S_ISDIR(mode) else "a named pipe" if stat.S_ISFIFO(mode) else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")


def check_input(path: str | os.PathLike, *, what: str = "data file", allow_dir: bool = False) -> Path:
    """Return ``path`` as a :class:`Path` if it is a readable regular file (or, with
    ``allow_dir``, a directory). Never opens a FIFO, device or socket (they could block forever).

    Raises:
        DataError: missing; a directory (unless ``allow_dir``); not a regular file; unreadable.
    """
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise DataError(p, None, None, f"{what} not found") from None
    except OSError as exc:
        raise DataError(p, None, None, f"cannot access {what}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        if allow_dir:
            if not os.access(p, os.R_OK | os.X_OK):
                raise DataError(p, None, None, "cannot read directory (permission denied)")
            return p
        raise DataError(p, None, None, "expected a file, found a directory")
    if not stat.S_ISREG(st.st_mode):
        raise DataError(p, None, None, f"expected a regular file, found {_file_kind(st.st_mode)}")
    if not os.access(p, os.R_OK):
        raise DataError(p, None, None, f"cannot read {what} (permission denied)")
    return p


def check_output(path: str | os.PathLike, *, argument: str = "out") -> Path:
    """The file an output will be written to (``path`` with symlinks resolved, so a link keeps
    pointing at the written file), checked before any work is done: it is a regular file or does
    not exist yet, and a file can be created beside it (its nearest existing folder is a folder we
    can create a file in: probed with a temporary file, removed at once).

    Raises:
        ArgumentError: (naming ``argument``) a path ending in a slash; a symlink loop; a directory, pipe, device or
            socket at ``path``; a parent that is a file; a folder where no file can be created.
    """
    if str(path).endswith(("/", os.sep)):
        raise ArgumentError(argument, f"{path} names a folder; give the path of a file")
    try:
        p = Path(path).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise ArgumentError(argument, f"{path}: {exc}") from None
    if p.exists() or p.is_symlink():
        try:
            mode = p.stat().st_mode
        except OSError as exc:
            raise ArgumentError(argument, f"{path}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(mode):
            raise ArgumentError(argument, f"{path} is {_file_kind(mode)}; give the path of a regular file")
    folder = p.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise ArgumentError(argument, f"{path}: {folder} is a file, not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".probe", dir=folder)
    except OSError as exc:
        raise ArgumentError(argument, f"{path}: cannot create a file in {folder} ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(probe)
    return p


def _new_file_mode(path: Path) -> int:
    """The mode a written file gets: the permission bits of the file it replaces, else 0o666 less
    the umask."""
    try:
        return stat.S_IMODE(path.stat().st_mode) & 0o777  # never a setuid/setgid/sticky bit
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def check_file(path: str | os.PathLike, *, what: str = "data file") -> Path:
    """Return ``path`` as a :class:`Path`; raise DataError unless it is a readable regular file
    (:func:`check_input`)."""
    return check_input(path, what=what)


def read_bounded(path: str | os.PathLike, *, what: str = "data file", max_bytes: int | None = None) -> bytes:
    """The bytes of a readable regular file of at most ``max_bytes`` (default
    :data:`MAX_FILE_BYTES`). Raises DataError (missing, not a regular file, unreadable, too big)."""
    p = check_input(path, what=what)
    limit = MAX_FILE_BYTES if max_bytes is None else max_bytes
    chunks, size = [], 0
    with reading(p, what=what), p.open("rb") as fh:
        # in chunks: read(limit + 1) would allocate the whole limit (256 MB for a program.json) up front
        while size <= limit and (chunk := fh.read(min(1 << 20, limit + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
    if size > limit:
        raise DataError(p, None, None, f"{what} is larger than {limit} bytes")
    return b"".join(chunks)


def read_text(path: str | os.PathLike, *, what: str = "file", max_bytes: int | None = None) -> str:
    """UTF-8 text of a regular file (BOM stripped), bounded as :func:`read_bounded`.

    Raises:
        DataError: as :func:`read_bounded`; bytes not UTF-8 or a NUL byte (a binary file), naming
            the line.
    """
    p = Path(path)
    data = read_bounded(p, what=what, max_bytes=max_bytes)
    nul = data.find(b"\0")
    if nul >= 0:
        raise DataError(p, data[:nul].count(b"\n") + 1, None, "binary file (NUL byte), expected UTF-8 text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(p, line, None, f"not valid UTF-8 (byte offset {exc.start})") from None


def loads_json(text: str | bytes, path, line: int | None = None) -> Any:
    """``json.loads`` whose every failure is a DataError naming ``path`` and the line: invalid
    JSON, an integer of more than 4300 digits, nesting too deep for the parser, a non-finite
    number (``NaN``, ``Infinity``, ``1e309``: not JSON)."""
    try:
        obj = json.loads(text)
        check_json_values(obj, text, path, line)
        return obj
    except json.JSONDecodeError as exc:
        at = line if line is not None else exc.lineno
        raise DataError(path, at, None, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise DataError(path, line, None, "invalid JSON: nested too deeply") from None
    except ValueError as exc:  # e.g. "Exceeds the limit (4300 digits) for integer string conversion"
        raise DataError(path, line, None, f"invalid JSON: {(str(exc).splitlines() or [''])[0][:120]}") from None


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
    with reading(p), p.open("rb") as fh:
        lineno = 0
        while True:
            raw = fh.readline(MAX_LINE_BYTES + 1)
            if not raw:
                break
            lineno += 1
            if len(raw) > MAX_LINE_BYTES:
                raise DataError(p, lineno, None, f"line longer than {MAX_LINE_BYTES} bytes")
            if b"\0" in raw:
                raise DataError(p, lineno, None, "binary data (NUL byte), expected UTF-8 JSON")
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
            except (RecursionError, ValueError):
                obj = loads_json(line, p, lineno)  # raises the one-line DataError
            if not isinstance(obj, dict):
                raise DataError(p, lineno, None, f"expected a JSON object, got {type(obj).__name__}")
            check_json_values(obj, line, p, lineno)
            n += 1
            yield lineno, obj
    if n == 0 and not allow_empty:
        raise DataError(p, None, None, "file is empty (no JSON records)")


def read_json(path: str | os.PathLike) -> Any:
    """Parse a whole JSON document. Raises DataError (with the line of a syntax error) on
    missing files, non-UTF-8 bytes, empty files and invalid JSON."""
    p = Path(path)
    text = read_text(p, what="data file")
    if not text.strip():
        raise DataError(p, None, None, "file is empty")
    return loads_json(text, p)


def array_element_lines(path: str | os.PathLike, n: int) -> list[int | None]:
    """1-based line on which each element of a top-level JSON array starts, for error messages
    about pretty-printed JSON arrays (one scan of the text, tracking nesting outside strings).
    Returns ``[None] * n`` if the scan does not find exactly ``n`` elements."""
    text = read_text(path)
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


@contextlib.contextmanager
def atomic_text(path: str | os.PathLike, *, exclusive: bool = False) -> Iterator[Any]:
    """A UTF-8 text file object whose content replaces ``path`` only when the block ends without an
    error: written to a temporary sibling, renamed into place (a failure -- a full disk, an
    interrupt -- leaves no partial file and the old one untouched). ``exclusive``: linked into place
    instead, so an existing file is never replaced (:class:`FileExistsError`). A symlink at
    ``path`` is followed (the link stays); missing folders are created; the file keeps the mode of
    the one it replaces, else gets 0o666 less the umask."""
    p = Path(path).resolve()  # a symlink keeps pointing at the written file
    p.parent.mkdir(parents=True, exist_ok=True)
    mode = _new_file_mode(p)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            yield out
        os.chmod(tmp, mode)  # mkstemp creates 0o600
        if exclusive:
            os.link(tmp, p)
            os.unlink(tmp)
        else:
            os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text(path: str | os.PathLike, text: str, *, exclusive: bool = False) -> Path:
    """Write ``text`` at ``path`` atomically (:func:`atomic_text`); returns the path written."""
    with atomic_text(path, exclusive=exclusive) as out:
        out.write(text)
    return Path(path)


def write_jsonl(path: str | os.PathLike, records: Iterable[BaseModel | Mapping]) -> int:
    """Write records (pydantic models or mappings) as JSONL, atomically (:func:`atomic_text`):
    the file is renamed into place only when every record was serialized, so a failure leaves no
    partial output. Returns the number of records written.
    """
    n = 0
    with atomic_text(path) as out:
        for rec in records:
            if isinstance(rec, BaseModel):
                line = rec.model_dump_json()
            else:
                line = dumps(rec, ensure_ascii=False)  # NaN/Infinity as null, listed in the row
            out.write(line + "\n")
            n += 1
    return n
