"""Learned selector: logistic regression on MiniLM features of attribute, prompt and their interaction.

Source of the approach: the seed study's finding that selectors trained on human labels beat
prompted LLM judges; here the cheapest trained selector -- frozen all-MiniLM-L6-v2 embeddings
(:func:`personalign.lm.embedder.embed`, L2-normalized, 384-d) and scikit-learn's
``LogisticRegression(class_weight="balanced")`` for the rare positive class (~18%).

Features of a pair (a = attribute embedding, p = prompt embedding), by ``features`` groups:
``attribute`` a (384), ``prompt`` p (384), ``product`` a*p (384), ``absdiff`` |a-p| (384),
``cosine`` a.p (1). Standardized by a ``StandardScaler`` fitted on train.

Fitting happens in ``compile`` (:class:`personalign.optimizers.LearnedSelectorFit`): out-of-fold
scores from leave-one-prompt-out models fix the threshold, then the model is refit on all of train.

Saving (no pickle): :meth:`MiniLMLogReg.dump_state` -> JSON ``{"threshold", "features", "C",
"fitted"}``; ``save_weights`` writes the :class:`~personalign.programs.common.logistic.LogisticHead`
as ``minilm_logreg.npz`` (``coef`` (d,), ``intercept`` (), ``mean`` (d,), ``scale`` (d,)) and
``load_weights`` reads it with ``allow_pickle=False``.
"""

from __future__ import annotations

from typing import Sequence

from personalign.programs.common.logistic import HeadWeights, LogisticHead
from personalign.programs.relevance._scorer import RelevanceScorer

FEATURE_GROUPS = ("attribute", "prompt", "product", "absdiff", "cosine")
DEFAULT_FEATURES = ("attribute", "product", "absdiff", "cosine")
WEIGHTS_FILE = "minilm_logreg.npz"
_CACHE_MAX = 20000
_cache: "dict[str, object]" = {}


def _embed_cached(texts: Sequence[str]):
    """MiniLM embeddings (n, 384) with a process-wide text -> vector cache (CV refits embed once)."""
    import numpy as np

    from personalign.lm.embedder import embed

    missing = [t for t in texts if t not in _cache]
    if missing:
        if len(_cache) + len(missing) > _CACHE_MAX:
            _cache.clear()
        for t, v in zip(missing, embed(missing)):
            _cache[t] = v
    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    return np.stack([_cache[t] for t in texts])


def pair_features(attributes: Sequence[str], prompts: Sequence[str], groups: Sequence[str] = FEATURE_GROUPS):
    """MiniLM feature matrix, float32 of shape (n, d) with d = 384 per vector group + 1 for cosine.

    Raises:
        ValueError: unknown feature group or unequal lengths.
    """
    import numpy as np

    bad = [g for g in groups if g not in FEATURE_GROUPS]
    if bad:
        raise ValueError(f"unknown feature group(s) {bad}; choose from {FEATURE_GROUPS}")
    if len(attributes) != len(prompts):
        raise ValueError(f"{len(attributes)} attributes vs {len(prompts)} prompts")
    uniq = sorted(set(attributes) | set(prompts))
    index = {t: i for i, t in enumerate(uniq)}
    vecs = _embed_cached(uniq)
    a = vecs[[index[t] for t in attributes]] if attributes else np.zeros((0, vecs.shape[1]), np.float32)
    p = vecs[[index[t] for t in prompts]] if prompts else np.zeros((0, vecs.shape[1]), np.float32)
    parts = {"attribute": a, "prompt": p, "product": a * p, "absdiff": np.abs(a - p),
             "cosine": np.sum(a * p, axis=1, keepdims=True)}
    return np.concatenate([parts[g] for g in groups], axis=1).astype(np.float32)


class MiniLMLogReg(HeadWeights, RelevanceScorer):
    """Relevant when ``P(relevant | MiniLM features) >= threshold`` (probability in [0, 1]).

    Args:
        features: feature groups (see module doc); default attribute, product, absdiff, cosine --
            the prompt embedding alone is left out because train has only 3 prompts, so it can
            only learn per-prompt offsets that do not transfer to a new prompt.
        C: inverse L2 regularization strength of the logistic regression (0.01: strong, for
            ~340 examples x 1153 features).
        threshold: decision threshold on the probability; None until compiled.

    Raises:
        RuntimeError: scoring before :meth:`fit` / :meth:`load_weights`, or predicting without a
            threshold.
    """

    fit_with = "LearnedSelectorFit"

    uses_lm = False
    weights_file = WEIGHTS_FILE

    def __init__(self, features: Sequence[str] = DEFAULT_FEATURES, C: float = 0.01,
                 threshold: float | None = None) -> None:
        super().__init__()
        self.features = list(features)
        self.C = float(C)
        self.threshold = threshold
        self.head = None  # LogisticHead once fitted or loaded

    def feature_dim(self) -> int:
        return 384 * sum(g != "cosine" for g in self.features) + ("cosine" in self.features)

    def _features(self, examples: Sequence):
        return pair_features([e.attribute for e in examples], [e.prompt for e in examples], self.features)

    # -- fitting (called by the optimizer) ------------------------------------------------------
    def fit(self, examples: Sequence, *, seed: int = 0) -> "MiniLMLogReg":
        """Fit scaler + class-balanced logistic regression on ``examples`` (their ``relevant`` labels).

        Raises:
            ValueError: a single class in ``examples``.
        """
        y = [bool(e.relevant) for e in examples]
        if len(set(y)) < 2:
            raise ValueError("MiniLMLogReg.fit needs both relevant and irrelevant examples")
        head = LogisticHead(C=self.C, class_weight="balanced", max_iter=2000, random_state=seed)
        self.head = head.fit(self._features(examples), y)
        return self

    # -- scoring --------------------------------------------------------------------------------
    def score_batch(self, examples: Sequence) -> list[float]:
        """Probability of relevant per example (shape (n,)), from the fitted weights."""
        self.require_head()
        return self.probabilities(self._features(examples)) if examples else []

    # -- state ----------------------------------------------------------------------------------
    def dump_state(self, *args, **kwargs) -> dict:
        return {"threshold": self.threshold, "features": list(self.features), "C": self.C, "fitted": self.fitted}

    def load_state(self, state: dict) -> "MiniLMLogReg":
        self.threshold = state.get("threshold")
        self.features = list(state.get("features", self.features))
        self.C = float(state.get("C", self.C))
        return self
