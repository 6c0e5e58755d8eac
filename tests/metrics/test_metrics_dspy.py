"""DSPy-convention per-example metrics and their corpus aggregation."""

from __future__ import annotations

import pytest

from personalign.metrics import (
    evaluate_binary,
    mcq_correct,
    rating_agreement,
    relevance_f1,
    to_bool,
    verification_accuracy,
)


@pytest.fixture()
def dspy():
    return pytest.importorskip("dspy")


def test_relevance_metric_float_and_trace(dspy):
    ex = dspy.Example(attribute="a", prompt="p", relevant=True).with_inputs("attribute", "prompt")
    assert relevance_f1(ex, dspy.Prediction(relevant=True)) == 1.0
    assert relevance_f1(ex, dspy.Prediction(relevant="No")) == 0.0
    assert relevance_f1(ex, dspy.Prediction(relevant="maybe")) == 0.0
    assert relevance_f1(ex, dspy.Prediction(relevant="yes"), trace=[]) is True
    assert relevance_f1(ex, dspy.Prediction(relevant=False), trace=[]) is False
    assert isinstance(relevance_f1(ex, dspy.Prediction(relevant=True)), float)


def test_to_bool():
    assert to_bool("Yes.") is True and to_bool("irrelevant") is False and to_bool(1) is True
    assert to_bool("perhaps") is None and to_bool(None) is None and to_bool(2) is None


def test_other_per_example_metrics():
    assert verification_accuracy({"accepted": False}, {"accepted": "rejected"}) == 1.0
    assert mcq_correct({"gold_index": 2}, {"answer_index": 2}) == 1.0
    assert mcq_correct({"gold_index": 2}, {"answer_index": "x"}) == 0.0
    gold = {"ratings": {"concise": 1, "formal": 5}}
    assert rating_agreement(gold, {"ratings": {"concise": 1, "formal": 5}}) == 1.0
    # concise off by 2 -> 1 - (2/4)^2 = .75 ; formal missing -> 0 ; mean .375
    assert rating_agreement(gold, {"ratings": {"concise": 3}}) == pytest.approx(0.375)
    assert rating_agreement(gold, {"ratings": {"concise": 1, "formal": 5}}, trace=[]) is True


def test_evaluate_binary_counts_unreadable_as_negative():
    exs = [{"relevant": True}, {"relevant": False}, {"relevant": True}]
    preds = [{"relevant": "yes"}, {"relevant": "no"}, {"relevant": "??"}]
    r = evaluate_binary(exs, preds, n_boot=50)
    assert r["n_unreadable"] == 1 and r["recall"] == 0.5 and r["precision"] == 1.0
