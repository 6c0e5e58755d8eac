"""Stage ``violation``: loader (PrefEval option labels, JSONL), the kappa objective, compile toward
kappa through the compile service (DummyLM control flow), bad input."""

from __future__ import annotations

import json

import dspy
import pytest

from personalign.errors import DataError
from personalign.stages import resolve_stage as get_stage
from personalign.programs.violation.metrics import violation_correct

STAGE = get_stage("violation")


def _ex(v, topic="t", split="train", i=0):
    return dspy.Example(preference="I only eat vegan food.", question="Dinner?", response=f"r{i}", violates=v,
                        topic=topic, pair_id=f"{topic}{i // 2}", split=split).with_inputs(*STAGE.inputs)


def test_stage_definition_objective_is_kappa():

    assert STAGE.kind == "binary" and STAGE.positive is True and STAGE.output == "violates"
    assert STAGE.inputs == ("preference", "question", "response") and STAGE.objective.name == "kappa"


def kappa(examples, predictions):
    """The violation stage's set objective (the generic kappa objective)."""
    return STAGE.score(examples, predictions)


def test_kappa_objective_and_metric():
    exs = [_ex(False), _ex(True), _ex(False), _ex(True)]
    assert kappa(exs, [False, True, False, True]) == pytest.approx(1.0)
    assert kappa(exs, [True, False, True, False]) == pytest.approx(-1.0)
    assert kappa(exs, [False, False, False, False]) == pytest.approx(0.0)  # constant: no agreement beyond chance
    assert kappa(exs, [False, True, None, True]) < 1.0  # a failure counts as the wrong label
    assert violation_correct(exs[1], dspy.Prediction(violates=True)) == 1.0
    assert violation_correct(exs[1], None) == 0.0 and violation_correct(exs[0], {"violates": False}, trace=[]) is True


def test_prefeval_loader_pairs_are_balanced_and_split_by_topic(shared_data):
    from personalign.judge_validation import labelled_pairs

    ex = STAGE.load(shared_data / "prefeval")
    val = [e for e in ex if e.split == "val"]
    assert sum(e.violates for e in ex) * 2 == len(ex)  # one following and one violating option per question
    pairs = {}
    for e in ex:
        pairs.setdefault(e.pair_id, []).append(e.violates)
    assert all(sorted(v) == [False, True] for v in pairs.values())
    assert {e.topic for e in val} == {p.topic for p in labelled_pairs(shared_data / "prefeval", limit=8)}
    assert not {e.topic for e in val} & {e.topic for e in ex if e.split == "train"}
    assert STAGE.load(shared_data / "prefeval") == ex  # seeded


def test_jsonl_loader_and_bad_lines(tmp_path):
    good = tmp_path / "v.jsonl"
    good.write_text(json.dumps({"preference": "p", "question": "q", "response": "r", "violates": True,
                                "split": "train", "topic": "a"}) + "\n")
    (e,) = STAGE.load(good)
    assert e.violates is True and e.topic == "a" and e.split == "train" and set(e.inputs().keys()) == set(STAGE.inputs)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"preference": "p", "question": "q", "response": "r", "violates": "yes"}) + "\n")
    with pytest.raises(DataError, match=r"bad\.jsonl:1: field 'violates': expected bool"):
        STAGE.load(bad)
    with pytest.raises(DataError, match="expected a PrefEval folder"):
        (tmp_path / "x.csv").write_text("a")
        STAGE.load(tmp_path / "x.csv")


def test_compile_toward_kappa_keeps_the_uncompiled_judge_unless_dev_kappa_rises():
    """Control flow (SchemaDummyLM answers every call the same): the compile service scores the
    uncompiled and the compiled judge on held-out train topics with kappa and never returns a
    program worse on dev than the one it was given."""
    from personalign.compile_service import compile_program
    from personalign.testing import SchemaDummyLM

    train = [_ex(i % 2 == 1, topic=f"t{i % 4}", i=i) for i in range(16)]
    program, info = compile_program(STAGE, "typed", "labeled", train, lm=SchemaDummyLM(), seed=0,
                                    optimizer_settings={"k": 2})
    assert info["objective"] == "kappa"
    sel = info["details"]["selection"]
    assert [c["name"] for c in sel["candidates"]] == ["uncompiled", "labeled"] and sel["n_dev"] >= 2
    assert info["dev_objective_after"] >= info["dev_objective_before"]
    # a constant judge (the dummy says the same for every response) has dev kappa 0: the uncompiled one is kept
    assert info["chosen"] == "uncompiled" and program.predictors()[0].demos == []
