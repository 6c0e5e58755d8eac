"""Evidence texts of Stage 1 (extraction, verification): parsing, rendering, fitting to a budget.

Evidence is ``Role: content`` paragraphs (PrefEval's rendering of a conversation). Budgets come
from :mod:`personalign.programs.common.budget`. :func:`fit_evidence` shortens an evidence text to
a budget in this order, stopping as soon as it fits: (1) the text as is; (2) only the user's turns
(a claim about the user must rest on what the user wrote; the assistant's text is never evidence
about the user); (3) each user turn cut to ``per_turn_chars`` (its beginning, then " [...]"); (4)
the user turns ranked by MiniLM cosine similarity to the attribute, kept greedily in that order
while they fit, then printed in conversation order (if not even the best turn fits, its beginning
is kept). The result says what was done (``FittedEvidence.steps``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from personalign.programs.common.budget import Budget, active_model, cut_text, cut_to_budget, prompt_budget, token_budget

_ROLE_RE = re.compile(r"(?:^|\n\n)(User|Assistant|System):[ \t]?", re.IGNORECASE)


def parse_evidence(text: str) -> list:
    """Turns of an evidence text rendered as ``Role: content`` paragraphs (PrefEval's
    :func:`~personalign.data.prefeval.render_turns` format). Text before the first marker, or a
    text without any marker, is read as one user turn. Returns ``list[Turn]`` (empty for blank
    text)."""
    from personalign.data.schemas import Turn
    from personalign.preprocess import clean_text

    text = clean_text(text, where="evidence")
    if not text.strip():
        return []
    marks = list(_ROLE_RE.finditer(text))
    turns = []
    head = text[: marks[0].start()] if marks else text
    if head.strip():
        turns.append(Turn(role="user", content=head.strip()))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        turns.append(Turn(role=m.group(1).lower(), content=text[m.end():end].strip()))
    return turns


def render_turns(turns: Sequence) -> str:
    """``Role: content`` paragraphs (the inverse of :func:`parse_evidence`)."""
    return "\n\n".join(f"{t.role.capitalize()}: {t.content}" for t in turns)


def render_user_turns(turns: Sequence, ids: Sequence[int] | None = None) -> str:
    """The user turns as ``[turn N] content`` paragraphs; ``N`` is the turn's 0-based position in
    the conversation (``ids`` gives the positions when ``turns`` is already a subset)."""
    ids = list(range(len(turns))) if ids is None else list(ids)
    return "\n\n".join(f"[turn {i}] {t.content}" for i, t in zip(ids, turns) if t.role == "user")

@dataclass
class FittedEvidence:
    """An evidence text fitted to a budget. ``steps`` lists the shortening steps applied
    (``user_turns_only``, ``turns_cut``, ``ranked_by_similarity``); ``n_turns_kept`` / ``n_turns``
    count user turns."""

    text: str
    steps: list[str] = field(default_factory=list)
    n_turns: int = 0
    n_turns_kept: int = 0


def fit_evidence(evidence: str, attribute: str, budget: Budget | int, *, per_turn_chars: int = 2000) -> FittedEvidence:
    """Shorten ``evidence`` to ``budget`` (policy in the module doc).

    Args:
        evidence: ``Role: content`` paragraphs (or free text, read as one user turn).
        attribute: used to rank user turns when they do not all fit.
        budget: a :class:`Budget`, or an int = a budget in characters.
        per_turn_chars: cap per user turn in step 3.

    Raises:
        ValueError: a budget below 200 characters or 50 tokens.
    """
    if isinstance(budget, int):
        budget = Budget(budget, "chars", len)
    if budget.limit < (200 if budget.unit == "chars" else 50):
        raise ValueError(f"budget too small: {budget.limit} {budget.unit}")
    turns = parse_evidence(evidence)
    users = [t for t in turns if t.role == "user"]
    if turns and budget.fits(evidence):
        return FittedEvidence(render_turns(turns), [], len(users), len(users))
    steps = ["user_turns_only"]
    text = render_turns(users)
    if budget.fits(text):
        return FittedEvidence(text, steps, len(users), len(users))
    from personalign.data.schemas import Turn

    cap = min(per_turn_chars, budget.approx_chars())
    cut = [Turn(role="user", content=cut_text(t.content, cap)) for t in users]
    steps.append("turns_cut")
    text = render_turns(cut)
    if budget.fits(text):
        return FittedEvidence(text, steps, len(users), len(users))
    from personalign.lm.embedder import cosine_pairs

    sims = cosine_pairs([attribute] * len(cut), [t.content for t in cut])
    order = sorted(range(len(cut)), key=lambda i: (-float(sims[i]), i))
    kept: list[int] = []
    used = 0
    for i in order:
        size = budget.measure(f"User: {cut[i].content}") + (budget.measure("\n\n") if kept else 0)
        if used + size <= budget.limit:
            kept.append(i)
            used += size
    steps.append("ranked_by_similarity")
    text = render_turns([cut[i] for i in sorted(kept)])
    while kept and not budget.fits(text):  # token counts of parts need not add up exactly
        kept.remove(max(kept, key=lambda i: order.index(i)))
        text = render_turns([cut[i] for i in sorted(kept)])
    if not kept:
        best = order[0]
        text = cut_to_budget(render_turns([cut[best]]), budget)
        kept = [best] if text else []
    return FittedEvidence(text, steps, len(users), len(kept))

def fit_demos(predictor: Any, inputs: dict[str, Any], long_field: str, *, output_tokens: int,
              attribute_field: str = "attribute") -> tuple[list | None, Budget]:
    """Demos whose ``long_field`` shares the context window with the call's own long input.

    On an embedded model, when the predictor carries demos (e.g. added by a teleprompter), the
    window left by the prompt *without* demos is split into ``len(demos) + 1`` equal shares and
    each demo's long field is fitted to one share (:func:`fit_evidence`, ranked by the demo's
    ``attribute_field``); then the budget of the call's own long field is measured with those
    fitted demos. Without demos, or on hosted models, returns ``(None, budget)`` (``None``: call
    with the predictor's own demos).
    """
    predict = getattr(predictor, "predict", predictor)
    demos = list(predict.demos or [])
    model = active_model()
    from personalign.lm import is_local

    if not demos or not model or not is_local(model):
        return None, prompt_budget(predictor, inputs, long_field, output_tokens=output_tokens)
    base = prompt_budget(predictor, inputs, long_field, output_tokens=output_tokens, demos=[])
    share = max(50, base.limit // (len(demos) + 1))
    fitted = []
    for d in demos:
        text = d.get(long_field) if hasattr(d, "get") else None
        if isinstance(text, str) and text:
            attribute = str(d.get(attribute_field) or "")
            d = d.copy(**{long_field: _fit_demo_text(model, text, attribute, share)})
        fitted.append(d)
    return fitted, prompt_budget(predictor, inputs, long_field, output_tokens=output_tokens, demos=fitted)


_demo_cache: dict[tuple, str] = {}


def _fit_demo_text(model: str, text: str, attribute: str, share: int) -> str:
    key = (model, text, attribute, share)
    if key not in _demo_cache:
        if len(_demo_cache) > 512:
            _demo_cache.clear()
        _demo_cache[key] = fit_evidence(text, attribute, token_budget(model, share)).text
    return _demo_cache[key]

__all__ = ["FittedEvidence", "fit_demos", "fit_evidence", "parse_evidence", "render_turns", "render_user_turns"]
