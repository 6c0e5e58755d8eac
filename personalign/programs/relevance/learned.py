"""Learned selector: logistic regression on MiniLM features of attribute, prompt and their interaction.

Source of the approach: the seed study's finding that selectors trained on human labels beat
prompted LLM judges; here the cheapest trained selector -- frozen all-MiniLM-L6-v2 embeddings
(:func:`personalign.programs.common.embed.embed_cached`, L2-normalized, 384-d) and scikit-learn's
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

from personalign.programs.common.embed import embed_cached
from personalign.programs.common.logistic import LogisticSelector, check_c, check_feature_groups
from personalign.programs.relevance._scorer import RelevanceScorer

FEATURE_GROUPS = ("attribute", "prompt", "product", "absdiff", "cosine")
DEFAULT_FEATURES = ("attribute", "product", "absdiff", "cosine")
WEIGHTS_FILE = "minilm_logreg.npz"


def pair_features(attributes: Sequence[str], prompts: Sequence[str], groups: Sequence[str] = FEATURE_GROUPS):
    """MiniLM feature matrix, float32 of shape (n, d) with d = 384 per vector group + 1 for cosine.

    Raises:
        ValueError: unknown feature group or unequal lengths.
    """
    import numpy as np

    check_feature_groups(groups, FEATURE_GROUPS)
    if len(attributes) != len(prompts):
        raise ValueError(f"{len(attributes)} attributes vs {len(prompts)} prompts")
    uniq = sorted(set(attributes) | set(prompts))
    index = {t: i for i, t in enumerate(uniq)}
    vecs = embed_cached(uniq)
    a = vecs[[index[t] for t in attributes]] if attributes else np.zeros((0, vecs.shape[1]), np.float32)
    p = vecs[[index[t] for t in prompts]] if prompts else np.zeros((0, vecs.shape[1]), np.float32)
    parts = {"attribute": a, "prompt": p, "product": a * p, "absdiff": np.abs(a - p),
             "cosine": np.sum(a * p, axis=1, keepdims=True)}
    return np.concatenate([parts[g] for g in groups], axis=1).astype(np.float32)


class MiniLMLogReg(LogisticSelector, RelevanceScorer):
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

    optimizer = "personalign.optimizers.learned:LearnedSelectorFit"  # its own fit (trainable)

    fit_with = "LearnedSelectorFit"

    uses_lm = False
    weights_file = WEIGHTS_FILE
    classes = ("relevant", "irrelevant")
    max_iter = 2000

    def __init__(self, features: Sequence[str] = DEFAULT_FEATURES, C: float = 0.01,
                 threshold: float | None = None) -> None:
        super().__init__()
        check_feature_groups(features, FEATURE_GROUPS)
        self.features = list(features)
        self.C = check_c(C)
        self.threshold = threshold
        self.head = None  # LogisticHead once fitted or loaded

    def feature_dim(self) -> int:
        return 384 * sum(g != "cosine" for g in self.features) + ("cosine" in self.features)

    def feature_matrix(self, examples: Sequence):
        """(n, d) float32 MiniLM features of the examples' (attribute, prompt) pairs."""
        return pair_features([e.attribute for e in examples], [e.prompt for e in examples], self.features)

    def is_positive(self, example) -> bool:
        return bool(example.relevant)
