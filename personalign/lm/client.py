"""personalign's ``dspy.LM``: every call inside its endpoint's window, identical calls in flight
made once, and failed calls retried by the one retry policy.

:func:`personalign.lm.make_lm` builds an :class:`LM` for every model string. It is a ``dspy.LM``
(programs, adapters, teleprompters and DSPy's cache see no difference) whose ``__call__``:

1. shares the answer of an identical call already in flight (:func:`personalign.lm.flight.coalesced`);
2. takes a place in the endpoint's adaptive window (:class:`personalign.lm.flight.Window`);
3. sends the call through ``dspy.LM`` with DSPy's own retries off -- held to the run's
   ``--max-cost`` (:func:`personalign.lm.spend.guarded`) -- and on failure asks
   :meth:`personalign.lm.retry.RetryPolicy.classify`: a rate-limit answer (429) or an overload
   (503) cuts the window and is sent again after ``Retry-After`` (or a jittered backoff), up to
   :attr:`~personalign.lm.retry.RetryPolicy.rate_limit_retries` times, then stops the run with
   :class:`~personalign.errors.RateLimitedError` (one line: the endpoint kept refusing); a
   transient failure (timeout, 5xx, a dropped connection) is sent again up to ``transient_retries``
   times (``num_retries`` of :func:`~personalign.lm.make_lm`, default 2), then raised to the
   runner, which counts it as the example's failure; anything else is raised at once.

Every call of an endpoint (not the embedded engine) has a ``timeout`` (:data:`ENDPOINT_TIMEOUT`
seconds unless ``--lm-kwargs`` sets one), so a hung server fails the call, not the run.
"""

from __future__ import annotations

import time

import dspy

from personalign.lm.flight import coalesced, in_flight_default, request_key, window_for

#: Seconds an endpoint call may take before it fails as a timeout (``--lm-kwargs '{"timeout": S}'``).
ENDPOINT_TIMEOUT = 120.0


def endpoint_key(lm) -> tuple:
    """The window an LM's calls share: its model string and ``api_base``."""
    return (str(getattr(lm, "model", "")), str((getattr(lm, "kwargs", None) or {}).get("api_base") or ""))


class LM(dspy.LM):
    """A ``dspy.LM`` whose calls go through the endpoint's window and the retry policy (module
    docstring). ``transient_retries``: how often a transient failure is sent again."""

    transient_retries: int = 2

    def __call__(self, prompt=None, *, messages=None, **kwargs):
        settings = {**self.kwargs, **kwargs}
        same_answer = bool(self.cache) or float(settings.get("temperature") or 0.0) == 0.0
        key = request_key(self.model, prompt, messages, settings) if same_answer else None
        window = window_for(endpoint_key(self), default=in_flight_default(self.model))
        from personalign.lm.spend import guarded  # --max-cost: each request held to the run's budget

        return coalesced(key, lambda: within_window(self, lambda: guarded(self, lambda: dspy.LM.__call__(
            self, prompt, messages=messages, **kwargs)), window), on_shared=lambda: _count_shared(window))


def within_window(lm, call, window=None, transient_retries: int | None = None):
    """``call()`` -- one request to ``lm``'s endpoint -- inside the endpoint's window, sent again by
    the retry policy (the module docstring's step 3); its answer.

    Raises:
        RateLimitedError: the endpoint kept refusing for the rate (or as overloaded).
        Exception: a transient failure after its retries, or any other failure at once."""
    from personalign.errors import RateLimitedError
    from personalign.lm.retry import DEFAULT_POLICY

    policy = DEFAULT_POLICY
    window = window or window_for(endpoint_key(lm), default=in_flight_default(lm.model))
    retries = getattr(lm, "transient_retries", 2) if transient_retries is None else transient_retries
    limited = transient = 0
    started = time.monotonic()
    while True:
        epoch = window.acquire()
        answered = False
        try:
            out = call()
            answered = True
            return out
        except Exception as exc:  # noqa: BLE001 -- classified, then raised or sent again
            kind, hint = policy.classify(exc)
            if kind in ("limited", "overloaded"):
                window.limited(epoch, overload=kind == "overloaded")
                limited += 1
                if limited > policy.rate_limit_retries:
                    said = "429 (rate limited)" if kind == "limited" else "503 (overloaded)"
                    raise RateLimitedError(
                        f"{lm.model}: the endpoint answered {said} {limited} times in a row over "
                        f"{time.monotonic() - started:.0f} s; lower --concurrency (now {window.cap}) or try again "
                        "later") from None
                wait = policy.backoff(limited - 1, hint)
            elif kind == "transient" and transient < retries:
                transient += 1
                wait = policy.backoff(transient - 1, hint)
            else:
                raise
            window.stats.retried += 1
        finally:
            window.release(answered)
        time.sleep(wait)


def _count_shared(window) -> None:
    """A call answered by an identical call in flight: counted as answered without a model call
    (like a cache hit) by the active call counters, and in the window's ``coalesced``."""
    from personalign.lm.calls import GENERATION, _active

    window.stats.coalesced += 1
    for counter in _active():
        counter.add(GENERATION)


__all__ = ["ENDPOINT_TIMEOUT", "LM", "endpoint_key", "within_window"]
