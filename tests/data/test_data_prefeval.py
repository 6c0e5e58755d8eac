"""PrefEval loaders (real data in ../shared/data) and the derived tasks."""

from __future__ import annotations

from collections import Counter

import pytest

from personalign.data.derive import extraction_targets, relevance_pairs, verification_pairs
from personalign.data.prefeval import load_prefeval, prefeval_choice_mcq, prefeval_mcq
from personalign.data.splits import assert_no_leakage, group_split
from personalign.errors import DataError


@pytest.fixture(scope="module")
def pref(shared_data):
    return shared_data / "prefeval"


def test_real_counts_per_kind(pref):
    for kind in ("explicit", "persona", "choice", "mcq"):
        recs = load_prefeval(pref, kind)
        assert len(recs) == 796, kind
        assert len({r.topic for r in recs}) == 16
        assert len({r.id for r in recs}) == 796
    persona = load_prefeval(pref, "persona", topics=["lifestyle_dietary"])
    assert len(persona) == 57 and persona[0].conversation[0].role == "user"
    assert persona[0].conversation[1].role == "assistant" and len(persona[0].conversation) % 2 == 0
    choice = load_prefeval(pref / "implicit_preference" / "choice-based" / "lifestyle_dietary.json", "choice")
    assert choice[0].options[choice[0].aligned_index].startswith("A fresh salad")


def test_unknown_topic(pref):
    with pytest.raises(DataError, match="unknown topic"):
        load_prefeval(pref, "mcq", topics=["astrology"])


def test_mcq_shuffle_is_seeded_and_tracks_gold(pref):
    recs = load_prefeval(pref, "mcq")
    a, b = prefeval_mcq(recs, seed=0), prefeval_mcq(recs, seed=0)
    assert a == b
    for ex, r in zip(a, recs):
        assert ex.options[ex.gold_index] == r.mcq_options[0]
        assert sorted(ex.options) == sorted(r.mcq_options)
    # the gold is not always first after shuffling, and positions are roughly uniform
    pos = Counter(ex.gold_index for ex in a)
    assert set(pos) == {0, 1, 2, 3} and min(pos.values()) > 796 / 4 * 0.7
    # per-record seeding: a record's shuffle does not depend on the other records loaded
    assert prefeval_mcq(recs[5:6], seed=0)[0] == a[5]
    assert [e.gold_index for e in prefeval_mcq(recs, seed=1)] != [e.gold_index for e in a]


def test_choice_mcq(pref):
    recs = load_prefeval(pref, "choice", topics=["shop_home"])
    exs = prefeval_choice_mcq(recs, seed=0)
    for ex, r in zip(exs, recs):
        assert ex.options[ex.gold_index] == r.options[r.aligned_index]
        assert ex.context == r.preference


def _recs(n_topics=3, per=4):
    from personalign.data.prefeval import PrefEvalRecord
    from personalign.data.schemas import Turn

    return [PrefEvalRecord(id=f"prefeval:persona:t{t}:{i}", kind="persona", topic=f"t{t}", index=i,
                           preference=f"pref t{t} {i}", question=f"question t{t} {i}",
                           conversation=[Turn(role="user", content=f"conv t{t} {i}"),
                                         Turn(role="assistant", content="ok")])
            for t in range(n_topics) for i in range(per)]


def test_relevance_pairs_construction():
    recs = _recs()
    pairs = relevance_pairs(recs, negatives_per_positive=2, seed=0)
    assert len(pairs) == 12 * 3
    assert sum(p.relevant for p in pairs) == 12
    by_id = {r.id: r for r in recs}
    for p in pairs:
        owner = by_id[p.id.split(":rel:")[0]]
        assert p.attribute == owner.preference and p.user_id == owner.user_id
        if p.relevant:
            assert p.prompt == owner.question
        else:
            assert p.topic != owner.topic  # negatives only from other topics
    # deterministic and independent of input order
    again = relevance_pairs(list(reversed(recs)), negatives_per_positive=2, seed=0)
    assert sorted(pairs, key=lambda p: p.id) == sorted(again, key=lambda p: p.id)
    other = relevance_pairs(recs, negatives_per_positive=2, seed=1)
    assert {p.id for p in other} != {p.id for p in pairs}
    assert relevance_pairs(recs, negatives_per_positive=0) == [p for p in pairs if p.relevant]
    with pytest.raises(DataError, match="at least 2 topics"):
        relevance_pairs(_recs(n_topics=1))


def test_verification_and_extraction():
    recs = _recs()
    ver = verification_pairs(recs, negatives_per_positive=1, seed=3)
    assert len(ver) == 24 and sum(v.accepted for v in ver) == 12
    for v in ver:
        owner = v.id.split(":ver:")[0]
        own = next(r for r in recs if r.id == owner)
        assert v.evidence.startswith("User: " + own.conversation[0].content)
        assert (v.attribute == own.preference) == v.accepted
    ext = extraction_targets(recs)
    assert ext[0].gold_attributes == [recs[0].preference] and set(ext[0].to_dspy().inputs().keys()) == {"conversation"}


def test_real_derived_tasks_and_topic_split_without_leakage(pref):
    recs = load_prefeval(pref, "persona")
    splits = group_split(recs, by="topic", fractions={"train": 0.75, "val": 0.25}, seed=0)
    assert_no_leakage(splits, by="topic")
    train = relevance_pairs(splits["train"], negatives_per_positive=3, seed=0)
    val = relevance_pairs(splits["val"], negatives_per_positive=3, seed=0)
    assert sum(p.relevant for p in train) / len(train) == pytest.approx(0.25)
    assert_no_leakage({"train": train, "val": val}, by=("topic", "user", "prompt"))
    ver = verification_pairs(splits["val"], seed=0)
    assert sum(v.accepted for v in ver) == len(splits["val"])
