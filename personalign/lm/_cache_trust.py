"""Whether an LM cache directory may be trusted like the user's own files.

DSPy's disk cache (diskcache's ``FanoutCache``: shards ``000``, ``001``, ... each an SQLite
``cache.db``) keeps pickled responses and unpickles them when a call is answered from it; DSPy has
no hook to avoid that. Anyone who can write there can run code as the user. So, before DSPy or the
forward-pass cache (:mod:`personalign.lm.forward`, which never unpickles) opens it, the directory,
its shard directories and every ``cache.db`` must be owned by the user (or root) and not writable by
group or others, and each existing ``cache.db`` must open as an SQLite database (read-only, immutable: no
side file made; at most :data:`SQLITE_TIMEOUT_S`): a garbage shard is one line here, not DSPy's traceback.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from personalign.errors import CacheDirError

SQLITE_TIMEOUT_S = 2.0
SUBDIRS = ("forward-pass",)


def cache_entries(path: Path) -> list[Path]:
    """The existing parts of the cache at ``path``: the directory, each shard directory (``NNN``,
    ``forward-pass``) and each ``cache.db`` (paths; absent ones left out)."""
    dirs = [path, *sorted(path.glob("[0-9][0-9][0-9]")), *(path / d for d in SUBDIRS)]
    out = []
    for d in dirs:
        out += [p for p in (d, d / "cache.db") if p == path or os.path.lexists(p)]
    return list(dict.fromkeys(out))


def check_cache_trust(path: Path) -> None:
    """Refuse a cache another user could have written (see the module docstring).

    Raises:
        CacheDirError: one line naming the entry: owned by another user, writable by group or
            others (``chmod go-w``), or a ``cache.db`` SQLite cannot read.
    """
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    for entry in cache_entries(path):
        try:
            st = entry.stat()
        except OSError:
            continue  # gone, or its kind is refused by the caller's check
        shown = entry if entry == path else f"{path}: {entry.relative_to(path)}"
        if uid is not None and st.st_uid not in (uid, 0):
            raise CacheDirError(f"cache dir {shown} is owned by another user (uid {st.st_uid}); it holds pickles that "
                                "run as code when read: use your own --cache-dir, or --no-cache")
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise CacheDirError(f"cache dir {shown} is writable by group or others: anyone who can write there can "
                                f"run code as you (it holds pickles): chmod go-w {entry}")
        if entry.name == "cache.db" and stat.S_ISREG(st.st_mode) and st.st_size:
            _check_sqlite(entry, shown)


def _check_sqlite(db: Path, shown: str) -> None:
    from personalign.stores import sqlite_problem

    # immutable: SQLite makes no -wal/-shm beside it (a refused command writes nothing); the header
    # and schema it reads are whole in the main file even while DSPy writes to the WAL
    problem = sqlite_problem(db, timeout=SQLITE_TIMEOUT_S, immutable=True)
    if problem is not None:
        raise CacheDirError(f"cache dir {shown} cannot be read as an SQLite database ({problem}); remove it, "
                            "pass another --cache-dir, or --no-cache")
