"""Stage 1 -- extraction: lasting attributes of a user, read from the user's own messages.

Source: "Re-Centering Humans in LLM Personalization" (Stage 1): an LLM proposes attributes with a
reason, a confidence and the turns that support them; humans then reject many of them (see
:mod:`personalign.signatures.verification`). Here the extractor sees only the user's turns,
numbered by their position in the conversation, so every piece of evidence is something the user
wrote.

Output bounds: :class:`ExtractedAttribute` declares JSON-schema bounds (``attribute`` <= 160
characters, ``reason`` <= 120, ``evidence_turn_ids`` <= 4 ids, ``confidence`` one of 0.0, 0.1,
..., 1.0) and :class:`AttributeList` at most 5 attributes per call. They are *schema hints* for
grammar-constrained decoding (the longest possible answer then fits the embedded model's output
budget without shortening every string); they are not validated, so a hosted model writing a
longer answer is not a parse failure. Programs clamp ``confidence`` into [0, 1].
"""

from __future__ import annotations

import dspy
import pydantic

from personalign.data.schemas import Turn

MAX_ATTRIBUTE_CHARS = 160
MAX_REASON_CHARS = 120
MAX_EVIDENCE_IDS = 4
MAX_ATTRIBUTES_PER_CALL = 5
CONFIDENCE_STEPS = [round(i / 10, 1) for i in range(11)]


def _no_description(schema: dict, cls=None) -> None:
    # keep the class docstring out of the JSON schema the LM reads (it costs prompt tokens)
    schema.pop("description", None)


class ExtractedAttribute(pydantic.BaseModel):
    """One attribute of the user.

    Attributes:
        attribute: a standalone sentence about the user ("The user prefers in-person classes.").
        reason: why the user's messages show it.
        confidence: in [0, 1] (programs clamp out-of-range values).
        evidence_turn_ids: 0-based positions, in the conversation, of the user turns that show it.
    """

    model_config = pydantic.ConfigDict(json_schema_extra=_no_description)

    attribute: str = pydantic.Field(json_schema_extra={"maxLength": MAX_ATTRIBUTE_CHARS},
                                    description="one standalone sentence about the user, starting 'The user'")
    reason: str = pydantic.Field(json_schema_extra={"maxLength": MAX_REASON_CHARS},
                                 description="what the user wrote that shows it")
    confidence: float = pydantic.Field(json_schema_extra={"enum": CONFIDENCE_STEPS},
                                       description="0 to 1: how sure the messages make it")
    evidence_turn_ids: list[int] = pydantic.Field(default_factory=list, json_schema_extra={"maxItems": MAX_EVIDENCE_IDS},
                                                  description="numbers N of the [turn N] messages that show it")


class AttributeList(pydantic.RootModel[list[ExtractedAttribute]]):
    """A list of :class:`ExtractedAttribute` (at most 5 per call, as a schema hint)."""

    model_config = pydantic.ConfigDict(
        json_schema_extra=lambda schema, cls: (schema.pop("description", None), schema.update(maxItems=MAX_ATTRIBUTES_PER_CALL)))


class ExtractionSignature(dspy.Signature):
    """Read the user's messages and list lasting facts about the user: preferences, dislikes, habits, background, circumstances.

    Only list what the user's own messages show about the user. Do not list the topic of a single
    request, facts about other people or documents, or guesses. Write each attribute as one short
    sentence that makes sense on its own, starting with 'The user'. Give the numbers of the
    [turn N] messages that show it. An empty list is a valid answer."""

    user_turns: str = dspy.InputField(desc="the user's messages, each starting with its number as '[turn N]'")
    attributes: AttributeList = dspy.OutputField(desc="attributes of the user; [] when the messages show none")


class RefineSignature(dspy.Signature):
    """A reviewer rejected an attribute extracted about a user. Using the user's messages, either
    rewrite the attribute so that it says exactly what the messages support (narrower, about the
    user, standalone), or remove it when the messages support nothing of it."""

    user_turns: str = dspy.InputField(desc="the user's messages, one 'User: ...' paragraph each")
    attribute: str = dspy.InputField(desc="the rejected attribute")
    reason: str = dspy.InputField(desc="the extractor's reason for it")
    rationale: str = dspy.InputField(desc="the reviewer's reason for rejecting it")
    remove: bool = dspy.OutputField(desc="true to remove the attribute, false to keep a rewritten version")
    revised_attribute: str = dspy.OutputField(desc="the rewritten attribute, one sentence starting 'The user' (ignored when removing)")


class RestateSignature(dspy.Signature):
    """A user wrote this sentence to an assistant. If it states a lasting preference, dislike, habit or trait of the user, restate that as one short standalone sentence starting 'The user', keeping the user's own words and qualifiers and leaving out the request. If it states none, write exactly: none"""

    sentence: str = dspy.InputField(desc="one sentence the user wrote")
    attribute: str = dspy.OutputField(desc="one sentence starting 'The user', or 'none'")


OwnVoiceRestateSignature = RestateSignature.with_instructions(
    "A user wrote this sentence to an assistant. If it states a lasting preference, dislike, habit or trait of the "
    "user, restate that as one short standalone sentence in the user's own voice, starting 'I', keeping the user's "
    "own words and qualifiers and leaving out the request. If it states none, write exactly: none"
).with_updated_fields("attribute", desc="one sentence in the user's voice starting 'I', or 'none'")
""":class:`RestateSignature` in the user's own voice ("I prefer ..."), the voice PrefEval's stated
preferences are written in (strategy ``extract-own-voice``)."""


class GeneralizeSignature(dspy.Signature):
    """A user wrote this message to an assistant. The quoted sentence from it hints at a lasting preference, dislike or trait. State that lasting preference in general terms, as one short sentence in the user's own voice starting 'I' (for example 'I prefer ...' or 'I dislike ...'): name the general kind of thing the user likes or avoids, not only the one instance mentioned, and leave out the request."""

    message: str = dspy.InputField(desc="the user's whole message")
    sentence: str = dspy.InputField(desc="the sentence that hints at the preference")
    preference: str = dspy.OutputField(desc="one general sentence in the user's voice starting 'I'")


class ConversationAttributesSignature(dspy.Signature):
    """Lasting attributes of the user, read from a whole conversation (the ``extraction`` stage's
    input and output; its LLM strategies chunk the user's turns and call
    :class:`ExtractionSignature` per chunk)."""

    conversation: list[Turn] = dspy.InputField(desc="the conversation, one turn (role, content) each")
    attributes: list[ExtractedAttribute] = dspy.OutputField(desc="attributes of the user; [] when none")


__all__ = ["ConversationAttributesSignature", "ExtractedAttribute", "AttributeList", "ExtractionSignature", "RefineSignature", "RestateSignature", "OwnVoiceRestateSignature", "GeneralizeSignature", "MAX_ATTRIBUTE_CHARS",
           "MAX_REASON_CHARS", "MAX_EVIDENCE_IDS", "MAX_ATTRIBUTES_PER_CALL", "CONFIDENCE_STEPS"]
