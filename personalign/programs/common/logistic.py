"""The logistic head of every learned selector: standardize, then a logistic regression.

:class:`LogisticHead` is a small scikit-learn-style estimator (configuration in ``__init__``, data
in :meth:`~LogisticHead.fit`, :meth:`~LogisticHead.get_params` derived from ``__init__``) that
wraps ``sklearn.preprocessing.StandardScaler`` + ``sklearn.linear_model.LogisticRegression`` and
keeps only four float64 arrays: ``coef`` (d,), ``intercept`` (), ``mean`` (d,), ``scale`` (d,).
Scores are computed from those arrays, ``z = ((X - mean) / scale) @ coef + intercept``, so a head
read back from its ``.npz`` file (:meth:`~LogisticHead.save` / :meth:`~LogisticHead.load`, no
pickle) scores exactly as the fitted one.

:class:`HeadWeights` is the weights half of a selector whose model is one head: ``fitted``,
``save_weights(dir)`` / ``load_weights(dir)`` on the selector's ``weights_file``.
"""

from __future__ import annotations

import inspect
import math
import os
from pathlib import Path
from typing import Any

ARRAYS = ("coef", "intercept", "mean", "scale")


def check_feature_groups(groups, known) -> None:
    """Raise ``ValueError`` naming the groups of ``groups`` that are not in ``known``."""
    bad = [g for g in groups if g not in known]
    if bad:
        raise ValueError(f"unknown feature group(s) {bad}; choose from {tuple(known)}")


def check_c(C) -> float:
    """``C`` (scikit-learn's inverse regularization strength) as a float; ``ValueError`` unless
    it is a finite number > 0 (scikit-learn's constraint on ``LogisticRegression(C)``)."""
    if isinstance(C, bool) or not isinstance(C, (int, float)) or not math.isfinite(C) or C <= 0:
        raise ValueError(f"C must be a finite number > 0, got {C!r}")
    return float(C)


class LogisticHead:
    """Standardized binary logistic regression, persisted as npz arrays.

    Args:
        C: inverse L2 regularization strength (scikit-learn's ``C``).
        class_weight: ``"balanced"`` or None (scikit-learn's ``class_weight``).
        max_iter: lbfgs iterations (scikit-learn's ``max_iter``).
        standardize: fit a ``StandardScaler`` on the training features; False keeps ``mean`` = 0
            and ``scale`` = 1 (raw features).
        random_state: scikit-learn's ``random_state`` (lbfgs is deterministic; kept for parity).

    Attributes (after :meth:`fit` or :meth:`load`): ``coef_`` (d,), ``intercept_`` (float64
    scalar array), ``mean_`` (d,), ``scale_`` (d,), all float64.
    """

    def __init__(self, C: float = 1.0, *, class_weight: str | None = None, max_iter: int = 100,
                 standardize: bool = True, random_state: int | None = 0) -> None:
        self.C = C
        self.class_weight = class_weight
        self.max_iter = max_iter
        self.standardize = standardize
        self.random_state = random_state

    # -- scikit-learn estimator protocol ---------------------------------------------------------
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The ``__init__`` arguments as set on this head (``{name: value}``)."""
        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {name: getattr(self, name) for name in names}

    def set_params(self, **params: Any) -> "LogisticHead":
        """Change ``__init__`` arguments; returns self.

        Raises:
            ValueError: a name that is not an ``__init__`` argument.
        """
        valid = self.get_params()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for LogisticHead; valid: {sorted(valid)}")
            setattr(self, name, value)
        return self

    def fit(self, X, y, sample_weight=None) -> "LogisticHead":
        """Fit on features ``X`` (n, d) and binary labels ``y`` (n,) (1 = positive class), with
        optional per-row ``sample_weight`` (n,).

        Raises:
            ValueError: ``y`` holds a single class, or shapes disagree.
        """
        import numpy as np
        from sklearn.linear_model import LogisticRegression
        from sklearn.preprocessing import StandardScaler

        y = np.asarray(y, dtype=int)
        if len(set(y.tolist())) < 2:
            raise ValueError("LogisticHead.fit needs examples of both classes")
        if self.standardize:
            scaler = StandardScaler().fit(X)
            Xs = scaler.transform(X)
            mean, scale = scaler.mean_, scaler.scale_
        else:
            Xs = X
            d = np.shape(X)[1]
            mean, scale = np.zeros(d), np.ones(d)
        clf = LogisticRegression(C=self.C, class_weight=self.class_weight, max_iter=self.max_iter,
                                 random_state=self.random_state)
        clf.fit(Xs, y, sample_weight=sample_weight)
        self.coef_ = clf.coef_[0].astype(np.float64)
        self.intercept_ = np.asarray(clf.intercept_[0], np.float64)
        self.mean_ = np.asarray(mean).astype(np.float64)
        self.scale_ = np.asarray(scale).astype(np.float64)
        return self

    @property
    def fitted(self) -> bool:
        return getattr(self, "coef_", None) is not None

    @property
    def n_features(self) -> int:
        """d, the number of features (RuntimeError when not fitted)."""
        return int(self._arrays()["coef"].shape[0])

    def _arrays(self) -> dict[str, Any]:
        if not self.fitted:
            raise RuntimeError("LogisticHead is not fitted: call fit() or load()")
        return {"coef": self.coef_, "intercept": self.intercept_, "mean": self.mean_, "scale": self.scale_}

    def decision_function(self, X):
        """Logits ``((X - mean) / scale) @ coef + intercept``, float64 of shape (n,).

        Raises:
            RuntimeError: not fitted.
        """
        w = self._arrays()
        return ((X - w["mean"]) / w["scale"]) @ w["coef"] + w["intercept"]

    def predict_proba(self, X):
        """``[[P(0), P(1)], ...]``, float64 of shape (n, 2), ``P(1) = 1 / (1 + exp(-logit))``."""
        import numpy as np

        p = 1.0 / (1.0 + np.exp(-self.decision_function(X)))
        return np.stack([1.0 - p, p], axis=1)

    # -- persistence (npz, no pickle) --------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        """Write the four arrays to the ``.npz`` file ``path`` (parent created); returns the path.

        Raises:
            RuntimeError: not fitted.
        """
        import numpy as np

        arrays = self._arrays()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, **arrays)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike, n_features: int, **params: Any) -> "LogisticHead":
        """A head read from ``path`` (``allow_pickle=False``), ``coef``/``mean``/``scale`` of shape
        (``n_features``,); ``params`` are ``__init__`` arguments (not stored in the file).

        Raises:
            DataError: missing or invalid file, missing array, wrong shape or dtype, NaN or
                infinity, ``scale`` <= 0 (names the file and the array).
        """
        from personalign.programs._weights import read_npz

        d = int(n_features)
        w = read_npz(path, {"coef": (d,), "intercept": (), "mean": (d,), "scale": (d,)}, positive=("scale",))
        return cls.from_arrays(**w, **params)

    @classmethod
    def from_arrays(cls, coef, intercept, mean=None, scale=None, **params: Any) -> "LogisticHead":
        """A head with the given weights (``mean`` defaults to 0, ``scale`` to 1: raw features)."""
        import numpy as np

        head = cls(**params)
        head.coef_ = np.asarray(coef, dtype=np.float64).reshape(-1)
        head.intercept_ = np.asarray(intercept, dtype=np.float64).reshape(())
        d = head.coef_.shape[0]
        head.mean_ = np.zeros(d) if mean is None else np.asarray(mean, dtype=np.float64)
        head.scale_ = np.ones(d) if scale is None else np.asarray(scale, dtype=np.float64)
        return head

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"LogisticHead({args})"


class HeadWeights:
    """Mixin: the weights of a selector whose model is one :class:`LogisticHead` in ``self.head``.

    The selector sets ``weights_file`` (file name inside the saved program's directory), ``fit_with``
    (the optimizer named in errors) and implements ``feature_dim() -> int`` from its own settings
    (so a weights file of another feature set is refused on load).
    """

    weights_file: str = "logistic_head.npz"
    fit_with: str = "LearnedSelectorFit"
    head: LogisticHead | None = None

    def feature_dim(self) -> int:
        raise NotImplementedError

    @property
    def fitted(self) -> bool:
        return self.head is not None

    def require_head(self) -> LogisticHead:
        """The fitted head.

        Raises:
            RuntimeError: not fitted nor loaded.
        """
        if self.head is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted: compile it with {self.fit_with} "
                               "or load_weights()")
        return self.head

    def probabilities(self, X) -> list[float]:
        """P(positive) per row of the feature matrix ``X`` (n, d), as floats."""
        return [float(v) for v in self.require_head().predict_proba(X)[:, 1]]

    def save_weights(self, directory: str | os.PathLike) -> Path:
        """Write ``weights_file`` into ``directory`` (created); returns its path.

        Raises:
            RuntimeError: not fitted.
        """
        if self.head is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted: nothing to save")
        return self.head.save(Path(directory) / self.weights_file)

    def load_weights(self, directory: str | os.PathLike):
        """Read ``weights_file`` from ``directory`` (``allow_pickle=False``); returns self.

        Raises:
            DataError: missing or invalid weights file (names the file and the array).
        """
        self.head = LogisticHead.load(Path(directory) / self.weights_file, self.feature_dim())
        return self


class LogisticSelector(HeadWeights):
    """Mixin: a learned selector = features -> one class-balanced :class:`LogisticHead`.

    The selector sets ``features`` (its feature groups), ``C``, ``threshold`` and implements
    ``feature_matrix(examples) -> (n, d) array``, ``is_positive(example) -> bool`` (the class the
    score is the probability of) and ``feature_dim()``; ``classes`` names (positive, negative) in
    the single-class error; ``max_iter`` is the lbfgs budget.
    """

    classes: tuple[str, str] = ("positive", "negative")
    max_iter: int = 3000

    def feature_matrix(self, examples):
        raise NotImplementedError

    def is_positive(self, example) -> bool:
        raise NotImplementedError

    def fit(self, examples, *, seed: int = 0):
        """Fit the head (scaler + class-balanced logistic regression) on ``examples``; returns self.

        Raises:
            ValueError: ``examples`` hold a single class.
        """
        y = [bool(self.is_positive(e)) for e in examples]
        if len(set(y)) < 2:
            raise ValueError(f"{type(self).__name__}.fit needs both {self.classes[0]} and {self.classes[1]} examples")
        head = LogisticHead(C=self.C, class_weight="balanced", max_iter=self.max_iter, random_state=seed)
        self.head = head.fit(self.feature_matrix(examples), y)
        return self

    def score_batch(self, examples) -> list[float]:
        """P(positive class) per example, shape (n,).

        Raises:
            RuntimeError: not fitted nor loaded.
        """
        self.require_head()
        return self.probabilities(self.feature_matrix(examples)) if examples else []

    def dump_state(self, *args, **kwargs) -> dict:
        return {"threshold": self.threshold, "features": list(self.features), "C": self.C, "fitted": self.fitted}

    def load_state(self, state: dict):
        self.threshold = state.get("threshold")
        self.features = list(state.get("features", self.features))
        self.C = float(state.get("C", self.C))
        return self


__all__ = ["ARRAYS", "HeadWeights", "LogisticHead", "LogisticSelector", "check_feature_groups"]
