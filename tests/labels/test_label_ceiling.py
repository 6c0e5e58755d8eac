"""The human ceiling: by hand on a few rows, its interval over the stage's groups, and the figure of
the issue on the shared recenter annotations (0.662 over 794 judgments)."""

from __future__ import annotations

from pathlib import Path

import dspy
import numpy as np
import pytest

from personalign.labels.ceiling import _resampled, human_ceiling, judgments, share_of_ceiling
from personalign.stages import resolve_stage as get_stage

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "recenter_relevance"
REL = get_stage("relevance")


def _row(i, votes, prompt="p1", user="u1"):
    return dspy.Example(id=f"r{i}", attribute=f"a{i}", prompt="q", relevant=False, prompt_id=prompt, user_id=user,
                        annotations=dict(zip("abcd", map(bool, votes)))).with_inputs("attribute", "prompt")


def test_by_hand_three_annotators():
    rows = [_row(0, [True, True, True]), _row(1, [True, True, False]), _row(2, [False, False, False]),
            _row(3, [True, False, False]), _row(4, [True, True])]  # the last: 2 annotators, left out
    golds, preds, who = judgments(REL, rows)
    assert len(preds) == 12 and who.count("a") == 4
    # (pred, others' majority): r0 yyy -> 3x (y,y); r1 yyn -> a:(y, tie->n) b:(y,n) c:(n,y); r2 -> 3x (n,n);
    # r3 ynn -> a:(y,n) b:(n, tie->n) c:(n, tie->n). TP 3, FP 3, FN 1 -> F1 = 6 / 10
    out = human_ceiling(REL, rows, n_boot=50, seed=0)
    assert out["name"] == "human" and out["metric"] == "f1"
    assert out["f1"] == pytest.approx(0.6) and out["n"] == 12 and out["n_items"] == 4
    assert out["yes_rate"] == pytest.approx(6 / 12)
    # c: r0 TP, r1 FN (others y, y), r2 and r3 TN -> F1 2/3
    assert out["by_annotator"]["c"] == {"f1": pytest.approx(2 / 3), "n": 4, "yes_rate": 0.25}
    # one prompt (and one user): as stage_report does, the items within it are resampled, and it says so
    assert out["resampling"]["unit"] == "user_id within one prompt_id" and out["f1_by_group"] == {"p1": pytest.approx(0.6)}


def test_no_row_with_three_annotators_is_no_ceiling():
    assert human_ceiling(REL, [_row(0, [True, False])], n_boot=10) is None
    assert human_ceiling(REL, [dspy.Example(id="x", relevant=True, prompt_id="p")], n_boot=10) is None


def test_vectorized_resamples_equal_the_objective():
    rng = np.random.default_rng(1)
    rows = [_row(i, list(rng.random(3) < 0.4), prompt=f"p{i % 3}") for i in range(30)]
    golds, preds, _ = judgments(REL, rows)
    w = rng.integers(0, 3, size=(5, len(golds)))
    fast = _resampled(REL, golds, preds, w)
    slow = [REL.score([g for g, k in zip(golds, row) for _ in range(k)],
                            [p for p, k in zip(preds, row) for _ in range(k)]) for row in w]
    assert fast == pytest.approx(slow)


def _clustered(prompt_of):
    """10 prompts x 12 rows: on prompts 0-4 the annotators agree on every row, on 5-9 at random."""
    rng = np.random.default_rng(0)
    rows = []
    for p in range(10):
        for i in range(12):
            y = bool(rng.random() < 0.5)
            votes = [y, y, y] if p < 5 else list(rng.random(3) < 0.5)
            rows.append(_row(p * 12 + i, votes, prompt=prompt_of(p, i), user=f"u{p}-{i // 4}"))
    return rows


def test_interval_resamples_the_stages_groups():
    by_prompt = human_ceiling(REL, _clustered(lambda p, i: f"p{p}"), n_boot=400, seed=0)
    assert by_prompt["resampling"] == {"unit": "prompt_id > user_id", "n_clusters": 10, "n_boot": 400}
    lo, hi = by_prompt["f1_ci"]
    assert lo < by_prompt["f1"] < hi and set(by_prompt["f1_by_group"]) == {f"p{p}" for p in range(10)}
    # the same judgments with every row its own prompt: the items are resampled, the interval narrower
    by_row = human_ceiling(REL, _clustered(lambda p, i: f"p{p}-{i}"), n_boot=400, seed=0)
    assert by_row["f1"] == pytest.approx(by_prompt["f1"])
    assert (hi - lo) > 1.3 * (by_row["f1_ci"][1] - by_row["f1_ci"][0])


def test_below_five_groups_a_range_not_an_interval():
    rows = [r for r in _clustered(lambda p, i: f"p{p % 3}")]
    out = human_ceiling(REL, rows, n_boot=100, seed=0)
    assert out["f1_ci"] is None and out["resampling"]["n_clusters"] == 3
    assert out["f1_range"] == [min(out["f1_by_group"].values()), max(out["f1_by_group"].values())]


def test_share_of_ceiling():
    assert share_of_ceiling(0.604, 0.662) == pytest.approx(0.9124, abs=1e-4)
    assert share_of_ceiling(0.5, {"metric": "f1", "f1": 0.625}) == pytest.approx(0.8)
    assert share_of_ceiling(None, 0.6) is None and share_of_ceiling(0.5, 0.0) is None
    assert share_of_ceiling(0.5, {"metric": "f1", "f1": float("nan")}) is None


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data (the recenter raw annotations) is absent")
def test_the_issues_figure_on_the_shared_annotations():
    from personalign.data.recenter import annotated_relevance

    examples, _ = annotated_relevance(SHARED / "relevance_labels.jsonl", SHARED / "raw_task3_annotations.jsonl")
    out = human_ceiling(REL, [REL.mark_inputs(ex.to_dspy()) for ex in examples], n_boot=200, seed=0)
    assert out["f1"] == pytest.approx(0.66, abs=0.02) and out["n"] == 794
    assert out["f1_by_group"] == {"recenter:p0": pytest.approx(0.672, abs=5e-4),
                                  "recenter:p2": pytest.approx(0.645, abs=5e-4)}
    per = [a["f1"] for a in out["by_annotator"].values()]
    assert min(per) == pytest.approx(0.57, abs=5e-3) and max(per) == pytest.approx(0.77, abs=5e-3)
    assert out["yes_rate"] == pytest.approx(0.38, abs=5e-3)
    assert out["f1_ci"] is None and out["resampling"]["n_clusters"] == 2  # 2 prompts: the range instead
