"""Stage 3 -- personalized responses: generate an answer for a user and judge it.

Sources:

* The seed study "Re-Centering Humans in LLM Personalization" (Stage 3): a response written with
  the user's selected attributes vs a generic response (no attributes), rated per attribute;
  explicit restatements of an attribute are rewarded by LLM judges but not valued by humans, hence
  the option to forbid them (:class:`RespondImplicitSignature`).
* CUPID (COLM 2025): an inferred preference is scored by the share of the gold checklist it
  covers (the benchmark's "Preference Match", PrefMatcher; :class:`PreferenceCoverageSignature`),
  a response by the share of checklist items it satisfies (:class:`ChecklistSignature`).
* PrefEval ("Do LLMs Recognize Your Preferences?", ICLR 2025), generation task: a response is
  judged against the user's stated preference (:class:`PreferenceViolationSignature`).

The multiple-choice signatures are in :mod:`personalign.signatures.mcq`.
"""

from __future__ import annotations

import dspy


class RespondSignature(dspy.Signature):
    """Answer the user's request in a way that fits the user. Use the known attributes of the
    user where they matter for this request and ignore the others. Be concise and concrete."""

    attributes: list[str] = dspy.InputField(desc="attributes of the user selected for this request; may be empty")
    prompt: str = dspy.InputField(desc="the user's request")
    response: str = dspy.OutputField(desc="the answer to the user, written for this user")


class RespondImplicitSignature(dspy.Signature):
    """Answer the user's request in a way that fits the user. Let the known attributes of the
    user shape the content, the examples and the tone, but NEVER mention, restate or allude to
    them: do not write "since you ...", "as a ...", "given your ...". Be concise and concrete."""

    attributes: list[str] = dspy.InputField(desc="attributes of the user selected for this request; may be empty")
    prompt: str = dspy.InputField(desc="the user's request")
    response: str = dspy.OutputField(desc="the answer to the user; it never mentions the attributes")


class GenericRespondSignature(dspy.Signature):
    """Answer the user's request helpfully. Be concise and concrete."""

    prompt: str = dspy.InputField(desc="the user's request")
    response: str = dspy.OutputField(desc="the answer to the user")


class PreferenceViolationSignature(dspy.Signature):
    """A user stated a preference, then asked a question and got a response. Decide whether the
    response violates the preference: it recommends or assumes something the user said they
    avoid or dislike, or ignores a requirement the user stated. A response that simply does not
    mention the preference but is consistent with it does NOT violate it."""

    preference: str = dspy.InputField(desc="the user's stated preference")
    question: str = dspy.InputField(desc="the user's question")
    response: str = dspy.InputField(desc="the assistant's response")
    violates: bool = dspy.OutputField(desc="true if the response goes against the preference")


class PreferenceCoverageSignature(dspy.Signature):
    """Decide whether a check about a response is covered by a user's preference: a response
    written to satisfy the preference would pass the check because of it."""

    preference: str = dspy.InputField(desc="a preference of the user (as inferred by a system)")
    check: str = dspy.InputField(desc="a yes/no check on a response, e.g. 'Does the message open with a summary?'")
    covered: bool = dspy.OutputField(desc="true if the preference asks for what the check tests")


class ChecklistSignature(dspy.Signature):
    """Check one yes/no requirement against a response to the user's request."""

    request: str = dspy.InputField(desc="the user's request")
    response: str = dspy.InputField(desc="the assistant's response")
    check: str = dspy.InputField(desc="a yes/no question about the response")
    satisfied: bool = dspy.OutputField(desc="true if the answer to the check is yes")


__all__ = [
    "RespondSignature", "RespondImplicitSignature", "GenericRespondSignature",
    "PreferenceViolationSignature", "PreferenceCoverageSignature", "ChecklistSignature",
]
