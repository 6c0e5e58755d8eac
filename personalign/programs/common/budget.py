"""How much long input a prompt may carry, and cutting a text to it.

The embedded models have a 4096-token context (``PERSONALIGN_N_CTX``), while a PrefEval
conversation is up to ~15,000 characters and a real chat history far more. An LLM program fits its
long input (evidence, chunk, item) to a :class:`Budget` computed by :func:`prompt_budget` for the
predictor about to be called:

* embedded models (``local/...``): a budget in **tokens**, measured with the model's own
  tokenizer (:func:`personalign.lm.count_tokens`) -- ``n_ctx - output_tokens - overhead - 16``,
  where ``overhead`` is the token count of the exact prompt the adapter would send with the long
  field left empty (instructions, field framing, JSON schema, the other inputs and any few-shot
  demos a teleprompter added) and 16 a margin for tokenization at the seams;
* any other model: ``hosted_chars`` **characters** (50,000, the study's chunk size).

Texts longer than 10 characters per token of budget are not tokenized (no text of natural
language is that sparse): they are treated as not fitting. Evidence-specific shortening (user
turns only, ranked turns) is in :mod:`personalign.programs.common.evidence`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

HOSTED_CHARS = 50_000
MAX_CHARS_PER_TOKEN = 10
SEAM_TOKENS = 16

@dataclass
class Budget:
    """How much long input a prompt may carry: ``limit`` in ``unit`` ("tokens" or "chars"),
    measured by ``measure(text)``."""

    limit: int
    unit: str = "chars"
    measure: Callable[[str], int] = len

    def fits(self, text: str) -> bool:
        if self.unit == "chars":
            return len(text) <= self.limit
        return len(text) <= self.limit * MAX_CHARS_PER_TOKEN and self.measure(text) <= self.limit

    def approx_chars(self) -> int:
        """A character count that usually fits (4 characters per token for token budgets)."""
        return self.limit if self.unit == "chars" else self.limit * 4

def cut_text(text: str, limit: int) -> str:
    """The beginning of ``text`` in at most ``limit`` characters, ``" [...]"`` marking a cut."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 6)].rstrip() + " [...]"


def cut_to_budget(text: str, budget: Budget) -> str:
    """The longest beginning of ``text`` (``" [...]"`` marking the cut) that fits ``budget``
    (halving/extending by characters; at most ~12 measurements)."""
    if budget.fits(text):
        return text
    lo, hi = 0, min(len(text), budget.limit * (1 if budget.unit == "chars" else MAX_CHARS_PER_TOKEN))
    while hi - lo > max(16, hi // 64):
        mid = (lo + hi) // 2
        if budget.fits(cut_text(text, mid)):
            lo = mid
        else:
            hi = mid
    return cut_text(text, lo) if lo > 6 else ""

def active_model() -> str | None:
    """Model string of the LM in the current DSPy context (None when none is set)."""
    import dspy

    lm = dspy.settings.lm
    return getattr(lm, "model", None) if lm is not None else None

def prompt_budget(predictor: Any, inputs: dict[str, Any], long_field: str, *, output_tokens: int,
                  hosted_chars: int = HOSTED_CHARS, model: str | None = None, demos: Sequence | None = None) -> Budget:
    """The budget of ``long_field`` for a call of ``predictor`` with the other ``inputs``.

    Args:
        predictor: a ``dspy.Predict`` (a ``dspy.ChainOfThought``'s inner ``predict`` is used);
            its signature and current demos are rendered.
        inputs: the other input fields of the call.
        long_field: the field to fit (rendered empty to measure the overhead).
        output_tokens: tokens reserved for the answer.
        model: default: the LM of the current DSPy context.
        demos: the demos the call will carry (default: the predictor's own).

    Raises:
        ContextWindowError: on an embedded model, the prompt without the long field leaves fewer
            than 50 tokens (e.g. too many few-shot demos for a 4096-token window).
    """
    from personalign.lm import adapter_for, context_window, is_local, prompt_tokens

    model = model if model is not None else active_model()
    if not model or not is_local(model):
        return Budget(hosted_chars, "chars", len)
    from personalign.errors import ContextWindowError

    predict = getattr(predictor, "predict", predictor)
    demos = list(predict.demos or []) if demos is None else list(demos)
    messages = adapter_for(model).format(predict.signature, demos=demos, inputs={**inputs, long_field: ""})
    overhead = prompt_tokens(messages, model)
    n_ctx = context_window()
    limit = n_ctx - output_tokens - overhead - SEAM_TOKENS
    if limit < 50:
        raise ContextWindowError(
            f"the prompt of {type(predict).__name__} without '{long_field}' takes {overhead} tokens; with "
            f"{output_tokens} reserved for the answer it leaves {max(limit, 0)} of {n_ctx}: "
            "use fewer demos or raise n_ctx (PERSONALIGN_N_CTX)")
    return token_budget(model, limit)


def token_budget(model: str, limit: int) -> Budget:
    """A token :class:`Budget` of ``limit`` measured by ``model``'s tokenizer (embedded models;
    :func:`personalign.lm.count_tokens`)."""
    from personalign.lm import count_tokens

    def measure(text: str) -> int:
        return count_tokens(text, model)

    return Budget(limit, "tokens", measure)


__all__ = ["Budget", "HOSTED_CHARS", "MAX_CHARS_PER_TOKEN", "SEAM_TOKENS", "active_model", "cut_text",
           "cut_to_budget", "prompt_budget", "token_budget"]
