"""Stage 1 extraction: lasting user attributes from a chat history.

Every strategy is a ``dspy.Module`` whose ``forward(conversation)`` returns a ``dspy.Prediction``
with ``attributes: list[ExtractedAttribute]`` (attribute, reason, confidence in [0, 1], evidence
turn ids; :mod:`personalign.signatures.extraction`). The stage is *scored*: per conversation, the
share of its gold attributes recovered (:func:`personalign.programs.extraction.metrics.gold_recovered`,
MiniLM cosine >= 0.6); the mean over conversations is the extraction recall.

Modules: :mod:`~personalign.programs.extraction.chunking` (turn-boundary chunks),
:mod:`~personalign.programs.extraction.extractor` (the typed extractor),
:mod:`~personalign.programs.extraction.merge` (clustering + independence-aware confidence),
:mod:`~personalign.programs.extraction.refine` (verify-and-refine loop),
:mod:`~personalign.programs.extraction.restate` (the LLM restates first-person sentences, as
"The user ..." or in the user's own voice),
:mod:`~personalign.programs.extraction.generalize` (the user's sentences plus the LLM's general
restatement of those that hint at a preference),
:mod:`~personalign.programs.extraction.baseline` (LM-free first-person sentences, quoted or bare),
:mod:`~personalign.programs.extraction.data` (PrefEval / canonical loaders),
:mod:`~personalign.programs.extraction.metrics` (the recall metric).
"""

from personalign.registry import Registry, StrategyInfo
from personalign.programs.stages import Stage

_PKG = "personalign.programs.extraction"

STRATEGIES = Registry(
    "extraction strategy",
    [
        StrategyInfo(
            "extract",
            f"{_PKG}.extractor:AttributeExtractor",
            "LLM extractor: typed attribute list per chunk of user turns (<= 50,000 chars), confidence >= 0.4, pooled",
            uses_lm=True,
            trainable=False,
        ),
        StrategyInfo(
            "extract-merge",
            f"{_PKG}.extractor:MergingExtractor",
            "LLM extractor + MiniLM agglomerative merge (average linkage, cosine 0.7, independence-aware confidence)",
            uses_lm=True,
            trainable=False,
        ),
        StrategyInfo(
            "extract-refine",
            f"{_PKG}.refine:VerifyAndRefine",
            "LLM extractor, criteria verifier, one refine round for rejected attributes; keeps the accepted",
            uses_lm=True,
            trainable=False,
        ),
        StrategyInfo(
            "extract-sentences",
            f"{_PKG}.restate:SentenceRestater",
            "LLM restates each first-person user sentence as 'The user ...' (or none): one short call per sentence",
            uses_lm=True,
            trainable=False,
        ),
        StrategyInfo(
            "extract-own-voice",
            f"{_PKG}.restate:OwnVoiceRestater",
            "LLM restates each first-person user sentence in the user's own voice, 'I ...' (or none): one call per sentence",
            uses_lm=True,
            trainable=False,
        ),
        StrategyInfo(
            "extract-generalize",
            f"{_PKG}.generalize:PreferenceGeneralizer",
            "the user's first-person sentences + the LLM's general restatement of each preference-cue sentence, 'I ...'",
            uses_lm=True,
            trainable=False,
        ),
        StrategyInfo(
            "first-person",
            f"{_PKG}.baseline:FirstPersonSentences",
            "LM-free baseline: the user's first-person sentences, quoted",
            uses_lm=False,
            trainable=False,
        ),
        StrategyInfo(
            "first-person-bare",
            f"{_PKG}.baseline:BareFirstPersonSentences",
            "LM-free control: the same sentences as the user wrote them, no 'The user said' wrapper",
            uses_lm=False,
            trainable=False,
        ),
    ],
)

DEFAULT_STRATEGIES = "extract,first-person"

STAGE = Stage(
    name="extraction",
    summary="Stage 1: extract lasting user attributes from a chat history (recall of the hidden gold preference)",
    signature="personalign.signatures.extraction:ConversationAttributesSignature",
    strategies=STRATEGIES,
    default_strategies=DEFAULT_STRATEGIES,
    loader=f"{_PKG}.data:load_extraction",
    label="gold_attributes",
    kind="scored",
    metric=f"{_PKG}.metrics:gold_recovered",
    metric_name="recall",
    group_key="group",
    objective="mean",
)

__all__ = ["STRATEGIES", "DEFAULT_STRATEGIES", "STAGE"]
