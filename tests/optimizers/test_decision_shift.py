"""Decision rules that survive a new prompt: synthetic scores whose level moves from group to group."""

from __future__ import annotations

import dspy
import numpy as np
import pytest
from sklearn.metrics import f1_score

from personalign.optimizers.decision import fit_decision_rule, stage_units
from tests.optimizers.test_decision import MarginJudge
from personalign.programs.decision import (DecidedProgram, DecisionRule, UnitRuleProgram, apply_rule,
                                            fallback_threshold, normalize, with_rule)


def shifted(prompt_shift=(0.0, 3.0, -2.0, 5.0), user_shift=0.0, users=5, per_user=10, seed=0):
    """4 prompts x ``users`` users x ``per_user`` attributes, 2 relevant per user; a relevant
    attribute scores 1.5 higher than the user's others; each prompt (and optionally each user)
    has its own level."""
    rng = np.random.default_rng(seed)
    rows = []
    for p, ps in enumerate(prompt_shift):
        for u in range(users):
            us = rng.normal(0, user_shift) if user_shift else 0.0
            for j in range(per_user):
                gold = j < 2
                rows.append(dspy.Example(prompt_id=f"p{p}", user_id=f"u{u}", relevant=gold,
                                         attribute=f"attr {p} {u} {j}", prompt=f"prompt {p}",
                                         score=ps + us + (1.5 if gold else 0.0) + rng.normal(0, 0.3)))
    return rows


def f1_of(gold):
    return lambda idx, d: f1_score([gold[i] for i in idx], list(d), zero_division=0)


def fit(rows, **kw):
    gold = [bool(r.relevant) for r in rows]
    return fit_decision_rule([r.score for r in rows], [r.prompt_id for r in rows], None, f1_of(gold),
                             units=stage_units(rows, "prompt_id", ("prompt_id", "user_id")), **kw)


def by_candidate(rule):
    return {(c["kind"], c["unit"]): c for c in rule.candidates}


def test_a_raw_threshold_fails_across_prompt_levels_and_a_normalized_rule_transfers():
    rows = shifted()
    rule = fit(rows)
    cands = by_candidate(rule)
    raw = cands[("threshold", None)]
    assert raw["cv_objective"] < 0.6 and raw["worst"] < 0.4  # a threshold from 3 prompts misses the 4th
    assert rule.kind in ("top_share", "zscore", "offset") and rule.cv_objective > 0.9
    assert rule.cv_objective - raw["cv_objective"] > 0.3
    # leave-one-prompt-out: one held-out figure per prompt, all of them good
    assert sorted(r["group"] for r in rule.per_group) == ["p0", "p1", "p2", "p3"] and rule.n_splits == 4
    assert min(r["objective"] for r in rule.per_group) > 0.8
    assert all(0.1 < r["yes_rate"] < 0.35 for r in rule.per_group)
    # a new prompt at a level never seen: the fitted rule still finds its positives
    new = shifted(prompt_shift=(40.0,), seed=9)
    units = [rule.unit_of(r) for r in new]
    pred = apply_rule(rule.kind, rule.value, [r.score for r in new], units, min_unit=rule.min_unit)
    assert f1_score([r.relevant for r in new], pred) > 0.85
    thr = fit(rows, kinds=("threshold",)).value
    assert all(r.score >= thr for r in new)  # the raw threshold says yes to every pair


def test_the_unit_is_chosen_among_group_key_and_decision_keys():
    rows = shifted(prompt_shift=(0.0, 0.0, 0.0, 0.0), user_shift=3.0)  # each user's own level
    rule = fit(rows)
    cands = by_candidate(rule)
    assert rule.unit == ["prompt_id", "user_id"], (rule.kind, rule.unit)
    finer = max(c["cv_objective"] for (k, u), c in cands.items() if u == "prompt_id+user_id")
    coarser = max(c["cv_objective"] for (k, u), c in cands.items() if u == "prompt_id")
    assert finer > coarser + 0.2


def test_normalize_and_fallback_threshold():
    s = [1.0, 2.0, 3.0, 11.0, 12.0, 13.0]
    g = ["a", "a", "a", "b", "b", "b"]
    assert np.allclose(normalize("offset", s, g), [-1, 0, 1, -1, 0, 1])
    z = normalize("zscore", s, g)
    assert np.allclose(z[:3], z[3:]) and z[0] < 0 < z[2]
    assert np.allclose(normalize("zscore", [5.0, 5.0], ["x", "x"]), 0.0)  # a flat unit: no signal
    with pytest.raises(ValueError, match="kind"):
        normalize("top_share", s, g)
    assert fallback_threshold("offset", 0.5, s, g) == pytest.approx(7.5)  # median of 2.5 and 12.5
    assert fallback_threshold("top_share", 0.34, s, g) == pytest.approx(7.0)  # 2nd largest of each: 2, 12
    with pytest.raises(ValueError, match="kind"):
        DecisionRule("rank", 0.5, 0.9, None, 10, 2, 2)


class Scored(dspy.Module):
    def forward(self, attribute, prompt):
        return dspy.Prediction(relevant=False, score=float(attribute.split()[-1]))


def test_a_single_call_uses_the_documented_fallback_and_says_so():
    rule = DecisionRule("zscore", 0.4, 0.9, None, 40, 4, 4, unit=["prompt_id", "user_id"], min_unit=3, fallback=2.0)
    prog = with_rule(Scored(), rule, "relevant", None)
    assert isinstance(prog, UnitRuleProgram)
    one = prog(attribute="a 2.5", prompt="p")
    assert one.relevant is True
    assert one.decision_note == ("fallback threshold 2 (no pool of 3 or more to normalize against; "
                                 "batch prediction uses zscore@prompt_id+user_id)")
    assert prog(attribute="a 1.5", prompt="p").relevant is False
    exs = [dspy.Example(attribute=f"a {s}", prompt="p", prompt_id="x", user_id="u").with_inputs("attribute", "prompt")
           for s in (10.0, 11.0, 12.0, 13.0)]
    preds = prog.predict_batch(exs)  # a pool: normalized inside it, no fallback note
    assert [p.relevant for p in preds] == [False, False, True, True]
    assert not any("decision_note" in p for p in preds)
    mixed = exs + [dspy.Example(attribute="a 2.5", prompt="q", prompt_id="y", user_id="u").with_inputs("attribute", "prompt")]
    assert "fallback" in prog.predict_batch(mixed)[-1].decision_note


def test_a_negative_class_scorer_gets_its_output_inverted():
    rule = DecisionRule("threshold", 0.5, 0.9, None, 10, 2, 2)
    prog = with_rule(Scored(), rule, "accepted", None, positive=False)
    assert isinstance(prog, DecidedProgram)
    assert prog(attribute="a 0.7", prompt="p").accepted is False  # high score = reject
    assert prog(attribute="a 0.1", prompt="p").accepted is True


def test_rule_round_trips_through_its_dict_and_old_rules_still_load():
    rule = fit(shifted())
    again = DecisionRule.from_dict(rule.to_dict())
    assert again == rule
    old = DecisionRule.from_dict({"kind": "top_share", "value": 0.2, "cv_objective": 0.5, "raw_objective": 0.1,
                                  "n": 10, "n_groups": 2, "n_splits": 2})
    assert old.unit is None and old.fallback is None and old.min_unit == 1


def _shifted_scorer_cls():
    from personalign.programs.relevance._scorer import RelevanceScorer

    class LevelShifted(RelevanceScorer):
        """A scorer that thresholds a raw score (like yes-prob), its level moving with the prompt."""

        uses_lm = False

        def fit(self, examples, *, seed=0):
            return self

        def score_batch(self, examples):
            return [float(e.score) for e in examples]

    return LevelShifted


def test_learned_selector_fit_gives_a_raw_score_scorer_the_rule_chosen_leave_one_prompt_out():
    from personalign.optimizers.learned import LearnedSelectorFit

    rows = shifted()
    cls = _shifted_scorer_cls()
    opt = LearnedSelectorFit(label="relevant", group_key="prompt_id", decision_keys=("prompt_id", "user_id"))
    compiled, result = opt.compile(cls(), trainset=rows[:150], valset=rows[150:])
    rule = result.details["decision_rule"]
    assert rule["kind"] != "threshold" and isinstance(compiled, UnitRuleProgram)
    assert len(rule["per_group"]) == 3 and rule["cv_objective"] > 0.9
    assert result.val_score > 0.85  # the 4th prompt sits 5 above the others
    baseline, res_t = LearnedSelectorFit(label="relevant", group_key="prompt_id", decision="threshold").compile(cls(), trainset=rows[:150], valset=rows[150:])
    assert isinstance(baseline, cls) and res_t.val_score < 0.5
    preds = compiled.predict_batch(rows[150:])
    assert f1_score([r.relevant for r in rows[150:]], [p.relevant for p in preds]) == pytest.approx(result.val_score)
    with pytest.raises(ValueError, match="decision"):
        LearnedSelectorFit(label="relevant", group_key="prompt_id", decision="rank")


class ShiftedMarginJudge(MarginJudge):
    """:class:`MarginJudge` (an LM call per example, always says no) whose margin ranks the gold
    well inside each prompt group but sits at a level of its own per group."""

    def forward(self, attribute, prompt):
        pred = super().forward(attribute=attribute, prompt=prompt)
        pred["score"] = pred.score + 4.0 * int(prompt.split()[-1].rstrip("."))
        return pred


def test_compile_chooses_a_unit_rule_when_the_level_moves_between_prompts(dummy_lm):
    from personalign.compile_service import compile_program
    from personalign.stages import resolve_stage
    STAGE = resolve_stage("relevance")
    from personalign.testing.tasks import imbalanced_examples

    program, info = compile_program(STAGE, "zero-shot", "labeled", imbalanced_examples(), lm=dummy_lm, seed=0,
                                    optimizer_settings={"k": 0}, program=ShiftedMarginJudge())
    rule = info["details"]["selection"]["decision_rule"]
    assert rule is not None and rule["kind"] in ("top_share", "zscore", "offset"), rule and rule["kind"]
    assert isinstance(program, UnitRuleProgram)
    cands = {(c["kind"], c["unit"]): c for c in rule["candidates"]}
    assert rule["cv_objective"] > cands[("threshold", None)]["cv_objective"] + 0.2
    assert len(rule["per_group"]) == rule["n_groups"] >= 3  # one held-out figure per prompt group
    assert "leave-one-group-out" in info["reason"]


def test_choose_by_auc_ranks_candidates_by_their_scores_not_their_decisions():
    """Toward ranking: a candidate whose decisions are constant (the judge says no to every pair)
    but whose score ranks best wins by AUC; ties go to the uncompiled program; with a candidate
    missing its AUC the objective decides and the reason says so."""
    from personalign.compile_service import choose

    cands = [{"name": "uncompiled", "objective": 0.40, "auc": 0.80, "constant": False},
             {"name": "labeled", "objective": 0.00, "auc": 0.91, "constant": True},
             {"name": "labeled#2", "objective": 0.55, "auc": 0.70, "constant": False}]
    best, why = choose(cands, by="auc")
    assert best["name"] == "labeled" and "ROC AUC" in why
    assert choose(cands)[0]["name"] == "labeled#2"  # by the objective (constant excluded)
    tie = [{**cands[0], "auc": 0.9}, {**cands[1], "auc": 0.9}]
    assert choose(tie, by="auc")[0]["name"] == "uncompiled"
    best, why = choose([cands[0], {**cands[2], "auc": None}], by="auc")
    assert best["name"] == "labeled#2" and "no AUC" in why


def test_compile_toward_ranking_records_each_candidates_auc(dummy_lm):
    from personalign.compile_service import compile_program
    from personalign.errors import ConfigurationError
    from personalign.stages import resolve_stage
    STAGE = resolve_stage("relevance")
    from personalign.testing.tasks import imbalanced_examples

    program, info = compile_program(STAGE, "zero-shot", "labeled", imbalanced_examples(), lm=dummy_lm, seed=0,
                                    optimizer_settings={"k": 0, "select_by": "auc"}, program=ShiftedMarginJudge())
    sel = info["details"]["selection"]
    assert sel["select_by"] == "auc"
    aucs = [c["auc"] for c in sel["candidates"]]
    assert all(a is not None and 0.0 <= a <= 1.0 for a in aucs)
    assert sel["chosen"].startswith("uncompiled") and "ROC AUC" in sel["reason"]  # k=0: same scores, tie
    with pytest.raises(ConfigurationError, match="select_by"):
        compile_program(STAGE, "zero-shot", "labeled", imbalanced_examples(), lm=dummy_lm, seed=0,
                        optimizer_settings={"select_by": "f1"}, program=ShiftedMarginJudge())
