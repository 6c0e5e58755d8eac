"""Rank-based learned selectors (minilm-rank, style-rank): decision rule, fit, save/load, seed.

Unit tests use the demo labels in ``examples/`` (no shared data needed); the real-label test
uses the ``shared_data`` fixture (skips when ../shared/data is absent).
"""

from __future__ import annotations

from pathlib import Path

import dspy
import pytest

from personalign.data import load_relevance
from personalign.stages import resolve_stage
STRATEGIES = resolve_stage("relevance").registry
from personalign.programs.relevance.ranked import RankedSelector, prompt_sentences, ranked_features

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "relevance_demo.jsonl"
RANKED = ("minilm-rank", "style-rank")


@pytest.fixture(scope="module")
def demo():
    rows = load_relevance(DEMO)
    return [r.to_dspy() for r in rows if r.split == "train"], [r.to_dspy() for r in rows if r.split == "val"]


def _ex(attribute, prompt="Plan my dinners.", prompt_id="P", user_id="U", relevant=False, rate=None):
    return dspy.Example(attribute=attribute, prompt=prompt, prompt_id=prompt_id, user_id=user_id,
                        relevant=relevant, human_yes_rate=rate).with_inputs("attribute", "prompt")


def test_decide_top_fraction_per_user_and_small_group_fallback():
    sel = RankedSelector(min_group=5, top_fraction=0.2, threshold=0.5)
    exs = [_ex(f"a{i}", user_id="U") for i in range(10)] + [_ex(f"b{i}", user_id="V") for i in range(5)] \
        + [_ex(f"c{i}", user_id="W") for i in range(2)]
    scores = [0.1, 0.9, 0.2, 0.8, 0.3, 0.05, 0.0, 0.4, 0.35, 0.15] + [0.01, 0.02, 0.03, 0.04, 0.05] + [0.6, 0.4]
    got = sel.decide(scores, exs)
    assert [i for i in range(10) if got[i]] == [1, 3]  # top 2 of 10 (rank inside U)
    assert [i for i in range(10, 15) if got[i]] == [14]  # top 1 of 5: low probabilities still ranked
    assert got[15:] == [True, False]  # group of 2 < min_group -> probability >= threshold


def test_small_groups_carry_the_fallback_note_ranked_ones_none(monkeypatch):
    sel = RankedSelector(min_group=5, top_fraction=0.2, threshold=0.5)
    exs = [_ex(f"a{i}", user_id="U") for i in range(5)] + [_ex("b", user_id="V")]
    monkeypatch.setattr(sel, "score_batch", lambda examples: [0.9, 0.1, 0.2, 0.3, 0.4, 0.6][:len(examples)])
    preds = sel.predict_batch(exs)
    assert [p.relevant for p in preds] == [True, False, False, False, False, True]
    assert all("decision_note" not in p for p in preds[:5])
    assert preds[5].decision_note == ("fallback threshold 0.5 (no pool of 5 or more to rank against; "
                                      "batch prediction uses top_share@prompt_id+user_id)")


def test_unfitted_and_bad_arguments_raise():
    with pytest.raises(RuntimeError, match="not fitted"):
        STRATEGIES.create("minilm-rank").score_batch([_ex("a")])
    with pytest.raises(RuntimeError, match="threshold"):
        RankedSelector().predict_batch([_ex("a")])
    with pytest.raises(ValueError, match="feature"):
        RankedSelector(features=("nope",))
    with pytest.raises(ValueError, match="labels"):
        RankedSelector(labels="fuzzy")
    with pytest.raises(ValueError, match="both"):
        RankedSelector().fit([_ex("a", relevant=True), _ex("b", relevant=True)])


def test_features_shapes_and_group_standardization():
    exs = [_ex(a, user_id=u) for u in ("U", "V") for a in
           ("The user is vegan.", "The user plays chess.", "The user values concise answers.")]
    X = ranked_features(exs, ("attribute", "cosine", "sentence_cosine", "cosine_z", "style"))
    assert X.shape == (6, 384 + 4)
    cos, sent, z = X[:, 384], X[:, 385], X[:, 386]
    assert (sent >= cos - 1e-9).all()  # the whole prompt is one of the candidates
    assert abs(z[:3].mean()) < 1e-6 and abs(z[3:].mean()) < 1e-6
    assert prompt_sentences("First one here. Second one!\nThird line") == [
        "First one here.", "Second one!", "Third line"]


@pytest.mark.parametrize("name", RANKED)
def test_compile_save_load_roundtrip_without_pickle(name, demo, tmp_path):
    import numpy as np

    from personalign._verbs.relevance import load_program, save_program

    train, val = demo
    compiled, res = resolve_stage("relevance").default_optimizer(name, seed=0).compile(STRATEGIES.create(name), trainset=train,
                                                                      valset=val)
    d = res.details
    assert len(d["folds"]) == len({e.prompt_id for e in train})  # leave-one-prompt-out
    assert d["top_fraction"] == pytest.approx(sum(e.relevant for e in train) / len(train))
    assert compiled.threshold is not None and 0.0 <= res.train_score <= 1.0
    preds = compiled.predict_batch(val)
    assert all(isinstance(p.relevant, bool) and isinstance(p.score, float) for p in preds)
    save_program(compiled, tmp_path, strategy=name, compile_info=res.to_dict())
    with np.load(tmp_path / "ranked_selector.npz", allow_pickle=False) as z:  # plain arrays
        assert set(z.files) == {"coef", "intercept", "mean", "scale"}
    from personalign.programs.saved import read_metadata

    state = read_metadata(tmp_path)[1]["state"]
    assert state["top_fraction"] == compiled.top_fraction and state["fitted"] is True
    loaded, meta = load_program(tmp_path)
    assert meta["strategy"] == name and type(loaded) is type(compiled)
    assert loaded.score_batch(val) == pytest.approx(compiled.score_batch(val))
    assert [p.relevant for p in loaded.predict_batch(val)] == [p.relevant for p in preds]


def test_load_weights_rejects_wrong_features(demo, tmp_path):
    train, _ = demo
    STRATEGIES.create("style-rank").fit(train).save_weights(tmp_path)
    from personalign.errors import DataError

    with pytest.raises(DataError, match="shape"):
        STRATEGIES.create("minilm-rank").load_weights(tmp_path)


@pytest.mark.parametrize("name", RANKED)
def test_seed_gives_identical_program(name, demo):
    train, val = demo
    a, ra = resolve_stage("relevance").default_optimizer(name, seed=1).compile(STRATEGIES.create(name), trainset=train)
    b, rb = resolve_stage("relevance").default_optimizer(name, seed=1).compile(STRATEGIES.create(name), trainset=train)
    assert a.score_batch(val) == b.score_batch(val)
    assert a.threshold == b.threshold and ra.train_score == rb.train_score


def test_soft_labels_use_human_yes_rate(demo):
    train, val = demo
    flipped = [e.copy(human_yes_rate=(0.6 if e.relevant else 0.4)) for e in train]
    sharp = [e.copy(human_yes_rate=(1.0 if e.relevant else 0.0)) for e in train]
    soft = [RankedSelector(labels="soft").fit(t).score_batch(val) for t in (flipped, sharp)]
    hard = [RankedSelector(labels="hard").fit(t).score_batch(val) for t in (flipped, sharp)]
    assert hard[0] == pytest.approx(hard[1])  # majority labels unchanged
    assert soft[0] != pytest.approx(soft[1])  # the vote shares changed the soft fit


def test_predict_relevance_ranks_one_users_attributes():
    from personalign._verbs.relevance import predict_relevance

    attrs = ["The user follows a vegetarian diet.", "The user enjoys playing chess online.",
             "The user has two young children.", "The user collects stamps.", "The user likes jazz.",
             "The user is allergic to peanuts."]
    out = predict_relevance(attrs, "Suggest a weekly dinner plan for a family of four.", strategy="minilm-rank")
    assert [r["attribute"] for r in out] == attrs
    assert all(isinstance(r["relevant"], bool) for r in out)
    assert 1 <= sum(r["relevant"] for r in out) < len(attrs)  # a top share, not all or nothing


@pytest.mark.slow
def test_ranked_selectors_on_real_labels(shared_data):
    from personalign.metrics import f1

    rows = load_relevance(shared_data / "recenter_relevance" / "relevance_labels.jsonl")
    train = [r.to_dspy() for r in rows if r.split == "train"]
    val = [r.to_dspy() for r in rows if r.split == "val"]
    gold = [e.relevant for e in val]
    gold_rate = sum(gold) / len(gold)
    for name in RANKED:
        compiled, res = resolve_stage("relevance").default_optimizer(name).compile(STRATEGIES.create(name), trainset=train)
        pred = [p.relevant for p in compiled.predict_batch(val)]
        assert abs(sum(pred) / len(pred) - gold_rate) <= 0.10, name  # the rank rule keeps the human yes-rate
        assert f1(gold, pred) > f1(gold, [True] * len(gold)), name
        assert res.details["oof_yes_rate"] == pytest.approx(compiled.top_fraction, abs=0.05)
