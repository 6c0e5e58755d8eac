"""``--limit N``: a seeded random sample stratified over the stage's groups, in file order."""

from __future__ import annotations

from collections import Counter

import pytest

from personalign.data.sample import limit_examples, stratified_limit
from personalign.errors import ConfigurationError


def _rows(sizes: dict[str, int]) -> list[dict]:
    # file order: whole groups one after another (the layout that made "the first N" one topic)
    return [{"id": f"{g}-{i}", "topic": g} for g, k in sizes.items() for i in range(k)]


def test_same_seed_same_sample_other_seed_other_sample():
    rows = _rows({"a": 40, "b": 40, "c": 40})
    first = stratified_limit(rows, 12, "topic", seed=3)
    assert first == stratified_limit(rows, 12, "topic", seed=3)
    assert first != stratified_limit(rows, 12, "topic", seed=4)


def test_every_group_keeps_its_share():
    rows = _rows({"a": 50, "b": 30, "c": 20})
    got = Counter(r["topic"] for r in stratified_limit(rows, 10, "topic", seed=0))
    assert got == {"a": 5, "b": 3, "c": 2}
    # the first 10 rows would all be topic "a"
    assert Counter(r["topic"] for r in rows[:10]) == {"a": 10}


def test_remainders_go_to_the_largest_fractions_and_total_is_exact():
    rows = _rows({"a": 7, "b": 7, "c": 6})
    for seed in range(5):
        sample = stratified_limit(rows, 4, "topic", seed=seed)
        assert len(sample) == 4
        counts = Counter(r["topic"] for r in sample)
        assert all(counts[g] >= 1 for g in ("a", "b")), counts  # quotas 1.4, 1.4, 1.2


def test_file_order_kept_and_no_duplicates():
    rows = _rows({"a": 20, "b": 20, "c": 20, "d": 5})
    sample = stratified_limit(rows, 17, "topic", seed=1)
    positions = [rows.index(r) for r in sample]
    assert positions == sorted(positions)
    assert len(set(positions)) == 17


def test_n_at_least_len_returns_all_in_order():
    rows = _rows({"a": 3, "b": 2})
    assert stratified_limit(rows, 5, "topic") == rows
    assert stratified_limit(rows, 99, "topic") == rows
    assert stratified_limit(rows, None, "topic") == rows


def test_singleton_groups_and_no_key_are_plain_seeded_samples():
    rows = [{"id": i, "prompt_id": f"p{i}"} for i in range(100)]
    a = stratified_limit(rows, 10, "prompt_id", seed=0)
    assert len(a) == 10 and len({r["id"] for r in a}) == 10
    b = stratified_limit(rows, 10, None, seed=0)
    assert len(b) == 10 and b == stratified_limit(rows, 10, None, seed=0)
    assert [r["id"] for r in a] != list(range(10))


def test_attribute_access_and_missing_group():
    class Row:
        def __init__(self, i, topic):
            self.id, self.topic = i, topic

    rows = [Row(i, "x" if i < 10 else None) for i in range(20)]
    got = Counter(r.topic for r in stratified_limit(rows, 6, "topic", seed=0))
    assert got == {"x": 3, None: 3}


def test_bad_n():
    with pytest.raises(ValueError):
        stratified_limit(_rows({"a": 3}), 0, "topic")

    class _Stage:
        limit_key = "topic"

    with pytest.raises(ConfigurationError, match="--limit must be >= 1"):
        limit_examples(_Stage(), _rows({"a": 3}), 0)


def test_stage_limit_uses_topic_for_mcq_and_group_key_elsewhere():
    from personalign.stages import resolve_stage as get_stage

    assert get_stage("mcq").limit_key == "topic"
    assert get_stage("respond").limit_key == "topic"
    assert get_stage("relevance").limit_key == "prompt_id"
    assert get_stage("verification").limit_key == "group"
    rows = _rows({"t1": 30, "t2": 30, "t3": 30})
    assert Counter(r["topic"] for r in get_stage("mcq").limit(rows, 9, seed=0)) == {"t1": 3, "t2": 3, "t3": 3}
