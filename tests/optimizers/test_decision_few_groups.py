"""A decision rule chosen on few groups holds on a new one: no absolute threshold without the groups
to show it survives, and a yes-rate guard that never leaves a new group empty or flooded."""

from __future__ import annotations

import dspy
import numpy as np
import pytest
from sklearn.metrics import f1_score

from personalign.optimizers.decision import MIN_THRESHOLD_GROUPS, fit_decision_rule, stage_units
from personalign.programs.decision import DecisionRule, apply_rule, guard, with_rule, yes_band
from personalign.programs.program_schema import DecisionRuleRecord


def f1_of(gold):
    return lambda idx, d: f1_score([gold[i] for i in idx], list(d), zero_division=0)


def calibrated(n_groups: int, seed: int = 0, per_group: int = 40):
    """Groups whose scores are calibrated in absolute level: positives score in [1, 2], negatives
    in [a_g - 0.5, -0.5] with a spread a_g that varies by group (so a unit's median moves), and a positive
    share of 10-30%: an absolute threshold in (-0.5, 1) is perfect everywhere; no within-unit rule is."""
    rng = np.random.default_rng(seed)
    scores, groups, gold = [], [], []
    for g in range(n_groups):
        rate = 0.1 + 0.2 * (g % 3) / 2
        spread = [0.2, 6.0, 1.0, 3.0, 0.5][g % 5]
        for j in range(per_group):
            pos = j < round(rate * per_group)
            top = j == per_group - 1  # every group's highest negative sits at -0.5 exactly
            scores.append(rng.uniform(1, 2) if pos else -0.5 if top else rng.uniform(-spread, 0) - 0.5)
            groups.append(f"g{g}")
            gold.append(pos)
    return scores, groups, gold


def test_three_groups_never_choose_an_absolute_threshold_even_when_it_wins_the_folds():
    scores, groups, gold = calibrated(3)
    rule = fit_decision_rule(scores, groups, None, f1_of(gold), positives=gold)
    thr = next(c for c in rule.candidates if c["kind"] == "threshold")
    assert thr["cv_objective"] >= max(c["cv_objective"] for c in rule.candidates) - 1e-9  # it wins the folds
    assert rule.kind != "threshold"
    assert f"< {MIN_THRESHOLD_GROUPS}" in rule.reason and "3 groups" in rule.reason
    assert rule.band == pytest.approx(yes_band(np.mean(gold)))


def test_with_enough_groups_a_threshold_that_holds_on_every_group_is_chosen_and_says_why():
    scores, groups, gold = calibrated(9)
    rule = fit_decision_rule(scores, groups, None, f1_of(gold), positives=gold)
    assert rule.kind == "threshold", rule.reason
    assert "above 0" in rule.reason and "95% interval" in rule.reason
    assert np.mean([r["objective"] for r in rule.per_group]) > 0.95


def test_a_threshold_whose_held_out_yes_rates_spread_outside_the_band_is_not_chosen():
    # 9 groups, one of which holds no positives at a raised level: the threshold floods it
    scores, groups, gold = calibrated(9)
    rng = np.random.default_rng(3)
    scores += list(rng.uniform(1.2, 2.0, 40))
    groups += ["flood"] * 40
    gold += [False] * 20 + [True] * 20
    scores[-20:] = list(np.asarray(scores[-20:]) + 1.0)  # the group's positives score higher still
    rule = fit_decision_rule(scores, groups, None, f1_of(gold), positives=gold)
    assert rule.kind != "threshold"
    assert "spread over" in rule.reason


def test_the_guard_keeps_every_unit_inside_its_band_by_rank():
    scores = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0] * 2
    units = ["a"] * 10 + ["b"] * 10
    empty = [False] * 10 + [True] * 10  # unit a: nothing; unit b: everything
    out = guard(empty, scores, units, [0.1, 0.3])
    assert out[:10] == [False] * 9 + [True]  # the top 1 of a (ceil(0.1 * 10))
    assert out[10:] == [False] * 7 + [True] * 3  # the top 3 of b (floor(0.3 * 10))
    # within the band: unchanged; a unit under MIN_UNIT examples: unguarded
    ok = [False] * 8 + [True] * 2 + [False] * 8 + [True, True]
    assert guard(ok, scores, units, [0.1, 0.3]) == ok
    assert guard([False, False], [0.1, 0.2], ["c", "c"], [0.1, 0.3]) == [False, False]
    assert guard(empty, scores, units, None) == empty


def test_a_new_group_at_another_level_gets_a_selection_from_every_kind_of_rule():
    scores, groups, gold = calibrated(4)
    band = yes_band(np.mean(gold))
    new = list(np.linspace(-50, -40, 30))  # a new group far below the level a threshold was fitted on
    for kind, value in (("threshold", 0.5), ("offset", 0.9), ("zscore", 3.0), ("top_share", 0.05)):
        picked = apply_rule(kind, value, new, ["new"] * 30, min_unit=3, band=band)
        assert 1 <= sum(picked) <= band[1] * 30, kind
        assert picked[-sum(picked):] == [True] * sum(picked)  # the highest scores


def test_a_guarded_threshold_decides_by_unit_in_batches_and_round_trips_through_the_saved_schema():
    class Scored(dspy.Module):
        def forward(self, attribute, prompt):
            return dspy.Prediction(relevant=False, score=float(attribute))

    rule = DecisionRule("threshold", 100.0, 0.5, None, 40, 5, 5, unit=["prompt_id"], band=[0.1, 0.4],
                        reason="why")
    prog = with_rule(Scored(), rule, "relevant", None)
    rows = [dspy.Example(attribute=str(i), prompt="p", prompt_id=f"p{i // 10}").with_inputs("attribute", "prompt")
            for i in range(20)]
    preds = prog.predict_batch(rows)
    assert [p.relevant for p in preds[:10]] == [False] * 9 + [True]  # nothing reaches 100: the top 1
    assert prog(attribute="200", prompt="p").relevant is True  # one example: the threshold itself
    assert "yes-rate kept within 10%-40%" in rule.describe()
    record = DecisionRuleRecord(**rule.to_dict())
    assert record.band == [0.1, 0.4] and record.reason == "why"
    with pytest.raises(ValueError):
        DecisionRuleRecord(**{**rule.to_dict(), "band": [0.5, 0.1]})


def test_a_learned_scorer_on_three_prompts_gets_a_unit_rule_with_a_guard():
    """The learned-selector path (yes-prob, lm-probe, the learned heads) on 3 prompts."""
    from personalign.optimizers.learned import LearnedSelectorFit
    from personalign.programs.common.scorer import ThresholdedScorer

    class Level(ThresholdedScorer):
        output_field = "relevant"

        def fit(self, examples, *, seed=0):
            return self

        def score_batch(self, examples):
            return [float(ex.score) for ex in examples]

    scores, groups, gold = calibrated(3)
    rows = [dspy.Example(attribute=f"a{i}", prompt=g, prompt_id=g, user_id="u", relevant=y, score=s)
            .with_inputs("attribute", "prompt") for i, (s, g, y) in enumerate(zip(scores, groups, gold))]
    program, result = LearnedSelectorFit(label="relevant", group_key="prompt_id").compile(Level(), trainset=rows)
    rule = result.details["decision_rule"]
    assert rule["kind"] != "threshold" and rule["band"] is not None
    assert "< 5" in rule["reason"]
    new = [dspy.Example(attribute=f"n{i}", prompt="new", prompt_id="new", user_id="u", relevant=False,
                        score=-100.0 + i).with_inputs("attribute", "prompt") for i in range(20)]
    assert 1 <= sum(bool(p.relevant) for p in program.predict_batch(new)) <= 8
