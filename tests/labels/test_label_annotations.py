"""Annotations as data: the shape, its one-line errors, the majority under each tie rule, the
recenter raw votes read into it and joined to the released rows."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from personalign.data.annotations import check_annotations, label_checker, majority, others_majority, yes_rate
from personalign.errors import DataError

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "recenter_relevance"


def test_majority_strict_and_each_tie_rule():
    assert majority({"a": True, "b": True, "c": False}) is True
    assert majority([True, False, False]) is False
    tie = {"a": True, "b": False, "c": True, "d": False}
    assert majority(tie, ties="negative") is False
    assert majority(tie, ties="positive") is True
    assert majority(tie, ties="drop") is None


def test_tie_rules_follow_the_positive_class():
    """Verification's positive class is accepted=False ("rejected"): a tie under "negative" is accepted."""
    tie = [True, False]
    assert majority(tie, ties="negative", positive=False) is True
    assert majority(tie, ties="positive", positive=False) is False
    assert majority([False, False, True], positive=False) is False


def test_non_boolean_labels_plurality_and_ties_need_drop():
    assert majority(["low", "high", "low"]) == "low"
    assert majority(["low", "high"], ties="drop") is None
    with pytest.raises(ValueError, match="use --ties drop"):
        majority(["low", "high"])
    with pytest.raises(ValueError):
        majority([], ties="negative")
    with pytest.raises(ValueError, match="tie rule"):
        majority([True], ties="coin")


def test_others_majority_leaves_the_annotator_out():
    labels = {"a": True, "b": False, "c": False, "d": True}
    assert others_majority(labels, "a") == (True, False)  # b, c, d: 1 yes of 3
    assert others_majority(labels, "b") == (True, True)   # a, c, d: 2 of 3
    assert others_majority({"a": True, "b": True}, "a") == (False, None)  # one other: not enough
    assert others_majority({"a": True, "b": True, "c": False}, "a", ties="drop") == (False, None)


def test_yes_rate():
    assert yes_rate({"a": True, "b": False, "c": True, "d": True}) == 0.75
    assert yes_rate(["x", "y"]) is None and yes_rate([]) is None


@pytest.mark.parametrize("value, field, words", [
    ([True, False], "annotations", "expected an object"),
    ({}, "annotations", "empty"),
    ({"a": 1}, "annotations.a", "expected a boolean label, got integer"),
    ({"a": True, "b": "yes"}, "annotations.b", "got string"),
    ({" ": True}, "annotations", "annotator name is empty"),
])
def test_bad_annotations_are_one_line_naming_file_line_field(value, field, words):
    with pytest.raises(DataError) as ei:
        check_annotations(value, "rows.jsonl", 7, label_checker(bool))
    msg = str(ei.value)
    assert "rows.jsonl" in msg and "7" in msg and field in msg and words in msg and "\n" not in msg


def test_label_checker_of_a_literal_output():
    check = label_checker(Literal["low", "high"])
    assert check("low") is None
    assert "not one of the allowed labels" in check("medium")
    assert check(True) is not None


def test_schema_rows_carry_annotations_strictly():
    from pydantic import ValidationError

    from personalign.data.schemas import RelevanceExample

    row = dict(id="r1", attribute="a", prompt="p", relevant=True, prompt_id="p1")
    ex = RelevanceExample.model_validate({**row, "annotations": {"ann01": True, "ann02": False}, "n_annotators": 2})
    assert ex.to_dspy().annotations == {"ann01": True, "ann02": False}
    for bad in ({}, {"ann01": 1}, [True]):
        with pytest.raises(ValidationError):
            RelevanceExample.model_validate({**row, "annotations": bad})


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data (the recenter raw annotations) is absent")
def test_recenter_raw_votes_join_the_released_rows():
    from personalign.data.recenter import annotated_relevance, raw_annotation_rows

    rows = raw_annotation_rows(SHARED / "raw_task3_annotations.jsonl")
    assert len(rows) == 212 and set(rows[0]) == {"prompt_index", "sample_index", "attribute", "annotations"}
    assert not any("ann07" in r["annotations"] for r in rows)  # the tool tests (is_admin_test) are dropped
    examples, join = annotated_relevance(SHARED / "relevance_labels.jsonl", SHARED / "raw_task3_annotations.jsonl")
    assert join["released_rows"] == 534 and join["matched"] == 212 and join["raw_only"] == 0
    # the raw votes are not what the released labels were computed from on every row
    assert join["label_equal"] == 181 and join["yes_rate_equal"] == 99
    with_votes = [ex for ex in examples if ex.annotations]
    assert len(with_votes) == 212 and all(ex.n_annotators == len(ex.annotations) for ex in with_votes)
    assert {ex.prompt_id for ex in with_votes} == {"recenter:p0", "recenter:p2", "recenter:p3"}
