"""Yes-probability scoring with an embedded model: ``log p(Yes) - log p(No)`` as a relevance score.

No text is generated: one forward pass over the yes/no question of
:func:`personalign.lm.scoring.relevance_messages` gives the next-token distribution, and the score
is :func:`personalign.lm.scoring.yes_no_margin` (natural-log units). The decision rule is fitted
on train by :class:`personalign.optimizers.LearnedSelectorFit` (grouped CV by prompt): ``yes-prob``
thresholds the margin (threshold maximizing F1 over the out-of-fold margins; the score itself has
no trained weights, so they are not in-sample fits); ``yes-prob-rank`` marks the top train-rate
share of each user's attributes for a prompt (:class:`YesProbRank`), as ``style-rank`` does.
Margins are computed grouped by request (:func:`margins`) so the engine reuses the KV cache of the
shared prompt prefix; an embedded model's pass also keeps the hidden state ``lm-probe`` reads, so
the two share one pass per pair (:mod:`personalign.lm.forward`). Embedded
(``local/...``) models read their exact next-token distribution; a model on an OpenAI-compatible
endpoint gives the same margin from the first answer token's ``top_logprobs``
(:func:`personalign.lm.serving.yes_no_margin`); an endpoint without them raises
:class:`~personalign.errors.ConfigurationError`.

State (JSON, no weights): ``{"threshold": float | None, "model": str | None}`` (plus
``top_fraction`` and ``min_group`` for :class:`YesProbRank`) via
:meth:`YesProbability.dump_state` / :meth:`YesProbability.load_state`.
"""

from __future__ import annotations

from typing import Sequence

import dspy

from personalign.lm.scoring import resolve_model  # noqa: F401  (re-exported: ensemble, probe)

from personalign.programs.relevance._scorer import RelevanceScorer, TopShareDecision


def cached_margin(model: str, attribute: str, prompt: str) -> float:
    """:func:`personalign.lm.scoring.cached_yes_no_margin` of the relevance question: for an
    embedded model the margin of the one forward pass that ``lm-probe`` and the ensembles read
    too (:func:`personalign.lm.forward.yes_no_pass`, cached in memory and on disk)."""
    from personalign.lm.scoring import cached_yes_no_margin, relevance_messages

    return cached_yes_no_margin(model, relevance_messages(attribute, prompt))


def margins(model: str, examples: Sequence) -> list[float]:
    """:func:`cached_margin` of every example's (attribute, prompt), shape (n,), in the caller's
    order; computed grouped by request (and user) so the KV prefix is reused between pairs."""
    from personalign.lm.scoring import cached_yes_no_margins, relevance_messages, sharing_order

    keys = [(ex.prompt, str(getattr(ex, "user_id", "") or ""), ex.attribute) for ex in examples]
    return cached_yes_no_margins(model, [relevance_messages(ex.attribute, ex.prompt) for ex in examples],
                                 sharing_order(keys))


class YesProbability(RelevanceScorer):
    """Relevant when ``log p(Yes) - log p(No) >= threshold`` for the pair's yes/no question.

    Args:
        model: embedded model string; None = the LM in the current ``dspy`` context (set by
            ``personalign.lm.use``), falling back to the default model.
        threshold: decision threshold on the margin (nats); None until fitted.

    Attributes:
        fitted_model: the model the threshold was fitted with (recorded by :meth:`score_batch`);
            once set, it is used for predicting too (margins of different models are not on one
            scale), unless ``model`` is given explicitly.

    Cost: one prompt evaluation (no generation) per pair, shared with ``lm-probe`` and the
    ensembles: a model call (a forward pass, :mod:`personalign.lm.calls`), shown as cached when a
    cache answers it.

    Raises:
        ConfigurationError: an endpoint that returns no ``top_logprobs``, unknown model.
        ContextWindowError: the question does not fit the model's context window.
        RuntimeError: predicting before the threshold is fitted.
    """

    needs_logprobs = True  # reads next-token log-probabilities: an embedded model, or an endpoint with top_logprobs

    optimizer = "personalign.optimizers.learned:LearnedSelectorFit"  # its own fit (trainable)

    uses_lm = True

    def __init__(self, model: str | None = None, threshold: float | None = None) -> None:
        super().__init__()
        self.model = model
        self.threshold = threshold
        self.fitted_model: str | None = None

    def _model(self) -> str:
        from personalign.lm.serving import require_top_logprobs

        model = resolve_model(self.model or self.fitted_model)
        require_top_logprobs(model, "yes-probability scoring")
        return model

    fit_with = "LearnedSelectorFit"

    def fit(self, examples: Sequence, *, seed: int = 0) -> "YesProbability":
        """Nothing to learn but the model (recorded); the threshold is set by the optimizer."""
        self.fitted_model = self._model()
        return self

    def score_batch(self, examples: Sequence) -> list[float]:
        """Margins (nats, shape (n,)) for each example's (attribute, prompt); records the model."""
        model = self._model()
        self.fitted_model = model
        return margins(model, examples)

    def score(self, attribute: str, prompt: str) -> float:
        """Margin (nats) of one pair."""
        return cached_margin(self._model(), attribute, prompt)

    def dump_state(self, *args, **kwargs) -> dict:
        return {"threshold": self.threshold, "model": self.fitted_model}

    def load_state(self, state: dict) -> "YesProbability":
        self.threshold = state.get("threshold")
        self.fitted_model = state.get("model")
        return self


class YesProbRank(TopShareDecision, YesProbability):
    """Relevant = among the top ``top_fraction`` of its (prompt, user) group by yes/no margin.

    Humans mark a roughly constant share (~17-20%) of a user's attributes relevant to any prompt,
    while the margin's scale shifts between prompts; ranking inside each group of one user's
    attributes for one prompt transfers where a global threshold may not. ``top_fraction`` is the
    train positive rate (set by :meth:`fit`); groups smaller than ``min_group`` fall back to
    ``margin >= threshold`` (threshold from the optimizer's grouped CV).

    Args:
        model, threshold: as :class:`YesProbability`.
        min_group: smallest group decided by rank.
        top_fraction: share of a group marked relevant; None until fitted.
    """

    optimizer = "personalign.optimizers.learned:LearnedSelectorFit"  # its own fit (trainable)

    def __init__(self, model: str | None = None, threshold: float | None = None, min_group: int = 5,
                 top_fraction: float | None = None) -> None:
        super().__init__(model=model, threshold=threshold)
        self.min_group = int(min_group)
        self.top_fraction = top_fraction

    def fit(self, examples: Sequence, *, seed: int = 0) -> "YesProbRank":
        """Record the model; ``top_fraction`` = the positive rate of ``examples`` (their ``relevant``)."""
        super().fit(examples, seed=seed)
        self.fit_top_fraction(examples)
        return self
