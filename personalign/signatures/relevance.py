"""Stage 2 -- relevance selection: should this user attribute change the answer to this prompt?

Source: "Re-Centering Humans in LLM Personalization" (relevance task): annotators mark an
attribute relevant when a thoughtful assistant would answer differently because of it; humans
say yes ~20% of the time, LLM judges 40-60%. The label is the human majority vote.
"""

from __future__ import annotations

import dspy


class RelevanceSignature(dspy.Signature):
    """Decide whether one known attribute of a user should change how a thoughtful assistant answers the user's new prompt."""

    attribute: str = dspy.InputField(desc="one attribute of the user, e.g. 'The user prefers concise answers.'")
    prompt: str = dspy.InputField(desc="the user's new request")
    relevant: bool = dspy.OutputField(desc="true only if the answer should differ because of this attribute")


INPUTS = ("attribute", "prompt")
LABEL = "relevant"
