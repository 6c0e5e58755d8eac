"""Learned and similarity verifiers on MiniLM features; they score *rejection*.

Both score a triple with a number that grows with the chance that the attribute should be
REJECTED (the stage's positive class, :data:`OPTIMIZER_KWARGS` ``positive=False``), and reject when
``score >= threshold``. The threshold is fitted by
:class:`personalign.optimizers.learned.LearnedSelectorFit` on out-of-fold scores of a grouped
cross-validation (groups: the example's ``group`` field -- the PrefEval topic, or the user for
human-labelled files) maximizing F-beta with beta = 2, i.e. recall of rejections weighted over
precision (van Rijsbergen 1979): a wrongly kept attribute does more harm downstream than a
wrongly dropped one.

Evidence representation (:func:`user_segments`): only the user's text (assistant turns are not
evidence about the user), at most ``MAX_USER_CHARS`` = 200,000 characters of it (the beginning;
a 5 MB message is cut, not embedded in full), packed by sentences into segments of at most 600
characters (MiniLM reads at most 256 word pieces, about 1,000 characters, and truncates the rest).

Features of a triple (``a`` = attribute embedding, ``s_j`` = segment embeddings, all MiniLM
all-MiniLM-L6-v2, L2-normalized, 384-d; ``t`` = the segment most similar to ``a``; ``m`` = the
normalized mean of the segments), by group:

* ``attribute`` a (384) -- ``best_product`` a*t (384) -- ``best_absdiff`` |a-t| (384) --
  ``mean_product`` a*m (384)
* ``sims`` (5): max_j cos(a, s_j), mean of the top-3 cosines, mean cosine, cos(a, m), and 1 when
  the evidence has no user text (then the other features are 0).
* ``lexical`` (2): the share of the attribute's content words found anywhere in the user's text,
  and the largest share found in one segment (words: lower-cased ``[a-z]+`` runs of >= 3 letters,
  minus bm25s' English stop words and pronoun/preference-verb fillers, crudely stemmed by
  truncation to 5 characters).

Default features: ``sims`` + ``lexical`` (7 numbers). Measured on the PrefEval-derived train split
(8 topics, 858 pairs, 5-fold grouped-by-topic CV, ROC AUC of out-of-fold P(rejected)): ``sims``
alone 0.951, ``sims`` + ``lexical`` 0.985, every combination with the 384-d vector groups 0.83-0.92
-- the vectors learn the training topics and do not transfer to new topics.

The extractor's ``reason`` is not used: the PrefEval-derived pairs have none, so no weight for
it could be learned from them.

:class:`MiniLMVerifier`: scikit-learn ``LogisticRegression(class_weight="balanced")`` on the
standardized features; score = P(rejected). :class:`MaxSimilarityVerifier`: no weights; score =
1 - max_j cos(a, s_j) (an attribute no user sentence resembles is suspect); the threshold is its
only parameter.

Saving (no pickle): ``dump_state()`` -> JSON; ``MiniLMVerifier.save_weights`` writes its
:class:`~personalign.programs.common.logistic.LogisticHead` as ``minilm_verifier.npz`` (``coef`` (d,), ``intercept`` (), ``mean`` (d,), ``scale`` (d,)), read
back with ``allow_pickle=False``.
"""

from __future__ import annotations

import re
from typing import Sequence

import dspy

from personalign.programs.common.embed import embed_cached
from personalign.programs.common.evidence import parse_evidence
from personalign.programs.common.logistic import LogisticSelector, check_feature_groups
from personalign.programs.common.scorer import ThresholdedScorer

FEATURE_GROUPS = ("attribute", "best_product", "best_absdiff", "mean_product", "sims", "lexical")
DEFAULT_FEATURES = ("sims", "lexical")
_GROUP_DIMS = {"attribute": 384, "best_product": 384, "best_absdiff": 384, "mean_product": 384, "sims": 5, "lexical": 2}
WEIGHTS_FILE = "minilm_verifier.npz"
MAX_USER_CHARS = 200_000
SEGMENT_CHARS = 600
OPTIMIZER_KWARGS = {"label": "accepted", "positive": False, "beta": 2.0, "group_key": "group"}
"""Settings of :class:`~personalign.optimizers.learned.LearnedSelectorFit` for verifiers."""

_SENT = re.compile(r"(?<=[.!?])\s+")


def user_segments(evidence: str, *, segment_chars: int = SEGMENT_CHARS, max_chars: int = MAX_USER_CHARS) -> list[str]:
    """The user's text of an evidence string as segments of at most ``segment_chars`` characters
    (sentences packed in order; a longer sentence is cut into pieces). Empty when the evidence has
    no user text."""
    users = [t.content.strip() for t in parse_evidence(evidence or "") if t.role == "user" and t.content.strip()]
    out: list[str] = []
    budget = max_chars
    for text in users:
        if budget <= 0:
            break
        text = text[:budget]
        budget -= len(text)
        cur = ""
        for sent in _SENT.split(text):
            while len(sent) > segment_chars:
                if cur:
                    out.append(cur)
                    cur = ""
                out.append(sent[:segment_chars])
                sent = sent[segment_chars:]
            if cur and len(cur) + 1 + len(sent) > segment_chars:
                out.append(cur)
                cur = sent
            else:
                cur = f"{cur} {sent}" if cur else sent
        if cur.strip():
            out.append(cur)
    return [s for s in out if s.strip()]


_STOP = None


def _content_words(text: str) -> set[str]:
    """Content-word stems of ``text`` (see ``lexical`` in the module doc)."""
    global _STOP
    if _STOP is None:
        from bm25s.stopwords import STOPWORDS_EN

        _STOP = set(STOPWORDS_EN) | set(
            "i me my mine we our you your he she him her his they them their user users has have had do does did "
            "am would could should really very much also just like likes liked prefer prefers preferred love loves "
            "enjoy enjoys want wants don doesn can't cannot any some more most than".split())
    return {w[:5] for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 3 and w not in _STOP}


def _lexical(attribute: str, segments: Sequence[str]) -> list[float]:
    aw = _content_words(attribute)
    if not aw or not segments:
        return [0.0, 0.0]
    whole = set().union(*(_content_words(s) for s in segments))
    best = max(len(aw & _content_words(s)) for s in segments)
    return [len(aw & whole) / len(aw), best / len(aw)]


def _segment_stats(evidences: Sequence[str], attributes: Sequence[str]):
    """Per example: (a, t, m, sims(5,)) as numpy arrays (see the module doc)."""
    import numpy as np

    segs = [user_segments(e) for e in evidences]
    uniq = list(dict.fromkeys([*attributes, *(s for ss in segs for s in ss)]))
    index = {t: i for i, t in enumerate(uniq)}
    vecs = embed_cached(uniq).astype(np.float64)
    d = vecs.shape[1]
    n = len(attributes)
    A = vecs[[index[a] for a in attributes]] if n else np.zeros((0, d))
    T = np.zeros((n, d))
    M = np.zeros((n, d))
    S = np.zeros((n, 5))
    for i, ss in enumerate(segs):
        if not ss:
            S[i, 4] = 1.0
            continue
        E = vecs[[index[s] for s in ss]]
        cos = E @ A[i]
        best = int(np.argmax(cos))
        T[i] = E[best]
        m = E.mean(axis=0)
        norm = np.linalg.norm(m)
        M[i] = m / norm if norm > 0 else m
        top = np.sort(cos)[::-1][:3]
        S[i, :4] = [cos.max(), top.mean(), cos.mean(), float(M[i] @ A[i])]
    return A, T, M, S, segs


def verification_features(evidences: Sequence[str], attributes: Sequence[str],
                          groups: Sequence[str] = DEFAULT_FEATURES):
    """Feature matrix, float64 of shape (n, sum of the groups' sizes: 384 per vector group, 5 for
    ``sims``, 2 for ``lexical``).

    Raises:
        ValueError: unknown feature group or unequal lengths.
    """
    import numpy as np

    check_feature_groups(groups, FEATURE_GROUPS)
    if len(evidences) != len(attributes):
        raise ValueError(f"{len(evidences)} evidences vs {len(attributes)} attributes")
    A, T, M, S, segs = _segment_stats(evidences, attributes)
    parts = {"attribute": A, "best_product": A * T, "best_absdiff": np.where(S[:, 4:5] > 0, 0.0, np.abs(A - T)),
             "mean_product": A * M, "sims": S}
    if "lexical" in groups:
        parts["lexical"] = np.array([_lexical(a, ss) for a, ss in zip(attributes, segs)], dtype=np.float64).reshape(-1, 2)
    return np.concatenate([parts[g] for g in groups], axis=1)


def _snippet(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class RejectScorer(ThresholdedScorer):
    """Base of the scoring verifiers: ``score_batch(examples) -> list[float]`` (higher = reject),
    rejected when ``score >= threshold``. ``predict_batch`` returns one
    ``Prediction(accepted, score, rationale)`` per example; the rationale names the user segment
    most similar to the attribute and its cosine (the feedback a refiner can use).

    Raises:
        RuntimeError: predicting without a threshold (not compiled).
    """

    uses_lm = False
    output_field = "accepted"
    positive_output = False  # score >= threshold: rejected
    fit_with = "LearnedSelectorFit"
    optimizer_kwargs = OPTIMIZER_KWARGS

    def fit(self, examples: Sequence, *, seed: int = 0) -> "RejectScorer":
        return self

    def explain(self, examples: Sequence, scores: Sequence[float], decisions: Sequence[bool]) -> list[dict]:
        """``{"rationale": ...}`` per example: the closest user segment and the score vs the threshold."""
        import numpy as np

        A, T, M, S, segs = _segment_stats([e.evidence for e in examples], [e.attribute for e in examples])
        out = []
        for i, (s, rejected) in enumerate(zip(scores, decisions)):
            if not segs[i]:
                why = "no user messages in the evidence"
            else:
                best = segs[i][int(np.argmax([float(v) for v in (embed_cached(segs[i]) @ A[i])]))]
                why = (f"closest user message (cosine {S[i, 0]:.2f}): \"{_snippet(best)}\"; "
                       f"rejection score {s:.2f} {'>=' if rejected else '<'} threshold {self.threshold:.2f}")
            out.append({"rationale": why})
        return out

    def forward(self, evidence: str, attribute: str, reason: str = "") -> dspy.Prediction:
        (pred,) = self.predict_batch([dspy.Example(evidence=evidence, attribute=attribute, reason=reason)])
        return pred


class MaxSimilarityVerifier(RejectScorer):
    """Similarity baseline: score = 1 - max cosine between the attribute and any user segment (in
    [0, 2]; 1 when there is no user text). No weights; compiled = threshold fitted."""

    optimizer = "personalign.optimizers.learned:LearnedSelectorFit"  # its own fit (trainable)

    def score_batch(self, examples: Sequence) -> list[float]:
        if not examples:
            return []
        _, _, _, S, segs = _segment_stats([e.evidence for e in examples], [e.attribute for e in examples])
        return [1.0 if not segs[i] else float(1.0 - S[i, 0]) for i in range(len(examples))]

    def dump_state(self, *args, **kwargs) -> dict:
        return {"threshold": self.threshold}

    def load_state(self, state: dict) -> "MaxSimilarityVerifier":
        self.threshold = state.get("threshold")
        return self


class MiniLMVerifier(LogisticSelector, RejectScorer):
    """Learned verifier: P(rejected | MiniLM features) from a class-weighted logistic regression.

    Args:
        features: feature groups (module doc); default ``sims`` + ``lexical``.
        C: inverse L2 strength of the logistic regression (1.0: 7 standardized features; the CV
            AUC on train was flat for C in 0.1-10).
        threshold: rejection threshold on the probability; None until compiled.

    Raises:
        RuntimeError: scoring before :meth:`fit` / :meth:`load_weights`.
        ValueError (fit): training examples of a single class.
    """

    optimizer = "personalign.optimizers.learned:LearnedSelectorFit"  # its own fit (trainable)

    weights_file = WEIGHTS_FILE
    classes = ("rejected", "accepted")

    def __init__(self, features: Sequence[str] = DEFAULT_FEATURES, C: float = 1.0,
                 threshold: float | None = None) -> None:
        super().__init__()
        self.features = list(features)
        self.C = float(C)
        self.threshold = threshold
        self.head = None  # LogisticHead once fitted or loaded

    def feature_dim(self) -> int:
        return sum(_GROUP_DIMS[g] for g in self.features)

    def feature_matrix(self, examples: Sequence):
        """(n, d) float64 features of the examples' (evidence, attribute) pairs (module doc)."""
        return verification_features([e.evidence for e in examples], [e.attribute for e in examples], self.features)

    def is_positive(self, example) -> bool:
        return not bool(example.accepted)  # the score is P(rejected)


__all__ = ["FEATURE_GROUPS", "OPTIMIZER_KWARGS", "MaxSimilarityVerifier", "MiniLMVerifier", "RejectScorer",
           "user_segments", "verification_features"]
