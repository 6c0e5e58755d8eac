"""Group splits: seeded, order-independent and leakage-free."""

from __future__ import annotations

import pytest

from personalign.data import RelevanceExample
from personalign.data.splits import assert_no_leakage, assign_split, find_leaks, group_split


def _ex(i, prompt, user, topic="t"):
    return RelevanceExample(id=f"e{i}", attribute=f"a{i}", prompt=f"prompt {prompt}", relevant=i % 3 == 0,
                            prompt_id=f"p{prompt}", user_id=f"u{user}", topic=topic)


ITEMS = [_ex(i, prompt=i % 7, user=i % 5, topic=f"t{i % 3}") for i in range(70)]


def test_row_split_would_leak_but_group_split_does_not():
    # a naive row split puts prompts on both sides ...
    naive = {"train": ITEMS[:56], "val": ITEMS[56:]}
    assert find_leaks(naive, by="prompt")
    # ... a prompt split never does
    for seed in range(5):
        s = group_split(ITEMS, by="prompt", seed=seed)
        assert_no_leakage(s, by="prompt")
        assert sum(len(v) for v in s.values()) == 70 and all(s.values())


def test_split_by_user_and_topic():
    s = group_split(ITEMS, by="user", fractions={"train": 0.6, "val": 0.2, "test": 0.2}, seed=1)
    assert_no_leakage(s, by="user")
    assert set(s) == {"train", "val", "test"} and all(s.values())
    t = group_split(ITEMS, by="topic", seed=0)
    assert_no_leakage(t, by="topic")


def test_multi_key_split_uses_connected_components():
    items = [_ex(0, 0, 0), _ex(1, 0, 1), _ex(2, 1, 1), _ex(3, 2, 2), _ex(4, 3, 3)]
    s = group_split(items, by=("prompt", "user"), seed=0)
    assert_no_leakage(s, by=("prompt", "user"))
    side = {x.id: name for name, xs in s.items() for x in xs}
    assert side["e0"] == side["e1"] == side["e2"]  # linked through prompt p0 and user u1


def test_seeded_and_order_independent():
    a = group_split(ITEMS, by="prompt", seed=7)
    assert a == group_split(ITEMS, by="prompt", seed=7)
    b = group_split(list(reversed(ITEMS)), by="prompt", seed=7)
    assert {k: sorted(x.id for x in v) for k, v in a.items()} == {k: sorted(x.id for x in v) for k, v in b.items()}
    vals = {frozenset(x.id for x in group_split(ITEMS, by="prompt", seed=k)["val"]) for k in range(6)}
    assert len(vals) > 1  # the seed matters


def test_errors_and_assign():
    with pytest.raises(ValueError, match="sum to 1"):
        group_split(ITEMS, fractions={"train": 0.5, "val": 0.4})
    with pytest.raises(ValueError, match="group"):
        group_split(ITEMS[:1], by="prompt")
    with pytest.raises(ValueError, match="leakage"):
        assert_no_leakage({"a": ITEMS[:5], "b": ITEMS[3:8]}, by="prompt")
    no_user = [RelevanceExample(id="x", attribute="a", prompt="p", relevant=True, prompt_id="p")]
    with pytest.raises(ValueError, match="no 'user' group key"):
        group_split(no_user * 2, by="user")
    flat = assign_split(group_split(ITEMS, by="prompt"))
    assert {x.split for x in flat} == {"train", "val"}


def test_real_recenter_prompt_split(shared_data):
    from personalign.data import load_relevance

    exs = load_relevance(shared_data / "recenter_relevance" / "relevance_labels.jsonl")
    s = group_split(exs, by="prompt", fractions={"train": 0.6, "val": 0.4}, seed=0)
    assert_no_leakage(s, by="prompt")
    # the shipped split column is itself leakage-free by prompt
    shipped = {"train": [e for e in exs if e.split == "train"], "val": [e for e in exs if e.split == "val"]}
    assert find_leaks(shipped, by="prompt") == {}
