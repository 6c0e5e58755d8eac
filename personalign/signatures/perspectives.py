"""Multi-perspective answering: answer an open question from several sampled user profiles, then
merge the answers into one.

Source: the behaviour-grounded profiles study cited by the project's issue (answer an open
question as several plausible askers would need it, then aggregate), with the aggregation rules
of the issue: no meta text, no facts absent from the candidates, prefer details several
candidates share, acknowledge conflicts, drop persona details and refusals, obey the user's
explicit constraints (e.g. "5 items" -> exactly 5), never empty.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated

import dspy
from pydantic import BaseModel, Field, create_model

AGGREGATION_RULES = (
    "Rules: (1) write only the answer itself, addressed to the asker: never mention drafts, candidates, "
    "perspectives, profiles, personas or how the answer was made; (2) use only facts that appear in the drafts, "
    "add nothing new; (3) prefer details that several drafts share; (4) when drafts disagree, say briefly that it "
    "depends and give both options; (5) leave out personal details of any specific person (names, jobs, family) "
    "and leave out refusals; (6) obey the asker's explicit constraints exactly (\"5 items\" means exactly 5 "
    "items); (7) never return an empty answer."
)


class PlausibilitySignature(dspy.Signature):
    """Could a person with this profile plausibly ask this question? Say yes when the question
    fits their life, work, interests or situation; say no when it would be odd for them."""

    profile: str = dspy.InputField(desc="a user profile")
    question: str = dspy.InputField(desc="an open question")
    plausible: bool = dspy.OutputField(desc="true if this person could ask this question")


class PerspectiveAnswerSignature(dspy.Signature):
    """Answer the question for the person described by the profile: give concrete details that
    fit their situation. Write only the answer, addressed to them as "you"; never mention the
    profile, their name or that you were told about them."""

    profile: str = dspy.InputField(desc="who is asking")
    question: str = dspy.InputField(desc="the question")
    answer: str = dspy.OutputField(desc="a short, concrete answer")


class PerspectiveItemsSignature(dspy.Signature):
    """The person described by the profile asks for a list with an exact number of items. Write
    that list: each item one short, concrete entry that fits their situation. Never mention the
    profile or their name."""

    profile: str = dspy.InputField(desc="who is asking")
    question: str = dspy.InputField(desc="the question")
    answer: BaseModel = dspy.OutputField(desc="the list, with exactly the requested number of items")


class ListAnswerSignature(dspy.Signature):
    """Answer the question with a list of the requested number of items: each item one short,
    concrete entry."""

    question: str = dspy.InputField(desc="the question")
    answer: BaseModel = dspy.OutputField(desc="the list, with exactly the requested number of items")


class AggregateSignature(dspy.Signature):
    __doc__ = ("Several draft answers to the same question are given. Write ONE answer to the question. "
               + AGGREGATION_RULES)

    question: str = dspy.InputField(desc="the question")
    constraints: str = dspy.InputField(desc="the asker's explicit constraints, or 'none'")
    candidates: list[str] = dspy.InputField(desc="draft answers")
    answer: str = dspy.OutputField(desc="the single merged answer, never empty")


class AggregateItemsSignature(dspy.Signature):
    __doc__ = ("Several draft answers to the same question are given. The asker wants a list with an exact "
               "number of items. Write that list: each item is one short, concrete entry. " + AGGREGATION_RULES)

    question: str = dspy.InputField(desc="the question")
    constraints: str = dspy.InputField(desc="the asker's explicit constraints")
    candidates: list[str] = dspy.InputField(desc="draft answers")
    answer: BaseModel = dspy.OutputField(desc="the list, with exactly the requested number of items")


class SyntheticProfileSignature(dspy.Signature):
    """Write a short profile (one or two sentences: occupation, situation, needs) of a realistic
    person who might ask this question. Make it different from the profiles already written. Do
    not give the person a name."""

    question: str = dspy.InputField(desc="an open question")
    existing: list[str] = dspy.InputField(desc="profiles already written; may be empty")
    profile: str = dspy.OutputField(desc="a new, different profile")


@lru_cache(maxsize=32)
def items_model(n: int) -> type[BaseModel]:
    """A pydantic model ``{"items": [str, ...]}`` whose JSON schema says ``minItems = maxItems =
    n`` (and ``minLength = 1`` per item), so the embedded backend's grammar emits exactly ``n``
    non-empty items. The bounds are schema hints, not validation: a hosted model returning
    another count still parses, and the count is enforced in code
    (:func:`personalign.programs.perspectives.rules.enforce_rules`)."""
    if not 1 <= n <= 20:
        raise ValueError(f"item count must be 1-20, got {n}")
    item = Annotated[str, Field(json_schema_extra={"minLength": 1})]
    return create_model(f"Items{n}", items=(Annotated[list[item], Field(json_schema_extra={"minItems": n,
                                                                                           "maxItems": n})], ...))


def items_signature(n: int, base: type[dspy.Signature] | None = None) -> type[dspy.Signature]:
    """``base`` (default :class:`AggregateItemsSignature`) with the answer typed as
    :func:`items_model` ``(n)``."""
    return (base or AggregateItemsSignature).with_updated_fields("answer", type_=items_model(n))


class PerspectivesSignature(dspy.Signature):
    """Answer an open question for the people who could plausibly ask it (the ``perspectives``
    stage's inputs and output; its strategies call the signatures above)."""

    question: str = dspy.InputField(desc="an open question")
    profile_bank: str = dspy.InputField(desc="path of a profile bank (JSONL of profiles); empty: the strategy's default")
    answer: str = dspy.OutputField(desc="one answer, never empty")


__all__ = ["PerspectivesSignature", "AGGREGATION_RULES", "PlausibilitySignature", "PerspectiveAnswerSignature", "PerspectiveItemsSignature",
           "ListAnswerSignature", "AggregateSignature",
           "AggregateItemsSignature", "SyntheticProfileSignature", "items_model", "items_signature"]
