"""The judge's hidden state: the final hidden state at the position that emits the yes/no verdict.

:func:`margin_and_hidden` evaluates the same prompt as :func:`personalign.lm.scoring.yes_no_margin`
and returns both the yes/no margin (the prompt is evaluated with embeddings off and only its last
token with them on, :meth:`personalign.lm._engine.LocalEngine.next_token_logprobs_hidden`) and
the model's final hidden state there, shape (n_embd,) float64 (1536 for Qwen2.5-Coder-1.5B).
A linear probe on it (:mod:`personalign.programs.relevance.probe`) reads what the model "knows"
about the verdict beyond the two logits the margin keeps. Embedded models only. Uncached: the
strategies read the same pass through :func:`personalign.lm.forward.yes_no_pass`, which caches it.
"""

from __future__ import annotations

from typing import Sequence


def margin_and_hidden(model: str, messages: Sequence[dict]):
    """``(margin, hidden)`` of the yes/no question in ``messages`` for an embedded ``model``.

    Raises:
        ConfigurationError: a model that is not embedded (``local/...``): no hidden state to read.
        ContextWindowError: the prompt does not fit n_ctx.
    """
    from personalign.errors import ConfigurationError
    from personalign.lm import is_local
    from personalign.lm._engine import get_engine
    from personalign.lm.scoring import NO, YES, margin_of

    if not is_local(model):
        raise ConfigurationError(f"lm-probe reads the hidden state of an embedded model (local/...); got '{model}'")
    engine = get_engine(model)
    prompt, _ = engine.render(list(messages))
    lp, hidden = engine.next_token_logprobs_hidden(prompt, list(YES + NO))
    return margin_of(lp), hidden


__all__ = ["margin_and_hidden"]
