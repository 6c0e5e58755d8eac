"""Pairwise judges of the ``judge`` stage: which of two responses serves the user better, per
attribute, on a 1-5 scale (1 = A much better, 3 = equal, 5 = B much better).

Every strategy is a ``dspy.Module`` with ``forward(profile, prompt, response_a, response_b,
attributes)`` returning ``dspy.Prediction(ratings: dict[str, int], scores: dict[str, float],
consistent: dict[str, bool | None], score: float)``: ``ratings`` (the stage output, compared with
the human ratings by :func:`personalign.metrics.rating_agreement`) maps each attribute to an
integer 1-5, ``scores`` to the unrounded debiased value, ``consistent`` whether both orders agreed
(None for single-order strategies), ``score`` the mean of ``scores``.

Position debiasing (Zheng et al., NeurIPS 2023, sec. 3.3): :class:`PairwiseJudge` rates (A, B)
-> r1 and (B, A) -> r2, maps the swapped rating back (6 - r2) and averages:
``s = (r1 + 6 - r2) / 2``. A half-integer ``s`` is rounded toward 3 (the judge is only as sure as
its less extreme order). Cost: 2 LM calls per attribute.

``pairwise-expected`` (:class:`ExpectedPairwiseJudge`) reads each order's rating as the model's
**expected** rating under its own distribution over 1-5 at the rating token
(:func:`personalign.lm.logprobs.expected_value`; the LM's log-probabilities, which the embedded
models return for typed outputs) and debiases those: ``s = (E_ab + 6 - E_ba) / 2``. A small model
that answers "4" in both orders (pure position bias: every debiased integer verdict a tie) still
shifts probability toward the better response; the expected values keep that shift. Without
log-probabilities it falls back to the integer ratings.

Budgets: profile <= 1500 characters, each response <= 2500 (heads kept), attributes <= 12 of
<= 300 characters; a call then stays under ~2000 tokens of a 4096-token window.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import dspy

from personalign.lm.logprobs import expected_value, with_logprobs
from personalign.programs.common.text import clip_list, truncate_head
from personalign.signatures.judge import PairwiseImplicitJudgeSignature, PairwiseJudgeSignature

MAX_PROFILE_CHARS = 1500
MAX_RESPONSE_CHARS = 2500
RATINGS = (1, 2, 3, 4, 5)


def debias(r_ab: int, r_ba: int) -> tuple[int, float]:
    """Combine the rating of order (A, B) with the rating of the swapped order (B, A), both on
    1-5 in their own frame. Returns ``(rounded rating, mean score)`` in the (A, B) frame; half
    points round toward 3."""
    for r in (r_ab, r_ba):
        if isinstance(r, bool) or not isinstance(r, int) or not 1 <= r <= 5:
            raise ValueError(f"ratings must be integers 1-5, got {r!r}")
    s = (r_ab + (6 - r_ba)) / 2.0
    if s == int(s):
        return int(s), s
    return (int(s) if s > 3 else int(s) + 1), s


def _rating(value) -> int:
    if isinstance(value, bool):
        raise ValueError(f"rating must be an integer 1-5, got {value!r}")
    r = int(value)
    if not 1 <= r <= 5:
        raise ValueError(f"rating {r} outside 1-5")
    return r


def _attributes(attributes) -> list[str]:
    attrs = clip_list(attributes, max_items=12, max_chars=300)
    if not attrs:
        raise ValueError("no attributes to judge (pass the attributes rated, e.g. the keys of the human ratings)")
    return attrs


class PairwiseJudge(dspy.Module):
    """``pairwise`` / ``pairwise-implicit``: typed 1-5 judge per attribute, both orders, debiased.

    Args:
        implicit: use :class:`~personalign.signatures.judge.PairwiseImplicitJudgeSignature`, whose
            instructions say that restating an attribute earns nothing and that 3 is the most
            common rating (the seed study's finding that LLM judges inflate and reward mentions).
        both_orders: judge (A, B) and (B, A) (default). When False, one order is chosen per
            (prompt, attribute) by a seeded hash (:class:`SingleOrderJudge`).
        seed: seed of that order choice.
        expected: rate each order by the expected rating under the model's log-probabilities
            (:class:`ExpectedPairwiseJudge`); ``rate`` then also returns ``e_ab`` / ``e_ba``.

    LM errors propagate (``run_program`` retries and counts them).
    """

    uses_lm = True

    def __init__(self, implicit: bool = False, both_orders: bool = True, seed: int = 0, expected: bool = False) -> None:
        super().__init__()
        self.implicit = bool(implicit)
        self.both_orders = bool(both_orders)
        self.seed = int(seed)
        self.expected = bool(expected)
        self.judge = dspy.Predict(PairwiseImplicitJudgeSignature if self.implicit else PairwiseJudgeSignature)
        (self._field,) = self.judge.signature.output_fields  # the one rating field, named by the signature

    def lm_calls_per_run(self, example) -> int:
        """Judge calls of one forward pass on ``example``: one per order (two with ``both_orders``)
        per rated attribute (read by the LM-call projection, :mod:`personalign.optimizers.budget`)."""
        attrs = clip_list(getattr(example, "attributes", None), max_items=12, max_chars=300)
        return (2 if self.both_orders else 1) * len(attrs)

    def _one(self, profile, prompt, attribute, a, b) -> tuple[int, float]:
        """One order: ``(rating, expected rating)`` (the expected one is the rating itself unless
        ``expected`` and the LM returned log-probabilities)."""
        kw = dict(profile=profile, prompt=prompt, attribute=attribute, response_a=a, response_b=b)
        if not self.expected:
            r = _rating(getattr(self.judge(**kw), self._field))
            return r, float(r)
        out, lp = with_logprobs(self.judge, **kw)
        r = _rating(getattr(out, self._field))
        e = expected_value(lp, self._field, RATINGS)
        return r, float(r) if e is None else e

    def _swap_first(self, prompt: str, attribute: str) -> bool:
        h = hashlib.sha1(f"{self.seed}\x00{prompt}\x00{attribute}".encode()).digest()
        return bool(h[0] & 1)

    def rate(self, profile: str, prompt: str, attribute: str, response_a: str, response_b: str) -> dict:
        """One attribute: ``{"rating", "score", "consistent", "r_ab", "r_ba", "e_ab", "e_ba"}``
        (``r_ba`` / ``e_ba`` in the swapped frame; None when that order was not judged; ``e_*`` the
        expected ratings, equal to ``r_*`` unless ``expected``)."""
        p = truncate_head(str(profile), MAX_PROFILE_CHARS)
        a = truncate_head(str(response_a), MAX_RESPONSE_CHARS)
        b = truncate_head(str(response_b), MAX_RESPONSE_CHARS)
        if self.both_orders:
            r_ab, e_ab = self._one(p, prompt, attribute, a, b)
            r_ba, e_ba = self._one(p, prompt, attribute, b, a)
            rating, score = debias(r_ab, r_ba)
            if self.expected:
                score = (e_ab + 6 - e_ba) / 2.0
                rating = int(min(5, max(1, round(score))))
            return {"rating": rating, "score": score, "consistent": r_ab == 6 - r_ba, "r_ab": r_ab, "r_ba": r_ba,
                    "e_ab": e_ab, "e_ba": e_ba}
        if self._swap_first(prompt, attribute):
            r_ba, e_ba = self._one(p, prompt, attribute, b, a)
            return {"rating": 6 - r_ba, "score": 6 - e_ba, "consistent": None, "r_ab": None, "r_ba": r_ba,
                    "e_ab": None, "e_ba": e_ba}
        r_ab, e_ab = self._one(p, prompt, attribute, a, b)
        return {"rating": r_ab, "score": e_ab, "consistent": None, "r_ab": r_ab, "r_ba": None, "e_ab": e_ab,
                "e_ba": None}

    def forward(self, profile: str, prompt: str, response_a: str, response_b: str,
                attributes: Sequence[str] | None = None) -> dspy.Prediction:
        prompt = truncate_head(str(prompt), 1500)
        rows = {attr: self.rate(profile, prompt, attr, response_a, response_b) for attr in _attributes(attributes)}
        scores = {k: v["score"] for k, v in rows.items()}
        return dspy.Prediction(ratings={k: v["rating"] for k, v in rows.items()}, scores=scores,
                               consistent={k: v["consistent"] for k, v in rows.items()},
                               orders={k: (v["r_ab"], v["r_ba"]) for k, v in rows.items()},
                               score=sum(scores.values()) / len(scores))


class ImplicitPairwiseJudge(PairwiseJudge):
    """``pairwise-implicit``: :class:`PairwiseJudge` with ``implicit=True``."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("implicit", True)
        super().__init__(**kwargs)


class ExpectedPairwiseJudge(PairwiseJudge):
    """``pairwise-expected``: :class:`PairwiseJudge` with ``expected=True`` (module doc)."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("expected", True)
        super().__init__(**kwargs)


class SingleOrderJudge(PairwiseJudge):
    """``single-order``: :class:`PairwiseJudge` judging one order per (prompt, attribute), chosen by
    a seeded hash -- the position-biased baseline, half the LM calls."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("both_orders", False)
        super().__init__(**kwargs)


class TieJudge(dspy.Module):
    """``tie``: LM-free baseline rating every attribute 3 (no difference). Its Spearman rho is
    undefined (constant) and its weighted kappa 0; its ``rating_agreement`` is what "no
    preference" earns."""

    uses_lm = False

    def forward(self, profile: str, prompt: str, response_a: str, response_b: str,
                attributes: Sequence[str] | None = None) -> dspy.Prediction:
        attrs = _attributes(attributes)
        return dspy.Prediction(ratings={a: 3 for a in attrs}, scores={a: 3.0 for a in attrs},
                               consistent={a: None for a in attrs}, score=3.0)


class EmbeddingJudge(dspy.Module):
    """``minilm``: LM-free baseline. For each attribute, ``d = cos(attribute, B) - cos(attribute,
    A)`` with MiniLM embeddings; rating 3 when ``|d| < small``, 2/4 when ``|d| < large``, else
    1/5 (defaults 0.03 and 0.10: fixed cut points, not fitted). ``scores`` holds ``3 + d * 10``
    clipped to [1, 5] (monotone in d, for Spearman)."""

    uses_lm = False

    def __init__(self, small: float = 0.03, large: float = 0.10) -> None:
        super().__init__()
        self.small, self.large = float(small), float(large)

    def forward(self, profile: str, prompt: str, response_a: str, response_b: str,
                attributes: Sequence[str] | None = None) -> dspy.Prediction:
        from personalign.lm.embedder import embed

        attrs = _attributes(attributes)
        vecs = embed([truncate_head(response_a, MAX_RESPONSE_CHARS), truncate_head(response_b, MAX_RESPONSE_CHARS)] + attrs)
        ratings, scores = {}, {}
        for i, attr in enumerate(attrs):
            d = float(vecs[2 + i] @ vecs[1] - vecs[2 + i] @ vecs[0])
            mag = 0 if abs(d) < self.small else (1 if abs(d) < self.large else 2)
            ratings[attr] = 3 + (mag if d > 0 else -mag)
            scores[attr] = min(5.0, max(1.0, 3.0 + d * 10.0))
        return dspy.Prediction(ratings=ratings, scores=scores, consistent={a: None for a in attrs},
                               score=sum(scores.values()) / len(scores))


__all__ = ["debias", "PairwiseJudge", "ImplicitPairwiseJudge", "ExpectedPairwiseJudge", "SingleOrderJudge", "TieJudge", "EmbeddingJudge"]
