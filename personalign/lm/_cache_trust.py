"""Whether an LM cache directory may be trusted like the user's own files.

DSPy's disk cache (diskcache's ``FanoutCache``: shards ``000``, ``001``, ... each an SQLite
``cache.db`` with its ``-wal``/``-shm`` files, large values as files in nested folders) keeps pickled
responses and unpickles them when a call is answered from it; DSPy has no hook to avoid that. Anyone
who can write there can run code as the user. So, before DSPy or the forward-pass cache
(:mod:`personalign.lm.forward`, which never unpickles) opens it:

- every file and folder under the cache dir (``lstat``: never through a link) is owned by the user
  (or root) and not writable by group or others; a symlink is refused unless it resolves inside the
  cache dir (its target is then walked like the rest);
- no folder above the cache dir is writable by others (who could swap the cache dir itself) unless
  sticky; the walk up stops at the first root-owned sticky folder (``/tmp``). A folder writable by
  its group passes only when that group is the user's own private group (``umask 002`` systems);
- each ``cache.db`` at the top or in a shard opens as an SQLite database (read-only, immutable: no
  side file made; at most :data:`SQLITE_TIMEOUT_S`) whose diskcache ``Settings`` are plain values:
  diskcache pastes the ``sqlite_*`` ones into ``PRAGMA`` statements and sets the ``disk_*`` ones on
  its Disk object, so a garbage shard or a hostile setting is one line here, not DSPy's traceback.

The walk is one ``os.scandir`` + ``lstat`` per entry (no reading, no hashing): thousands of files
take milliseconds.
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections import deque
from pathlib import Path

from personalign.errors import CacheDirError

SQLITE_TIMEOUT_S = 2.0
SUBDIRS = ("forward-pass", "ledger")
JOURNAL_MODES = ("delete", "truncate", "persist", "memory", "wal", "off")
COUNTERS = ("count", "size", "hits", "misses")  # diskcache's metadata rows, kept by its triggers
_NUMBER = re.compile(r"-?[0-9]{1,19}(\.[0-9]{1,19})?")


def check_cache_trust(path: Path) -> None:
    """Refuse a cache another user could have written (see the module docstring).

    Raises:
        CacheDirError: one line naming the first offending path: owned by another user, writable by
            group or others (``chmod go-w PATH``), a symlink out of the cache dir, a ``cache.db``
            SQLite cannot read, or a hostile diskcache setting.
    """
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    root = Path(os.path.realpath(path))
    for ancestor in _loose_ancestors(Path(path).absolute(), uid) + _loose_ancestors(root, uid):
        raise CacheDirError(f"cache dir {path}: the folder above it, {ancestor}, is writable by others (not "
                            "sticky): anyone could replace the cache dir, which holds pickles that run as code "
                            f"when read: chmod go-w {ancestor}, or use another --cache-dir")
    _check_entry(path, root, root, os.stat(root), uid)
    queue = deque([root])  # breadth first: the shallowest offender is named
    while queue:
        folder = queue.popleft()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue  # gone, or unreadable: DSPy's own open reports it
        for entry in sorted(entries, key=lambda e: e.name):
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # gone meanwhile
            if stat.S_ISLNK(st.st_mode):
                _check_link(path, root, Path(entry.path))
                continue
            _check_entry(path, root, Path(entry.path), st, uid)
            if stat.S_ISDIR(st.st_mode):
                queue.append(Path(entry.path))
            elif entry.name == "cache.db" and root in (folder, folder.parent) and st.st_size:
                _check_sqlite(Path(entry.path), _shown(path, root, Path(entry.path)))


def _shown(path: Path, root: Path, entry: Path) -> str:
    return str(path) if entry == root else f"{path}: {entry.relative_to(root)}"


def _check_entry(path: Path, root: Path, entry: Path, st: os.stat_result, uid: int | None) -> None:
    shown = _shown(path, root, entry)
    if uid is not None and st.st_uid not in (uid, 0):
        raise CacheDirError(f"cache dir {shown} is owned by another user (uid {st.st_uid}); it holds pickles that "
                            "run as code when read: use your own --cache-dir, or --no-cache")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheDirError(f"cache dir {shown} is writable by group or others: anyone who can write there can "
                            f"run code as you (it holds pickles): chmod go-w {entry}")


def _check_link(path: Path, root: Path, link: Path) -> None:
    target = Path(os.path.realpath(link))
    if target != root and root not in target.parents:
        raise CacheDirError(f"cache dir {_shown(path, root, link)} is a symlink out of the cache dir (to {target}): "
                            "what it points at is not checked and may be written by others; remove it, or --no-cache")


def _loose_ancestors(path: Path, uid: int | None) -> list[Path]:
    """The folders above ``path`` (nearest first, up to the first root-owned sticky one such as
    ``/tmp``) in which others may rename or replace entries: the first, or none."""
    for folder in path.parents:
        try:
            st = os.stat(folder)
        except OSError:
            continue
        if st.st_mode & stat.S_ISVTX:
            if st.st_uid == 0:
                return []  # sticky, root's: others may add entries but not remove or rename ours
            if st.st_uid == uid:
                continue
        if st.st_mode & stat.S_IWOTH or (st.st_mode & stat.S_IWGRP and not _private_group(st.st_gid, uid)):
            return [folder]
    return []


def _private_group(gid: int, uid: int | None) -> bool:
    """True when ``gid`` is the user's own group (named after the user, no other members): the
    ``umask 002`` convention, where the user's folders are group-writable for nobody else."""
    try:
        import grp
        import pwd

        user, group = pwd.getpwuid(uid), grp.getgrgid(gid)
    except (ImportError, KeyError, TypeError):
        return False
    return group.gr_name == user.pw_name and user.pw_gid == gid and set(group.gr_mem) <= {user.pw_name}


def _check_sqlite(db: Path, shown: str) -> None:
    import sqlite3

    from personalign.stores import read_only_sqlite

    # immutable: SQLite makes no -wal/-shm beside it (a refused command writes nothing); the header
    # and schema it reads are whole in the main file even while DSPy writes to the WAL
    try:
        with read_only_sqlite(db, timeout=SQLITE_TIMEOUT_S, immutable=True) as con:
            names = {n for (n,) in con.execute("select name from sqlite_master where type = 'table'")}
            settings = con.execute("select key, value from Settings").fetchall() if "Settings" in names else []
    except sqlite3.Error as exc:
        raise CacheDirError(f"cache dir {shown} cannot be read as an SQLite database ({exc or type(exc).__name__}); "
                            "remove it, pass another --cache-dir, or --no-cache") from None
    for key, value in settings:
        problem = setting_problem(key, value)
        if problem:
            raise CacheDirError(f"cache dir {shown}: diskcache setting {str(key)[:40]!r} {problem}; remove the file, "
                                "pass another --cache-dir, or --no-cache")


def setting_problem(key: object, value: object) -> str | None:
    """Why a diskcache ``Settings`` row (``key``, ``value`` as SQLite returned them) is unsafe to
    hand to diskcache, or None: an ``sqlite_*``/``disk_*`` key diskcache does not define, a numeric
    setting that is not a finite number, an unknown journal mode or eviction policy."""
    from diskcache import DEFAULT_SETTINGS, EVICTION_POLICY

    if key == "sqlite_journal_mode":
        return None if str(value).lower() in JOURNAL_MODES else f"is not one of {', '.join(JOURNAL_MODES)}"
    if key == "eviction_policy":
        return None if value in EVICTION_POLICY else f"is not one of {', '.join(EVICTION_POLICY)}"
    if key in DEFAULT_SETTINGS or key in COUNTERS:
        if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
            return None
        if isinstance(value, str) and _NUMBER.fullmatch(value):
            return None
        return "is not a number"
    if isinstance(key, str) and key.startswith(("sqlite_", "disk_")):
        return "is not a setting diskcache defines"
    return None
