"""The user's model cache: verify-once stamps and safe concurrent first use.

Model files are large (0.5-1.1 GB) and hashing one takes seconds, so a file is sha256-verified
once and the result is kept in a **stamp** -- ``NAME.stamp.json`` in the models directory
(:func:`personalign.settings.models_dir`), beside the assembled file -- holding the file's path,
size, modification time (ns) and sha256. A later process trusts the stamp while path, size and
mtime still agree, and re-hashes only when they do not (as pip's and Hugging Face's caches key
on file metadata). A read-only cache is fine: nothing is written when the stamp agrees; when it
cannot be written the file is simply re-hashed once per process.

First use from several processes at once (two ``personalign`` commands on a fresh machine) is
serialized by a file lock (``filelock``, an OS lock released when the holder dies) per model; the
winner writes a temporary file in the same directory and renames it into place (``os.replace``,
atomic on POSIX and Windows), the others wait and then find the finished file. A crashed
assembly leaves at most a ``.NAME.*.partial`` file, removed by the next assembly.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Callable

from personalign.errors import ModelFileError

STAMP_VERSION = 1
LOCK_TIMEOUT_S = 3600.0  # the longest another process may hold a model's lock (assembling 1.1 GB takes ~20 s)

_verified: dict[tuple[str, int, int], str] = {}
_how: dict[str, str] = {}  # path -> how this process last vouched for it: "hash", "stamp" or "assembled"
_lock = threading.Lock()


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _key(path: Path, st: os.stat_result) -> tuple[str, int, int]:
    return str(path.absolute()), st.st_size, st.st_mtime_ns


def read_stamp(stamp: Path, path: Path, st: os.stat_result) -> str | None:
    """The sha256 recorded in ``stamp`` when it describes ``path`` as it is now (same path, size
    and mtime in ns), else None (no stamp, unreadable, or the file changed since)."""
    try:
        data = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != STAMP_VERSION:
        return None
    path_key, size, mtime_ns = _key(path, st)
    if (data.get("path"), data.get("size"), data.get("mtime_ns")) != (path_key, size, mtime_ns):
        return None
    sha = data.get("sha256")
    return sha if isinstance(sha, str) and len(sha) == 64 else None


def write_stamp(stamp: Path, path: Path, sha256: str) -> bool:
    """Record ``path``'s current size, mtime and ``sha256`` in ``stamp`` (atomically); False when
    the directory is not writable (a read-only cache: the file is then re-hashed per process)."""
    st = path.stat()
    path_key, size, mtime_ns = _key(path, st)
    body = json.dumps({"version": STAMP_VERSION, "path": path_key, "size": size, "mtime_ns": mtime_ns,
                       "sha256": sha256}, indent=1)
    tmp = stamp.with_name(f".{stamp.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(body + "\n", encoding="utf-8")
        os.replace(tmp, stamp)
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        return False
    return True


def verify(path: Path, expected: str, *, stamp: Path | None, label: str, fix: str, rehash: bool = False) -> str:
    """Return ``path``'s sha256 after checking it equals ``expected``: free when this process or
    a stamp (``stamp``, None = no stamp for this file) already vouches for the file as it is now;
    else the file is hashed and, when it matches, the stamp is (re)written.

    Args:
        label: the model string, for messages. fix: what reinstalls the file, for messages.
        rehash: ignore stamps and this process's memory (``personalign doctor --rehash``).

    Raises:
        ModelFileError: the file is missing, or its sha256 is not ``expected`` (one line naming
            the path, both digests' prefixes and the fix).
    """
    try:
        st = path.stat()
    except OSError:
        raise ModelFileError(f"model file for {label} is missing: {path} ({fix})") from None
    key = _key(path, st)
    with _lock:
        if not rehash and _verified.get(key) == expected:
            return expected
        if not rehash and stamp is not None and read_stamp(stamp, path, st) == expected:
            _verified[key] = expected
            _how[key[0]] = "stamp"
            return expected
        actual = sha256_file(path)
        _how[key[0]] = "hash"
        if actual != expected:
            raise ModelFileError(
                f"model file {path} is corrupted (sha256 {actual[:12]}... != expected {expected[:12]}...); "
                f"delete it ({fix}), then retry"
            )
        _verified[key] = actual
        if stamp is not None:
            write_stamp(stamp, path, actual)
        return actual


def remember(path: Path, sha256: str) -> None:
    """Record in this process that ``path`` (as it is now) has ``sha256`` (just written and hashed)."""
    with _lock:
        key = _key(path, path.stat())
        _verified[key] = sha256
        _how[key[0]] = "assembled"


def how_verified(path: Path) -> str | None:
    """How this process verified ``path``: ``"assembled"`` (hashed while writing it), ``"hash"``
    (read and hashed), ``"stamp"`` (a stamp agreed; nothing read), or None (not yet)."""
    with _lock:
        return _how.get(str(path.absolute()))


_thread_lock = threading.Lock()


def create_once(target: Path, build: Callable[[Path], str], *, label: str) -> bool:
    """Create ``target`` unless it exists, safely across threads and processes.

    ``build(tmp)`` writes the file's bytes to ``tmp`` (in ``target``'s directory) and returns their
    sha256, raising when they are wrong; ``tmp`` is then renamed onto ``target`` (``os.replace``)
    under a per-file lock (``.NAME.lock`` beside it), so concurrent callers never see a partial
    file and only one of them builds. Returns True when this call built the file, False when it
    was already there (or another process built it while this one waited).

    Raises:
        ModelFileError: the directory cannot be created or written (a read-only cache without the
            file): one line naming the directory and ``PERSONALIGN_MODELS_DIR``.
    """
    if target.exists():
        return False
    directory = target.parent
    hint = (f"{label} is not in the model cache {directory} and cannot be assembled there ({{why}}); "
            "set PERSONALIGN_MODELS_DIR to a writable directory, or to one that already holds "
            f"{target.name}")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelFileError(hint.format(why=exc.strerror or "cannot create it")) from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ModelFileError(hint.format(why="read-only"))
    from filelock import FileLock, Timeout

    try:
        with _thread_lock, FileLock(str(directory / f".{target.name}.lock"), timeout=LOCK_TIMEOUT_S):
            if target.exists():  # another process finished while we waited
                return False
            for stale in directory.glob(f".{target.name}.*.partial"):  # a crashed earlier attempt
                stale.unlink(missing_ok=True)
            tmp = directory / f".{target.name}.{os.getpid()}.{threading.get_ident()}.partial"
            try:
                sha = build(tmp)
                os.replace(tmp, target)
            finally:
                tmp.unlink(missing_ok=True)
    except Timeout:
        raise ModelFileError(f"waited {LOCK_TIMEOUT_S:.0f} s for another process assembling {target}; "
                             f"if none is running, delete {directory / ('.' + target.name + '.lock')}") from None
    except OSError as exc:
        raise ModelFileError(hint.format(why=exc.strerror or str(exc))) from None
    remember(target, sha)
    return True


__all__ = ["create_once", "how_verified", "read_stamp", "remember", "sha256_file", "verify", "write_stamp"]
