"""Decision calibration: grouped-CV threshold / top share, saved with the program, fitted in compile."""

from __future__ import annotations

import json
import random

import dspy

from personalign.stages import resolve_stage as get_stage
import numpy as np
import pytest
from sklearn.metrics import f1_score

from personalign.optimizers.decision import (DecidedProgram, DecisionRule, TopShareProgram, apply_rule,
                                             fit_decision_rule, with_rule)


def f1_of(gold):
    return lambda idx, decisions: f1_score([gold[i] for i in idx], list(decisions), zero_division=0)


def test_threshold_rule_beats_a_program_that_always_says_no():
    rng = random.Random(0)
    gold = [i % 5 == 0 for i in range(100)]
    scores = [(1.0 if g else 0.0) + rng.gauss(0, 0.3) for g in gold]
    groups = [i // 10 for i in range(100)]
    rule = fit_decision_rule(scores, groups, [False] * 100, f1_of(gold), kinds=("threshold",))
    assert rule is not None and rule.kind == "threshold"
    assert rule.raw_objective == 0.0 and rule.cv_objective > 0.7
    assert 0.0 < rule.value < 1.0
    assert rule.n_groups == 10 and rule.n_splits == 5


def test_top_share_wins_when_each_group_has_its_own_scale():
    # one positive per group of 5, the highest score of its group; the groups' scales differ, so no
    # single threshold separates them
    gold, scores, groups = [], [], []
    for g in range(12):
        for j in range(5):
            gold.append(j == 0)
            scores.append(g * 10 + (5.0 if j == 0 else float(j)))
            groups.append(g)
    rule = fit_decision_rule(scores, groups, [True] * 60, f1_of(gold))
    assert rule is not None and rule.kind == "top_share", rule
    assert rule.cv_objective == pytest.approx(1.0)
    assert apply_rule("top_share", rule.value, scores, groups) == gold


def test_no_rule_when_it_does_not_beat_the_program_out_of_fold():
    gold = [i % 4 == 0 for i in range(40)]
    scores = list(np.random.default_rng(0).normal(size=40))  # noise
    groups = [i // 4 for i in range(40)]
    assert fit_decision_rule(scores, groups, gold, f1_of(gold)) is None  # the program is already perfect
    assert fit_decision_rule(scores, [0] * 40, [False] * 40, f1_of(gold)) is None  # one group: no CV
    assert fit_decision_rule([0.5] * 40, groups, [False] * 40, f1_of(gold)) is None  # constant scores


class Scored(dspy.Module):
    def forward(self, attribute, prompt):
        return dspy.Prediction(relevant=False, score=float(attribute.split()[-1]))


def test_decided_programs_apply_their_rule():
    rule = DecisionRule("threshold", 0.5, 0.9, 0.0, 10, 5, 5)
    prog = with_rule(Scored(), rule, "relevant", None)
    assert isinstance(prog, DecidedProgram) and prog.decision_rule["value"] == 0.5
    assert prog(attribute="a 0.7", prompt="p").relevant is True
    assert prog(attribute="a 0.2", prompt="p").relevant is False
    top = with_rule(Scored(), {**rule.to_dict(), "kind": "top_share", "value": 0.5}, "relevant",
                    get_stage("relevance").decision_group)
    assert isinstance(top, TopShareProgram)
    exs = [dspy.Example(attribute=f"a {s}", prompt="p", prompt_id=g, user_id=u).with_inputs("attribute", "prompt")
           for s, g, u in ((1, "x", "u"), (2, "x", "u"), (3, "y", "u"), (9, "y", "u"), (4, "y", "v"), (5, "y", "v"))]
    # ranked within each (prompt_id, user_id) unit: the top half of each of x/u, y/u, y/v
    assert [p.relevant for p in top.predict_batch(exs)] == [False, True, False, True, False, True]


def test_a_decision_rule_is_saved_in_the_program_json_and_reapplied_on_load(tmp_path):
    from personalign.programs.export import prompt_text
    from personalign.programs.saved import load_program, save_program
    from personalign.programs.relevance.judges import ZeroShotJudge

    rule = DecisionRule("threshold", 0.25, 0.7, 0.5, 30, 6, 5)
    prog = with_rule(ZeroShotJudge(), rule, "relevant", get_stage("relevance").decision_group)
    save_program(prog, tmp_path, stage="relevance", strategy="zero-shot")
    saved = json.loads((tmp_path / "program.json").read_text())
    rule_saved = saved["metadata"]["personalign"]["decision_rule"]
    assert rule_saved["kind"] == "threshold" and rule_saved["value"] == 0.25
    assert "judge" in saved  # the strategy's own state (DSPy's layout), not the wrapper's
    loaded, meta = load_program(tmp_path)
    assert isinstance(loaded, DecidedProgram) and loaded.decision_rule == rule.to_dict()
    text = prompt_text(loaded)
    assert "## decision rule" in text and "score >= 0.25" in text and "### instructions" in text
    assert "no calibrated threshold" in prompt_text(ZeroShotJudge())
    fitted = Scored()
    fitted.threshold = 0.3
    assert "yes when score >= 0.3 (the strategy's fitted threshold)" in prompt_text(fitted)
    assert "has no LM prompt" in prompt_text(Scored())


class MarginJudge(dspy.Module):
    """A binary LLM program with a score: an LM call per example (so compile can select), and a
    margin from a hidden gold map that its own decision ignores (it always says no)."""

    uses_lm = True

    def __init__(self):
        super().__init__()
        from personalign.signatures.relevance import RelevanceSignature

        self.judge = dspy.Predict(RelevanceSignature)

    def forward(self, attribute, prompt):
        self.judge(attribute=attribute, prompt=prompt)
        i = int(attribute.split("attr-")[1].rstrip("."))
        return dspy.Prediction(relevant=False, score=(1.0 if i % 5 == 0 else 0.0) + (i % 7) * 0.01)


def test_compile_calibrates_a_scored_binary_program(dummy_lm):
    from personalign.compile_service import compile_program
    from personalign.stages import resolve_stage
    STAGE = resolve_stage("relevance")
    from tests.optimizers.test_objectives import examples

    program, info = compile_program(STAGE, "zero-shot", "labeled", examples(), lm=dummy_lm, seed=0,
                                    optimizer_settings={"k": 0}, program=MarginJudge())
    rule = info["details"]["selection"]["decision_rule"]
    assert rule is not None and info["chosen"].endswith("+rule"), info["reason"]
    assert isinstance(program, DecidedProgram)
    assert info["dev_objective_after"] > info["dev_objective_before"] == 0.0
    assert "decision rule" in info["reason"]
    sel = info["details"]["selection"]
    # calibrated by grouped CV on train: dev plus every fit example (no demos with k=0)
    assert sel["n_calibration"] == sel["n_dev"] + sel["n_fit"] and sel["calibration_lm_calls"] == sel["n_fit"]


def test_calibration_leaves_out_the_programs_own_demos(dummy_lm):
    from personalign.compile_service import _calibrate, dev_split, score_on
    from personalign.stages import resolve_stage
    STAGE = resolve_stage("relevance")
    from tests.optimizers.test_objectives import examples

    fit, dev = dev_split(examples(), 0, STAGE.group_key)
    program = MarginJudge()
    program.judge.demos = [fit[0], fit[3], fit[5]]
    with dspy.context(lm=dummy_lm):
        chosen = score_on(STAGE, program, dev, name="labeled")
        decided, rule, calls, n_calib, dev_after = _calibrate(STAGE, chosen, program, dev, fit, dummy_lm)
    assert calls == len(fit) - 3 and n_calib == len(dev) + len(fit) - 3
    assert rule is not None and isinstance(decided, DecidedProgram) and 0.0 <= dev_after <= 1.0


def test_decision_rule_none_keeps_the_programs_own_decisions(dummy_lm):
    from personalign.compile_service import compile_program
    from personalign.errors import ConfigurationError
    from personalign.stages import resolve_stage
    STAGE = resolve_stage("relevance")
    from tests.optimizers.test_objectives import examples

    program, info = compile_program(STAGE, "zero-shot", "labeled", examples(), lm=dummy_lm, seed=0,
                                    optimizer_settings={"k": 0, "decision_rule": "none"}, program=MarginJudge())
    assert info["details"]["selection"]["decision_rule"] is None and not isinstance(program, DecidedProgram)
    with pytest.raises(ConfigurationError, match="decision_rule must be"):
        compile_program(STAGE, "zero-shot", "labeled", examples(), lm=dummy_lm,
                        optimizer_settings={"decision_rule": "sometimes"})
