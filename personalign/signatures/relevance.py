"""Stage 2 -- relevance selection: should this user attribute change the answer to this prompt?

Source: "Re-Centering Humans in LLM Personalization" (relevance task): annotators mark an
attribute relevant when a thoughtful assistant would answer differently because of it; humans
say yes ~20% of the time, LLM judges 40-60%. The label is the human majority vote.

Input fields put the request before the attribute: DSPy's adapters render inputs in signature
order, so calls for one request share their prompt prefix and the embedded engine reuses its KV
cache for it (only the attribute and what follows are evaluated per call).
"""

from __future__ import annotations

import dspy


class RelevanceSignature(dspy.Signature):
    """Decide whether one known attribute of a user should change how a thoughtful assistant answers the user's new prompt."""

    prompt: str = dspy.InputField(desc="the user's new request")
    attribute: str = dspy.InputField(desc="one attribute of the user, e.g. 'The user prefers concise answers.'")
    relevant: bool = dspy.OutputField(desc="true only if the answer should differ because of this attribute")


INPUTS = tuple(RelevanceSignature.input_fields)  # ("prompt", "attribute"): derived, never restated
LABEL = next(iter(RelevanceSignature.output_fields))  # "relevant"


class RelevanceCriteriaSignature(dspy.Signature):
    """Decide whether one known attribute of a user should change the answer to the user's new prompt.

    Say YES when knowing the attribute would make a thoughtful assistant answer differently, either
    explicitly (the answer mentions or builds on the attribute) or implicitly (the attribute shifts
    the tone, the vocabulary, the choice of examples, the level of detail or the framing).
    Say NO when a thoughtful assistant would give the same answer without knowing the attribute:
    the attribute is about an unrelated part of the user's life, or it is true but makes no
    practical difference to this request. Most attributes are NOT relevant to a given prompt;
    say YES only when you can name what would change."""

    prompt: str = dspy.InputField(desc="the user's new request")
    attribute: str = dspy.InputField(desc="one attribute of the user, e.g. 'The user prefers concise answers.'")
    relevant: bool = dspy.OutputField(desc="true only if the answer should differ because of this attribute")


class BatchRelevanceSignature(dspy.Signature):
    """Given the numbered attributes of one user and the user's new prompt, list the numbers of the
    attributes that should change how a thoughtful assistant answers (explicitly, or implicitly through
    tone, vocabulary, examples, detail or framing). Leave out every attribute a thoughtful assistant
    would not need for this request; most attributes are not relevant, and an empty list is a valid answer."""

    attributes: list[str] = dspy.InputField(desc="the user's attributes, numbered from 1 in this order")
    prompt: str = dspy.InputField(desc="the user's new request")
    relevant_numbers: list[int] = dspy.OutputField(
        desc="numbers (1-based) of the relevant attributes; [] when none is relevant")
