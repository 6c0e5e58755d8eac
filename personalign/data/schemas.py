"""Typed examples for every personalization task (pydantic v2, strict).

Each task example is a pydantic model with ``INPUTS`` (the fields a program sees) and
``LABELS`` (the gold fields a metric reads); :meth:`TaskExample.to_dspy` turns it into a
``dspy.Example`` with those inputs marked (``dspy`` is imported lazily there, so importing
this module stays cheap).

Models are strict (no silent coercion: ``"1"`` is not a bool, ``1`` is not a bool) and forbid
unknown fields, so the project's canonical JSONL fails loudly on typos. Group keys
(``prompt_id``, ``user_id``, ``topic``) are what :mod:`personalign.data.splits` splits on.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

__all__ = [
    "Turn",
    "Session",
    "UserHistory",
    "Attribute",
    "TaskExample",
    "RelevanceExample",
    "VerificationExample",
    "ExtractionExample",
    "PreferenceRatingExample",
    "MCQExample",
    "ProfileExample",
    "EXAMPLE_TYPES",
]

Rating = Annotated[int, Field(ge=1, le=5)]
Probability = Annotated[float, Field(ge=0.0, le=1.0)]
NonEmpty = Annotated[str, Field(min_length=1)]
Annotations = Annotated[dict[NonEmpty, bool], Field(min_length=1)]
"""Per-annotator yes/no labels of a row (:mod:`personalign.data.annotations`)."""


class _Model(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class Turn(_Model):
    """One message of a conversation."""

    role: Literal["user", "assistant", "system"]
    content: str


class Session(_Model):
    """One conversation session of a user's history (e.g. one CUPID prior interaction)."""

    turns: list[Turn]
    id: str | None = None
    context_factor: str | None = None
    preference: str | None = None


class UserHistory(_Model):
    """All sessions of one user, in chronological order."""

    user_id: NonEmpty
    sessions: list[Session]


class Attribute(_Model):
    """An attribute extracted from a user's history (Stage 1 output).

    ``confidence`` is in [0, 1]; ``evidence`` quotes the turns that support the attribute.
    """

    text: NonEmpty
    reason: str = ""
    confidence: Probability | None = None
    evidence: list[str] = Field(default_factory=list)


class TaskExample(_Model):
    """Base of every task example: an ``id``, an optional ``split``, and the group keys."""

    INPUTS: ClassVar[tuple[str, ...]] = ()
    LABELS: ClassVar[tuple[str, ...]] = ()
    KIND: ClassVar[str] = ""

    id: NonEmpty
    split: str | None = None

    def to_dspy(self):
        """Return a ``dspy.Example`` holding every field, with ``INPUTS`` marked as inputs.

        Nested models (turns, sessions) are kept as pydantic objects so typed DSPy
        signatures receive them unchanged.
        """
        import dspy

        values: dict[str, Any] = {name: getattr(self, name) for name in type(self).model_fields}
        return dspy.Example(**values).with_inputs(*self.INPUTS)


class RelevanceExample(TaskExample):
    """Is a user attribute relevant to a new prompt? (Stage 2)

    ``relevant`` is the human majority (ties count as not relevant). ``human_yes_rate`` is the
    share of annotators who said relevant and ``annotator_labels`` their individual votes,
    where known; ``annotations`` the same votes by annotator (``{"ann01": true, ...}``,
    :mod:`personalign.data.annotations`) and ``n_annotators`` how many judged the row;
    ``selection_probability``, ``acquisition`` and ``selection`` record how ``personalign label next``
    chose the row (:mod:`personalign.labels.next`).
    ``prompt_id`` groups rows sharing a prompt (leakage-free splits); ``user_id`` groups rows of
    one user sample.
    """

    INPUTS: ClassVar[tuple[str, ...]] = ("attribute", "prompt")
    LABELS: ClassVar[tuple[str, ...]] = ("relevant",)
    KIND: ClassVar[str] = "relevance"

    attribute: NonEmpty
    prompt: NonEmpty
    relevant: bool
    prompt_id: NonEmpty
    user_id: str | None = None
    topic: str | None = None
    human_yes_rate: Probability | None = None
    annotator_labels: list[bool] | None = None
    annotations: Annotations | None = None
    n_annotators: Annotated[int, Field(ge=1)] | None = None
    selection_probability: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    acquisition: Annotated[float, Field(ge=0.0)] | None = None
    selection: dict[str, Any] | None = None


class VerificationExample(TaskExample):
    """Is an extracted attribute supported by the evidence (a user's conversation)?

    ``reason`` is the extractor's stated reason (an input, possibly empty); ``accepted`` is
    the gold verdict. ``annotations`` holds per-annotator verdicts where known (``{"ann01": true,
    ...}``), ``n_annotators`` their number and ``human_yes_rate`` the share who accepted;
    ``selection_probability``, ``acquisition`` and ``selection``: how ``personalign label next`` chose it.
    """

    INPUTS: ClassVar[tuple[str, ...]] = ("evidence", "attribute", "reason")
    LABELS: ClassVar[tuple[str, ...]] = ("accepted",)
    KIND: ClassVar[str] = "verification"

    evidence: NonEmpty
    attribute: NonEmpty
    reason: str = ""
    accepted: bool
    user_id: str | None = None
    prompt_id: str | None = None
    topic: str | None = None
    annotations: Annotations | None = None
    n_annotators: Annotated[int, Field(ge=1)] | None = None
    selection_probability: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    acquisition: Annotated[float, Field(ge=0.0)] | None = None
    selection: dict[str, Any] | None = None
    human_yes_rate: Probability | None = None


class ExtractionExample(TaskExample):
    """A conversation in which gold attributes are hidden (Stage 1 extraction target)."""

    INPUTS: ClassVar[tuple[str, ...]] = ("conversation",)
    LABELS: ClassVar[tuple[str, ...]] = ("gold_attributes",)
    KIND: ClassVar[str] = "extraction"

    conversation: list[Turn] = Field(min_length=1)
    gold_attributes: list[NonEmpty] = Field(min_length=1)
    persona: str | None = None
    user_id: str | None = None
    topic: str | None = None


class PreferenceRatingExample(TaskExample):
    """Which of two responses better serves a profile, per attribute, on a 1–5 scale.

    ``ratings`` maps attribute text → Likert rating: 1 = response A much better, 3 = equal,
    5 = response B much better.
    """

    INPUTS: ClassVar[tuple[str, ...]] = ("profile", "prompt", "response_a", "response_b")
    LABELS: ClassVar[tuple[str, ...]] = ("ratings",)
    KIND: ClassVar[str] = "rating"

    profile: NonEmpty
    prompt: NonEmpty
    response_a: NonEmpty
    response_b: NonEmpty
    ratings: dict[str, Rating] = Field(min_length=1)
    user_id: str | None = None
    prompt_id: str | None = None
    topic: str | None = None


class MCQExample(TaskExample):
    """Multiple choice: given a context and a question, pick the option at ``gold_index``
    (0-based)."""

    INPUTS: ClassVar[tuple[str, ...]] = ("context", "question", "options")
    LABELS: ClassVar[tuple[str, ...]] = ("gold_index",)
    KIND: ClassVar[str] = "mcq"

    context: str
    question: NonEmpty
    options: list[NonEmpty] = Field(min_length=2)
    gold_index: int = Field(ge=0)
    user_id: str | None = None
    prompt_id: str | None = None
    topic: str | None = None

    @field_validator("gold_index")
    @classmethod
    def _gold_in_range(cls, v: int, info: ValidationInfo) -> int:
        options = info.data.get("options")
        if options is not None and v >= len(options):
            raise ValueError(f"{v} out of range for {len(options)} options")
        return v


class ProfileExample(TaskExample):
    """A user profile: short descriptors and a free-text bio."""

    INPUTS: ClassVar[tuple[str, ...]] = ("descriptors",)
    LABELS: ClassVar[tuple[str, ...]] = ("bio",)
    KIND: ClassVar[str] = "profile"

    user_id: NonEmpty
    descriptors: list[NonEmpty]
    bio: str = ""


EXAMPLE_TYPES: dict[str, type[TaskExample]] = {
    cls.KIND: cls
    for cls in (RelevanceExample, VerificationExample, ExtractionExample, PreferenceRatingExample,
                MCQExample, ProfileExample)
}
"""Canonical example type of each ``kind`` name."""
