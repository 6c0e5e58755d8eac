"""LLM verifiers: one LM call per (evidence, attribute, reason) triple.

Each is a plain DSPy module whose only parameter is its ``judge`` predictor, so every DSPy
teleprompter (few-shot bootstrapping, instruction search) can compile it; untrained they run as
they are (registry ``trainable=False``).

* :class:`ZeroShotVerifier` -- ``dspy.Predict(VerificationSignature)``.
* :class:`ChainOfThoughtVerifier` -- ``dspy.ChainOfThought(VerificationSignature)``.
* :class:`CriteriaVerifier` -- ``dspy.Predict(VerificationCriteriaSignature)``: the acceptance
  criteria (clear evidence about the user, no over-reach; reject guesses, one-off requests made
  general, task-only facts, added assumptions, non-standalone claims) in the instructions.

Input handling, shared by all three (before any LM call):

* evidence is cleaned (:func:`personalign.preprocess.clean_text`: invalid UTF-8 becomes U+FFFD)
  and fitted to the active model's context (:func:`~personalign.programs.common.evidence.fit_evidence`
  with :func:`~personalign.programs.common.budget.prompt_budget`: on the embedded
  4096-token models, measured in tokens -- what the exact prompt leaves after 512 answer tokens,
  about 2,900 tokens without demos; 50,000 characters on hosted models). Few-shot demos added by
  a teleprompter share the window: on embedded models each demo's evidence is fitted to an equal
  share (:func:`~personalign.programs.common.evidence.fit_demos`), so compiled verifiers
  still fit the 4096-token context;
* evidence without any user text is a defined result, not an LM call: ``accepted=False`` with the
  rationale ``"no user messages in the evidence"`` (nothing the user wrote can support the claim);
* ``attribute`` and ``reason`` are cut to 1,000 characters each.

Output: ``dspy.Prediction(accepted: bool, rationale: str, score: float | None, evidence_steps: list[str])``;
``score`` is the log-probability margin ``log P(true) - log P(false)`` of the ``accepted`` value
under the program's own prompt (:func:`personalign.lm.logprobs.scored`; None without
log-probabilities), so compiling can fit a decision rule on it.
LM errors propagate (:func:`personalign.programs.run.run_program` retries and counts them).
"""

from __future__ import annotations

import dspy

from personalign.lm.logprobs import bool_field, scored
from personalign.programs.common.evidence import fit_demos, fit_evidence, parse_evidence
from personalign.signatures.verification import VerificationCriteriaSignature, VerificationSignature

MAX_FIELD_CHARS = 1000
NO_USER_TEXT = "no user messages in the evidence"
FIELD = bool_field(VerificationSignature)


def _short(text, limit: int = MAX_FIELD_CHARS) -> str:
    from personalign.preprocess import clean_text

    text = clean_text(text if text is not None else "", where="attribute")
    return text if len(text) <= limit else text[: limit - 6].rstrip() + " [...]"


class _Verifier(dspy.Module):
    uses_lm = True
    gives_score = True  # its predictions carry a score: a compile fits a decision rule on it (and scores fit rows)
    output_tokens = 512  # reserved for the answer (the embedded backend's default budget)

    def budget(self, attribute: str = "", reason: str = ""):
        """``(demos, budget)`` of a call: the demos to send (None: the predictor's own) and the
        evidence :class:`~personalign.programs.common.budget.Budget`."""
        return fit_demos(self.judge, {"attribute": attribute, "reason": reason}, "evidence",
                         output_tokens=self.output_tokens)

    def forward(self, evidence: str, attribute: str, reason: str = "") -> dspy.Prediction:
        attribute = _short(attribute)
        reason = _short(reason)
        turns = parse_evidence(evidence if evidence is not None else "")
        if not any(t.role == "user" and t.content.strip() for t in turns):
            return dspy.Prediction(accepted=False, rationale=NO_USER_TEXT, score=None, evidence_steps=["empty"])
        demos, budget = self.budget(attribute, reason)
        fitted = fit_evidence(evidence, attribute, budget)
        extra = {} if demos is None else {"demos": demos}
        out, score = scored(self.judge, FIELD, evidence=fitted.text, attribute=attribute, reason=reason, **extra)
        return dspy.Prediction(**{FIELD: bool(out[FIELD])}, rationale=str(getattr(out, "rationale", "") or ""),
                               score=score, evidence_steps=fitted.steps)


class ZeroShotVerifier(_Verifier):
    """Zero-shot verifier: ``dspy.Predict(VerificationSignature)``; one LM call per triple."""

    def __init__(self) -> None:
        super().__init__()
        self.judge = dspy.Predict(VerificationSignature)


class ChainOfThoughtVerifier(_Verifier):
    """Chain-of-thought verifier: ``dspy.ChainOfThought(VerificationSignature)`` (reasoning, then
    the verdict and rationale, in one call)."""

    def __init__(self) -> None:
        super().__init__()
        self.judge = dspy.ChainOfThought(VerificationSignature)


class CriteriaVerifier(_Verifier):
    """Criteria verifier: ``dspy.Predict(VerificationCriteriaSignature)`` whose instructions state
    when to accept (the user's own messages clearly show the whole attribute) and the rejection
    rules (guess, one-off request generalized, task/other-people content, added assumptions, not
    standalone); when in doubt, reject."""

    def __init__(self) -> None:
        super().__init__()
        self.judge = dspy.Predict(VerificationCriteriaSignature)


__all__ = ["ZeroShotVerifier", "ChainOfThoughtVerifier", "CriteriaVerifier", "NO_USER_TEXT"]
