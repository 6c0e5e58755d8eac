"""Model calls, counted where they happen: every call a run makes of a model, and every one a
cache answered instead.

Two kinds of call:

* **generation** -- a DSPy LM call (``dspy.Predict`` and the rest). Those that reached a model are
  DSPy's usage-tracker entries (one per non-cached call); every call that returned is seen by a
  DSPy callback, so those a cache answered are the difference.
* **forward pass** -- a model evaluated outside DSPy's LM: a yes/no margin or a hidden state
  (``yes-prob``, ``lm-probe``, the ensembles), one pass of the prompt each. The place that invokes
  the model calls :func:`count_call` (the embedded engine's ``next_token_logprobs*``, an endpoint's
  one-token margin); a cache that serves a pass instead calls :func:`count_cached` (with its key:
  a pass read from memory again in the same block counts once), and :func:`count_computed` when it
  stores one it computed.

A :class:`CallCounter` counts both inside a ``with`` block, nested counters included (each sees
the calls of the blocks inside it), on every thread DSPy runs the block's work on (the counters
travel in ``dspy.context``, as DSPy's own settings do).
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any, Callable

STACK = "personalign_call_counters"  # the dspy.context key holding the active counters
GENERATION, FORWARD = "generation", "forward"


def _active() -> tuple:
    import dspy

    return tuple(dspy.settings.get(STACK) or ())


def count_call(model: str | None, *, seconds: float = 0.0, prompt_tokens: int = 0, usage: Any = None) -> None:
    """One forward pass of ``model`` that ran (call it where the model is invoked), ``seconds``
    long, evaluating ``prompt_tokens`` tokens: counted by every active :class:`CallCounter`.
    ``usage``: the ``prompt_tokens``/``completion_tokens`` an endpoint reported for it (a dict or
    an object with those attributes), added to the counters' :attr:`CallCounter.tokens`."""
    billed = None
    if usage:
        get = usage.get if isinstance(usage, dict) else (lambda k: getattr(usage, k, None))
        billed = {k: int(get(k) or 0) for k in ("prompt_tokens", "completion_tokens")}
    for counter in _active():
        counter.add(FORWARD, seconds=seconds, prompt_tokens=prompt_tokens, model=model, usage=billed)


def count_cached(model: str | None, key: Any = None) -> None:
    """One forward pass of ``model`` a cache answered instead of the model (call it where the cache
    serves it): counted apart, as cached, by every active :class:`CallCounter` -- once per ``key``
    (the cache's key) in a counter, and not at all when the counter saw it computed
    (:func:`count_computed`): a pass read again from memory is not another call."""
    for counter in _active():
        counter.add(FORWARD, cached=True, model=model, key=key)


def count_computed(key: Any) -> None:
    """The pass of ``key`` was just computed (the engine counted it): a later cache hit of ``key``
    in the same counters is not counted again. Call it where a cache stores a computed pass."""
    for counter in _active():
        counter.seen(key)


def calls_text(calls: int, cached: int = 0) -> str:
    """``"120"``, or ``"120 (+40 cached)"`` when a cache answered some."""
    return f"{calls} (+{cached} cached)" if cached else str(calls)


class CallCounter:
    """Counts model calls inside a ``with`` block.

    Attributes:
        calls: calls that reached a model: DSPy LM calls (cache hits excluded) plus forward passes.
        cached: calls a cache answered (DSPy's cache, a forward-pass cache).
        forward_passes: the forward passes among ``calls``.
        tokens: model -> ``{"prompt_tokens", "completion_tokens"}`` of the DSPy calls and of the
            forward passes an endpoint reported usage for.
        seconds: ``{"generation": s, "forward": s}``: time spent in calls by kind (generation:
            every DSPy LM call's duration, cache hits included, which take ~0 s).
        on_call: called with no argument after each call counted (cached or not) -- a progress bar.
    """

    def __init__(self, on_call: Callable[[], None] | None = None) -> None:
        self.on_call = on_call
        self.calls = 0
        self.cached = 0
        self.forward_passes = 0
        self.tokens: dict[str, dict[str, int]] = {}
        self.seconds = {GENERATION: 0.0, FORWARD: 0.0}
        self._lock = threading.Lock()
        self._forward_cached = 0
        self._generation_done = 0
        self._generation_real = 0
        self._forward_usage: dict[str, dict[str, int]] = {}
        self._started: dict[str, float] = {}
        self._seen: set = set()
        self._cms: list = []

    # -- counting ------------------------------------------------------------------------------
    def add(self, kind: str, *, cached: bool = False, seconds: float = 0.0, prompt_tokens: int = 0,
            model: str | None = None, key: Any = None, usage: dict[str, int] | None = None) -> None:
        """Count one call of ``kind`` (``"forward"``; DSPy calls come through the callback); a cached
        one with a ``key`` counts once (see :func:`count_cached`); ``usage``: its billed tokens."""
        with self._lock:
            if usage and model:
                kept = self._forward_usage.setdefault(model, {"prompt_tokens": 0, "completion_tokens": 0})
                for k in kept:
                    kept[k] += int(usage.get(k) or 0)
            if cached and key is not None:
                if key in self._seen:
                    return
                self._seen.add(key)
            if kind == GENERATION:
                self._generation_done += 1
            elif cached:
                self._forward_cached += 1
            else:
                self.forward_passes += 1
            self.seconds[kind] += float(seconds)
            self._refresh()
        if self.on_call is not None:
            self.on_call()

    def seen(self, key: Any) -> None:
        """Mark ``key``'s pass as computed in this block (:func:`count_computed`)."""
        with self._lock:
            self._seen.add(key)

    def _refresh(self) -> None:
        self.calls = self._generation_real + self.forward_passes
        self.cached = max(0, self._generation_done - self._generation_real) + self._forward_cached

    def _collect(self) -> None:
        data = dict(getattr(self._tracker, "usage_data", {}) or {})
        with self._lock:
            self._generation_real = sum(len(v) for v in data.values())
            self._refresh()
            forward = {m: dict(u) for m, u in self._forward_usage.items()}
        tokens = {
            model: {
                "prompt_tokens": int(sum((e.get("prompt_tokens") or 0) for e in entries)),
                "completion_tokens": int(sum((e.get("completion_tokens") or 0) for e in entries)),
            }
            for model, entries in data.items()
        }
        for model, used in forward.items():
            kept = tokens.setdefault(model, {"prompt_tokens": 0, "completion_tokens": 0})
            for k in kept:
                kept[k] += used[k]
        self.tokens = tokens

    @property
    def generations(self) -> int:
        """The DSPy LM calls among :attr:`calls` (those that reached a model)."""
        return self._generation_real

    def snapshot(self) -> int:
        """Calls so far (inside the block)."""
        self._collect()
        return self.calls

    # -- the block -----------------------------------------------------------------------------
    def __enter__(self) -> "CallCounter":
        import dspy

        self._tracker = _shared_tracker_class()()
        self._parent = dspy.settings.usage_tracker
        scope = dspy.context(callbacks=[*(dspy.settings.get("callbacks") or []), _watch_class()(self)],
                             usage_tracker=self._tracker, **{STACK: (*_active(), self)})
        scope.__enter__()
        self._cms = [scope]
        return self

    def __exit__(self, *exc) -> None:
        self._collect()
        (scope,) = self._cms
        scope.__exit__(*exc)
        if self._parent is not None:  # as dspy.track_usage: the block's usage rolls up into the parent's
            for model, entries in list(self._tracker.usage_data.items()):
                self._parent.usage_data[model].extend(entries)


@functools.lru_cache(maxsize=1)
def _shared_tracker_class() -> type:
    """DSPy's ``UsageTracker``, one for every thread of a block: DSPy's ``ParallelExecutor`` (its
    ``Evaluate`` and teleprompters with ``num_threads`` > 1) deep-copies the tracker into each
    thread, so the calls made there would be lost to the block's count; a deep copy of this one is
    itself, and entries are added under a lock."""
    from dspy.utils.usage_tracker import UsageTracker

    class SharedUsageTracker(UsageTracker):
        def __init__(self) -> None:
            super().__init__()
            self._lock = threading.Lock()

        def __deepcopy__(self, memo) -> "SharedUsageTracker":
            return self

        def add_usage(self, lm: str, usage_entry: dict) -> None:
            with self._lock:
                super().add_usage(lm, usage_entry)

    return SharedUsageTracker


@functools.lru_cache(maxsize=1)
def _watch_class() -> type:
    """The DSPy callback of one :class:`CallCounter` (built on first use: DSPy loads then): every
    LM call that returned, and its time."""
    from dspy.utils.callback import BaseCallback

    class Watch(BaseCallback):
        def __init__(self, counter: CallCounter) -> None:
            self.counter = counter

        def on_lm_start(self, call_id: str, instance: Any, inputs: dict) -> None:
            self.counter._started[call_id] = time.perf_counter()

        def on_lm_end(self, call_id: str, outputs: Any, exception: Exception | None = None) -> None:
            start = self.counter._started.pop(call_id, None)
            if exception is None:
                self.counter.add(GENERATION, seconds=0.0 if start is None else time.perf_counter() - start)

    return Watch


__all__ = ["CallCounter", "FORWARD", "GENERATION", "calls_text", "count_cached", "count_call", "count_computed"]
