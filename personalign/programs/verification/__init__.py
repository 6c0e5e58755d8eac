"""Stage 1 verification: accept or reject an extracted user attribute against the user's conversation.

Every strategy is a ``dspy.Module`` whose ``forward(evidence, attribute, reason="")`` returns a
``dspy.Prediction`` with ``accepted: bool`` (the
:class:`~personalign.signatures.verification.VerificationSignature` output), ``rationale: str`` and
``score: float | None`` (for scoring strategies: higher = more likely *rejected*). The stage's
positive class is a REJECTED attribute (``positive=False``): its F1, precision and recall are of
detecting attributes that should be dropped, and its learned strategies fit their threshold for
F-beta with beta = 2 (recall of rejections weighted over precision).

Data: :func:`personalign.programs.verification.data.load_verification` -- a PrefEval folder
(derived pairs, split by topic) or canonical JSONL of human-labelled
:class:`~personalign.data.schemas.VerificationExample` lines. Also here:
:mod:`~personalign.programs.verification.taxonomy` (error categories of rejected attributes); the
evidence helpers (fitting evidence to a context window) are shared:
:mod:`~personalign.programs.common.evidence`.

The stage itself is declared in ``stage.toml`` beside this file, in the schema of a user's stage
file (:mod:`personalign.stages.spec`); ``personalign.resolve_stage("verification")`` builds it.
"""
