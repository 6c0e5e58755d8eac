"""Which generation calls DSPy's cache already holds, found before a run without a model call and
without reading a cached response (DSPy's cache keeps pickles; only their keys are looked at here).

DSPy looks every LM call up in ``dspy.cache`` by a key (the sha256 of the request) before it calls
a model. :func:`personalign.lm.configure_cache` installs :class:`KeyedCache`, DSPy's own cache
class with one addition: the watchers active in the ``dspy.context`` see each key it is asked for.
Two watchers use that:

* a **probe** (:func:`first_call_cached`): runs a program on one row and stops it, by raising
  :class:`Probed`, at the cache lookup of its first call -- the model is never reached -- after
  checking whether that key is in the cache (memory, or a row of the disk cache's SQLite index:
  :meth:`KeyedCache.holds`; no value is read, so nothing is unpickled). It answers for programs
  whose prompts are known before the run (an uncompiled strategy, a saved program);
* a **unit** (:func:`unit`): records the keys of every generation call a block of work makes (a
  compile, the evaluation of a compiled program, a sweep trial) under a fingerprint of its inputs
  (:func:`fingerprint`), in the ledger ``<cache dir>/ledger`` (raw bytes, never unpickled:
  :class:`personalign.lm.forward.BytesDisk`). The same work asked again (same inputs: the same
  calls, each answered by the cache) is looked up with :func:`lookup`: how many of its keys the
  cache still holds. Work whose prompts depend on what a model answered (a teleprompter's demos)
  is known this way only.

A program whose calls cannot be checked (no :class:`KeyedCache`, the LM's cache off, a probe that
does not reach the cache) is reported as such: its generation count is then an upper bound of the
new calls.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
from typing import Any, Iterator, Sequence

STACK = "personalign_cache_watchers"  # the dspy.context key holding the active watchers
PROBING = "personalign_probing"  # set while a probe runs: the embedded provider refuses to compute
SUBDIR = "ledger"
LEDGER_VERSION = 1
_KEY = re.compile(r"[0-9a-f]{64}")


class Probed(BaseException):
    """Raised by a probe at a call's cache lookup: the call goes no further (a BaseException, so no
    adapter fallback or retry catches it)."""


def _watchers() -> tuple:
    import dspy

    return tuple(dspy.settings.get(STACK) or ())


def _cache_class() -> type:
    from dspy.clients.cache import Cache

    class KeyedCache(Cache):
        """DSPy's cache; each key asked for is shown to the active watchers first."""

        def get(self, request: dict, ignored_args_for_cache_key: list[str] | None = None) -> Any:
            watchers = _watchers()
            if watchers:
                try:
                    key = self.cache_key(request, ignored_args_for_cache_key)
                except Exception:  # noqa: BLE001 -- DSPy itself then caches nothing
                    key = None
                for watcher in watchers:
                    watcher.saw(key, self)
            return super().get(request, ignored_args_for_cache_key)

        def holds(self, key: str) -> bool:
            """Whether the cache holds ``key`` (memory, or the disk cache's index: its value unread)."""
            try:
                return key in self
            except Exception:  # noqa: BLE001 -- a locked or broken shard: not known to hold it
                return False

    return KeyedCache


KeyedCache = None  # the class, built on first use (DSPy loads then): see keyed_cache_class()


def keyed_cache_class() -> type:
    """:class:`KeyedCache` (DSPy's ``Cache`` subclass), built once."""
    global KeyedCache
    if KeyedCache is None:
        KeyedCache = _cache_class()
    return KeyedCache


def install(enabled: bool, directory: str) -> None:
    """Make ``dspy.cache`` a :class:`KeyedCache` on ``directory`` (as ``dspy.configure_cache``
    builds DSPy's own), memory and disk ``enabled`` or not."""
    import dspy
    from dspy.clients import DISK_CACHE_LIMIT

    cache = keyed_cache_class()(enabled, enabled, directory, DISK_CACHE_LIMIT)
    with dspy._cache_lock:
        dspy.cache = cache


def checkable(lm) -> bool:
    """Whether ``lm``'s calls can be looked up in DSPy's cache: a :class:`KeyedCache` that keeps
    something, and an LM that uses it."""
    import dspy

    cache = getattr(dspy, "cache", None)
    return (KeyedCache is not None and isinstance(cache, KeyedCache) and lm is not None
            and bool(getattr(lm, "cache", False)) and bool(cache.enable_memory_cache or cache.enable_disk_cache))


class _Probe:
    def __init__(self) -> None:
        self.hit: bool | None = None

    def saw(self, key: str | None, cache) -> None:
        self.hit = key is not None and cache.holds(key)
        raise Probed


def first_call_cached(program, inputs: dict, lm) -> bool | None:
    """Whether DSPy's cache holds the first generation call ``program`` makes on ``inputs`` with
    ``lm``; None when that cannot be known without a model call (see :func:`checkable`; a
    program that fails, or makes no call through the cache, before it). No model is called, no
    call is counted, no response is read."""
    import dspy

    from personalign.lm import adapter_for
    from personalign.lm.calls import STACK as COUNTERS

    if not checkable(lm):
        return None
    probe = _Probe()
    context = {COUNTERS: (), STACK: (probe,), PROBING: True}
    with dspy.context(lm=lm, adapter=adapter_for(lm.model), callbacks=[], **context):
        try:
            program(**inputs)
        except Probed:
            return probe.hit
        except Exception:  # noqa: BLE001 -- the program failed before its first call: not known
            return None
    return None


def probing() -> bool:
    """True inside a probe: nothing may compute (the embedded provider raises :class:`Probed`)."""
    import dspy

    return bool(dspy.settings.get(PROBING))


# --- units: the keys a block of work asked for ------------------------------------------------
def fingerprint(*parts: Any) -> str:
    """The sha256 naming a unit of work by its inputs (JSON; anything else by its ``str``)."""
    body = json.dumps([LEDGER_VERSION, *parts], sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()


def rows_of(examples: Sequence) -> list:
    """The content of ``examples`` (``dspy.Example``s or dicts) for a :func:`fingerprint`."""
    return [ex.toDict() if hasattr(ex, "toDict") else dict(ex) for ex in examples]


class _Recorder:
    def __init__(self) -> None:
        self.keys: set[str] = set()
        self._lock = threading.Lock()

    def saw(self, key: str | None, cache) -> None:
        if key is not None:
            with self._lock:
                self.keys.add(key)


def _store():
    from personalign.lm.forward import store

    return store(SUBDIR)


@contextlib.contextmanager
def unit(name: str | None) -> Iterator[None]:
    """Record the cache keys of the generation calls made inside the block (every thread of it),
    kept under ``name`` (a :func:`fingerprint`) when the block ends without an error; None, or
    no :class:`KeyedCache` in use: nothing recorded."""
    import dspy

    if name is None or KeyedCache is None or not isinstance(getattr(dspy, "cache", None), KeyedCache):
        yield
        return
    recorder = _Recorder()
    with dspy.context(**{STACK: (*_watchers(), recorder)}):
        yield
    disk = _store()
    if disk is not None:
        import sqlite3

        with contextlib.suppress(OSError, sqlite3.Error):
            disk.set(name, json.dumps(sorted(recorder.keys)).encode())


def lookup(name: str | None) -> tuple[int, int] | None:
    """``(cached, new)``: of the generation calls the unit ``name`` made when it last ran here,
    those DSPy's cache still holds and those it does not; None when it never ran on this cache."""
    import dspy

    cache = getattr(dspy, "cache", None)
    disk = _store() if name is not None and KeyedCache is not None and isinstance(cache, KeyedCache) else None
    if disk is None:
        return None
    try:
        raw = disk.get(name)
        keys = json.loads(raw.decode()) if isinstance(raw, bytes) else None
    except Exception:  # noqa: BLE001 -- an unreadable entry is no entry
        return None
    if not isinstance(keys, list) or not all(isinstance(k, str) and _KEY.fullmatch(k) for k in keys):
        return None
    cached = sum(cache.holds(k) for k in keys)
    return cached, len(keys) - cached


def keep_seconds(name: str | None, seconds: float) -> None:
    """Keep, under ``name`` (a :func:`fingerprint` of a command), the seconds its work besides
    model calls took (fitting, decision rules, intervals): the next projection of the same command
    adds them (:func:`seconds_of`). Best effort: nothing kept without a disk cache."""
    import math
    import sqlite3

    disk = _store() if name is not None else None
    if disk is not None and math.isfinite(seconds) and seconds >= 0:
        with contextlib.suppress(OSError, sqlite3.Error):
            disk.set(f"work:{name}", json.dumps({"seconds": round(float(seconds), 3)}).encode())


def seconds_of(name: str | None) -> float | None:
    """The seconds :func:`keep_seconds` kept for ``name``; None when this command never ran here."""
    disk = _store() if name is not None else None
    if disk is None:
        return None
    try:
        raw = disk.get(f"work:{name}")
        value = json.loads(raw.decode())["seconds"] if isinstance(raw, bytes) else None
    except Exception:  # noqa: BLE001 -- an unreadable entry is no entry
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


__all__ = ["Probed", "checkable", "first_call_cached", "fingerprint", "install", "keep_seconds", "keyed_cache_class",
           "lookup", "probing", "rows_of", "seconds_of", "unit"]
