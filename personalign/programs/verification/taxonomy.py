"""Error taxonomy of rejected attributes: a small typed program and per-category counts.

Categories (:data:`~personalign.signatures.verification.ERROR_CATEGORIES`): overgeneralization,
missing_evidence, task_context_confusion, not_standalone, other. Source: the seed study's error
analysis of attributes human annotators flagged (over-generalization ~54%, missing evidence ~20%,
task content mistaken for the user ~16%); ``not_standalone`` covers attributes that only make
sense inside the conversation.

:class:`ErrorClassifier` is one ``dspy.Predict(ErrorTaxonomySignature)`` call per rejected
attribute; the category is a ``Literal`` so the embedded models' grammar can only produce one of
the five names. Evidence is fitted to the model's context like the verifiers' (user turns first).
:func:`classify_errors` runs it over many rejected attributes, counting LM failures as ``other``
after the retries of :func:`personalign.programs.run.run_program` (they are reported separately).
"""

from __future__ import annotations

from typing import Any, Sequence

import dspy

from personalign.programs.common.budget import prompt_budget
from personalign.programs.common.evidence import fit_evidence, parse_evidence
from personalign.programs.verification.judges import _short
from personalign.signatures.verification import ERROR_CATEGORIES, ErrorTaxonomySignature


class ErrorClassifier(dspy.Module):
    """``forward(evidence, attribute, rationale="") -> Prediction(category: str)``, category one of
    :data:`ERROR_CATEGORIES`. Evidence without user text is ``missing_evidence`` without an LM
    call."""

    uses_lm = True
    output_tokens = 64

    def __init__(self) -> None:
        super().__init__()
        self.classify = dspy.Predict(ErrorTaxonomySignature)

    def forward(self, evidence: str, attribute: str, rationale: str = "") -> dspy.Prediction:
        attribute = _short(attribute)
        rationale = _short(rationale)
        if not any(t.role == "user" and t.content.strip() for t in parse_evidence(evidence or "")):
            return dspy.Prediction(category="missing_evidence")
        budget = prompt_budget(self.classify, {"attribute": attribute, "rationale": rationale}, "evidence",
                               output_tokens=self.output_tokens)
        fitted = fit_evidence(evidence, attribute, budget)
        out = self.classify(evidence=fitted.text, attribute=attribute, rationale=rationale)
        category = str(out.category)
        if category not in ERROR_CATEGORIES:
            category = "other"
        return dspy.Prediction(category=category)


def classify_errors(rejected: Sequence[Any], *, lm=None, program: ErrorClassifier | None = None,
                    progress: bool = False) -> dict:
    """Classify rejected attributes and count them per category.

    Args:
        rejected: items with ``evidence``, ``attribute`` and optionally ``rationale`` (dspy
            Examples, dicts or objects).
        lm: the LM (None: the one in the current DSPy context).

    Returns:
        ``{"categories": [str | None per item], "counts": {category: n} (all five keys),
        "shares": {category: share of classified items}, "failures": n, "lm_calls": n}``; a
        failed item's category is None and it is not counted.
    """
    from personalign.programs.run import run_program

    program = program or ErrorClassifier()
    items = [_as_example(r) for r in rejected]
    outcome = run_program(program, items, inputs=("evidence", "attribute", "rationale"), output="category", lm=lm,
                          description="error taxonomy", progress=progress)
    counts = {c: 0 for c in ERROR_CATEGORIES}
    for c in outcome.predictions:
        if c is not None:
            counts[c] += 1
    n = sum(counts.values())
    return {"categories": list(outcome.predictions), "counts": counts,
            "shares": {c: (counts[c] / n if n else 0.0) for c in ERROR_CATEGORIES},
            "failures": outcome.failures, "lm_calls": outcome.lm_calls}


def _as_example(item) -> dspy.Example:
    get = item.get if isinstance(item, dict) else (lambda k, d=None: getattr(item, k, d))
    return dspy.Example(evidence=get("evidence", "") or "", attribute=get("attribute", "") or "",
                        rationale=get("rationale", "") or "").with_inputs("evidence", "attribute", "rationale")


__all__ = ["ErrorClassifier", "classify_errors"]
