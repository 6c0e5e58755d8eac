"""Output-path checks run before any work (light: stdlib only).

Each raises :class:`personalign.errors.ConfigurationError` (one line naming the flag and the path),
so a bad ``--out`` / ``--save`` fails before anything is computed or written.
"""

from __future__ import annotations

import os
from pathlib import Path

from personalign.errors import ConfigurationError


def _nearest_existing(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_out_dir(path: Path | None, *, flag: str = "--out", must_be_empty: bool = True) -> Path | None:
    """Check an output directory before any work: not a file, (``must_be_empty``) empty if it
    exists, and creatable/writable (its nearest existing ancestor is a writable directory).

    Raises:
        ConfigurationError: one line naming ``flag`` and the path.
    """
    if path is None:
        return None
    path = Path(path)
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise ConfigurationError(f"{flag} {path} is a file, not a directory")
        if must_be_empty and any(path.iterdir()):
            raise ConfigurationError(f"{flag} {path} is not empty; choose another {flag}")
        if not os.access(path, os.W_OK | os.X_OK):
            raise ConfigurationError(f"{flag} {path} is not writable")
        return path
    base = _nearest_existing(path)
    if not base.is_dir():
        raise ConfigurationError(f"{flag} {path} cannot be created: {base} is a file")
    if not os.access(base, os.W_OK | os.X_OK):
        raise ConfigurationError(f"{flag} {path} cannot be created: {base} is not writable")
    return path


def check_out_file(path: Path | None, *, flag: str = "--out") -> Path | None:
    """Check an output file path: not a directory, and its directory creatable/writable.

    Raises:
        ConfigurationError: one line naming ``flag`` and the path.
    """
    if path is None:
        return None
    path = Path(path)
    if path.is_dir():
        raise ConfigurationError(f"{flag} {path} is a directory, not a file")
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigurationError(f"{flag} {path} is not writable")
    base = _nearest_existing(path.parent)
    if not base.is_dir():
        raise ConfigurationError(f"{flag} {path} cannot be created: {base} is a file")
    if not os.access(base, os.W_OK | os.X_OK):
        raise ConfigurationError(f"{flag} {path} cannot be created: {base} is not writable")
    return path


__all__ = ["check_out_dir", "check_out_file"]
