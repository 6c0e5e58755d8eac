"""The per-example metric of a stage over a set of predictions: what scored stages report as their
mean and what the ``mean`` objective maximizes. A failed prediction (None) scores 0; so does a
prediction the metric cannot score (it raised), unless the error is a configuration error (a
missing model, an unknown model): that one stops the run.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from personalign.errors import ConfigurationError, ContextWindowError, find_personalign_error
from personalign.lm.retry import fatal_lm_error


def per_example_scores(stage, examples: Sequence, predictions: Sequence[Any], *, lm=None) -> tuple[list[float], int]:
    """``stage.metric(example, Prediction(**{stage.output: p}))`` per example, in [0, 1].

    Metrics that call an LM (a judge) run inside :func:`personalign.lm.use` of ``lm``.

    Returns:
        ``(scores, metric_lm_calls)``.

    Raises:
        PersonalignError: a configuration error inside the metric (not a per-example failure).
    """
    import dspy

    from personalign.lm import CallCounter, use

    metric = stage.metric_fn()
    scores: list[float] = []
    counter = CallCounter()
    with counter, use(lm):
        for ex, p in zip(examples, predictions):
            if p is None:
                scores.append(0.0)
                continue
            try:
                value = metric(ex, dspy.Prediction(**{stage.output: p}))
                value = float(getattr(value, "score", value))
            except Exception as exc:  # noqa: BLE001 -- an unscorable prediction is a failure
                ours = find_personalign_error(exc)
                if ours is not None and not isinstance(ours, ContextWindowError):
                    raise ours from None
                fatal = fatal_lm_error(exc)
                if fatal is not None:
                    raise fatal from None
                scores.append(0.0)
                continue
            if not math.isfinite(value):  # NaN would silently become the mean and be written as a figure
                raise ConfigurationError(f"the stage's metric {stage.metric_name!r} returned {value} for example "
                                         f"{getattr(ex, 'id', '?')!r}; a metric returns a finite number")
            scores.append(value)
    return scores, counter.calls


__all__ = ["per_example_scores"]
