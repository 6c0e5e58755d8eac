"""Token counts on the embedded models' own tokenizers (``local/NAME`` models only).

Light at import; the model is loaded on first use (:func:`personalign.lm._engine.get_engine`).
Hosted models have no tokenizer here: these functions raise for them, and callers budget such
models in characters instead (:mod:`personalign.programs.common.budget`).
"""

from __future__ import annotations

from typing import Any, Sequence


def _engine(model: str):
    from personalign.errors import UnknownModelError
    from personalign.lm._models import is_local

    if not is_local(model):
        raise UnknownModelError(f"no local tokenizer for '{model}': token counts need an embedded model (local/...)")
    from personalign.lm._engine import get_engine

    return get_engine(model)


def count_tokens(text: str, model: str) -> int:
    """Number of tokens of ``text`` (>= 0) in ``model``'s tokenizer, without BOS, special tokens
    parsed as such.

    Raises:
        UnknownModelError: ``model`` is not an embedded ``local/NAME`` model (or unknown).
        ModelFileError: the model file is missing or fails its check (first load).
    """
    return _engine(model).count_tokens(text)


def prompt_tokens(messages: Sequence[dict[str, Any]], model: str) -> int:
    """Tokens of the prompt ``model`` is sent for chat ``messages`` (``[{"role", "content"}]``),
    rendered with the model's chat template. Raises as :func:`count_tokens`."""
    engine = _engine(model)
    prompt, _ = engine.render(list(messages))
    return engine.count_tokens(prompt)


def context_window() -> int:
    """The embedded models' context size in tokens (``n_ctx`` of the current settings,
    ``PERSONALIGN_N_CTX``)."""
    from personalign.lm._engine import current_settings

    return current_settings().n_ctx


__all__ = ["context_window", "count_tokens", "prompt_tokens"]
