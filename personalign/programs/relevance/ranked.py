"""Learned selectors that decide by rank inside one user's attributes for a prompt.

Why rank: humans mark ~17-20% of a user's attributes relevant to a prompt, whatever the prompt,
while a global probability threshold does not transfer between prompts (measured on the recenter
labels: ``minilm-logreg``'s threshold from leave-one-prompt-out CV inside train said yes to 45% of
val). So these selectors score every pair with a small logistic regression and, inside each group
of one user's attributes for one prompt (``(prompt_id, user_id)``), mark the top ``top_fraction``
relevant, where ``top_fraction`` is the positive rate of the training labels (fitted in ``fit``,
never on evaluation data). Groups smaller than ``min_group`` cannot be ranked meaningfully and fall
back to ``probability >= threshold``, the threshold fitted on out-of-fold probabilities by
:class:`personalign.optimizers.LearnedSelectorFit` (leave-one-prompt-out inside train).

Features of a pair (a = MiniLM attribute embedding, p = MiniLM prompt embedding, L2-normalized), by
``features`` group:

* ``attribute`` -- a (384): a prior over attributes learned from labels ("values concise answers"
  is relevant to most prompts);
* ``cosine`` -- a.p (1);
* ``sentence_cosine`` -- max over the prompt's sentences (and the whole prompt) of cos(a, s) (1):
  long prompts (the LIMA prompts run to ~300 words, beyond MiniLM's 256 word pieces) dilute a.p;
* ``cosine_z`` -- a.p standardized within the (prompt, user) group (1);
* ``style`` -- max over :data:`STYLE_PROTOTYPES` of cos(a, prototype) (1): how much the attribute
  is about *how* to answer (concision, precision, structure) rather than *what* about. The four
  prototype sentences are ours, written after reading the train split's positives (never val);
  the guideline of the seed study counts such attributes as relevant when they change tone,
  detail or framing of the reply.

Training labels: ``labels="hard"`` (the human majority ``relevant``, class-balanced
``LogisticRegression``) or ``labels="soft"`` (each pair counts as positive with weight
``human_yes_rate`` and as negative with ``1 - human_yes_rate``, class totals balanced; falls back
to the majority label where the yes-rate is missing). Standardized by a ``StandardScaler`` fitted
on train. Deterministic (lbfgs, no sampling).

Registered defaults (chosen by leave-one-prompt-out CV inside train -- F1 of the top-fraction
decision, ties broken by within-user ROC AUC; val never used): ``minilm-rank`` = attribute,
cosine, sentence_cosine, cosine_z, hard labels, C = 0.1; ``style-rank`` = style, cosine,
sentence_cosine, cosine_z, soft labels, C = 0.01.

Saving (no pickle): :meth:`RankedSelector.dump_state` -> JSON ``{"threshold", "top_fraction",
"min_group", "features", "C", "labels", "fitted"}``; ``save_weights`` writes the
:class:`~personalign.programs.common.logistic.LogisticHead` as ``ranked_selector.npz`` (``coef``
(d,), ``intercept`` (), ``mean`` (d,), ``scale`` (d,)) and ``load_weights`` reads it with
``allow_pickle=False``.
"""

from __future__ import annotations

import re
from typing import Sequence

from personalign.programs.common.embed import embed_cached
from personalign.programs.common.logistic import LogisticHead, LogisticSelector, check_c, check_feature_groups
from personalign.programs.relevance._scorer import (RelevanceScorer, TopShareDecision, _groups, group_keys,  # noqa: F401
                                                  small_group_mask, top_share_decisions)

FEATURE_GROUPS = ("attribute", "cosine", "sentence_cosine", "cosine_z", "style")
LABEL_MODES = ("hard", "soft")
WEIGHTS_FILE = "ranked_selector.npz"
EMBEDDING_DIM = 384

#: Attributes about how to answer; see the module doc for where they come from.
STYLE_PROTOTYPES = (
    "The user values concise and clear answers.",
    "The user is detail-oriented and values accuracy.",
    "The user prefers a particular communication style.",
    "The user values structured and organized information.",
)

_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")


def prompt_sentences(prompt: str) -> list[str]:
    """The prompt's sentences and lines longer than 3 characters (the whole prompt when none)."""
    parts = [s.strip() for s in _SENTENCE_SPLIT.split(prompt) if len(s.strip()) > 3]
    return parts or [prompt]


def feature_dim(features: Sequence[str]) -> int:
    return sum(EMBEDDING_DIM if f == "attribute" else 1 for f in features)


def ranked_features(examples: Sequence, features: Sequence[str]):
    """Feature matrix, float64 of shape (n, d) (d = 384 for ``attribute`` + 1 per other group).

    ``cosine_z`` is standardized within each (prompt, user) group of ``examples`` (0 for a group
    of one), so it depends on which attributes are scored together.

    Raises:
        ValueError: unknown feature group.
    """
    import numpy as np

    check_feature_groups(features, FEATURE_GROUPS)
    n = len(examples)
    attrs = [e.attribute for e in examples]
    prompts = [e.prompt for e in examples]
    sentences = {p: prompt_sentences(p) for p in set(prompts)}
    texts = sorted(set(attrs) | set(prompts) | {s for ss in sentences.values() for s in ss}
                   | (set(STYLE_PROTOTYPES) if "style" in features else set()))
    index = {t: i for i, t in enumerate(texts)}
    vecs = np.asarray(embed_cached(texts), dtype=np.float64)
    a = vecs[[index[t] for t in attrs]] if n else np.zeros((0, EMBEDDING_DIM))
    p = vecs[[index[t] for t in prompts]] if n else np.zeros((0, EMBEDDING_DIM))
    cos = np.sum(a * p, axis=1)
    parts = []
    for f in features:
        if f == "attribute":
            parts.append(a)
        elif f == "cosine":
            parts.append(cos[:, None])
        elif f == "sentence_cosine":
            sc = np.array([max(float(a[i] @ p[i]), max(float(a[i] @ vecs[index[s]]) for s in sentences[prompts[i]]))
                           for i in range(n)])
            parts.append(sc.reshape(n, 1))
        elif f == "cosine_z":
            z = np.zeros(n)
            for idx in _groups(examples).values():
                v = cos[idx]
                z[idx] = (v - v.mean()) / (v.std() + 1e-9) if len(idx) > 1 else 0.0
            parts.append(z[:, None])
        elif f == "style":
            protos = vecs[[index[t] for t in STYLE_PROTOTYPES]]
            parts.append((a @ protos.T).max(axis=1, initial=-1.0).reshape(n, 1))
    return np.concatenate(parts, axis=1) if parts else np.zeros((n, 0))


def _soft_rate(example) -> float:
    rate = getattr(example, "human_yes_rate", None) if not hasattr(example, "get") else example.get("human_yes_rate")
    return float(rate) if rate is not None else float(bool(example.relevant))


class RankedSelector(TopShareDecision, LogisticSelector, RelevanceScorer):
    """Relevant = among the top ``top_fraction`` of its (prompt, user) group by learned probability.

    Args:
        features: feature groups (module doc).
        C: inverse L2 regularization strength of the logistic regression.
        labels: ``"hard"`` (majority vote) or ``"soft"`` (``human_yes_rate`` as sample weights).
        min_group: smallest group decided by rank; smaller groups use ``probability >= threshold``.
        top_fraction: share of a group marked relevant; None = the train positive rate, set by
            :meth:`fit`.
        threshold: probability threshold for small groups; None until compiled.

    ``score`` of a prediction is the probability (comparable across groups, for ROC AUC).

    Raises:
        ValueError: unknown feature group or label mode; ``fit`` on a single class.
        RuntimeError: scoring before :meth:`fit` / :meth:`load_weights`; predicting uncompiled.
    """

    fit_with = "LearnedSelectorFit"
    uses_lm = False
    weights_file = WEIGHTS_FILE
    classes = ("relevant", "irrelevant")

    def __init__(self, features: Sequence[str] = ("attribute", "cosine", "sentence_cosine", "cosine_z"),
                 C: float = 0.1, labels: str = "hard", min_group: int = 5, top_fraction: float | None = None,
                 threshold: float | None = None) -> None:
        super().__init__()
        check_feature_groups(features, FEATURE_GROUPS)
        if labels not in LABEL_MODES:
            raise ValueError(f"labels must be one of {LABEL_MODES}, got {labels!r}")
        self.features = list(features)
        self.C = check_c(C)
        self.labels = labels
        self.min_group = int(min_group)
        self.top_fraction = top_fraction
        self.threshold = threshold
        self.head = None  # LogisticHead once fitted or loaded

    def feature_dim(self) -> int:
        return feature_dim(self.features)

    def feature_matrix(self, examples: Sequence):
        return ranked_features(examples, self.features)

    def is_positive(self, example) -> bool:
        return bool(example.relevant)

    # -- fitting --------------------------------------------------------------------------------
    def fit(self, examples: Sequence, *, seed: int = 0) -> "RankedSelector":
        """Fit scaler + logistic regression on ``examples``; ``top_fraction`` = their positive rate.

        Raises:
            ValueError: a single class in ``examples``.
        """
        import numpy as np

        y = np.array([bool(e.relevant) for e in examples], dtype=int)
        if self.labels == "hard":
            super().fit(examples, seed=seed)
            self.top_fraction = float(y.mean())
            return self
        if len(set(y.tolist())) < 2:
            raise ValueError(f"{type(self).__name__}.fit needs both relevant and irrelevant examples")
        # soft labels: each pair twice, positive with weight human_yes_rate and negative with 1 - it,
        # class totals balanced; the scaler is fitted on the pairs once (as for hard labels)
        from sklearn.preprocessing import StandardScaler

        X = ranked_features(examples, self.features)
        scaler = StandardScaler().fit(X)
        Xs = scaler.transform(X)
        rate = np.array([_soft_rate(e) for e in examples], dtype=float)
        y2 = np.r_[np.ones(len(rate), int), np.zeros(len(rate), int)]
        w = np.r_[rate, 1.0 - rate]
        pos, neg = w[y2 == 1].sum(), w[y2 == 0].sum()
        w = np.where(y2 == 1, w / pos, w / neg) * len(rate)  # balanced class totals
        fitted = LogisticHead(C=self.C, max_iter=self.max_iter, standardize=False, random_state=seed).fit(
            np.vstack([Xs, Xs]), y2, sample_weight=w)
        self.head = LogisticHead.from_arrays(fitted.coef_, fitted.intercept_, scaler.mean_, scaler.scale_,
                                             C=self.C, max_iter=self.max_iter, random_state=seed)
        self.top_fraction = float(y.mean())
        return self

    def require_compiled(self) -> None:
        """Raise ``RuntimeError`` unless ``threshold`` and ``top_fraction`` are set."""
        if self.threshold is None or self.top_fraction is None:
            raise RuntimeError(f"{type(self).__name__} has no threshold/top_fraction: "
                               f"compile it with {self.fit_with} first")

    # -- state ----------------------------------------------------------------------------------
    def dump_state(self, *args, **kwargs) -> dict:
        return {"threshold": self.threshold, "top_fraction": self.top_fraction, "min_group": self.min_group,
                "features": list(self.features), "C": self.C, "labels": self.labels, "fitted": self.fitted}

    def load_state(self, state: dict) -> "RankedSelector":
        self.threshold = state.get("threshold")
        self.top_fraction = state.get("top_fraction")
        self.min_group = int(state.get("min_group", self.min_group))
        self.features = list(state.get("features", self.features))
        self.C = float(state.get("C", self.C))
        self.labels = state.get("labels", self.labels)
        return self


class MiniLMRank(RankedSelector):
    """``minilm-rank``: MiniLM attribute embedding + prompt similarities, hard labels, C = 0.1."""

    optimizer = "personalign.optimizers.learned:LearnedSelectorFit"  # its own fit (trainable)

    def __init__(self, features: Sequence[str] = ("attribute", "cosine", "sentence_cosine", "cosine_z"),
                 C: float = 0.1, labels: str = "hard", **kwargs) -> None:
        super().__init__(features=features, C=C, labels=labels, **kwargs)


class StyleRank(RankedSelector):
    """``style-rank``: style-prototype similarity + prompt similarities (4 features), soft labels, C = 0.01."""

    optimizer = "personalign.optimizers.learned:LearnedSelectorFit"  # its own fit (trainable)

    def __init__(self, features: Sequence[str] = ("style", "cosine", "sentence_cosine", "cosine_z"),
                 C: float = 0.01, labels: str = "soft", **kwargs) -> None:
        super().__init__(features=features, C=C, labels=labels, **kwargs)


__all__ = ["FEATURE_GROUPS", "STYLE_PROTOTYPES", "MiniLMRank", "RankedSelector", "StyleRank", "group_keys",
           "prompt_sentences", "ranked_features", "small_group_mask", "top_share_decisions"]
