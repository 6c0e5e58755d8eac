"""programs/common: LogisticHead, grouped CV, the thresholded scorer, token budgets on lm.count_tokens."""

from __future__ import annotations

import zipfile

import dspy
import numpy as np
import pytest

from personalign.errors import DataError, UnknownModelError
from personalign.lm import TINY_MODEL
from personalign.programs.common.cv import group_of, grouped_folds, out_of_fold_scores
from personalign.programs.common.logistic import HeadWeights, LogisticHead
from personalign.programs.common.scorer import ThresholdedScorer


def _data(n=120, d=6, seed=7):
    rng = np.random.default_rng(seed)
    X = rng.normal(loc=3.0, scale=[0.5, 1, 2, 4, 8, 16][:d], size=(n, d))
    y = (X[:, 0] - 3 + 0.3 * rng.normal(size=n) > 0.4).astype(int)  # unbalanced, ~20% positive
    return X, y


def _old_copy_scores(X, y, Xnew, *, C, max_iter, seed):
    """The code the three selectors carried before LogisticHead, verbatim."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(X)
    clf = LogisticRegression(C=C, class_weight="balanced", max_iter=max_iter, random_state=seed)
    clf.fit(scaler.transform(X), y)
    w = {"coef": clf.coef_[0].astype(np.float64), "intercept": np.asarray(clf.intercept_[0], np.float64),
         "mean": scaler.mean_.astype(np.float64), "scale": scaler.scale_.astype(np.float64)}
    z = ((Xnew - w["mean"]) / w["scale"]) @ w["coef"] + w["intercept"]
    return w, 1.0 / (1.0 + np.exp(-z))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_logistic_head_matches_the_former_copies_bit_for_bit(dtype):
    X, y = _data()
    X = X.astype(dtype)
    w, p_old = _old_copy_scores(X[:80], y[:80], X[80:], C=0.1, max_iter=3000, seed=0)
    head = LogisticHead(C=0.1, class_weight="balanced", max_iter=3000, random_state=0).fit(X[:80], y[:80])
    p = head.predict_proba(X[80:])
    assert p.shape == (40, 2)
    np.testing.assert_array_equal(p[:, 1], p_old)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    for name in ("coef", "intercept", "mean", "scale"):
        np.testing.assert_array_equal(getattr(head, f"{name}_"), w[name])
    z = head.decision_function(X[80:])
    assert z.shape == (40,) and z.dtype == np.float64
    np.testing.assert_array_equal(z > 0, p[:, 1] > 0.5)
    # and it agrees with scikit-learn's own decision function on the standardized features
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    sc = StandardScaler().fit(X[:80])
    clf = LogisticRegression(C=0.1, class_weight="balanced", max_iter=3000, random_state=0).fit(sc.transform(X[:80]), y[:80])
    tol = 1e-10 if dtype == np.float64 else 1e-5  # scikit-learn standardizes float32 input in float32
    np.testing.assert_allclose(z, clf.decision_function(sc.transform(X[80:])), rtol=tol, atol=tol)


def test_logistic_head_params_are_derived_from_init():
    head = LogisticHead(C=0.5, class_weight="balanced", max_iter=10)
    assert head.get_params() == {"C": 0.5, "class_weight": "balanced", "max_iter": 10, "standardize": True,
                                 "random_state": 0}
    assert head.set_params(C=2.0) is head and head.get_params()["C"] == 2.0
    with pytest.raises(ValueError, match="invalid parameter 'alpha'"):
        head.set_params(alpha=1)
    assert "LogisticHead(C=2.0" in repr(head)


def test_logistic_head_errors():
    X, y = _data()
    with pytest.raises(ValueError, match="both classes"):
        LogisticHead().fit(X, np.zeros(len(X)))
    with pytest.raises(RuntimeError, match="not fitted"):
        LogisticHead().decision_function(X)
    assert not LogisticHead().fitted and LogisticHead().fit(X, y).fitted


def test_logistic_head_npz_round_trip_without_pickle(tmp_path):
    X, y = _data()
    head = LogisticHead(C=0.3, class_weight="balanced", max_iter=500).fit(X, y)
    path = head.save(tmp_path / "sub" / "head.npz")
    assert path == tmp_path / "sub" / "head.npz"
    with np.load(path, allow_pickle=False) as z:  # plain numeric arrays: loads with pickle off
        assert sorted(z.files) == ["coef", "intercept", "mean", "scale"]
        assert z["coef"].shape == (6,) and z["intercept"].shape == () and z["coef"].dtype == np.float64
    back = LogisticHead.load(path, n_features=6, C=0.3)
    assert back.get_params()["C"] == 0.3 and back.n_features == 6
    np.testing.assert_array_equal(back.decision_function(X), head.decision_function(X))
    with pytest.raises(DataError, match="shape"):
        LogisticHead.load(path, n_features=5)


def test_logistic_head_refuses_pickled_arrays(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, coef=np.array([object()], dtype=object), intercept=np.asarray(0.0), mean=np.zeros(1),
             scale=np.ones(1))
    with pytest.raises(DataError, match="pickled"):
        LogisticHead.load(path, n_features=1)
    assert zipfile.is_zipfile(path)


def test_logistic_head_without_standardization_is_the_raw_logistic():
    X, y = _data()
    head = LogisticHead(class_weight="balanced", standardize=False).fit(X, y)
    np.testing.assert_array_equal(head.mean_, np.zeros(6))
    np.testing.assert_array_equal(head.scale_, np.ones(6))
    raw = LogisticHead.from_arrays(head.coef_, head.intercept_)
    np.testing.assert_array_equal(raw.decision_function(X), X @ head.coef_ + head.intercept_)


class _Toy(HeadWeights, ThresholdedScorer):
    """A rejecting scorer on one feature (``x``), to exercise both common bases."""

    output_field = "accepted"
    positive_output = False
    weights_file = "toy.npz"

    def __init__(self):
        super().__init__()
        self.head = None

    def feature_dim(self):
        return 1

    def score_batch(self, examples):
        self.require_head()
        return self.probabilities(np.array([[e.x] for e in examples], dtype=float))

    def explain(self, examples, scores, decisions):
        return [{"rationale": f"x={e.x}"} for e in examples]


def test_head_weights_and_thresholded_scorer(tmp_path):
    toy = _Toy()
    with pytest.raises(RuntimeError, match="_Toy is not fitted: compile it with LearnedSelectorFit"):
        toy.score_batch([dspy.Example(x=1.0)])
    with pytest.raises(RuntimeError, match="nothing to save"):
        toy.save_weights(tmp_path)
    toy.head = LogisticHead(class_weight="balanced").fit(np.array([[0.0], [1.0], [2.0], [3.0]]), [0, 0, 1, 1])
    with pytest.raises(RuntimeError, match="_Toy has no threshold: compile it with LearnedSelectorFit first"):
        toy.predict_batch([dspy.Example(x=1.0)])
    toy.threshold = 0.5
    preds = toy.predict_batch([dspy.Example(x=0.0), dspy.Example(x=3.0)])
    assert [p.accepted for p in preds] == [True, False]  # high score = rejected
    assert preds[1].score > 0.5 > preds[0].score and preds[1].rationale == "x=3.0"
    assert toy(x=3.0).accepted is False
    toy.save_weights(tmp_path)
    fresh = _Toy().load_weights(tmp_path)
    assert fresh.fitted
    np.testing.assert_array_equal(fresh.head.coef_, toy.head.coef_)


# -- grouped CV ---------------------------------------------------------------------------------
@pytest.mark.parametrize("n_groups, max_folds, n_folds", [(3, 5, 3), (5, 5, 5), (9, 4, 4)])
def test_grouped_folds_hold_each_group_out_of_its_own_training(n_groups, max_folds, n_folds):
    groups = [f"g{i % n_groups}" for i in range(40)]
    folds = grouped_folds(groups, max_folds=max_folds)
    assert len(folds) == n_folds
    seen = []
    for tr, te in folds:
        assert not {groups[i] for i in tr} & {groups[i] for i in te}
        assert sorted(tr + te) == list(range(40))
        seen += te
    assert sorted(seen) == list(range(40))  # each item held out exactly once


def test_grouped_folds_errors():
    with pytest.raises(ValueError, match="needs >= 2 groups, got 1"):
        grouped_folds(["a", "a"])
    with pytest.raises(ValueError, match="max_folds must be >= 2"):
        grouped_folds(["a", "b"], max_folds=1)


def test_out_of_fold_scores_uses_the_labels_and_groups_passed_in():
    examples = list(range(12))
    groups = ["a"] * 4 + ["b"] * 4 + ["c"] * 4
    labels = [True, False] * 4 + [False] * 4  # training without a or b still has both classes

    calls = []

    def fit_and_score(tr, te):
        calls.append((tr, te))
        return [float(x) for x in te]

    scores, facts = out_of_fold_scores(fit_and_score, examples, groups=groups, labels=labels)
    for tr, te in calls:
        assert not {groups[i] for i in tr} & {groups[i] for i in te}
    assert [f["held_out"] for f in facts] == [["a"], ["b"], ["c"]]
    assert len(calls) == 3 and scores == [float(x) for x in examples]  # every fold's training has both classes
    assert facts[0]["auc"] == 0.25 and "auc" not in facts[2]  # a: positives score 0, 2 vs 1, 3; c: one class
    # single-class training part: not fitted, scores = the training positive rate
    labels2 = [True] * 4 + [False] * 8
    scores2, facts2 = out_of_fold_scores(fit_and_score, examples, groups=groups, labels=labels2)
    assert facts2[0]["skipped"] == "single class" and scores2[:4] == [0.0] * 4
    with pytest.raises(ValueError, match="12 examples vs 11 groups"):
        out_of_fold_scores(fit_and_score, examples, groups=groups[:-1], labels=labels)


def test_group_of_key_then_fallback():
    assert group_of(dspy.Example(prompt_id="p1", prompt="text"), "prompt_id", fallback="prompt") == "p1"
    assert group_of(dspy.Example(prompt="text"), "prompt_id", fallback="prompt") == "text"
    assert group_of({"group": 3}, "group") == "3"
    with pytest.raises(ValueError, match="no group field 'group' nor 'prompt'"):
        group_of(dspy.Example(x=1), "group", fallback="prompt")


# -- token counts and budgets ---------------------------------------------------------------------
class _FakeEngine:
    def count_tokens(self, text):
        return len(text.split())

    def render(self, messages):
        return " ".join(m["content"] for m in messages), []


def test_count_tokens_goes_through_the_engine(monkeypatch):
    import personalign.lm as lm
    import personalign.lm._engine as engine
    from personalign.programs.common.budget import token_budget

    monkeypatch.setattr(engine, "get_engine", lambda model: _FakeEngine())
    assert lm.count_tokens("one two three", TINY_MODEL) == 3
    assert lm.prompt_tokens([{"role": "user", "content": "a b"}, {"role": "user", "content": "c"}], TINY_MODEL) == 3
    budget = token_budget(TINY_MODEL, 4)
    assert budget.unit == "tokens" and budget.fits("a b c d") and not budget.fits("a b c d e")
    with pytest.raises(UnknownModelError, match="no local tokenizer for 'openai/gpt-4o-mini'"):
        lm.count_tokens("x", "openai/gpt-4o-mini")


def test_lm_import_stays_light():
    import subprocess
    import sys

    code = ("import sys, personalign.lm as lm; lm.count_tokens; "
            "print(any(m in sys.modules for m in ('llama_cpp', 'personalign.lm._engine', 'dspy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_count_tokens_on_the_tiny_model():
    from personalign.lm import count_tokens
    from personalign.lm._engine import get_engine

    text = "The user enjoys hiking in the mountains."
    n = count_tokens(text, TINY_MODEL)
    assert 5 <= n <= len(text)
    assert n == len(get_engine(TINY_MODEL).llm.tokenize(text.encode(), add_bos=False, special=True))
    assert count_tokens("", TINY_MODEL) == 0
