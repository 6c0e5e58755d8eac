"""Agreement figures on cases small enough to check by hand, and ``merge_labels`` on rows."""

from __future__ import annotations

import pytest

from personalign.labels.agreement import agreement, fleiss, krippendorff_alpha, vs_rest

# 3 annotators x 4 items: (yes, yes, yes), (no, no, no), (yes, yes, no), (no, no, yes)
THREE = {"i1": {"a": True, "b": True, "c": True}, "i2": {"a": False, "b": False, "c": False},
         "i3": {"a": True, "b": True, "c": False}, "i4": {"a": False, "b": False, "c": True}}


def test_fleiss_by_hand():
    # per-item agreement 1, 1, 1/3, 1/3 -> mean 2/3; yes share 6/12 -> chance 1/2; kappa = (2/3 - 1/2) / (1/2)
    out = fleiss(THREE)
    assert out["kappa"] == pytest.approx(1 / 3) and out["n_items"] == 4 and out["raters_per_item"] == 3


def test_fleiss_uses_the_most_common_number_of_annotators():
    items = {**THREE, "i5": {"a": True, "b": False}}
    out = fleiss(items)
    assert out["n_items"] == 4 and out["raters_per_item"] == 3 and out["kappa"] == pytest.approx(1 / 3)


def test_krippendorff_by_hand():
    # coincidences: o_yy = o_nn = 4, o_yn = o_ny = 2; D_o = 4/12, D_e = 2*6*6/(12*11) -> alpha = 1 - 11/18
    out = krippendorff_alpha(THREE)
    assert out["alpha"] == pytest.approx(7 / 18) and out["n_items"] == 4 and out["level"] == "nominal"


def test_krippendorff_takes_missing_judgments():
    items = {**THREE, "i5": {"a": True}}  # one annotator: not a pairable unit, left out
    assert krippendorff_alpha(items)["alpha"] == pytest.approx(7 / 18)


def test_pairwise_cohen_by_hand():
    # a: y y n n, b: y n n n -> p_o 3/4, p_e = .5*.25 + .5*.75 = .5 -> kappa .5
    items = {f"i{i}": {"a": x, "b": y} for i, (x, y) in enumerate([(True, True), (True, False), (False, False),
                                                                     (False, False)])}
    (pair,) = agreement(items)["pairwise"]
    assert (pair["a"], pair["b"], pair["n"]) == ("a", "b", 4) and pair["kappa"] == pytest.approx(0.5)


def test_each_annotator_against_the_majority_of_the_others():
    rows = {r["annotator"]: r for r in vs_rest(THREE)}
    # c against a+b (who always agree): c agrees on i1, i2 only
    assert rows["c"]["n"] == 4 and rows["c"]["agreement"] == pytest.approx(0.5)
    # a against b+c: i1 (y,y)->y agree; i2 n agree; i3 others (y,n) tie -> no (negative) vs a yes: disagree;
    # i4 others (n,y) tie -> no vs a no: agree
    assert rows["a"]["agreement"] == pytest.approx(0.75)
    assert rows["a"]["yes_rate"] == 0.5
    dropped = {r["annotator"]: r for r in vs_rest(THREE, ties="drop")}
    assert dropped["a"]["n"] == 2 and dropped["a"]["agreement"] == 1.0  # the two ties left out


def test_constant_labels_are_undefined_not_one():
    items = {f"i{i}": {"a": True, "b": True, "c": True} for i in range(3)}
    ag = agreement(items)
    assert ag["fleiss"]["kappa"] is None and ag["fleiss"]["undefined"]
    assert ag["krippendorff"]["alpha"] is None
    assert all(p["kappa"] is None for p in ag["pairwise"])


def test_merge_labels_majority_count_rate_and_ties():
    from personalign.errors import ConfigurationError
    from personalign.labels.merge import merge_labels
    from personalign.stages import resolve_stage as get_stage

    st = get_stage("relevance")
    rows = [{"id": "r1", "relevant": False, "annotations": {"a": True, "b": True, "c": False}},
            {"id": "r2", "annotations": {"a": True, "b": False}},
            {"id": "r3", "relevant": True}]
    merged, summary = merge_labels(st, rows, ties="negative")
    assert merged[0]["relevant"] is True and merged[0]["n_annotators"] == 3
    assert merged[0]["human_yes_rate"] == pytest.approx(2 / 3)
    assert merged[1]["relevant"] is False and merged[1]["human_yes_rate"] == 0.5
    assert merged[2] == rows[2]  # no annotations: as it was
    assert (summary["annotated"], summary["unannotated"], summary["changed"]) == (2, 1, 1)
    merged, summary = merge_labels(st, rows, ties="drop")
    assert [r["id"] for r in merged] == ["r1", "r3"] and summary["dropped_rows"] == [1]
    assert merge_labels(st, rows, ties="positive")[0][1]["relevant"] is True
    with pytest.raises(ConfigurationError):
        merge_labels(st, rows, ties="maybe")


def test_identical_annotators_from_ten_shared_rows_without_a_difference():
    from personalign.labels.agreement import identical_annotators, same_person

    def items(n, differ=None):
        out = {}
        for i in range(n):
            v = i % 3 == 0
            out[f"i{i}"] = {"alice": v, "ls-user-2": v if i != differ else not v, "bob": i % 2 == 0}
        return out

    assert identical_annotators(items(9)) == []  # too few shared rows to tell a person from a copy
    assert identical_annotators(items(10)) == [{"a": "alice", "b": "ls-user-2", "n": 10}]
    assert identical_annotators(items(30, differ=17)) == []  # one difference: two people
    assert same_person(items(10)) == [{"dropped": "ls-user-2", "kept": "alice", "n": 10}]  # the named one kept
    chain = {f"i{i}": {"zoe": i % 2 == 0, "ls-user-7": i % 2 == 0, "ann": i % 2 == 0} for i in range(12)}
    assert same_person(chain) == [{"dropped": "ls-user-7", "kept": "ann", "n": 12},  # one group, one name kept:
                                  {"dropped": "zoe", "kept": "ann", "n": 12}]  # named, then most labels, then first


def test_merge_leaves_out_rows_with_neither_annotations_nor_a_label():
    from personalign.labels.merge import merge_labels
    from personalign.stages import resolve_stage as get_stage

    st = get_stage("relevance")
    rows = [{"id": "r1", "annotations": {"a": True, "b": True}}, {"id": "r2"}, {"id": "r3", "relevant": False},
            {"id": "r4", "relevant": None}]
    merged, summary = merge_labels(st, rows)
    assert [r["id"] for r in merged] == ["r1", "r3"]  # a gold label is kept, an unlabelled row left out
    assert (summary["unannotated"], summary["unlabelled"], summary["dropped_rows"], summary["written"]) == (3, 2, [1, 3], 2)
