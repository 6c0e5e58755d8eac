"""A saved program's folder is the program it says it is: format version and listed files.

:func:`personalign.programs.saved.load_program` calls these before it builds anything:

* :func:`check_format` -- ``metadata.personalign.format`` is an integer (a JSON number, not
  ``"2"``) of a version this personalign reads (1 to :data:`~personalign.programs.program_schema.FORMAT`);
  a newer or unknown version is refused, never read as if it were the current one;
* :func:`check_listed_files` -- every entry of ``metadata.personalign.weights`` (``{file: sha256}``,
  the files the save wrote for the program to read back) names a regular file *inside* the
  program folder (a relative POSIX path: no absolute path, no ``..``, no symlink out), that file
  exists, and its sha256 is the listed one; for every strategy, whether or not it has weights.

The sha256 list is an integrity check (a corrupt, truncated, swapped or missing file), not a
signature: whoever can edit ``program.json`` can edit the list. What makes an edited program safe
is the rest of the loader (nothing in it is imported or configures a client; every value is
validated). ``prompt.md`` is a readable export that loading never reads; programs saved since this
check no longer list it, and a program that lists it (older saves) has it checked like any entry.

Every refusal is a one-line :class:`~personalign.errors.DataError` naming ``program.json`` and the
key (``metadata.personalign.weights.<file>``).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from personalign.errors import DataError, printable

_SHA256 = re.compile(r"[0-9a-f]{64}")


def check_format(ours: dict[str, Any], path: Path, where: str = "metadata.personalign.") -> None:
    """``ours["format"]`` (when present) is an integer from 1 to the current format.

    Raises:
        DataError: a string, a boolean, a float, or an unknown version (names ``<where>format``).
    """
    from personalign.programs.program_schema import FORMAT

    if "format" not in ours:
        return
    value = ours["format"]
    if type(value) is not int:
        raise DataError(path, None, f"{where}format", f"expected an integer format version, got "
                                                      f"{type(value).__name__} {value!r:.40}")
    if not 1 <= value <= FORMAT:
        raise DataError(path, None, f"{where}format", f"unknown format version {value} (this personalign reads "
                                                      f"versions 1 to {FORMAT}); save it again with this version")


def _inside(directory: Path, name: str) -> Path | None:
    """``directory/name`` when ``name`` is a plain relative path that stays inside ``directory``
    (symlinks resolved), else None."""
    if not name or "\\" in name or "\x00" in name or PureWindowsPath(name).drive:
        return None
    rel = PurePosixPath(name)
    if rel.is_absolute() or any(part in ("..", "") for part in rel.parts) or rel.as_posix() != name:
        return None
    target = directory / rel
    try:
        if not target.resolve().is_relative_to(directory.resolve()):
            return None
    except (OSError, RuntimeError):  # a symlink loop
        return None
    return target


def check_listed_files(directory: Path, listed: dict[str, str], path: Path) -> None:
    """Every ``{file: sha256}`` of ``metadata.personalign.weights`` is a file inside ``directory``
    whose sha256 is the listed one.

    Raises:
        DataError: naming ``path`` and ``metadata.personalign.weights.<file>``: a path outside the
            folder (absolute, ``..``, a symlink out), ``path`` (``program.json``) itself, a malformed digest,
            a missing file or one that is not a regular file, a different sha256.
    """
    for name, digest in listed.items():
        key = f"metadata.personalign.weights.{_shown(name)}"
        try:
            _check_listed(directory, name, digest, key, path)
        except OSError as exc:  # a name too long for the file system, a permission
            raise DataError(path, None, key, f"cannot be read ({exc.strerror or type(exc).__name__})") from None


def _shown(name: Any) -> str:
    """A listed name as an error shows it: at most 80 characters, control characters escaped."""
    text = str(name)
    return printable(text if len(text) <= 80 else text[:77] + "...")


def _check_listed(directory: Path, name: str, digest: Any, key: str, path: Path) -> None:
    from personalign.data.digest import file_sha256

    target = _inside(directory, name)
    if target is None:
        raise DataError(path, None, key, "not a file inside the program folder (a relative path with no '..' "
                                         "and no symlink out); a saved program reads only its own files")
    if target.resolve() == path.resolve():
        raise DataError(path, None, key, f"{path.name} cannot list itself")
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
        raise DataError(path, None, key, "expected a sha256 (64 lowercase hex digits)")
    if not target.is_file():
        raise DataError(path, None, key, "weights file missing" if not target.exists()
                        else "weights file is not a regular file")
    if file_sha256(target) != digest:
        raise DataError(path, None, key, "the file does not match its sha256 (corrupt, or replaced after "
                                         "the save)")


__all__ = ["check_format", "check_listed_files"]
