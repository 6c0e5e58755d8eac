"""Failures inside a DSPy teleprompter: retried (:class:`RetryingAdapter`, the one retry policy of
:mod:`personalign.lm.retry`), counted (:func:`failure_counter`) and tolerated up to
:func:`error_budget` per pass instead of DSPy's 10."""

from __future__ import annotations

from typing import Sequence

from personalign.lm.retry import DEFAULT_POLICY, RetryPolicy


def error_budget(trainset: Sequence, valset: Sequence | None) -> int:
    """Errors a DSPy teleprompter may meet in one pass before it gives up: half of the larger of
    trainset and valset, and never fewer than ``dspy.settings.max_errors`` (DSPy's default, 10).

    DSPy stops a bootstrap pass, and *cancels* an evaluation (scoring the candidate 0 for the
    whole pass), after ``max_errors`` failed examples. With DSPy's 10, a few percent of failed LM
    calls on a valset of 100 silently zeroes MIPROv2 candidates; with this budget a failed example
    is scored as a failure (metric 0) and only an LM that fails on half of a pass stops the run."""
    import dspy

    return max(int(dspy.settings.max_errors or 10), (max(len(trainset), len(valset or ())) + 1) // 2)


class Stopped(BaseException):
    """A run-stopping error (``--max-cost``: :class:`~personalign.errors.BudgetExceeded`) carried past
    a teleprompter's per-example error handling (which catches ``Exception`` and would log and
    count the same stop once per remaining example); re-raised as ``error`` where the teleprompter
    was called."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class RetryingAdapter:
    """The active DSPy adapter, with :class:`personalign.lm.retry.RetryPolicy` (the policy of
    :func:`personalign.programs.run.run_program`) for every predictor call a teleprompter makes
    (task runs and instruction proposals alike).

    A failed call the policy retries -- an LM error or timeout that outlived the LM's own retries,
    an empty or unparseable output -- is tried ``policy.retries`` more times, each a new sample
    (:meth:`RetryPolicy.retry_kwargs`), then raised to the teleprompter, which scores it as a
    failed example. Without this a single empty instruction proposal aborts MIPROv2 (DSPy does
    not guard its proposer). Configuration errors, fatal LM errors and prompts longer than the
    context window are raised at once. DSPy wraps adapters the same way
    (``dspy.adapters.decision.DecisionAdapter``); other attributes are the wrapped adapter's.
    ``retried`` counts the retries made.
    """

    def __init__(self, adapter, policy: RetryPolicy = DEFAULT_POLICY) -> None:
        import threading

        self.adapter = adapter
        self.policy = policy
        self.retried = 0
        self._lock = threading.Lock()

    def __getattr__(self, name: str):
        return getattr(self.__dict__["adapter"], name)

    def _kwargs(self, lm_kwargs: dict, attempt: int) -> dict:
        if attempt > 0:
            with self._lock:
                self.retried += 1
        return self.policy.retry_kwargs(lm_kwargs, attempt)

    def _give_up(self, exc: BaseException, attempt: int) -> bool:
        return attempt == self.policy.retries or self.policy.decide(exc).action != "retry"

    def __call__(self, lm, lm_kwargs, signature, demos, inputs):
        from personalign.errors import BudgetExceeded, find_personalign_error

        for attempt in range(self.policy.retries + 1):
            try:
                return self.adapter(lm, lm_kwargs=self._kwargs(dict(lm_kwargs or {}), attempt), signature=signature,
                                    demos=demos, inputs=inputs)
            except Exception as exc:
                if isinstance(find_personalign_error(exc), BudgetExceeded):
                    raise Stopped(find_personalign_error(exc)) from None
                if self._give_up(exc, attempt):
                    raise

    async def acall(self, lm, lm_kwargs, signature, demos, inputs):
        for attempt in range(self.policy.retries + 1):
            try:
                return await self.adapter.acall(lm, lm_kwargs=self._kwargs(dict(lm_kwargs or {}), attempt),
                                                signature=signature, demos=demos, inputs=inputs)
            except Exception as exc:
                if self._give_up(exc, attempt):
                    raise


def failure_counter():
    """A DSPy callback counting ``dspy.Predict`` calls that raised -- after the LM's own retries --
    (LM errors, timeouts, empty or unparseable outputs), by exception type."""
    import threading
    from collections import Counter

    import dspy
    from dspy.utils.callback import BaseCallback

    class PredictorFailures(BaseCallback):
        def __init__(self) -> None:
            self.failures = 0
            self.by_type: Counter[str] = Counter()
            self._open: set[str] = set()
            self._lock = threading.Lock()

        def on_module_start(self, call_id, instance, inputs):
            if isinstance(instance, dspy.Predict):
                with self._lock:
                    self._open.add(call_id)

        def on_module_end(self, call_id, outputs, exception=None):
            with self._lock:
                if call_id in self._open:
                    self._open.discard(call_id)
                    if exception is not None:
                        self.failures += 1
                        self.by_type[type(exception).__name__] += 1

    return PredictorFailures()


__all__ = ["RetryingAdapter", "error_budget", "failure_counter"]
