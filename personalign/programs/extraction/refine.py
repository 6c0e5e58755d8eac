"""Verify-and-refine: rejected attributes go back to the extractor with the verifier's rationale.

``VerifyAndRefine.forward(conversation)`` (strategy ``extract-refine``):

1. extract (:class:`~personalign.programs.extraction.extractor.AttributeExtractor`);
2. verify every attribute against the conversation (any verification strategy; default the
   criteria LLM verifier) -- verification pass 0;
3. for ``rounds`` rounds (default 1): each attribute rejected in the last pass is sent to a
   ``dspy.Predict(RefineSignature)`` call with the user's turns, the attribute, its reason and the
   verifier's rationale, which either removes it or rewrites it; rewritten attributes are verified
   again (pass r). Accepted attributes are final as soon as they are accepted.

Reported (``Prediction``): ``attributes`` -- the accepted ones (original or revised; the output
compared with the gold); ``rejected`` -- still rejected after the last pass, with rationales;
``removed`` -- dropped by the refiner; ``passes`` -- per verification pass ``{"pass", "verified",
"accepted"}``; ``acceptance_before`` = accepted in pass 0 / extracted; ``acceptance_after`` =
accepted at the end (original or revised) / extracted (both None when nothing was extracted);
``n_extracted``.

The refiner sees the user's turns fitted to the model's context like the verifiers' evidence
(user turns only, long turns cut, then the turns most similar to the attribute).
"""

from __future__ import annotations

import dspy

from personalign.programs.extraction.extractor import AttributeExtractor
from personalign.programs.common.budget import prompt_budget
from personalign.programs.common.evidence import fit_evidence, render_turns
from personalign.signatures.extraction import ExtractedAttribute, RefineSignature


class VerifyAndRefine(dspy.Module):
    """Extract, verify, refine the rejected (module doc).

    Args:
        extractor: the extractor (default :class:`AttributeExtractor`).
        verifier: a verification strategy -- a module ``verifier(evidence=..., attribute=...,
            reason=...)`` returning ``accepted`` and ``rationale``, or the name of one in the
            ``verification`` stage's registry, built from there (default ``"criteria"``, the
            criteria LLM verifier). Learned verifiers must be compiled first.
        rounds: refinement rounds (>= 0; 0 = verify only).

    Raises:
        ValueError: ``rounds`` < 0.
    """

    uses_lm = True
    output_tokens = 256

    def __init__(self, extractor: dspy.Module | None = None, verifier: dspy.Module | str | None = "criteria",
                 rounds: int = 1) -> None:
        super().__init__()
        if rounds < 0:
            raise ValueError(f"rounds must be >= 0, got {rounds}")
        if verifier is None or isinstance(verifier, str):  # by name: stage packages never import each other
            from personalign.stages import resolve_stage

            verifier = resolve_stage("verification").registry.create(verifier or "criteria")
        self.extractor = extractor or AttributeExtractor()
        self.verifier = verifier
        self.rounds = int(rounds)
        self.refiner = dspy.Predict(RefineSignature)

    def _verify(self, evidence: str, attrs: list[ExtractedAttribute]) -> list[tuple[bool, str]]:
        if not attrs:
            return []
        if hasattr(self.verifier, "predict_batch"):
            exs = [dspy.Example(evidence=evidence, attribute=a.attribute, reason=a.reason) for a in attrs]
            preds = self.verifier.predict_batch(exs)
        else:
            preds = [self.verifier(evidence=evidence, attribute=a.attribute, reason=a.reason) for a in attrs]
        return [(bool(p.accepted), str(getattr(p, "rationale", "") or "")) for p in preds]

    def forward(self, conversation) -> dspy.Prediction:
        from personalign.preprocess import normalize_turns

        turns = normalize_turns(conversation)
        extracted = self.extractor(conversation=turns)
        attrs = list(extracted.attributes)
        evidence = render_turns(turns)
        user_text = render_turns([t for t in turns if t.role == "user"])
        accepted: list[ExtractedAttribute] = []
        removed: list[dict] = []
        passes = []
        pending = attrs
        verdicts = self._verify(evidence, pending)
        first_accepted = sum(v for v, _ in verdicts)
        for r in range(self.rounds + 1):
            passes.append({"pass": r, "verified": len(pending), "accepted": sum(v for v, _ in verdicts)})
            rejected = []
            for a, (ok, why) in zip(pending, verdicts):
                (accepted if ok else rejected).append(a if ok else (a, why))
            if r == self.rounds or not rejected:
                break
            revised = []
            for a, why in rejected:
                budget = prompt_budget(self.refiner, {"attribute": a.attribute, "reason": a.reason, "rationale": why},
                                       "user_turns", output_tokens=self.output_tokens)
                user_turns = fit_evidence(user_text, a.attribute, budget).text
                out = self.refiner(user_turns=user_turns, attribute=a.attribute, reason=a.reason, rationale=why)
                text = " ".join(str(out.revised_attribute or "").split())
                if bool(out.remove) or not text:
                    removed.append({"attribute": a.attribute, "rationale": why})
                else:
                    revised.append(a.model_copy(update={"attribute": text}))
            pending = revised
            verdicts = self._verify(evidence, pending)
        still = [{"attribute": a.attribute, "rationale": why} for a, why in rejected]
        n = len(attrs)
        return dspy.Prediction(
            attributes=accepted, rejected=still, removed=removed, passes=passes, n_extracted=n,
            acceptance_before=(first_accepted / n if n else None),
            acceptance_after=(len(accepted) / n if n else None),
            note=getattr(extracted, "note", ""))


__all__ = ["VerifyAndRefine"]
