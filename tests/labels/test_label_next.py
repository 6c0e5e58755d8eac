"""``next_rows`` on the packaged demo labels with fast strategies: rows sampled per group with their
probabilities, rounds that continue, and the distance to a compiled decision rule."""

from __future__ import annotations

import json

import numpy as np
import pytest

from personalign.labels.next import boundary_distance, design_from_rows, next_rows
from personalign.stages import resolve_stage as get_stage
from tests.conftest import DEMO

REL = get_stage("relevance")


def _split(examples):
    held = {"demo:p5", "demo:p6", "demo:p7"}
    labelled = [ex for ex in examples if ex.prompt_id not in held]
    pool = [ex for ex in examples if ex.prompt_id in held]
    return labelled, pool


def test_next_rows_compare_two_rounds():
    labelled, pool = _split(REL.load(DEMO))
    out = next_rows(REL, labelled, pool, k=6, strategies=["bm25", "all-yes"], seed=3, folds=4)
    assert out["goal"] == "compare" and set(out["leading"]) == {"bm25", "all-yes"} and out["round"] == 1
    assert set(out["objective"]) == {"bm25", "all-yes"} and out["metric"] == "f1"
    assert out["allocation"] == {"demo:p5": 2, "demo:p6": 2, "demo:p7": 2}  # stratified: 9 rows each
    chosen = out["chosen"]
    assert len({c["index"] for c in chosen}) == 6
    for c in chosen:
        sel = c["selection"]
        assert 0 < c["selection_probability"] <= 1 and c["acquisition"] >= 0
        assert sel["stratum"] == pool[c["index"]].prompt_id and sel["stratum_size"] == 9 and sel["round"] == 1
        assert sel["floor"] == 0.1 and sel["strategies"] == out["leading"]
    assert sorted(c["selection"]["draw"] for c in chosen) == [1, 1, 1, 2, 2, 2]
    assert next_rows(REL, labelled, pool, k=6, strategies=["bm25", "all-yes"], seed=3, folds=4)["chosen"] == chosen
    # round 2: the chosen rows are labelled now (their selection records with them)
    picked = {c["index"]: c for c in chosen}
    now = labelled + [pool[i].copy(selection=c["selection"], selection_probability=c["selection_probability"])
                      for i, c in picked.items()]
    rest = [ex for i, ex in enumerate(pool) if i not in picked]
    assert design_from_rows(now)["drawn"] == {"demo:p5": 2, "demo:p6": 2, "demo:p7": 2}
    again = next_rows(REL, now, rest, k=3, strategies=["bm25", "all-yes"], seed=4, folds=4)
    assert again["round"] == 2 and sorted(c["selection"]["draw"] for c in again["chosen"]) == [3, 3, 3]
    assert {c["selection"]["stratum_size"] for c in again["chosen"]} == {9}
    assert out["estimate"] == {"note": "no row chosen by label next is labelled yet: no weighted estimate"}
    est = again["estimate"]  # round 1's rows, weighted; p1-p4 counted exactly
    assert est["n_labels"] == 36 + 6 and est["strata"] == {"demo:p5": 2, "demo:p6": 2, "demo:p7": 2}
    assert est["se"] is not None and est["ci"][0] <= est["diff"] <= est["ci"][1]
    # a pool that lost rows between rounds breaks the recorded design: said, not estimated
    assert "changed between rounds" in next_rows(REL, now, rest[1:], k=3, strategies=["bm25", "all-yes"], seed=4,
                                                 folds=4)["estimate"]["note"]


class _Rule:
    def __init__(self, rule):
        self.decision_rule = rule


def test_boundary_distance_of_each_rule_kind():
    rows = [REL.mark_inputs(__import__("dspy").Example(prompt_id="p", user_id=u, attribute="a", prompt="q"))
            for u in ("u1", "u1", "u1", "u1")]
    s = [0.1, 0.5, 0.9, 0.3]
    thr = {"kind": "threshold", "value": 0.4, "cv_objective": 0, "raw_objective": None, "n": 1, "n_groups": 1, "n_splits": 1}
    assert boundary_distance(_Rule(thr), REL, rows, s) == pytest.approx([-0.3, 0.1, 0.5, -0.1])
    top = {**thr, "kind": "top_share", "value": 0.5}  # top 2 of 4: boundary between 0.5 and 0.3
    d = boundary_distance(_Rule(top), REL, rows, s)
    assert (d > 0).tolist() == [False, True, True, False] and abs(d[1]) == pytest.approx(abs(d[3]))
    with pytest.raises(Exception, match="decision rule or a threshold"):
        boundary_distance(object(), REL, rows, s)


def test_next_rows_refuses_what_it_cannot_do():
    from personalign.errors import ConfigurationError

    labelled, pool = _split(REL.load(DEMO))
    with pytest.raises(ConfigurationError, match="at least two"):
        next_rows(REL, labelled, pool, k=2, strategies=["bm25"])
    with pytest.raises(ConfigurationError, match="--k"):
        next_rows(REL, labelled, pool, k=0, strategies=["bm25", "all-yes"])
    with pytest.raises(ConfigurationError, match="no unlabelled row"):
        next_rows(REL, labelled, [], k=2, strategies=["bm25", "all-yes"])
