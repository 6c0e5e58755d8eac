"""Set-level objectives in compiling: a constant predictor never wins, a compile is never worse on dev.

The task is imbalanced (20% positive) and deterministic. ``CollapsingLM``
(:mod:`personalign.testing.tasks`, a schema-following DummyLM) answers the relevance signature
from a hidden gold map:

* for the program as written (the original instructions, no demos) it is right on 90% of the
  examples (one negative in ten is called relevant) -- a non-constant program with a real F1;
* for any *changed* program (demos, or instructions a teleprompter rewrote) it answers the
  majority label, always: ~80% accurate, so DSPy's mean metric likes it, and its F1 is 0.

Every registered teleprompter is run through :func:`personalign.compile_service.compile_program`
for each binary objective (F1 in ``test_conformance.py``, by
:class:`personalign.testing.OptimizerTestCase`; the others here); the returned program must not be
constant on dev and must score at least the uncompiled program's dev objective.
"""

from __future__ import annotations

import dataclasses

import dspy
import pytest

from personalign.compile_service import choose, compile_program
from personalign.stages.objective import balanced_metric, get_objective, is_constant
from personalign.optimizers import OPTIMIZERS
from personalign.stages import resolve_stage
RELEVANCE = resolve_stage("relevance")
from personalign.testing.tasks import GOLD, N, CollapsingLM, check_no_constant_winner
from personalign.testing.tasks import imbalanced_examples as examples
from tests.optimizers.test_conformance import small_settings

pytestmark = pytest.mark.filterwarnings("ignore:The custom-engine complete_legacy:DeprecationWarning")

# the binary objectives, each on a stage that declares it (F2 of the *negative* class too)
STAGES = {
    "f1": RELEVANCE,
    "f2": dataclasses.replace(RELEVANCE, name="relevance-f2", objective=get_objective("fbeta:2", "binary")),
    "f2-negative": dataclasses.replace(RELEVANCE, name="relevance-f2neg", objective=get_objective("fbeta:2", "binary"), positive=False,
                                       positive_name="irrelevant"),
}
TELEPROMPTERS = OPTIMIZERS.names(kind="teleprompter")


@pytest.mark.parametrize("objective", [o for o in STAGES if o != "f1"])  # f1: test_conformance.py
@pytest.mark.parametrize("optimizer", TELEPROMPTERS)
def test_a_constant_program_never_wins_a_compile(objective, optimizer):
    info = check_no_constant_winner(STAGES[objective], optimizer, small_settings(optimizer))
    if optimizer == "bootstrap-rs":  # runners-up of the teleprompter's own search are candidates too
        assert any(c["name"].startswith("bootstrap-rs#") for c in info["details"]["selection"]["candidates"])


def test_a_better_compiled_program_is_chosen():
    train = examples()
    lm = CollapsingLM(better_with_demos=True)
    program, info = compile_program(RELEVANCE, "zero-shot", "labeled", train, lm=lm, seed=0,
                                    optimizer_settings={"k": 2})
    assert info["chosen"] == "labeled", info["reason"]
    assert info["dev_objective_after"] > info["dev_objective_before"]
    assert sum(len(p.demos) for p in program.predictors()) == 2


def test_the_inner_metric_is_balanced_accuracy():
    from sklearn.metrics import balanced_accuracy_score

    train = examples()
    metric = balanced_metric(RELEVANCE, RELEVANCE.metric_fn(), train)
    gold = [ex.relevant for ex in train]
    for preds in ([False] * N, [True] * N, [GOLD[i] != (i % 7 == 0) for i in range(N)]):
        mean = sum(metric(ex, dspy.Prediction(relevant=p)) for ex, p in zip(train, preds)) / N
        assert mean == pytest.approx(balanced_accuracy_score(gold, preds))
    # a constant predictor's balanced mean is 0.5, below an 80%-right one
    assert sum(metric(ex, dspy.Prediction(relevant=False)) for ex in train) / N == pytest.approx(0.5)
    # with a trace (bootstrap's demo filter) the pass/fail is unchanged
    assert metric(train[0], dspy.Prediction(relevant=train[0].relevant), trace=[]) is True


def test_choose_excludes_constant_candidates_and_prefers_the_uncompiled_on_ties():
    cands = [{"name": "uncompiled", "objective": 0.3, "constant": False},
             {"name": "x", "objective": 0.5, "constant": True},
             {"name": "y", "objective": 0.3, "constant": False}]
    best, why = choose(cands)
    assert best["name"] == "uncompiled" and "constant" in why
    best, _ = choose([{**cands[0], "constant": True}, cands[2]])
    assert best["name"] == "y"


def test_objectives_over_sets():
    train = examples()
    gold = [ex.relevant for ex in train]
    assert RELEVANCE.score(train, gold) == 1.0
    assert RELEVANCE.score(train, [False] * N) == 0.0
    assert is_constant(RELEVANCE, [False] * N) and not is_constant(RELEVANCE, gold)
    assert is_constant(RELEVANCE, [None] * N)
    # a failure counts as the wrong label
    assert RELEVANCE.score(train[:5], [True, None, False, False, False]) == pytest.approx(2 / 3)
    assert RELEVANCE.score(train[:5], [None, False, False, False, False]) == 0.0
    from sklearn.metrics import fbeta_score

    preds = [GOLD[i] or i % 3 == 0 for i in range(N)]
    assert STAGES["f2"].score(train, preds) == pytest.approx(fbeta_score(gold, preds, beta=2))
    assert STAGES["f2-negative"].score(train, preds) == pytest.approx(
        fbeta_score([not g for g in gold], [not p for p in preds], beta=2))


def test_judge_kappa_objective_rewards_agreement_not_a_constant_rating():
    from personalign.stages import resolve_stage
    JUDGE = resolve_stage("judge")

    exs = [dspy.Example(ratings={"a": r, "b": 6 - r}) for r in (1, 2, 3, 4, 5, 1, 5, 2)]
    agree = [dict(ex.ratings) for ex in exs]
    constant = [{"a": 3, "b": 3} for _ in exs]
    assert JUDGE.objective.name == "verdict_kappa"
    assert JUDGE.score(exs, agree) == pytest.approx(1.0)
    assert JUDGE.score(exs, constant) == pytest.approx(0.0)
    assert JUDGE.score(exs, [None] * len(exs)) < 0  # a failure is the wrong verdict


def test_judge_objective_reads_the_unrounded_score_not_the_rounded_rating():
    """pairwise-expected's debiased scores sit near 3 (2.97 rounds to a tie): the objective must
    see which side of 3 they fall on, as validation and every win rate do."""
    from personalign.stages import resolve_stage
    JUDGE = resolve_stage("judge")
    from personalign.programs.judge.metrics import weighted_kappa

    exs = [dspy.Example(ratings={"p": g}) for g in (1, 5, 1, 5, 1, 5, 1, 5)]
    near = [{"ratings": {"p": 3}, "scores": {"p": 3.0 + (0.03 if g == 5 else -0.03)}}
            for g in (1, 5, 1, 5, 1, 5, 1, 5)]
    wrong = [{"ratings": {"p": 3}, "scores": {"p": 3.0 + (-0.03 if g == 5 else 0.03)}}
             for g in (1, 5, 1, 5, 1, 5, 1, 5)]
    assert JUDGE.score(exs, near) == pytest.approx(1.0)
    assert JUDGE.score(exs, wrong) == pytest.approx(-1.0)
    assert weighted_kappa(exs, near) == pytest.approx(0.0)  # what the rounded ratings would have said


def test_mean_objectives_are_the_stage_metric_mean():
    from personalign.stages import resolve_stage
    MCQ = resolve_stage("mcq")

    exs = [dspy.Example(gold_index=i % 3) for i in range(9)]
    assert MCQ.objective.name == "accuracy"
    assert MCQ.score(exs, [i % 3 for i in range(9)]) == 1.0
    assert MCQ.score(exs, [0] * 9) == pytest.approx(3 / 9)


def test_every_stage_declares_a_valid_objective():
    from personalign.stages import all_stages

    names = {s.name: s.objective.name for s in all_stages().values()}
    assert names["relevance"] == "f1" and names["verification"] == "f2"
    assert names["extraction"] == "recall" and names["mcq"] == "accuracy" and names["judge"] == "verdict_kappa"
    assert names["perspectives"] == "win_rate"
    with pytest.raises(ValueError, match="unknown objective"):
        get_objective("auc", "binary")
    with pytest.raises(ValueError, match="needs kind binary"):
        get_objective("f1", "scored")
    with pytest.raises(ValueError, match="beta must be a finite number"):
        get_objective("fbeta:inf", "binary")
    with pytest.raises(ValueError, match="beta must be a finite number"):
        get_objective("fbeta:1e309", "binary")


def test_the_compile_summary_reports_the_choice():
    from personalign.compile_service import summary, summary_line

    _, info = compile_program(RELEVANCE, "zero-shot", "labeled", examples(), lm=CollapsingLM(), seed=0,
                              optimizer_settings={"k": 2})
    s = summary(info)
    assert s["objective"] == "f1" and s["chosen"] == "uncompiled" and s["dev_before"] == s["dev_after"] > 0
    assert s["warnings"] == ["labeled predicts a single class on dev"]
    line = summary_line("zero-shot@labeled", info)
    assert line.startswith(f"zero-shot@labeled: dev f1 {s['dev_before']:.3f} -> {s['dev_after']:.3f}, chose uncompiled")
    assert "(constant)" in line and f"{s['actual_lm_calls']} actual / {s['expected_lm_calls']} expected (at most {s['projected_lm_calls']})" in line
    assert summary(None) is None and summary_line("x", {"optimizer": None}) is None


def test_judge_objective_reads_the_per_example_score_run_program_returns():
    """run_program keeps the output field (bare ratings) and the Prediction's ``score`` apart; the
    objective must get the score through, or a compile could not see pairwise-expected's verdicts."""
    from personalign.stages import resolve_stage
    JUDGE = resolve_stage("judge")

    golds = (1, 5, 1, 5, 5, 1)
    exs = [dspy.Example(ratings={"p": g}) for g in golds]
    bare = [{"p": 3} for _ in golds]  # every score rounds to a tie
    scores = [3.0 + (0.02 if g == 5 else -0.02) for g in golds]
    assert JUDGE.score(exs, bare) == pytest.approx(0.0)
    assert JUDGE.score(exs, bare, scores=scores) == pytest.approx(1.0)
    assert JUDGE.score(exs, [None] + bare[1:], scores=[None] + scores[1:]) < 1.0  # a failure is wrong
