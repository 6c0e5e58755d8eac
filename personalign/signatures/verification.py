"""Stage 1 -- verification: is an extracted user attribute supported by the user's own words?

Source: "Re-Centering Humans in LLM Personalization" (Stage 1, attribute extraction from real
chat histories): human annotators reject many LLM-extracted attributes; among the flagged ones
~54% over-generalize, ~20% lack evidence and ~16% mistake task content for a fact about the
user. The verifier sees an evidence excerpt (the conversation, or the user's turns of it), the
attribute and the extractor's reason, and accepts or rejects it with a short rationale.

Fields use the names of :class:`personalign.data.schemas.VerificationExample`: inputs
``evidence``, ``attribute``, ``reason``; gold ``accepted``.
"""

from __future__ import annotations

from typing import Literal

import dspy


ERROR_CATEGORIES = ("overgeneralization", "missing_evidence", "task_context_confusion", "not_standalone", "other")
"""Why a rejected attribute is wrong (the study's error analysis, plus ``not_standalone`` for
attributes that cannot be read without the conversation, e.g. "The user likes the second one")."""

ErrorCategory = Literal["overgeneralization", "missing_evidence", "task_context_confusion", "not_standalone", "other"]


class VerificationSignature(dspy.Signature):
    """Decide whether the conversation excerpt supports the stated attribute of the user."""

    evidence: str = dspy.InputField(desc="excerpt of the user's conversation, one 'User: ...' or 'Assistant: ...' paragraph per turn")
    attribute: str = dspy.InputField(desc="the attribute claimed about the user, e.g. 'The user is vegetarian.'")
    reason: str = dspy.InputField(desc="why the extractor proposed it (may be empty)")
    accepted: bool = dspy.OutputField(desc="true if the excerpt supports the attribute")
    rationale: str = dspy.OutputField(desc="one short sentence explaining the verdict")


INPUTS = tuple(VerificationSignature.input_fields)  # ("evidence", "attribute", "reason"): derived
LABEL = next(iter(VerificationSignature.output_fields))  # "accepted"


class VerificationCriteriaSignature(dspy.Signature):
    """Check one attribute that another system claims to know about a user, against an excerpt of the user's conversation.

    ACCEPT only when the user's own messages clearly show the attribute: the user states it, or
    plainly reveals it, as a lasting fact, preference or habit of theirs. The attribute must say no
    more than the messages show.

    REJECT when any of these holds:
    - it is a guess: nothing the user wrote says it;
    - it turns a one-time request into a general trait (asking for one vegan recipe does not make
      the user vegan);
    - it describes the task, a document the user pasted, a character or other people, or what the
      assistant said, rather than the user;
    - it adds details, reasons or strength that the messages do not contain;
    - it cannot be understood without the conversation ("the user likes the second option").
    When in doubt, reject."""

    evidence: str = dspy.InputField(desc="excerpt of the user's conversation, one 'User: ...' or 'Assistant: ...' paragraph per turn")
    attribute: str = dspy.InputField(desc="the attribute claimed about the user, e.g. 'The user is vegetarian.'")
    reason: str = dspy.InputField(desc="why the extractor proposed it (may be empty)")
    accepted: bool = dspy.OutputField(desc="true only if the user's own messages clearly support the whole attribute")
    rationale: str = dspy.OutputField(desc="one short sentence: what in the messages supports it, or which rule rejects it")


class ErrorTaxonomySignature(dspy.Signature):
    """An attribute extracted about a user was rejected by a reviewer. Name the main error:
    overgeneralization (a one-off request or a single remark turned into a general trait, or a claim
    stronger than the messages), missing_evidence (nothing the user wrote supports it),
    task_context_confusion (it describes the task, pasted content, a character or other people
    instead of the user), not_standalone (it cannot be understood without the conversation),
    other (none of these)."""

    evidence: str = dspy.InputField(desc="excerpt of the user's conversation")
    attribute: str = dspy.InputField(desc="the rejected attribute")
    rationale: str = dspy.InputField(desc="the reviewer's reason for rejecting it (may be empty)")
    category: ErrorCategory = dspy.OutputField(desc="the main error")


__all__ = ["INPUTS", "LABEL", "ERROR_CATEGORIES", "ErrorCategory", "VerificationSignature",
           "VerificationCriteriaSignature", "ErrorTaxonomySignature"]
