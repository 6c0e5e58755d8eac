"""The one retry policy for failed LM calls: what is retried, how often, and how a retry resamples.

Used by :func:`personalign.programs.run.run_program` (a failed example is run again) and by the
teleprompter wrappers (:class:`personalign.optimizers._failures.RetryingAdapter`: a failed
predictor call inside a DSPy teleprompter is made again). Every failure is one of:

* ``"raise"`` -- a configuration error (missing model file, unknown model, bad settings) or an LM
  that cannot be used at all (missing key, unknown model, unreachable server): every example
  would fail alike, so the run stops with :attr:`RetryDecision.error` (a
  :class:`~personalign.errors.PersonalignError`);
* ``"fail"`` -- a prompt longer than the context window: no retry can help; the example (or the
  predictor call) is scored as a failure;
* ``"retry"`` -- anything else (an LM error or timeout that outlived the LM's own retries, an empty
  or unparseable output): tried again up to :attr:`RetryPolicy.retries` times, each time as a new
  sample (a fresh ``rollout_id`` and temperature :attr:`RetryPolicy.temperature`, so the retry is
  not the cached failure), then scored as a failure.
"""

from __future__ import annotations

import json
import math
import os
import random
import zlib
from dataclasses import dataclass
from typing import Any, Literal

from personalign.errors import ConfigurationError, ContextWindowError, PersonalignError, find_personalign_error

# Errors that no retry fixes and that would fail every example alike: abort the run with one line.
_FATAL = ("AuthenticationError", "LMNotConfiguredError", "NotFoundError", "PermissionDeniedError",
          "APIConnectionError", "LMAuthError", "ConnectionRefusedError", "ConnectError")


def fatal_lm_error(exc: BaseException) -> ConfigurationError | None:
    """A :class:`ConfigurationError` for a missing key, unknown model or unreachable server found
    in ``exc``'s cause/context chain, else None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if type(exc).__name__ in _FATAL:
            from personalign.redaction import redact

            first = redact((str(exc).strip().splitlines() or [type(exc).__name__])[0])[:300]
            return ConfigurationError(f"the LM cannot be used ({type(exc).__name__}): {first}")
        exc = exc.__cause__ or exc.__context__
    return None


def provider_exception(exc: BaseException) -> bool:
    """True when ``exc`` is an ``APIConnectionError`` that litellm made out of an ordinary exception
    raised inside the provider (litellm labels *any* exception of a custom handler that way), not
    out of a failed connection: such an error is an LM failure like a timeout (retried, then
    counted), not an unreachable server. A connection failure has an ``OSError`` (e.g.
    ``ConnectionRefusedError``) or a ``*Connect*`` transport error as its root cause."""
    chain: list[BaseException] = []
    while exc is not None and all(exc is not e for e in chain):
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    names = [type(e).__name__ for e in chain]
    if "APIConnectionError" not in names or any(n in _FATAL for n in names if n != "APIConnectionError"):
        return False
    root = chain[-1]
    return not (type(root).__name__ == "APIConnectionError" or isinstance(root, OSError)
                or "Connect" in type(root).__name__)


@dataclass(frozen=True)
class RetryDecision:
    """What to do with one failure: ``action`` is ``"raise"`` (``error`` is the
    :class:`~personalign.errors.PersonalignError` to raise), ``"fail"`` or ``"retry"``."""

    action: Literal["raise", "fail", "retry"]
    error: PersonalignError | None = None


_LIMITED = ("RateLimitError", "LMRateLimitError")
_OVERLOADED = ("ServiceUnavailableError",)
_TRANSIENT = ("Timeout", "APITimeoutError", "LMTimeoutError", "InternalServerError", "LMServerError",
              "LMTransportError", "APIConnectionError", "ServiceUnavailableError", "BadGatewayError",
              "LMLockTimeoutError", "ConnectionError", "RemoteDisconnected", "ReadTimeout", "ConnectTimeout")


def _chain(exc: BaseException | None) -> list[BaseException]:
    out: list[BaseException] = []
    while exc is not None and all(exc is not e for e in out):
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def _status(exc: BaseException) -> int | None:
    for name in ("status", "status_code"):
        value = getattr(exc, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def retry_after(exc: BaseException) -> float | None:
    """The seconds a refusal asked to wait (``Retry-After``, as DSPy's errors carry it or in the
    HTTP response's headers), None when it said nothing usable (at most 300 s is honoured)."""
    for e in _chain(exc):
        hint = getattr(e, "retry_after", None)
        if hint is None:
            headers = getattr(getattr(e, "response", None), "headers", None)
            try:
                hint = headers.get("retry-after") if headers is not None else None
            except Exception:  # noqa: BLE001 -- a header object of another shape: no hint
                hint = None
        try:
            value = float(hint) if hint is not None else None
        except (TypeError, ValueError):
            value = None
        if value is not None and math.isfinite(value) and value >= 0:
            return min(value, 300.0)
    return None


def backoff_scale() -> float:
    """The factor of every backoff wait (``PERSONALIGN_RETRY_BACKOFF``, default 1; 0 in tests that
    inject many faults: :func:`personalign.testing.faults.fast_lm_retries`)."""
    try:
        value = float(os.environ.get("PERSONALIGN_RETRY_BACKOFF", "1"))
    except ValueError:
        return 1.0
    return value if math.isfinite(value) and value >= 0 else 1.0


@dataclass(frozen=True)
class RetryPolicy:
    """How failed LM calls are retried (see the module docstring).

    Attributes:
        retries: extra attempts of a whole program run after the first (0: no retry).
        temperature: sampling temperature of a retry.
        rate_limit_retries: times one call refused for the rate (429) or as overloaded (503) is
            sent again before the run stops (:class:`~personalign.errors.RateLimitedError`).
        backoff_base, backoff_cap: a retry waits ``min(cap, base * 2**attempt)`` seconds, jittered
            to 50-100% of that (or the refusal's ``Retry-After``, +0-20%).
    """

    retries: int = 2
    temperature: float = 0.7
    rate_limit_retries: int = 8
    backoff_base: float = 1.0
    backoff_cap: float = 30.0

    def classify(self, exc: BaseException) -> tuple[str | None, float | None]:
        """What one failed model call was, for :class:`personalign.lm.LM`'s retries:
        ``("limited" | "overloaded" | "transient" | None, Retry-After seconds or None)``.
        ``limited``: HTTP 429 / a ``RateLimitError``; ``overloaded``: 503; ``transient``: a timeout,
        another 5xx, a dropped or refused connection, a reply that is not JSON; None: anything else (a bad request, a
        missing key, a prompt too long, our own errors) -- not sent again here."""
        chain = _chain(exc)
        if any(isinstance(e, PersonalignError) for e in chain):
            return None, None
        names = [type(e).__name__ for e in chain]
        statuses = [s for s in (_status(e) for e in chain) if s is not None]
        hint = retry_after(exc)
        if 429 in statuses or any(n in _LIMITED for n in names):
            return "limited", hint
        if any(s in (503, 529) for s in statuses) or any(n in _OVERLOADED for n in names):
            return "overloaded", hint
        if any(n in ("AuthenticationError", "PermissionDeniedError", "NotFoundError", "BadRequestError",
                     "LMAuthError", "LMBillingError", "LMInvalidRequestError", "ContextWindowExceededError",
                     "ConnectionRefusedError", "ConnectError") for n in names):  # no retry helps (a refused
            # connection: the server is down; the runner stops the run: fatal_lm_error)
            return None, hint
        if any(s >= 500 for s in statuses) or any(n in _TRANSIENT for n in names) \
                or any(isinstance(e, (ConnectionError, TimeoutError, json.JSONDecodeError)) for e in chain):
            # a reply that is not JSON: a gateway's error page in front of the provider (502 HTML)
            return "transient", hint
        return None, hint

    def backoff(self, attempt: int, hint: float | None = None) -> float:
        """Seconds to wait before attempt ``attempt + 1`` of one call (see the attributes), times
        :func:`backoff_scale`."""
        scale = backoff_scale()
        if hint is not None:
            return hint * random.uniform(1.0, 1.2) * min(scale, 1.0)
        return min(self.backoff_cap, self.backoff_base * 2 ** min(attempt, 10)) * random.uniform(0.5, 1.0) * scale

    def decide(self, exc: BaseException) -> RetryDecision:
        """Classify ``exc`` (raised by a program or a predictor call) as raise / fail / retry."""
        ours = find_personalign_error(exc)
        if ours is not None and not isinstance(ours, ContextWindowError):
            return RetryDecision("raise", ours)
        fatal = fatal_lm_error(exc)
        if fatal is not None and not provider_exception(exc):
            return RetryDecision("raise", fatal)
        if isinstance(ours, ContextWindowError):
            return RetryDecision("fail", ours)
        return RetryDecision("retry")

    def retry_lm(self, lm, attempt: int):
        """The LM of attempt ``attempt`` of a whole program run: ``lm`` itself first, then a copy
        with ``rollout_id=attempt`` at :attr:`temperature`."""
        return lm if attempt == 0 else lm.copy(rollout_id=attempt, temperature=self.temperature)

    def retry_kwargs(self, lm_kwargs: dict[str, Any], attempt: int) -> dict[str, Any]:
        """The LM kwargs of attempt ``attempt`` of one predictor call: unchanged first, then a
        ``rollout_id`` derived from the call's own and the attempt (CRC32: the same across
        processes, so a rerun with the same seed hits the cache) at :attr:`temperature`."""
        if attempt == 0:
            return lm_kwargs
        rollout = zlib.crc32(f"retry:{lm_kwargs.get('rollout_id')}:{attempt}".encode())
        return {**lm_kwargs, "rollout_id": rollout, "temperature": self.temperature}


DEFAULT_POLICY = RetryPolicy()

__all__ = ["RetryPolicy", "RetryDecision", "DEFAULT_POLICY", "backoff_scale", "fatal_lm_error", "provider_exception",
           "retry_after"]
