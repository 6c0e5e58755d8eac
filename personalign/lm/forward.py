"""One forward pass of a yes/no question serves every feature read from it.

``yes-prob`` reads the margin ``log p(Yes) - log p(No)`` at the last prompt token; ``lm-probe``
reads the model's final hidden state at that same position; the ensembles stack both, and a
binary stage's generic ``yes-prob`` asks a question of the same kind. :func:`yes_no_pass`
evaluates a prompt once for all of them and keeps both results, so a second strategy (or a second
run) asking for the same prompt makes no forward pass. A result is served from

1. this process's memory (an LRU of :data:`MEMORY_ENTRIES` passes, kept with the cache off too);
2. else the disk cache under the LM cache dir -- ``<cache dir>/forward-pass`` (default
   ``runs/cache/forward-pass``), beside DSPy's own cache wherever
   :func:`personalign.lm.configure_cache` points it; none with ``--no-cache``. It is a
   :class:`diskcache.Cache` (SQLite; the library DSPy's disk cache is built on) whose rows are
   raw bytes, never unpickled (:class:`BytesDisk`: a row of another kind is a miss): safe for
   concurrent threads and processes, every write one transaction, so a reader sees a whole entry
   or none;
3. else the embedded engine: one pass over the prompt, whose last token is evaluated in one
   ``Llama.eval`` with embeddings on, giving its logits and hidden state together
   (:meth:`personalign.lm._engine.LocalEngine.next_token_logprobs_hidden`).

Every request is a model call (:mod:`personalign.lm.calls`): the engine counts the passes it makes;
a pass served from memory or disk is counted apart, as cached (once per key in a counter).

**Key** (:func:`pass_key`): the sha256 of ``{"pass": PASS_VERSION, "model_sha256": the model
file's verified sha256, "tokens": the exact prompt tokens (the model's own chat template and
tokenizer), "position": the index of the token read (the last), "answers": [YES, NO]}`` -- an
entry of another model file, prompt, position or answer set never serves.

**Value**: bytes, no pickle: the margin as one little-endian float64 (nats), then the hidden state
as n_embd little-endian float32 (as llama.cpp returns it: lossless). An entry of the wrong length
is treated as absent and overwritten.

Embedded models (``local/...``) only; a served model's margin is cached by
:func:`personalign.lm.scoring.cached_yes_no_margin`.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import NamedTuple, Sequence

import diskcache
import numpy as np
from diskcache.core import MODE_RAW

from personalign.lm.yesno import NO, YES, margin_of

PASS_VERSION = 1
SUBDIR = "forward-pass"
MAX_VALUE_BYTES = 1 << 22  # a pass of n_embd float32 is kept in the database row below this
MEMORY_ENTRIES = 20_000  # ~6 KB each for the 1.5B model (1536 float32)


class YesNoPass(NamedTuple):
    """One forward pass of a yes/no question.

    Attributes:
        margin: ``log p(Yes) - log p(No)`` of the next token (nats; :func:`personalign.lm.yesno.margin_of`).
        hidden: the final hidden state at the last prompt token, float64, shape (n_embd,).
        cached: True when served from memory or disk (no forward pass was made for this call).
    """

    margin: float
    hidden: np.ndarray
    cached: bool


_lock = threading.Lock()
_memory: "dict[str, tuple[float, np.ndarray]] | None" = None
_stores: dict[str, object] = {}
_counts = {"computed": 0, "memory": 0, "disk": 0}


def pass_key(model_sha256: str, tokens: Sequence[int], position: int) -> str:
    """Hex sha256 naming the pass of ``tokens`` read at ``position`` on the model file whose
    sha256 is ``model_sha256`` (see the module docstring)."""
    body = {"pass": PASS_VERSION, "model_sha256": model_sha256, "tokens": [int(t) for t in tokens],
            "position": int(position), "answers": [list(YES), list(NO)]}
    return hashlib.sha256(json.dumps(body, separators=(",", ":")).encode()).hexdigest()


def encode(margin: float, hidden: np.ndarray) -> bytes:
    """The stored bytes of a pass: ``<f8`` margin, then ``<f4`` hidden state."""
    return np.float64(margin).astype("<f8").tobytes() + np.asarray(hidden, dtype="<f4").tobytes()


def decode(raw: object, n_embd: int) -> tuple[float, np.ndarray] | None:
    """``(margin, hidden float32 (n_embd,))`` from :func:`encode`'s bytes; None when ``raw`` is
    not bytes of exactly ``8 + 4 * n_embd``."""
    if not isinstance(raw, bytes) or len(raw) != 8 + 4 * n_embd:
        return None
    return float(np.frombuffer(raw[:8], dtype="<f8")[0]), np.frombuffer(raw[8:], dtype="<f4").copy()


def _memory_cache():
    global _memory
    if _memory is None:
        from cachetools import LRUCache

        _memory = LRUCache(maxsize=MEMORY_ENTRIES)
    return _memory


class BytesDisk(diskcache.Disk):
    """The forward-pass cache's ``disk=`` (diskcache's own extension point): ``store`` keeps only
    bytes, ``fetch`` serves only a row kept as raw bytes inside the database (``MODE_RAW``). A row
    in any other mode -- a pickle (which diskcache's default ``Disk`` would unpickle, running its
    code), text, or a file whose name the row chooses -- is served as ``None``: absent, then
    computed and overwritten. Values are kept in the database up to :data:`MAX_VALUE_BYTES`.

    Raises:
        TypeError: ``store`` of anything but bytes; a key that is not text or bytes.
        ValueError: reading a key stored as a pickle (iterating a tampered cache).
    """

    def store(self, value, read, key=diskcache.UNKNOWN):
        if not isinstance(value, bytes):
            raise TypeError(f"the forward-pass cache keeps bytes, not {type(value).__name__}")
        return super().store(value, read, key=key)

    def put(self, key):
        if not isinstance(key, (str, bytes)):
            raise TypeError(f"the forward-pass cache's keys are text or bytes, not {type(key).__name__}")
        return super().put(key)

    def get(self, key, raw):
        """A stored key: never unpickled (a key written as a pickle is refused), so iterating the
        cache cannot run a planted key's code."""
        if not raw:
            raise ValueError("the forward-pass cache holds a pickled key: refused (the cache dir was tampered with)")
        return super().get(key, raw)

    def fetch(self, mode, filename, value, read):
        if mode != MODE_RAW or filename is not None:
            return None
        value = bytes(value) if isinstance(value, (memoryview, bytearray)) else value
        return value if isinstance(value, bytes) else None


def store(subdir: str = SUBDIR):
    """The disk cache in use (a :class:`diskcache.Cache` of :class:`BytesDisk` rows at ``<DSPy's disk
    cache dir>/<subdir>``: ``forward-pass``, or the ledger of :mod:`personalign.lm.ledger`), or None
    when DSPy's disk cache is off (``--no-cache``) or the directory cannot be opened."""
    import dspy

    cache = getattr(dspy, "cache", None)
    directory = getattr(cache, "disk_cache_dir", None)
    if cache is None or not getattr(cache, "enable_disk_cache", False) or not directory:
        return None
    path = str(Path(directory) / subdir)
    with _lock:
        if path not in _stores:
            import sqlite3

            try:
                _stores[path] = diskcache.Cache(path, disk=BytesDisk, disk_min_file_size=MAX_VALUE_BYTES)
            except (OSError, sqlite3.Error):  # unwritable: memory only (the DSPy cache dir was checked first)
                _stores[path] = None
        return _stores[path]


def _engine(model: str):
    from personalign.errors import ConfigurationError
    from personalign.lm import _engine as engines
    from personalign.lm._models import is_local

    if not is_local(model):
        raise ConfigurationError(f"a forward pass reads an embedded model (local/...); got '{model}'")
    return engines.get_engine(model)


def _remembered(key: str, value: tuple[float, np.ndarray], how: str | None, model: str | None = None) -> YesNoPass:
    from personalign.lm.calls import count_cached, count_computed

    with _lock:
        _memory_cache()[key] = value
        if how is not None:
            _counts[how] += 1
    if how == "computed":
        count_computed(key)  # the engine counted the pass as a model call
    elif how is not None:
        count_cached(model, key)
    return YesNoPass(value[0], value[1].astype(np.float64), how != "computed")


def yes_no_pass(model: str, messages: Sequence[dict]) -> YesNoPass:
    """The yes/no margin and the final hidden state of ``messages`` (chat messages ending with a
    yes/no question) on the embedded ``model``, from one forward pass or from the cache.

    Returns:
        :class:`YesNoPass` ``(margin nats, hidden float64 (n_embd,), cached)``.

    Raises:
        ConfigurationError: ``model`` is not embedded (``local/...``).
        ContextWindowError: the prompt does not fit n_ctx.
        ModelFileError: the model file is missing or corrupt.
    """
    engine = _engine(model)
    prompt, _ = engine.render(list(messages))
    tokens = engine._prompt_tokens(prompt)
    key = pass_key(engine.sha256, tokens, len(tokens) - 1)
    with _lock:
        hit = _memory_cache().get(key)
        if hit is not None:
            _counts["memory"] += 1
    if hit is not None:
        from personalign.lm.calls import count_cached

        count_cached(model, key)  # a cached model call, once per key in a run step
        return YesNoPass(hit[0], hit[1].astype(np.float64), True)
    disk = store()
    with engine.lock:  # one pass per key: a thread asking for the same prompt waits, then finds it
        with _lock:
            hit = _memory_cache().get(key)
        if hit is not None:
            return _remembered(key, hit, "memory", model)
        found = decode(disk.get(key), engine.llm.n_embd()) if disk is not None else None
        if found is not None:
            return _remembered(key, found, "disk", model)
        lp, hidden = engine.next_token_logprobs_hidden(tokens, list(YES + NO))
        value = (margin_of(lp), hidden.astype(np.float32))
        if disk is not None:
            disk.set(key, encode(*value))
        return _remembered(key, value, "computed", model)


def pass_lookup(model: str, messages: Sequence[dict]) -> tuple[str, bool]:
    """``(key, cached)`` of the pass :func:`yes_no_pass` would make of ``messages``: its
    :func:`pass_key`, and whether this process's memory or the disk cache holds it (the disk's
    index only: no value read). No forward pass is made (the prompt is rendered and tokenized).

    Raises: as :func:`yes_no_pass` (the model is loaded, not run)."""
    engine = _engine(model)
    tokens = engine._prompt_tokens(engine.render(list(messages))[0])
    key = pass_key(engine.sha256, tokens, len(tokens) - 1)
    with _lock:
        if key in _memory_cache():
            return key, True
    disk = store()
    try:
        return key, disk is not None and key in disk
    except Exception:  # noqa: BLE001 -- a locked or broken cache: not known to hold it
        return key, False


def remember(model: str, messages: Sequence[dict], margin: float, hidden) -> None:
    """Put a pass computed elsewhere (e.g. a benchmark's own store) in this process's memory, so
    :func:`yes_no_pass` serves it; ``hidden`` shape (n_embd,)."""
    engine = _engine(model)
    tokens = engine._prompt_tokens(engine.render(list(messages))[0])
    _remembered(pass_key(engine.sha256, tokens, len(tokens) - 1),
                (float(margin), np.asarray(hidden, dtype=np.float32)), None)


def counts() -> dict[str, int]:
    """Passes served in this process: ``{"computed": forward passes made, "memory": from this
    process's memory, "disk": from the disk cache}``."""
    with _lock:
        return dict(_counts)


def clear_memory() -> None:
    """Forget this process's passes (the disk cache is kept): the next request reads the disk
    cache or the model, as a new process would."""
    with _lock:
        _memory_cache().clear()


__all__ = ["MAX_VALUE_BYTES", "MEMORY_ENTRIES", "BytesDisk", "PASS_VERSION", "SUBDIR", "YesNoPass", "clear_memory", "counts", "decode", "encode",
           "pass_key", "pass_lookup", "remember", "store", "yes_no_pass"]
