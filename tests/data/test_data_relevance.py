"""Recenter relevance loader and canonical relevance JSONL."""

from __future__ import annotations

import json

import pytest

from personalign.data import (
    RelevanceExample,
    attach_annotator_labels,
    iter_relevance,
    load_recenter_annotations,
    load_relevance,
    write_examples,
)
from personalign.errors import DataError, PersonalignError


def _rec(**over):
    row = {"prompt_index": 0, "sample_index": 0, "attribute": "The user likes tea.", "prompt_text": "What should I drink?",
           "label": 1, "split": "train", "n_annotators": 4, "human_yes_rate": 0.75}
    row.update(over)
    return row


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_real_recenter_counts_and_splits(shared_data):
    path = shared_data / "recenter_relevance" / "relevance_labels.jsonl"
    train = load_relevance(path, split="train")
    val = load_relevance(path, split="val")
    assert (len(train), len(val)) == (338, 196)
    assert sum(e.relevant for e in train) == 59 and sum(e.relevant for e in val) == 34
    # split by prompt: no prompt on both sides
    assert {e.prompt_id for e in train} == {"recenter:p0", "recenter:p2", "recenter:p3"}
    assert {e.prompt_id for e in val} == {"recenter:p4"}
    assert len({e.id for e in train + val}) == 534
    ex = train[0]
    assert ex.relevant is True and ex.human_yes_rate == 0.75 and ex.user_id == "recenter:s0"


def test_real_unknown_split_lists_available(shared_data):
    path = shared_data / "recenter_relevance" / "relevance_labels.jsonl"
    with pytest.raises(DataError, match=r"unknown split 'test'; available: train, val") as ei:
        load_relevance(path, split="test")
    assert ei.value.field == "split"


def test_real_raw_annotations_drop_admin_tests(shared_data):
    d = shared_data / "recenter_relevance"
    recs = load_recenter_annotations(d / "raw_task3_annotations.jsonl")
    assert len(recs) == 91  # 93 records, 2 tool tests
    assert all(r.annotator != "ann07" for r in recs)
    assert len(load_recenter_annotations(d / "raw_task3_annotations.jsonl", keep_admin_tests=True)) == 93
    task2 = load_recenter_annotations(d / "raw_task2_annotations.jsonl")
    assert len(task2) == 86 and task2[0].judgments[0].rating == "necessary_implicit"
    exs = attach_annotator_labels(load_relevance(d / "relevance_labels.jsonl", split="train"), recs)
    first = exs[0]
    assert first.annotator_labels is not None and len(first.annotator_labels) >= 3
    assert all(isinstance(v, bool) for v in first.annotator_labels)


def test_to_dspy_marks_inputs():
    ex = RelevanceExample(id="x", attribute="a", prompt="p", relevant=False, prompt_id="g")
    d = ex.to_dspy()
    assert set(d.inputs().keys()) == {"attribute", "prompt"}
    assert d.relevant is False and d.labels().relevant is False


def test_canonical_roundtrip(tmp_path):
    exs = [RelevanceExample(id=f"e{i}", attribute=f"a{i}", prompt="p", relevant=i % 2 == 0, split="val",
                            prompt_id="p0", human_yes_rate=0.5, annotator_labels=[True, False]) for i in range(3)]
    out = tmp_path / "rel.jsonl"
    assert write_examples(out, exs) == 3
    back = load_relevance(out)
    assert back == exs
    assert load_relevance(out, split="val") == exs


@pytest.mark.parametrize("over, field, problem", [
    ({"label": 2}, "label", "must be 0 or 1"),
    ({"label": "1"}, "label", "expected int or bool, got string"),
    ({"human_yes_rate": 1.5}, "human_yes_rate", "must be in [0, 1]"),
    ({"label": 0}, "label", "contradicts human_yes_rate"),
    ({"prompt_index": -1}, "prompt_index", ">= 0"),
    ({"attribute": ""}, "attribute", "empty string"),
])
def test_recenter_field_errors(tmp_path, over, field, problem):
    p = _write(tmp_path / "r.jsonl", [_rec(attribute="first"), _rec(**over)])
    with pytest.raises(DataError) as ei:
        load_relevance(p)
    assert ei.value.line == 2 and ei.value.field == field and problem in ei.value.problem
    assert str(ei.value).startswith(f"{p}:2: field '{field}': ")
    assert isinstance(ei.value, PersonalignError) and ei.value.exit_code == 2


def test_recenter_missing_field(tmp_path):
    row = _rec()
    del row["split"]
    p = _write(tmp_path / "r.jsonl", [row])
    with pytest.raises(DataError, match=r":1: field 'split': missing"):
        load_relevance(p)


def test_recenter_duplicate_and_mixed(tmp_path):
    p = _write(tmp_path / "r.jsonl", [_rec(), _rec()])
    with pytest.raises(DataError, match=r":2: field 'attribute': duplicate id .*first on line 1"):
        load_relevance(p)
    canon = {"id": "c1", "attribute": "a", "prompt": "p", "relevant": True, "prompt_id": "g"}
    p = _write(tmp_path / "m.jsonl", [_rec(), canon])
    with pytest.raises(DataError, match=r":2: canonical record in a recenter relevance file"):
        load_relevance(p)


def test_canonical_strict_types(tmp_path):
    p = _write(tmp_path / "c.jsonl", [{"id": "c1", "attribute": "a", "prompt": "p", "relevant": 1, "prompt_id": "g"}])
    with pytest.raises(DataError, match=r":1: field 'relevant': Input should be a valid boolean"):
        load_relevance(p)
    p = _write(tmp_path / "c.jsonl", [{"id": "c1", "attribute": "a", "prompt": "p", "relevant": True, "prompt_id": "g",
                                      "colour": "red"}])
    with pytest.raises(DataError, match=r":1: field 'colour': unknown field"):
        load_relevance(p)


def test_unrecognised_record(tmp_path):
    p = _write(tmp_path / "c.jsonl", [{"foo": 1}])
    with pytest.raises(DataError, match=r":1: field 'attribute': missing"):
        load_relevance(p)


def test_iter_is_lazy(tmp_path):
    p = _write(tmp_path / "r.jsonl", [_rec(attribute="ok")])
    with p.open("a") as fh:
        fh.write("{not json\n")
    it = iter_relevance(p)
    assert next(it).attribute == "ok"  # the bad second line is not read yet
    with pytest.raises(DataError, match=r":2: invalid JSON"):
        next(it)


def test_real_all_yes_reference_f1(shared_data):
    from personalign.metrics import binary_report

    val = load_relevance(shared_data / "recenter_relevance" / "relevance_labels.jsonl", split="val")
    r = binary_report([e.relevant for e in val], [True] * len(val), n_boot=200)
    assert r["f1"] == pytest.approx(2 * 34 / (34 + 196))  # 0.296, the measured reference
    assert r["gold_yes_rate"] == pytest.approx(34 / 196)
