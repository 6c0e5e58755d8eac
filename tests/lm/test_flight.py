"""Calls in flight: the adaptive window, identical calls made once, the ordered map and its interrupt,
and what the retry policy calls a rate limit."""

from __future__ import annotations

import threading
import time

import pytest

from personalign.lm.flight import Window, check_concurrency, coalesced, map_in_flight
from personalign.lm.retry import DEFAULT_POLICY, retry_after


def test_the_window_is_cut_once_per_round_on_a_rate_limit_and_grows_back_to_its_cap():
    win = Window(10)
    epochs = [win.acquire() for _ in range(10)]
    for e in epochs[:5]:  # five calls of the same round refused: one cut
        win.limited(e)
        win.release(False)
    assert win.size == 8 and win.stats.cuts == 1 and win.stats.limited == 5
    for _ in range(5):
        win.release(True)
    for _ in range(8 + 9):  # a run of `size` answers grows it by one, twice
        win.acquire()
        win.release(True)
    assert win.size == 10 and win.stats.smallest == 8
    for _ in range(50):
        win.acquire()
        win.release(True)
    assert win.size == 10  # never past the cap


def test_the_window_holds_calls_beyond_its_size():
    win = Window(2)
    win.acquire(), win.acquire()
    got = threading.Event()
    threading.Thread(target=lambda: (win.acquire(), got.set()), daemon=True).start()
    assert not got.wait(0.2)
    win.release(True)
    assert got.wait(2)
    assert win.stats.max_in_flight == 2


def test_identical_calls_in_flight_are_made_once_and_a_failure_is_not_shared():
    made, shared = [], []
    gate = threading.Event()

    def call():
        made.append(1)
        gate.wait(2)
        return {"answer": [1, 2]}

    out = []
    threads = [threading.Thread(target=lambda: out.append(coalesced("k", call, lambda: shared.append(1))))
               for _ in range(5)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    gate.set()
    for t in threads:
        t.join(5)
    assert len(made) == 1 and len(shared) == 4 and out == [{"answer": [1, 2]}] * 5
    assert len({id(o) for o in out}) == 5  # each caller its own copy

    fails = {"n": 0}

    def flaky():
        fails["n"] += 1
        time.sleep(0.2)
        if fails["n"] == 1:
            raise RuntimeError("first")
        return "ok"

    results = []

    def run():
        try:
            results.append(coalesced("f", flaky))
        except RuntimeError:
            results.append("error")

    a, b = threading.Thread(target=run), threading.Thread(target=run)
    a.start(); time.sleep(0.05); b.start()
    a.join(5); b.join(5)
    assert sorted(results) == ["error", "ok"]  # the waiting call made its own


def test_the_map_keeps_input_order_and_runs_items_at_once():
    def slow(i, x):
        time.sleep(0.2 if i % 2 else 0.05)
        return x * 2

    t0 = time.perf_counter()
    assert map_in_flight(slow, list(range(16)), 16) == [x * 2 for x in range(16)]
    assert time.perf_counter() - t0 < 1.5
    done = []
    assert map_in_flight(slow, [1, 2, 3], 1, on_done=done.append) == [2, 4, 6] and done == [0, 1, 2]


def test_the_map_carries_the_callers_context_into_its_threads():
    import dspy

    with dspy.context(personalign_probe="here"):
        seen = map_in_flight(lambda i, x: dspy.settings.get("personalign_probe"), list(range(8)), 4)
    assert seen == ["here"] * 8


def test_an_interrupt_stops_submitting_and_waits_for_the_calls_in_flight_within_a_bound():
    import _thread

    started, finished = [], []

    def item(i, x):
        started.append(i)
        if i == 0:  # Ctrl-C while the first items are in flight (not after a sleep: a loaded machine delays it)
            _thread.interrupt_main()
        time.sleep(1.0)
        finished.append(i)
        return i

    import signal

    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # not a handler an earlier test left
    try:
        t0 = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            map_in_flight(item, list(range(40)), 4, drain_seconds=5.0)
    finally:
        signal.signal(signal.SIGINT, before)
    assert time.perf_counter() - t0 < 5.0
    assert len(started) <= 8 and sorted(finished) == sorted(started)  # the ones in flight ended; no new ones


def test_an_error_in_one_item_is_raised_after_the_items_in_flight_end():
    def item(i, x):
        if i == 3:
            raise ValueError("bad item")
        time.sleep(0.05)
        return i

    with pytest.raises(ValueError, match="bad item"):
        map_in_flight(item, list(range(20)), 4)


@pytest.mark.parametrize("value", [0, -1, 257, 2.5, "8", True])
def test_a_concurrency_out_of_range_is_one_line(value):
    from personalign.errors import ArgumentError

    with pytest.raises(ArgumentError, match="concurrency"):
        check_concurrency(value)
    assert check_concurrency(None) is None and check_concurrency(32) == 32


def test_the_policy_tells_a_rate_limit_an_overload_and_a_transient_failure_apart():
    class Status(Exception):
        def __init__(self, status, retry=None):
            super().__init__(f"HTTP {status}")
            self.status_code = status
            self.retry_after = retry

    assert DEFAULT_POLICY.classify(Status(429, 2)) == ("limited", 2.0)
    assert DEFAULT_POLICY.classify(Status(503))[0] == "overloaded"
    assert DEFAULT_POLICY.classify(Status(500))[0] == "transient"
    assert DEFAULT_POLICY.classify(TimeoutError("slow"))[0] == "transient"
    assert DEFAULT_POLICY.classify(Status(400))[0] is None
    assert DEFAULT_POLICY.classify(ValueError("parse"))[0] is None
    assert retry_after(Status(429, "1e9")) == 300.0 and retry_after(Status(429, "soon")) is None
    assert 0.5 <= DEFAULT_POLICY.backoff(0) <= 1.0 and DEFAULT_POLICY.backoff(20) <= DEFAULT_POLICY.backoff_cap
    assert 2.0 <= DEFAULT_POLICY.backoff(0, 2.0) <= 2.4  # Retry-After honoured, never earlier
