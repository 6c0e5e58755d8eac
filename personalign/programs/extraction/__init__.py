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

The stage itself is declared in ``stage.toml`` beside this file, in the schema of a user's stage
file (:mod:`personalign.stages.spec`); ``personalign.resolve_stage("extraction")`` builds it.
"""
