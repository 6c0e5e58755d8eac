"""Model calls in flight: how many at once, within the provider's limits, none paid twice.

A hosted or served model answers after ~0.3-2 s of waiting, not computing; many calls at once cost
nothing extra until the provider says so. Three pieces, used by :class:`personalign.lm.LM` (every
model :func:`personalign.lm.make_lm` builds) and by the one runner of programs
(:func:`personalign.programs.run.run_program`):

* :class:`Window` -- an **adaptive concurrency window** per endpoint (model + ``api_base``), shared
  by every thread and verb of the process. It starts at the run's ``concurrency`` (its cap); a
  rate-limit answer (HTTP 429, ``RateLimitError``) or an overload (503) cuts it to
  :data:`CUT` of its size -- once per round, not once per call that was already in flight -- and
  each ``size`` successes in a row grow it by one, back up to the cap (AIMD, as TCP; inspect_ai
  cuts by 0.8 too, promptfoo by 0.5). The limited call itself waits ``Retry-After`` (or a jittered
  backoff: :meth:`personalign.lm.retry.RetryPolicy.backoff`) before it is sent again.
* :func:`coalesced` -- **identical requests in flight at the same time are made once**: a call whose
  key (the request DSPy's cache would key: model, messages, settings) is already in flight waits
  for that call and shares its answer. Only where a cache would answer it anyway (the model caches
  or samples at temperature 0), so no sample the user asked for is merged away.
* :func:`map_in_flight` -- an ordered concurrent map on **daemon** worker threads that carry the
  caller's DSPy context (the model, adapter and call counters travel in ``dspy.context``, a
  ``contextvars`` variable): results in input order; an interrupt stops submitting, waits for the
  calls in flight at most :data:`DRAIN_SECONDS`, and re-raises (a hung call never holds the
  process: its thread is a daemon and every endpoint call has a timeout).

Why not DSPy's ``ParallelExecutor``: it deep-copies the usage tracker per thread (the calls a
thread makes are lost to the caller's counter), re-sends an item older than 120 s (billed twice)
and, past ``max_errors``, cancels and loses every result. Nothing here re-sends a call that may
still be answered, and a failure is one item's failure.
"""

from __future__ import annotations

import contextvars
import copy
import hashlib
import json
import math
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

#: The share of its size a window keeps after a rate-limit or overload answer.
CUT = 0.8
#: Seconds an interrupt waits for the calls in flight before it re-raises.
DRAIN_SECONDS = 10.0


@dataclass
class WindowStats:
    """What one endpoint's window saw: ``limited`` (429 answers), ``overloaded`` (503), ``cuts``
    (times the window shrank), ``coalesced`` (calls that shared an identical call in flight),
    ``retried`` (calls sent again), ``max_in_flight`` (most calls in flight at once), ``smallest``
    (the smallest size the window had)."""

    limited: int = 0
    overloaded: int = 0
    cuts: int = 0
    coalesced: int = 0
    retried: int = 0
    max_in_flight: int = 0
    smallest: int | None = None

    def to_dict(self) -> dict[str, int | None]:
        return dict(self.__dict__)


class Window:
    """An adaptive limit of calls in flight to one endpoint (see the module docstring).

    Args:
        cap: the most calls in flight (the run's ``concurrency``; >= 1).
    """

    def __init__(self, cap: int) -> None:
        self.cap = max(1, int(cap))
        self.size = self.cap
        self.active = 0
        self.epoch = 0
        self._run = 0
        self._cond = threading.Condition()
        self.stats = WindowStats(smallest=self.size)

    def set_cap(self, cap: int) -> None:
        """A new cap (a verb's ``concurrency``); the window starts again at it."""
        with self._cond:
            self.cap = self.size = max(1, int(cap))
            self._run = 0
            self.stats.smallest = min(self.stats.smallest or self.size, self.size)
            self._cond.notify_all()

    def acquire(self) -> int:
        """Wait for a free place; returns the window's epoch (pass it to :meth:`limited`)."""
        with self._cond:
            while self.active >= self.size:
                self._cond.wait()
            self.active += 1
            self.stats.max_in_flight = max(self.stats.max_in_flight, self.active)
            return self.epoch

    def release(self, ok: bool) -> None:
        """The call is over; ``ok``: it was answered (a run of ``size`` answers grows the window)."""
        with self._cond:
            self.active -= 1
            if ok:
                self._run += 1
                if self._run >= self.size and self.size < self.cap:
                    self.size += 1
                    self._run = 0
            self._cond.notify_all()

    def limited(self, epoch: int, overload: bool = False) -> None:
        """A call sent at ``epoch`` was refused for the rate (or an overload): cut the window,
        once per epoch (calls already in flight when it was cut do not cut it again)."""
        with self._cond:
            if overload:
                self.stats.overloaded += 1
            else:
                self.stats.limited += 1
            self._run = 0
            if epoch == self.epoch:
                self.size = max(1, math.floor(self.size * CUT)) if self.size > 1 else 1
                self.epoch += 1
                self.stats.cuts += 1
                self.stats.smallest = min(self.stats.smallest or self.size, self.size)


_windows: dict[tuple, Window] = {}
_windows_lock = threading.Lock()


def window_for(key: tuple, cap: int | None = None, *, default: int = 1) -> Window:
    """The process's window of endpoint ``key``: created at ``cap`` (or ``default``); a ``cap``
    given for an existing window resets it to that cap (a verb's ``concurrency``)."""
    with _windows_lock:
        win = _windows.get(key)
        if win is None:
            win = _windows[key] = Window(cap or default)
            return win
    if cap is not None and cap != win.cap:
        win.set_cap(cap)
    return win


# --- identical requests in flight: made once --------------------------------------------------
@dataclass
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    failed: bool = False


_pending: dict[str, _Pending] = {}
_pending_lock = threading.Lock()


def request_key(model: str, prompt: Any, messages: Any, settings: dict) -> str:
    """The sha256 of a request as a cache keys it: the model, the prompt or messages and every
    setting but secrets and transport (``api_key``, ``api_base``, ``base_url``, headers)."""
    skip = {"api_key", "api_base", "base_url", "headers", "extra_headers"}
    body = {"model": model, "prompt": prompt, "messages": messages,
            **{k: v for k, v in settings.items() if k not in skip}}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=repr).encode()).hexdigest()


def coalesced(key: str | None, call: Callable[[], Any], on_shared: Callable[[], None] | None = None) -> Any:
    """``call()``, or -- when a call of the same ``key`` is in flight -- that call's answer (a deep
    copy), ``on_shared`` called. A leader's failure is not shared: the waiting call makes its own.
    ``key`` None: always ``call()``."""
    if key is None:
        return call()
    with _pending_lock:
        pending = _pending.get(key)
        leader = pending is None
        if leader:
            pending = _pending[key] = _Pending()
    if not leader:
        pending.done.wait()
        if not pending.failed:
            if on_shared is not None:
                on_shared()
            return copy.deepcopy(pending.result)
        return call()
    try:
        pending.result = call()
        return pending.result
    except BaseException:
        pending.failed = True
        raise
    finally:
        with _pending_lock:
            _pending.pop(key, None)
        pending.done.set()


# --- an ordered concurrent map ----------------------------------------------------------------
def map_in_flight(fn: Callable[[int, Any], Any], items: Sequence, concurrency: int, *,
                  on_done: Callable[[int], None] | None = None, drain_seconds: float = DRAIN_SECONDS) -> list:
    """``[fn(i, item) for i, item in enumerate(items)]`` with up to ``concurrency`` calls at once,
    on daemon threads carrying the caller's context (``contextvars``: DSPy's settings), results
    in input order. ``fn`` handles its own failures (an exception it raises is re-raised here
    after the calls in flight end). ``on_done(i)`` runs in the calling thread as each item ends.

    An interrupt (``KeyboardInterrupt``, the CLI's SIGINT/SIGTERM/SIGHUP) while waiting stops
    submitting, waits for the items in flight at most ``drain_seconds``, then re-raises.
    ``concurrency`` <= 1 runs in the calling thread, in order.
    """
    n = len(items)
    if concurrency <= 1 or n <= 1:
        out = []
        for i, item in enumerate(items):
            out.append(fn(i, item))
            if on_done is not None:
                on_done(i)
        return out
    results: list = [None] * n
    done: queue.Queue = queue.Queue()
    todo: queue.Queue = queue.Queue()
    for i in range(n):
        todo.put(i)
    stop = threading.Event()
    context = contextvars.copy_context()

    def worker() -> None:
        while not stop.is_set():
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            try:
                results[i] = context.copy().run(fn, i, items[i])
                done.put((i, None))
            except BaseException as exc:  # noqa: BLE001 -- handed to the caller's thread
                done.put((i, exc))

    threads = [threading.Thread(target=worker, daemon=True, name=f"personalign-call-{k}")
               for k in range(min(concurrency, n))]
    error: BaseException | None = None
    finished = 0
    try:
        for t in threads:  # inside the try: an interrupt while they start drains those started
            t.start()
        while finished < n:
            try:
                i, exc = done.get(timeout=0.2)
            except queue.Empty:  # after an error, the items never started never end
                if error is not None and not any(t.is_alive() for t in threads) and done.empty():
                    break
                continue
            finished += 1
            if exc is not None and error is None:
                error = exc
                stop.set()
            if on_done is not None and exc is None:
                on_done(i)
    except BaseException:
        stop.set()
        deadline = time.monotonic() + drain_seconds
        for t in threads:
            if t.ident is not None:  # started
                t.join(max(0.0, deadline - time.monotonic()))
        raise
    if error is not None:
        raise error
    return results


def run_in_flight(model: str | None) -> int:
    """The calls in flight of a run on ``model``: the context's ``concurrency``
    (:func:`personalign.lm.use`), else the model's default (:func:`in_flight_default`); 1 for the
    embedded engine whatever was asked (it serves one call at a time) and without a model."""
    if model is None:
        return 1
    import dspy

    from personalign.lm import CONCURRENCY_KEY, is_local

    if is_local(model):
        return 1
    return max(1, int(dspy.settings.get(CONCURRENCY_KEY) or in_flight_default(model)))


def in_flight_default(model: str | None) -> int:
    """The calls a run keeps in flight when none is asked: 1 for the embedded engine (one call at
    a time is what its CPU gives), :data:`HOSTED_CONCURRENCY` for any other model."""
    from personalign.lm._models import is_local

    return 1 if model is None or is_local(model) else HOSTED_CONCURRENCY


#: Calls in flight by default for a hosted or served model (DSPy's Evaluate keeps 8, inspect_ai starts at 20).
HOSTED_CONCURRENCY = 32
#: The most calls in flight a run may ask for.
MAX_CONCURRENCY = 256


def check_concurrency(value: Any) -> int | None:
    """``value`` as a concurrency (an int in 1..:data:`MAX_CONCURRENCY`), None for the default.

    Raises:
        ArgumentError: anything else (naming ``concurrency``)."""
    from personalign.errors import ArgumentError

    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CONCURRENCY:
        raise ArgumentError("concurrency", f"must be a whole number from 1 to {MAX_CONCURRENCY}, got {value!r}")
    return value


__all__ = ["CUT", "DRAIN_SECONDS", "HOSTED_CONCURRENCY", "MAX_CONCURRENCY", "Window", "WindowStats",
           "check_concurrency", "coalesced", "in_flight_default", "map_in_flight", "request_key", "run_in_flight",
           "window_for"]
