"""The upstream traps the wrappers guard against (DSPy 3.4.1), each shown on raw DSPy and then
handled by the wrapper; plus events, over-budget reporting, the feedback metric and the result
type. The raw-DSPy tests are tripwires: when one fails, upstream changed and the guard can go."""

from __future__ import annotations

import dspy
import pytest
from dspy.utils.dummies import DummyVectorizer

from personalign.optimizers import OPTIMIZERS, CompileResult
from personalign.programs.relevance.judges import ZeroShotJudge
from tests.optimizers.conftest import REL

pytestmark = pytest.mark.filterwarnings("ignore:The custom-engine complete_legacy:DeprecationWarning")


def test_mipro_upstream_crashes_with_zero_bootstrapped_demos(tiny, dummy_lm):
    train, val = tiny
    with dspy.context(lm=dummy_lm):
        tp = dspy.MIPROv2(metric=lambda e, p, t=None: 1.0, max_bootstrapped_demos=0, max_labeled_demos=2,
                          auto=None, num_candidates=4, num_threads=1)
        with pytest.raises(ValueError, match="empty range"):
            tp.compile(ZeroShotJudge(), trainset=train, valset=val, num_trials=2, minibatch=False)


def test_mipro_wrapper_honours_zero_bootstrapped_demos(tiny, dummy_lm):
    train, val = tiny
    opt = OPTIMIZERS.create("mipro", **REL, lm=dummy_lm, auto=None, num_candidates=4, num_trials=3,
                            max_bootstrapped_demos=0, max_labeled_demos=2, score=False)
    assert opt.projection(ZeroShotJudge(), train, val)["teleprompter_parts"]["bootstrap"] == 0
    compiled, result = opt.compile(ZeroShotJudge(), trainset=train, valset=val)
    demos = compiled.judge.demos
    assert len(demos) <= 2 and not any(d.get("augmented") for d in demos)
    assert result.details["guards"] and result.actual_lm_calls <= result.projected_lm_calls


def test_mipro_seed_zero_reaches_the_sampler(tiny, dummy_lm, monkeypatch):
    import optuna

    seen = []
    real = optuna.samplers.TPESampler.__init__

    def spy(self, *args, **kwargs):
        seen.append(kwargs.get("seed"))
        real(self, *args, **kwargs)

    monkeypatch.setattr(optuna.samplers.TPESampler, "__init__", spy)
    train, val = tiny
    OPTIMIZERS.create("mipro", **REL, lm=dummy_lm, seed=0, auto=None, num_candidates=3, num_trials=2,
                      max_bootstrapped_demos=1, max_labeled_demos=1, score=False).compile(
        ZeroShotJudge(), trainset=train, valset=val)
    assert seen == [0]  # not DSPy's default 9 (``seed or self.seed``)


def test_bootstrap_rs_upstream_crashes_with_zero_bootstrapped_demos(tiny, dummy_lm):
    train, val = tiny
    with dspy.context(lm=dummy_lm):
        tp = dspy.BootstrapFewShotWithRandomSearch(metric=lambda e, p, t=None: 1.0, max_bootstrapped_demos=0,
                                                   max_labeled_demos=2, num_candidate_programs=2, num_threads=1)
        with pytest.raises(ValueError, match="empty range"):
            tp.compile(ZeroShotJudge(), trainset=train, valset=val)
    compiled, result = OPTIMIZERS.create("bootstrap-rs", **REL, lm=dummy_lm, max_bootstrapped_demos=0,
                                         max_labeled_demos=2,
                                         num_candidate_programs=2, score=False).compile(
        ZeroShotJudge(), trainset=train, valset=val)
    assert len(compiled.judge.demos) <= 2 and result.details["guards"]


def test_knn_upstream_k0_returns_every_train_example(tiny):
    from dspy.predict.knn import KNN

    train, _ = tiny
    knn = KNN(0, train, vectorizer=dspy.Embedder(DummyVectorizer()))
    assert len(knn(attribute="a", prompt="b")) == len(train)


def test_simba_bsize_capped_to_trainset(tiny, dummy_lm):
    train, val = tiny
    compiled, result = OPTIMIZERS.create("simba", **REL, lm=dummy_lm, bsize=32, num_candidates=2, max_steps=1,
                                         score=False).compile(ZeroShotJudge(), trainset=train[:5], valset=val)
    assert any("bsize" in g for g in result.details["guards"])


def test_recompiling_a_compiled_program(tiny, dummy_lm):
    train, val = tiny
    first, _ = OPTIMIZERS.create("labeled", **REL, lm=dummy_lm, k=2, score=False).compile(ZeroShotJudge(), trainset=train)
    first._compiled = True  # as BootstrapFewShot leaves it; DSPy would assert "Student must be uncompiled"
    second, _ = OPTIMIZERS.create("bootstrap", **REL, lm=dummy_lm, max_bootstrapped_demos=1, max_labeled_demos=1,
                                  score=False).compile(first, trainset=train)
    assert len(second.judge.demos) <= 1


def test_projected_event_precedes_any_lm_call(tiny, dummy_lm):
    train, val = tiny
    seen = []
    opt = OPTIMIZERS.create("bootstrap", **REL, lm=dummy_lm, max_bootstrapped_demos=2, max_labeled_demos=2,
                            on_event=lambda kind, payload: seen.append((kind, len(dummy_lm.calls), payload)))
    _, result = opt.compile(ZeroShotJudge(), trainset=train, valset=val)
    (k1, calls1, p1), (k2, calls2, p2) = seen
    assert (k1, calls1) == ("projected", 0) and k2 == "actual"
    assert p1["projected_lm_calls"] == result.projected_lm_calls and p2["actual_lm_calls"] == result.actual_lm_calls


class ThriceJudge(ZeroShotJudge):
    """Calls its one predictor three times per forward (more than the projection assumes)."""

    def forward(self, attribute, prompt):
        for _ in range(2):
            self.judge(attribute=attribute, prompt=prompt + " ")
        return super().forward(attribute, prompt)


def test_over_budget_reason(tiny, dummy_lm):
    train, val = tiny
    _, result = OPTIMIZERS.create("labeled", **REL, lm=dummy_lm, k=1).compile(ThriceJudge(), trainset=train, valset=val)
    assert result.actual_lm_calls > result.projected_lm_calls
    assert "score_before" in result.details["over_budget_reason"]
    _, ok = OPTIMIZERS.create("labeled", **REL, lm=dummy_lm, k=1, calls_per_run=6).compile(
        ThriceJudge(), trainset=train, valset=val)
    assert ok.actual_lm_calls <= ok.projected_lm_calls and "over_budget_reason" not in ok.details


def test_no_lm_is_a_configuration_error(tiny):
    from personalign.errors import ConfigurationError

    train, val = tiny
    with pytest.raises(ConfigurationError, match="needs an LM"):
        OPTIMIZERS.create("labeled", **REL).compile(ZeroShotJudge(), trainset=train, valset=val)


def test_no_metric_is_a_configuration_error(tiny, dummy_lm):
    from personalign.errors import ConfigurationError

    train, val = tiny
    with pytest.raises(ConfigurationError, match="needs metric="):
        OPTIMIZERS.create("labeled", lm=dummy_lm).compile(ZeroShotJudge(), trainset=train, valset=val)


def test_invalid_settings_raise():
    with pytest.raises(ValueError):
        OPTIMIZERS.create("copro", breadth=1)
    with pytest.raises(ValueError):
        OPTIMIZERS.create("mipro", auto=None)
    with pytest.raises(ValueError):
        OPTIMIZERS.create("gepa", max_metric_calls=10, auto="light")


def test_relevance_feedback():
    from personalign.programs.relevance.metrics import relevance_feedback

    ex = dspy.Example(attribute="The user is vegetarian.", prompt="Plan dinners.", relevant=False,
                      human_yes_rate=0.2).with_inputs("attribute", "prompt")
    fp = relevance_feedback(ex, dspy.Prediction(relevant=True))
    assert fp.score == 0.0 and "you said relevant" in fp.feedback and "20%" in fp.feedback
    ok = relevance_feedback(ex, dspy.Prediction(relevant=False), None, "judge", [])
    assert ok.score == 1.0 and ok.feedback.startswith("Correct")
    assert relevance_feedback(ex, None).score == 0.0


def test_compile_result_stays_compatible():
    r = CompileResult(optimizer="x", config={"seed": 0})
    d = r.to_dict()
    for key in ("optimizer", "config", "train_score", "val_score", "lm_calls", "seconds", "details",
                "score_before", "score_after_ci", "projected_lm_calls", "actual_lm_calls", "seed"):
        assert key in d
