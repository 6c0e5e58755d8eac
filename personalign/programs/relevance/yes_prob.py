"""Yes-probability scoring with an embedded model: ``log p(Yes) - log p(No)`` as a relevance score.

No text is generated: one forward pass over the yes/no question of
:func:`personalign.lm.scoring.relevance_messages` gives the next-token distribution, and the score
is :func:`personalign.lm.scoring.yes_no_margin` (natural-log units). The decision threshold is a
learned parameter fitted on train for F1 by :class:`personalign.optimizers.ThresholdFit` (the score
itself has no trained weights, so train scores are not in-sample fits). Only embedded
(``local/...``) models expose next-token log-probabilities here; other models raise
:class:`~personalign.errors.ConfigurationError`.

State (JSON, no weights): ``{"threshold": float | None, "model": str | None}`` via
:meth:`YesProbability.dump_state` / :meth:`YesProbability.load_state`.
"""

from __future__ import annotations

import threading
from typing import Sequence

import dspy

_margins: dict[tuple[str, str, str], float] = {}
_margins_lock = threading.Lock()


def cached_margin(model: str, attribute: str, prompt: str) -> float:
    """:func:`personalign.lm.scoring.yes_no_margin` of the relevance question, memoized per process
    by ``(model, attribute, prompt)`` (deterministic: greedy next-token log-probabilities)."""
    from personalign.lm.scoring import relevance_messages, yes_no_margin

    key = (model, attribute, prompt)
    with _margins_lock:
        if key in _margins:
            return _margins[key]
    value = float(yes_no_margin(model, relevance_messages(attribute, prompt)))
    with _margins_lock:
        _margins[key] = value
    return value


def resolve_model(model: str | None) -> str:
    """The model string to score with: ``model`` if given, else the LM of the current dspy context,
    else :data:`personalign.lm.DEFAULT_MODEL`."""
    if model:
        return model
    lm = dspy.settings.lm
    if lm is not None and getattr(lm, "model", None):
        return str(lm.model)
    from personalign.lm import DEFAULT_MODEL

    return DEFAULT_MODEL


class YesProbability(dspy.Module):
    """Relevant when ``log p(Yes) - log p(No) >= threshold`` for the pair's yes/no question.

    Args:
        model: embedded model string; None = the LM in the current ``dspy`` context (set by
            ``personalign.lm.use``), falling back to the default model.
        threshold: decision threshold on the margin (nats); None until fitted.

    Attributes:
        fitted_model: the model the threshold was fitted with (recorded by :meth:`score_batch`);
            once set, it is used for predicting too (margins of different models are not on one
            scale), unless ``model`` is given explicitly.

    Cost: one prompt evaluation (no generation) per pair; not counted as a DSPy LM call.

    Raises:
        ConfigurationError: a non-embedded model (no log-probabilities), unknown model.
        ContextWindowError: the question does not fit the model's context window.
        RuntimeError: predicting before the threshold is fitted.
    """

    uses_lm = True

    def __init__(self, model: str | None = None, threshold: float | None = None) -> None:
        super().__init__()
        self.model = model
        self.threshold = threshold
        self.fitted_model: str | None = None

    def _model(self) -> str:
        from personalign.errors import ConfigurationError
        from personalign.lm import is_local

        model = resolve_model(self.model or self.fitted_model)
        if not is_local(model):
            raise ConfigurationError(
                f"yes-probability scoring needs next-token log-probabilities of an embedded model "
                f"(local/...); got '{model}'")
        return model

    def score_batch(self, examples: Sequence) -> list[float]:
        """Margins (nats, shape (n,)) for each example's (attribute, prompt); records the model."""
        model = self._model()
        self.fitted_model = model
        return [cached_margin(model, ex.attribute, ex.prompt) for ex in examples]

    def score(self, attribute: str, prompt: str) -> float:
        """Margin (nats) of one pair."""
        return cached_margin(self._model(), attribute, prompt)

    def forward(self, attribute: str, prompt: str) -> dspy.Prediction:
        if self.threshold is None:
            raise RuntimeError("YesProbability has no threshold: compile it with ThresholdFit first")
        s = self.score(attribute, prompt)
        return dspy.Prediction(relevant=s >= self.threshold, score=s)

    def dump_state(self, *args, **kwargs) -> dict:
        return {"threshold": self.threshold, "model": self.fitted_model}

    def load_state(self, state: dict) -> "YesProbability":
        self.threshold = state.get("threshold")
        self.fitted_model = state.get("model")
        return self
