"""Behaviour-grounded user profiles: per-item descriptors -> cleaned list -> a short bio.

Source: the seed study's profile pipeline (descriptors written per post or conversation, then
cleaned -- near-duplicates merged, contradictions dropped -- and summarized into a short bio that
abstracts exact places and dates, so the profile describes behaviour without identifying
details).

Bounds on outputs (:class:`DescriptorList`: at most 5 descriptors of at most 100 characters per
item) are JSON-schema hints for grammar-constrained decoding, not validated (hosted models are
not failed for longer answers).
"""

from __future__ import annotations

from typing import Annotated

import dspy
import pydantic

MAX_DESCRIPTORS_PER_ITEM = 5
MAX_DESCRIPTOR_CHARS = 100

Descriptor = Annotated[str, pydantic.Field(json_schema_extra={"maxLength": MAX_DESCRIPTOR_CHARS})]


class DescriptorList(pydantic.RootModel[list[Descriptor]]):
    """Short descriptors of the author (at most 5 per item, as a schema hint)."""

    model_config = pydantic.ConfigDict(
        json_schema_extra=lambda schema, cls: (schema.pop("description", None), schema.update(maxItems=MAX_DESCRIPTORS_PER_ITEM)))


class ItemDescriptorSignature(dspy.Signature):
    """Read one item a person wrote (a post, or their messages in a conversation). Decide whether it
    tells anything lasting about the person -- interests, habits, values, circumstances, style -- and
    if so write short descriptors of the person (a few words each, e.g. 'keeps freshwater
    aquariums', 'writes tersely'). Describe the person, not the topic of the item. If the item says
    nothing about the person, mark it not useful and give no descriptors."""

    item: str = dspy.InputField(desc="the text the person wrote")
    useful: bool = dspy.OutputField(desc="true if the item shows something lasting about the person")
    justification: str = dspy.OutputField(desc="one short sentence: what in the item shows it, or why nothing does")
    descriptors: DescriptorList = dspy.OutputField(desc="short descriptors of the person; [] when not useful")


class ContradictionSignature(dspy.Signature):
    """The numbered descriptors below were collected about one person from different items; each
    shows how many items supported it. List the numbers of the descriptors to DROP because they
    contradict another descriptor that is better supported (when two contradict each other with equal
    support, drop the later one). Descriptors that merely differ are not contradictions. An empty
    list is a valid answer."""

    descriptors: list[str] = dspy.InputField(desc="numbered descriptors '[n] text (k items)'")
    drop_numbers: list[int] = dspy.OutputField(desc="numbers of the descriptors to drop; [] when none contradicts")


class BioSignature(dspy.Signature):
    """Write a short bio (2 to 4 sentences, third person) of a person from descriptors of their
    behaviour. Use only what the descriptors say. Abstract identifying specifics: name no exact
    places (say 'a large city', 'a coastal region') and no exact dates or ages (say 'recently',
    'in their thirties')."""

    descriptors: list[str] = dspy.InputField(desc="descriptors of the person, most supported first")
    bio: str = dspy.OutputField(desc="2 to 4 sentences, third person, no exact places or dates")


__all__ = ["BioSignature", "ContradictionSignature", "Descriptor", "DescriptorList", "ItemDescriptorSignature",
           "MAX_DESCRIPTORS_PER_ITEM", "MAX_DESCRIPTOR_CHARS"]
