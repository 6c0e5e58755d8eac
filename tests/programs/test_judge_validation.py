"""Judges validated against PrefEval's option labels: pairs, figures, usability (DummyLM / fakes)."""

from __future__ import annotations

import dspy
import pytest
from dspy.utils.dummies import DummyLM

from personalign.judge_validation import (
    JudgeUnusable,
    labelled_pairs,
    require_usable,
    usable,
    validate_pairwise_judge,
    validate_violation_judge,
    verdict,
)


@pytest.fixture(scope="module")
def pairs(shared_data):
    return labelled_pairs(shared_data / "prefeval", split="val", limit=12, seed=0)


def test_pairs_follow_the_authors_labels(shared_data, pairs):
    from personalign.data import load_prefeval

    records = {r.user_id: r for r in load_prefeval(shared_data / "prefeval", "mcq")}
    assert len(pairs) == 12 and len({p.topic for p in pairs}) == 4  # stratified over the 4 val topics
    for p in pairs:
        rec = records[p.user_id]
        assert p.follows == rec.mcq_options[0] and p.violates in rec.mcq_options[1:]
        assert p.preference == rec.preference
        assert (p.response_a, p.response_b) == ((p.follows, p.violates) if p.follow_first else (p.violates, p.follows))
    assert 0 < sum(p.follow_first for p in pairs) < 12  # both positions hold the following option
    again = labelled_pairs(shared_data / "prefeval", split="val", limit=12, seed=0)
    assert [(p.id, p.violates, p.follow_first) for p in again] == [(p.id, p.violates, p.follow_first) for p in pairs]


class _Oracle(dspy.Module):
    def __init__(self, follows):
        super().__init__()
        self.follows = set(follows)

    def forward(self, preference, question, response):
        return dspy.Prediction(violates=response not in self.follows)


def test_violation_judge_perfect_and_constant(pairs):
    good = validate_violation_judge(pairs, judge=_Oracle(p.follows for p in pairs), n_boot=100)
    assert good["accuracy"] == 1.0 and good["kappa"] == 1.0 and good["usable"] is True
    assert good["n_items"] == 24 and good["violates_rate"] == 0.5 and good["flip_rate"] is None
    lm = DummyLM([{"violates": True}] * 24)
    const = validate_violation_judge(pairs, lm=lm, n_boot=100)
    assert const["accuracy"] == 0.5 and const["kappa"] == 0.0 and const["violates_rate"] == 1.0
    assert const["usable"] is False and const["lm_calls"] == 24
    with pytest.raises(JudgeUnusable, match="violation judge unusable"):
        require_usable(const, "violation judge")
    require_usable(good)


def test_pairwise_position_bias_is_measured_and_debiased_to_ties(pairs):
    lm = DummyLM([{"rating": 2}] * 24)  # "A is better" whatever A is
    rep = validate_pairwise_judge(pairs, lm=lm, n_boot=100)
    gold_a = sum(p.follow_first for p in pairs) / len(pairs)
    assert rep["before"]["a_rate"] == 1.0 and rep["before"]["flip_rate"] == 1.0
    assert rep["before"]["accuracy"] == pytest.approx(gold_a, abs=1e-4)
    assert rep["after"]["tie_rate"] == 1.0 and rep["after"]["accuracy"] == 0.0 and rep["after"]["flip_rate"] == 0.0
    assert rep["usable"] is False and rep["lm_calls"] == 24 and rep["n_scored"] == 12


class _PairOracle:
    def __init__(self, follows, strength=2):
        self.follows, self.strength = set(follows), strength

    def rate(self, profile, prompt, attribute, response_a, response_b):
        r_ab = 3 - self.strength if response_a in self.follows else 3 + self.strength
        return {"r_ab": r_ab, "r_ba": 6 - r_ab}


def test_pairwise_oracle_is_usable(pairs):
    rep = validate_pairwise_judge(pairs, judge=_PairOracle(p.follows for p in pairs), n_boot=100)
    for k in ("before", "after"):
        assert rep[k]["accuracy"] == 1.0 and rep[k]["kappa"] == 1.0 and rep[k]["flip_rate"] == 0.0
    assert rep["usable"] and rep["kappa_ci"][0] > 0


class _ExpectedOracle:
    """Says "4" in both orders (pure position bias) but leans toward the following response in
    its expected rating, as a small model does."""

    def __init__(self, follows):
        self.follows = set(follows)

    def rate(self, profile, prompt, attribute, response_a, response_b):
        e_ab = 3.7 if response_a in self.follows else 4.3
        e_ba = 3.7 if response_b in self.follows else 4.3
        return {"r_ab": 4, "r_ba": 4, "e_ab": e_ab, "e_ba": e_ba}


def test_pairwise_expected_ratings_recover_what_integer_verdicts_tie(pairs):
    rep = validate_pairwise_judge(pairs, judge=_ExpectedOracle(p.follows for p in pairs), n_boot=100)
    assert rep["after"]["tie_rate"] == 0.0 and rep["after"]["accuracy"] == 1.0 and rep["after"]["flip_rate"] == 0.0
    assert rep["before"]["a_rate"] == 0.0 and rep["before"]["flip_rate"] == 1.0
    assert rep["usable"] is True


def test_expected_judge_falls_back_to_integer_ratings_without_logprobs():
    from personalign.programs.judge.pairwise import ExpectedPairwiseJudge

    with dspy.context(lm=DummyLM([{"rating": 2}, {"rating": 5}])):
        row = ExpectedPairwiseJudge().rate("p", "q", "attr", "a", "b")
    assert (row["r_ab"], row["r_ba"], row["e_ab"], row["e_ba"]) == (2, 5, 2.0, 5.0)
    assert row["score"] == pytest.approx(1.5) and row["rating"] == 2


def test_verdict_and_usable():
    assert [verdict(r) for r in (1, 2.5, 3, 3.5, 5)] == ["A", "A", "tie", "B", "B"]
    assert usable({"kappa_ci": [0.01, 0.3]}) and not usable({"kappa_ci": [0.0, 0.3]}) and not usable({"kappa_ci": None})
    # a positive kappa is not enough: the 1.5B's debiased integer pairwise judge (ties 93%) measured this
    assert not usable({"kappa_ci": [0.0062, 0.0753], "accuracy_ci": [0.0167, 0.1333]})
    assert usable({"kappa_ci": [0.2, 0.5], "accuracy_ci": [0.61, 0.77]})
    assert not usable({"kappa_ci": [0.2, 0.5], "accuracy_ci": None})


def test_bad_limit_and_unknown_judge(shared_data):
    from personalign.errors import ConfigurationError
    from personalign.judge_validation import validate_judges

    with pytest.raises(ConfigurationError):
        labelled_pairs(shared_data / "prefeval", limit=0)
    with pytest.raises(ConfigurationError, match="unknown judge"):
        validate_judges(shared_data / "prefeval", judges=("oracle",), lm=DummyLM([]))


def test_refusal_lines():
    from personalign.judge_validation import refusal

    assert refusal({"kappa": 0.4, "kappa_ci": [0.2, 0.6]}) is None
    assert refusal({"kappa": 0.1, "kappa_ci": [0.01, 0.2], "accuracy": 0.4, "accuracy_ci": [0.3, 0.5]}).startswith(
        "judge unusable")
    assert refusal({"kappa": 0.0, "kappa_ci": [-0.1, 0.1]}, "violation judge").startswith(
        "judge unusable: against PrefEval's option labels the violation judge's kappa 0.0 (95% CI [-0.1, 0.1])")
    assert refusal(None, "answer judge") == "judge unusable: the answer judge was not validated against labels"


def test_generation_without_a_usable_judge_never_calls_it(shared_data):
    from personalign.runners.prefeval import generation_examples, run_generation

    exs = generation_examples(shared_data / "prefeval", split="val", limit=2, seed=0)
    lm = DummyLM([{"response": "Here is a plan."}] * 2)  # two generations; a judge call would exhaust it
    out = run_generation(exs, ["generic"], lm=lm, n_boot=20, score=False)
    row = out["strategies"][0]
    assert row["violation_rate"] is None and row["violation_rate_ci"] is None and row["judge_failures"] == 0
    assert len(lm.history) == 2


def test_violation_report_carries_sensitivity_and_corrects_a_follow_rate(pairs):
    from personalign.judge_validation import JudgeUnusable, corrected_follow_rate

    good = validate_violation_judge(pairs, judge=_Oracle(p.follows for p in pairs), n_boot=100)
    assert good["sensitivity_follows"] == 1.0 and good["specificity_follows"] == 1.0
    assert len(good["items"]["gold_follows"]) == good["n_items"] == len(good["items"]["pair"])
    # a perfect judge needs no correction: the corrected rate is the observed one
    r = corrected_follow_rate([True, False, True, True], good, n_boot=200)
    assert r["corrected"] == pytest.approx(0.75) and r["sensitivity"] == 1.0
    with pytest.raises(JudgeUnusable):
        corrected_follow_rate([True], {**good, "kappa_ci": [-0.1, 0.2]})
