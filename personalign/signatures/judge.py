"""Stage 3 judges: pairwise preference per attribute, explicit-mention detection.

Source: the seed study "Re-Centering Humans in LLM Personalization", Stage 3 -- annotators
compare a personalized and a generic response for a user profile and rate, per attribute, which
one serves the user better on a 1-5 scale (1 = A much better, 3 = equal, 5 = B much better);
LLM judges inflate these ratings and reward explicit attribute mentions that humans do not value.
Position bias of LLM judges (preferring the first or second response) is removed by judging both
orders (Zheng et al., "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena", NeurIPS 2023,
section 3.3 "swap positions").
"""

from __future__ import annotations

from typing import Literal

import dspy


class PairwiseJudgeSignature(dspy.Signature):
    """A user with the profile below asked the prompt and got two responses, A and B. For ONE
    attribute of the user, rate which response serves this user better with respect to that
    attribute: 1 = A much better, 2 = A somewhat better, 3 = no difference, 4 = B somewhat
    better, 5 = B much better."""

    profile: str = dspy.InputField(desc="the user's profile")
    prompt: str = dspy.InputField(desc="the user's request")
    attribute: str = dspy.InputField(desc="the attribute of the user to judge on")
    response_a: str = dspy.InputField(desc="response A")
    response_b: str = dspy.InputField(desc="response B")
    rating: Literal[1, 2, 3, 4, 5] = dspy.OutputField(desc="1 = A much better ... 3 = equal ... 5 = B much better")


class PairwiseImplicitJudgeSignature(PairwiseJudgeSignature):
    """A user with the profile below asked the prompt and got two responses, A and B. For ONE
    attribute of the user, rate which response serves this user better with respect to that
    attribute: 1 = A much better, 2 = A somewhat better, 3 = no difference, 4 = B somewhat
    better, 5 = B much better. Judge what the response DOES for the user (content, choices,
    level of detail, tone), not whether it mentions the attribute: restating the user's
    attribute ("since you are vegan...") earns nothing by itself; most attributes make no
    difference to a given prompt, so 3 is the most common rating."""
    # the fields of PairwiseJudgeSignature, inherited; only the instructions differ


class ExplicitMentionSignature(dspy.Signature):
    """Decide whether the response explicitly mentions or restates the user's attribute (e.g.
    "since you are vegan", "as a nurse", "you mentioned you dislike podcasts"). Merely following
    the attribute without referring to it (recommending vegan dishes without saying why) is NOT
    an explicit mention."""

    attribute: str = dspy.InputField(desc="an attribute of the user")
    response: str = dspy.InputField(desc="a response written for the user")
    mentions: bool = dspy.OutputField(desc="true if the response refers to the attribute explicitly")


class AnswerPreferenceSignature(dspy.Signature):
    """Two answers to the same open question. Which one is more useful to the people who ask
    this question: more specific, more correct, covers the different needs askers may have, and
    has no filler? Answer A, B, or tie."""

    question: str = dspy.InputField(desc="the question")
    answer_a: str = dspy.InputField(desc="answer A")
    answer_b: str = dspy.InputField(desc="answer B")
    preferred: Literal["A", "B", "tie"] = dspy.OutputField(desc="A, B or tie")


class PairwiseRatingsSignature(dspy.Signature):
    """For each attribute of a user, rate which of two responses to the user's request serves the
    user better (the ``judge`` stage's inputs and output; its strategies call
    :class:`PairwiseJudgeSignature` once per attribute and order)."""

    profile: str = dspy.InputField(desc="the user's profile")
    prompt: str = dspy.InputField(desc="the user's request")
    response_a: str = dspy.InputField(desc="response A")
    response_b: str = dspy.InputField(desc="response B")
    attributes: list[str] = dspy.InputField(desc="the attributes of the user to judge on")
    ratings: dict[str, Literal[1, 2, 3, 4, 5]] = dspy.OutputField(
        desc="attribute -> 1 = A much better ... 3 = equal ... 5 = B much better")


__all__ = ["PairwiseRatingsSignature", "PairwiseJudgeSignature", "PairwiseImplicitJudgeSignature", "ExplicitMentionSignature",
           "AnswerPreferenceSignature"]
