"""Content digests of data files (an unreadable file is a one-line DataError naming it)."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: str | Path) -> str:
    """sha256 of a data file; for a directory (e.g. PrefEval's topic folder), of its sorted relative
    file paths and their contents."""
    from personalign.data.files import reading

    path = Path(path)
    digest = hashlib.sha256()
    with reading(path):
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        if path.is_dir():
            digest.update(str(f.relative_to(path)).encode() + b"\0")
        with reading(f), open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


__all__ = ["file_sha256"]
