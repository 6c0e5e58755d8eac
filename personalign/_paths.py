"""Output-path checks run before any work (light: stdlib only).

Each raises :class:`personalign.errors.ArgumentError` (one line naming the argument -- ``out``;
the command line shows it as ``--out`` -- and the path), so a bad output path fails before
anything is computed or written.
"""

from __future__ import annotations

import os
from pathlib import Path

from personalign.errors import ArgumentError


def _nearest_existing(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_out_dir(path: Path | None, *, argument: str = "out", must_be_empty: bool = True) -> Path | None:
    """Check an output directory before any work: not a file, (``must_be_empty``) empty if it
    exists, and creatable/writable (its nearest existing ancestor is a writable directory).

    Raises:
        ArgumentError: one line naming ``argument`` and the path.
    """
    if path is None:
        return None
    path = Path(path)
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise ArgumentError(argument, f"{path} is a file, not a directory")
        if must_be_empty and any(path.iterdir()):
            raise ArgumentError(argument, f"{path} is not empty; choose another")
        if not os.access(path, os.W_OK | os.X_OK):
            raise ArgumentError(argument, f"{path} is not writable")
        return path
    base = _nearest_existing(path)
    if not base.is_dir():
        raise ArgumentError(argument, f"{path} cannot be created: {base} is a file")
    if not os.access(base, os.W_OK | os.X_OK):
        raise ArgumentError(argument, f"{path} cannot be created: {base} is not writable")
    return path


def check_out_file(path: Path | None, *, argument: str = "out") -> Path | None:
    """Check an output file path: not a directory, and its directory creatable/writable.

    Raises:
        ArgumentError: one line naming ``argument`` and the path.
    """
    if path is None:
        return None
    path = Path(path)
    if path.is_dir():
        raise ArgumentError(argument, f"{path} is a directory, not a file")
    if path.exists() and not os.access(path, os.W_OK):
        raise ArgumentError(argument, f"{path} is not writable")
    base = _nearest_existing(path.parent)
    if not base.is_dir():
        raise ArgumentError(argument, f"{path} cannot be created: {base} is a file")
    if not os.access(base, os.W_OK | os.X_OK):
        raise ArgumentError(argument, f"{path} cannot be created: {base} is not writable")
    return path


__all__ = ["check_out_dir", "check_out_file"]
