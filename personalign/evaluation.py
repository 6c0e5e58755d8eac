"""Run a program over examples: predictions, failures, LM calls and wall time, with a progress bar.

LM failures (timeouts, provider errors, unparseable output) are retried ``retries`` times -- each
retry with a fresh ``rollout_id`` and temperature 0.7 so it is a new sample, not a cache hit --
then counted in ``failures`` and scored as failures: the prediction is recorded as ``None`` and
classification metrics count it as the wrong label (see :func:`filled_predictions`). A failure
never stops the run. Configuration errors (missing model file, unknown model) do stop it.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from personalign.errors import ConfigurationError, ContextWindowError, PersonalignError, find_personalign_error

# Errors that no retry fixes and that would fail every example alike: abort the run with one line.
_FATAL = ("AuthenticationError", "LMNotConfiguredError", "NotFoundError", "PermissionDeniedError",
          "APIConnectionError")


def fatal_lm_error(exc: BaseException) -> ConfigurationError | None:
    """A :class:`ConfigurationError` for a missing key, unknown model or unreachable server, else None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if type(exc).__name__ in _FATAL:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            return ConfigurationError(f"the LM cannot be used ({type(exc).__name__}): {first}")
        exc = exc.__cause__ or exc.__context__
    return None


@dataclass
class EvalOutcome:
    """Per-example outputs of one program on one example list.

    Attributes:
        predictions: one per example: the predicted label, or None for a failure.
        scores: one per example: the strategy's score when it has one, else None.
        failures: number of examples that failed after all retries.
        errors: one line per failure (example index and error).
        lm_calls: LM calls that reached a model (cache hits excluded).
        seconds: wall time of the run.
    """

    predictions: list[Any]
    scores: list[float | None]
    failures: int = 0
    errors: list[str] = field(default_factory=list)
    lm_calls: int = 0
    seconds: float = 0.0


def filled_predictions(gold: Sequence[bool], predictions: Sequence[bool | None]) -> list[bool]:
    """Replace failed predictions (None) by the wrong label, so a failure always costs the score."""
    return [(not g) if p is None else bool(p) for g, p in zip(gold, predictions)]


def _progress(description: str, total: int, enabled: bool):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    # Progress goes to stderr so that --json output on stdout stays one JSON object.
    progress = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=Console(stderr=True), disable=not enabled, transient=False,
    )
    return progress


def run_program(
    program,
    examples: Sequence,
    *,
    inputs: Sequence[str],
    output: str,
    lm=None,
    retries: int = 2,
    description: str = "predict",
    progress: bool = True,
    on_example: Callable[[int], None] | None = None,
) -> EvalOutcome:
    """Run ``program`` on each example (or ``program.predict_batch`` when it has one).

    Args:
        program: a dspy.Module returning a Prediction with field ``output``.
        examples: dspy.Example-like objects carrying the ``inputs`` fields.
        lm: the dspy.LM to use (set with :func:`personalign.lm.use`); None for LM-free programs.
        retries: extra attempts per failed example.
    """
    from personalign.lm import CallCounter, use

    start = time.perf_counter()
    preds: list[Any] = [None] * len(examples)
    scores: list[float | None] = [None] * len(examples)
    errors: list[str] = []
    counter = CallCounter()
    with counter, _progress(description, len(examples), progress) as bar:
        task = bar.add_task(description, total=len(examples))
        if hasattr(program, "predict_batch"):
            with use(lm) if lm is not None else contextlib.nullcontext():
                outs = program.predict_batch(examples)
            for i, out in enumerate(outs):
                preds[i] = getattr(out, output)
                scores[i] = getattr(out, "score", None)
            bar.update(task, advance=len(examples))
        else:
            for i, ex in enumerate(examples):
                kwargs = {k: getattr(ex, k) for k in inputs}
                for attempt in range(retries + 1):
                    try:
                        if lm is None:
                            out = program(**kwargs)
                        else:
                            active = lm if attempt == 0 else lm.copy(rollout_id=attempt, temperature=0.7)
                            with use(active):
                                out = program(**kwargs)
                        preds[i] = getattr(out, output)
                        scores[i] = getattr(out, "score", None)
                        break
                    except Exception as exc:  # noqa: BLE001 -- counted, reported, never fatal
                        ours = find_personalign_error(exc)
                        if ours is not None and not isinstance(ours, ContextWindowError):
                            raise ours from None
                        fatal = fatal_lm_error(exc)
                        if fatal is not None:
                            raise fatal from None
                        if attempt == retries or isinstance(ours, ContextWindowError):
                            msg = str(ours or exc).splitlines()[0][:300] if str(ours or exc) else type(exc).__name__
                            errors.append(f"example {i}: {type(ours or exc).__name__}: {msg}")
                            break
                bar.update(task, advance=1)
                if on_example is not None:
                    on_example(i)
    failures = sum(p is None for p in preds)
    return EvalOutcome(preds, scores, failures, errors, counter.calls, time.perf_counter() - start)


__all__ = ["EvalOutcome", "run_program", "filled_predictions", "PersonalignError"]
