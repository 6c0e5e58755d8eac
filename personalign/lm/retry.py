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

import zlib
from dataclasses import dataclass
from typing import Any, Literal

from personalign.errors import ConfigurationError, ContextWindowError, PersonalignError, find_personalign_error

# Errors that no retry fixes and that would fail every example alike: abort the run with one line.
_FATAL = ("AuthenticationError", "LMNotConfiguredError", "NotFoundError", "PermissionDeniedError",
          "APIConnectionError")


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


@dataclass(frozen=True)
class RetryPolicy:
    """How failed LM calls are retried (see the module docstring).

    Attributes:
        retries: extra attempts after the first (0: no retry).
        temperature: sampling temperature of a retry.
    """

    retries: int = 2
    temperature: float = 0.7

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

__all__ = ["RetryPolicy", "RetryDecision", "DEFAULT_POLICY", "fatal_lm_error", "provider_exception"]
