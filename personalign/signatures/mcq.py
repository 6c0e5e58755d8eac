"""Multiple choice: choose the option that follows the user's stated preference (stage ``mcq``).

Source: PrefEval ("Do LLMs Recognize Your Preferences?", ICLR 2025), classification task: choose,
among four options, the one that follows the user's stated preference
(:class:`MCQContextSignature`); PersonaMem ("Know Me, Respond to Me", COLM 2025) uses the same
four-option format with a long conversation as context.

:class:`MCQTaskSignature` is the stage's contract (every input a strategy may read); each strategy
calls the LM through the narrower signature it needs. Multiple-choice signatures type the answer as
an ``int``; the programs narrow it per question to ``Literal[0, ..., n-1]``
(:func:`with_option_count`) so that on the embedded backend the JSON schema becomes an ``enum``
and the grammar can only produce a valid index.
"""

from __future__ import annotations

from typing import Literal

import dspy


class MCQTaskSignature(dspy.Signature):
    """Choose the option that answers the user's question and follows what is known about the user
    (the ``mcq`` stage's inputs and output; strategies read the subset they need)."""

    context: str = dspy.InputField(desc="what the user said about themselves (a stated preference or a conversation); may be empty")
    question: str = dspy.InputField(desc="the user's question")
    options: list[str] = dspy.InputField(desc="candidate answers, numbered from 0 in this order")
    attributes: list[str] = dspy.InputField(desc="known (extracted) attributes of the user; may be empty")
    answer_index: int = dspy.OutputField(desc="0-based number of the chosen option")


class MCQSignature(dspy.Signature):
    """Choose the option that best answers the user's question."""

    question: str = dspy.InputField(desc="the user's question")
    options: list[str] = dspy.InputField(desc="candidate answers, numbered from 0 in this order")
    answer_index: int = dspy.OutputField(desc="0-based number of the chosen option")


class MCQContextSignature(dspy.Signature):
    """The user has told you something about themselves. Choose the option that answers the
    user's question AND respects what the user said: never choose an option that goes against
    the user's stated preference."""

    context: str = dspy.InputField(desc="what the user said about themselves (a stated preference or a conversation)")
    question: str = dspy.InputField(desc="the user's question")
    options: list[str] = dspy.InputField(desc="candidate answers, numbered from 0 in this order")
    answer_index: int = dspy.OutputField(desc="0-based number of the chosen option")


class MCQAttributesSignature(dspy.Signature):
    """Some attributes of the user are known. Choose the option that answers the user's question
    AND suits these attributes: never choose an option that conflicts with one of them."""

    attributes: list[str] = dspy.InputField(desc="known attributes of the user; may be empty")
    question: str = dspy.InputField(desc="the user's question")
    options: list[str] = dspy.InputField(desc="candidate answers, numbered from 0 in this order")
    answer_index: int = dspy.OutputField(desc="0-based number of the chosen option")


def with_option_count(signature: type[dspy.Signature], n: int) -> type[dspy.Signature]:
    """``signature`` with ``answer_index`` narrowed to ``Literal[0, ..., n-1]`` (same instructions
    and fields otherwise). Raises ValueError for fewer than 2 options."""
    if n < 2:
        raise ValueError(f"a multiple-choice question needs at least 2 options, got {n}")
    return signature.with_updated_fields("answer_index", type_=Literal[tuple(range(n))])  # type: ignore[misc]


__all__ = ["MCQTaskSignature", "MCQSignature", "MCQContextSignature", "MCQAttributesSignature", "with_option_count"]
