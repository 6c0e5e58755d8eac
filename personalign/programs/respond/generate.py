"""Response generators of Stage 3: personalized (with selected attributes), generic (without).

Source: the seed study "Re-Centering Humans in LLM Personalization", Stage 3 -- a response
written with the user's relevant attributes is compared with a generic response; LLM judges
reward explicit restatements of attributes that human raters do not value, so the generator can
forbid them (``forbid_explicit=True``).

Budgets (the embedded SmolLM2-135M has a 4096-token window and writes ~40-70 tokens/s on 2
cores): at most ``max_attributes`` attributes of at most 300 characters each, the prompt cut to
``max_prompt_chars`` (head kept), and ``max_tokens`` output tokens per call (default 200; on the
embedded backend the response string is then bounded to fit that budget).

Post-checks done in code because a 135M model cannot be trusted to follow the instructions:

* an empty response is re-sampled once (``rollout_id`` + temperature 0.7), then raises
  ``ValueError`` (``run_program`` counts it as a failure);
* with ``forbid_explicit``, a response that explicitly mentions an attribute (by
  :func:`~personalign.programs.common.text.lexical_mention`) is re-sampled once; if it still
  does, the sentences that mention an attribute are removed when something remains.
"""

from __future__ import annotations

from typing import Sequence

import dspy

from personalign.programs.common.text import clip_list, lexical_mention, split_sentences, truncate_head
from personalign.signatures.respond import GenericRespondSignature, RespondImplicitSignature, RespondSignature

RESAMPLE_TEMPERATURE = 0.7


def _clean(text) -> str:
    return str(text or "").strip()


class _Responder(dspy.Module):
    uses_lm = True

    def __init__(self, *, max_tokens: int = 200, max_attributes: int = 12, max_prompt_chars: int = 4000) -> None:
        super().__init__()
        self.max_tokens = int(max_tokens)
        self.max_attributes = int(max_attributes)
        self.max_prompt_chars = int(max_prompt_chars)

    def _call(self, attempt: int, **inputs) -> str:
        config = {"max_tokens": self.max_tokens}
        if attempt:
            config.update(rollout_id=attempt, temperature=RESAMPLE_TEMPERATURE)
        return _clean(self.respond(**inputs, config=config).response)


class GenericResponder(_Responder):
    """The generic response: the prompt only, no attributes (``GenericRespondSignature``).

    ``forward(prompt, attributes=None)`` ignores ``attributes`` (accepted so every respond
    strategy takes the stage's inputs) and returns ``Prediction(response: str, mentioned=[],
    resamples: int)``. One LM call, two when the first answer is empty.

    Raises:
        ValueError: the response is still empty after one re-sample.
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.respond = dspy.Predict(GenericRespondSignature)

    def forward(self, prompt: str, attributes: Sequence[str] | None = None) -> dspy.Prediction:
        p = truncate_head(prompt, self.max_prompt_chars)
        text, resamples = self._call(0, prompt=p), 0
        if not text:
            text, resamples = self._call(1, prompt=p), 1
        if not text:
            raise ValueError("the model returned an empty response twice")
        return dspy.Prediction(response=text, mentioned=[], resamples=resamples)


class PersonalizedResponder(_Responder):
    """The personalized response: prompt + the user's selected attributes.

    Args:
        forbid_explicit: instruct the model never to mention the attributes
            (``RespondImplicitSignature``) and enforce it in code (see the module docstring).
        max_tokens, max_attributes, max_prompt_chars: budgets (module docstring).

    ``forward(prompt, attributes)`` returns ``Prediction(response: str, mentioned: list[str]
    (attributes the final response still mentions explicitly, by the lexical detector),
    resamples: int)``. 1-3 LM calls.

    Raises:
        ValueError: the response is still empty after one re-sample.
    """

    def __init__(self, forbid_explicit: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.forbid_explicit = bool(forbid_explicit)
        self.respond = dspy.Predict(RespondImplicitSignature if self.forbid_explicit else RespondSignature)

    def forward(self, prompt: str, attributes: Sequence[str] | None = None) -> dspy.Prediction:
        attrs = clip_list(attributes, max_items=self.max_attributes, max_chars=300)
        p = truncate_head(prompt, self.max_prompt_chars)
        attempt = 0
        text = self._call(attempt, attributes=attrs, prompt=p)
        if not text:
            attempt += 1
            text = self._call(attempt, attributes=attrs, prompt=p)
        if not text:
            raise ValueError("the model returned an empty response twice")
        mentioned = [a for a in attrs if lexical_mention(a, text)]
        if self.forbid_explicit and mentioned:
            attempt += 1
            again = self._call(attempt, attributes=attrs, prompt=p)
            again_mentions = [a for a in attrs if lexical_mention(a, again)] if again else attrs
            if again and len(again_mentions) < len(mentioned):
                text, mentioned = again, again_mentions
            if mentioned:
                kept = [s for s in split_sentences(text) if not any(lexical_mention(a, s) for a in attrs)]
                if kept:
                    text, mentioned = " ".join(kept), []
        return dspy.Prediction(response=text, mentioned=mentioned, resamples=attempt)


class ImplicitResponder(PersonalizedResponder):
    """:class:`PersonalizedResponder` with ``forbid_explicit=True`` (a registry entry of its own)."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("forbid_explicit", True)
        super().__init__(**kwargs)


__all__ = ["GenericResponder", "PersonalizedResponder", "ImplicitResponder", "RESAMPLE_TEMPERATURE"]
