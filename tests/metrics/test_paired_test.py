"""The compare table's p is a test of the objective's difference (issue 37, "one honest p column"):
a paired permutation test swapping the two strategies' predictions whole per group, computed from
swapped confusion counts equal to scikit-learn's objectives; its header names it; McNemar, where it
is still shown (old result files), is labelled a test of accuracy."""

from __future__ import annotations

import numpy as np
import pytest

from personalign.metrics.paired import (comparison_test, confusion_cells, objective_of_counts, p_header, p_parts,
                                        permutation_test_of_totals, describe_test)
from tests.conftest import ROOT

OWN = ROOT / "examples" / "own_task"


def _stage(tmp_path, objective: str = "f1", multiclass: bool = False):
    from personalign.stages.ref import resolve_stage

    text = (OWN / "stage.toml").read_text().replace('objective = "f1"', f'objective = "{objective}"')
    if multiclass:
        text = text.replace('kind = "binary"', 'kind = "multiclass"').replace('type = "bool"',
                                                                              'type = ["yes", "no", "partly"]')
    (tmp_path / "st.toml").write_text(text)
    return resolve_stage(str(tmp_path / "st.toml"))


def _examples(st, tmp_path, multiclass: bool = False):
    if not multiclass:
        return st.load(OWN / "data.jsonl")
    import json

    labels = ["yes", "no", "partly"]
    rows = [json.loads(line) for line in (OWN / "data.jsonl").read_text().splitlines() if line.strip()]
    path = tmp_path / "mc.jsonl"
    path.write_text("".join(json.dumps({**r, "follows": labels[i % 3]}) + "\n" for i, r in enumerate(rows)))
    return st.load(path)


@pytest.mark.parametrize("name", ["accuracy", "kappa", "macro_f1", "fbeta"])
def test_confusion_count_forms_equal_scikit_learn(name):
    from sklearn.metrics import accuracy_score, cohen_kappa_score, f1_score, fbeta_score

    rng = np.random.default_rng(3)
    labs = ["a", "b", "c", "failed"]
    gold, pred = rng.choice(labs[:3], 300), rng.choice(labs, 300)
    counts = np.eye(16)[confusion_cells(gold, pred, labs)].sum(axis=0).reshape(4, 4)
    got = objective_of_counts(name, counts, positive=0, beta=2.0, gold_present=[0, 1, 2])
    want = {"accuracy": accuracy_score(gold, pred), "kappa": cohen_kappa_score(gold, pred),
            "macro_f1": f1_score(gold, pred, labels=["a", "b", "c"], average="macro", zero_division=0),
            "fbeta": fbeta_score(gold == "a", pred == "a", beta=2.0, zero_division=0)}[name]
    assert got == pytest.approx(want, abs=1e-12)


def test_whole_group_swaps_are_exact_and_the_smallest_p_is_two_over_two_to_the_g():
    rng = np.random.default_rng(0)
    gold = rng.random(120) < 0.4
    better, worse = gold.copy(), np.ones(120, dtype=bool)  # a perfect system against always-yes
    labs, eye = [True, False], np.eye(4)
    f1 = lambda t: objective_of_counts("f1", t.reshape(*t.shape[:-1], 2, 2), positive=0)  # noqa: E731
    out = permutation_test_of_totals(eye[confusion_cells(gold, better, labs)], eye[confusion_cells(gold, worse, labs)],
                                     f1, np.repeat(np.arange(6), 20))
    assert out["exact"] and out["n_resamples"] == 64 and out["n_clusters"] == 6
    assert out["p_value"] == pytest.approx(2 / 64) and out["p_min"] == pytest.approx(2 / 64)
    assert out["diff"] == pytest.approx(1.0 - 2 * gold.mean() / (1 + gold.mean()))
    same = permutation_test_of_totals(eye[confusion_cells(gold, worse, labs)], eye[confusion_cells(gold, worse, labs)],
                                      f1, np.repeat(np.arange(6), 20))
    assert same["p_value"] == 1.0 and same["diff"] == 0.0


def test_equal_accuracy_different_f1_is_significant_where_mcnemar_says_one(tmp_path):
    """The issue's report: Δ F1 large beside p = 1 (McNemar, a test of accuracy, under an F1 header)."""
    from personalign.evaluation import paired_comparison, stage_report

    st = _stage(tmp_path)
    ex = _examples(st, tmp_path)  # 60 rows, 10 topics, half of each topic follows
    yes, no = ({**stage_report(st, ex, [v] * len(ex), n_boot=50), "predictions": [v] * len(ex)} for v in (True, False))
    cmp = paired_comparison(st, yes, no, n_boot=50, examples=ex)
    assert cmp["mcnemar"]["p_value"] == 1.0 and cmp["mcnemar"]["of"] == "accuracy"  # 30 vs 30 discordant rows
    test = cmp["paired_test"]
    assert test["statistic"] == "f1" and test["unit"] == "topic" and test["exact"] and test["n_clusters"] == 10
    assert test["diff"] == pytest.approx(2 / 3) == pytest.approx(cmp["diff"]["diff"])
    assert test["p_value"] == pytest.approx(2 / 2 ** 10)
    text, notes = p_parts(cmp)
    assert float(text) == pytest.approx(test["p_value"], rel=1e-2) and "McNemar" not in " ".join(notes)
    assert describe_test(test) == "paired permutation of f1 over topics"
    # without groups the rows themselves are swapped (Monte Carlo beyond 2^13 swaps)
    rows = {**yes, "cluster_levels": {"names": [], "levels": []}}
    items = paired_comparison(st, rows, no, n_boot=50, examples=ex)["paired_test"]
    assert items["unit"] == "item" and not items["exact"] and items["p_value"] < 0.001
    assert describe_test(items) == "paired permutation of f1 over rows"


@pytest.mark.parametrize("objective,multiclass", [("kappa", True), ("macro_f1", True), ("accuracy", False),
                                                  ("fbeta:2", False)])
def test_the_tested_difference_is_the_objectives_and_the_slow_path_agrees(objective, multiclass, tmp_path,
                                                                          monkeypatch):
    import personalign.evaluation as evaluation

    st = _stage(tmp_path, objective, multiclass)
    ex = _examples(st, tmp_path, multiclass)
    topics = list(dict.fromkeys(e.topic for e in ex))[:7]
    ex = [e for e in ex if e.topic in topics]  # 7 topics: 128 swaps, few enough for the slow path to enumerate
    rng = np.random.default_rng(1)
    gold = [st.gold(e) for e in ex]
    choices = ["yes", "no", "partly"] if multiclass else [True, False]
    pa = [g if rng.random() < 0.8 else rng.choice(choices).item() for g in gold]
    pb = [g if rng.random() < 0.5 else rng.choice(choices).item() for g in gold]
    pb[0] = None  # a failure counts as the wrong label in both paths
    ra, rb = (evaluation.stage_report(st, ex, p, n_boot=20) for p in (pa, pb))
    ra["predictions"], rb["predictions"] = pa, pb
    fast = evaluation.objective_test(st, ex, ra, rb)
    assert fast["statistic"] == st.objective.name
    assert fast["diff"] == pytest.approx(st.score(ex, pa) - st.score(ex, pb), abs=1e-12)
    monkeypatch.setattr(evaluation, "_objective_totals", lambda *a: None)  # the objective recomputed per swap
    slow = evaluation.objective_test(st, ex, ra, rb)
    assert slow["exact"] and fast["exact"] and fast["n_resamples"] == 128
    assert slow["p_value"] == pytest.approx(fast["p_value"]) and slow["diff"] == pytest.approx(fast["diff"])


def test_headers_name_the_test_for_new_and_old_results():
    new = {"strategies": [{"name": "a"}, {"name": "b", "vs_first": {
        "diff": {"metric": "f1", "diff": 0.5, "permutation": {"p_value": 0.5, "p_min": 0.125}},
        "paired_test": {"test": "paired permutation", "statistic": "f1", "unit": "prompt_id", "p_value": 0.0156,
                        "p_min": 0.0156, "exact": True, "n_clusters": 7}, "mcnemar": {"p_value": 1.0}}}]}
    assert p_header(new) == "p (paired permutation of f1 over prompts)"
    assert p_parts(new["strategies"][1]["vs_first"])[0] == "0.0156"
    old = {"strategies": [{"name": "a"}, {"name": "b", "vs_first": {
        "diff": {"diff": 0.5, "permutation": {"p_value": 0.25, "p_min": 0.25}, "p_holm": 0.5}}}]}
    assert p_header(old) == "p (sign-flip over clusters)"
    assert p_parts(old["strategies"][1]["vs_first"]) == ("0.5", ["Holm", "min 0.25",
                                                                 "too few clusters to show a difference"])
    only_mcnemar = {"strategies": [{"name": "a"}, {"name": "b", "vs_first": {"diff": {"diff": 0.1},
                                                                           "mcnemar": {"p_value": 0.3}}}]}
    assert p_header(only_mcnemar) == "p (McNemar, item-level: a test of accuracy)"
    assert p_parts(only_mcnemar["strategies"][1]["vs_first"]) == ("0.3", ["McNemar, item-level: a test of accuracy"])
    cv = {"diff": 0.2, "permutation": {"test": "sign-flip", "statistic": "f1", "unit": "prompt_id", "p_value": 0.03,
                                       "p_min": 0.0156}}
    assert describe_test(comparison_test(cv)[0]) == "sign-flip of per-prompt f1 differences"
