"""Preprocessing helpers on constructed inputs: input normalization, scripted users, activity,
diversity metrics."""

from __future__ import annotations

import numpy as np
import pytest

from personalign.errors import DataError
from personalign.preprocess import (
    activity_filter,
    clean_text,
    dataset_diversity,
    detect_scripted_user,
    diverse_sample,
    farthest_point_sampling,
    generalist_score,
    mean_pairwise_cosine_distance,
    normalize_turns,
    quintile_bins,
    scripted_users,
    user_turn_texts,
    window_hashes,
)

TEMPLATE = ("You are a helpful assistant. Rewrite the following product description in a friendly tone for our "
            "online store and keep it under one hundred words: ")


def _unique(i: int) -> str:
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    return " ".join(f"{words[(i * 7 + k) % 10]}{i}{k}" for k in range(30))


# ------------------------------------------------------------------ normalization
def test_normalize_turns_accepts_dicts_pairs_and_aliases():
    turns = normalize_turns([{"role": "human", "content": "hi"}, ("gpt", "hello"), {"role": "User", "content": b"caf\xc3\xa9"}])
    assert [t.role for t in turns] == ["user", "assistant", "user"]
    assert turns[2].content == "café"


def test_non_utf8_becomes_replacement_characters():
    assert clean_text(b"bad \xff\xfe bytes") == "bad \ufffd\ufffd bytes"
    assert clean_text("lone \udcff surrogate") == "lone \ufffd surrogate"
    assert clean_text("nul\x00byte") == "nulbyte"
    # the cleaned text can be encoded (a tokenizer would crash on the raw surrogate)
    clean_text("x\udcff").encode("utf-8")


@pytest.mark.parametrize("bad, field", [
    ("just a string", "conversation"),
    ([{"content": "no role"}], "turns.0.role"),
    ([{"role": "user"}], "turns.0.content"),
    ([{"role": "narrator", "content": "x"}], "turns.0.role"),
    ([{"role": "user", "content": 42}], "turns.0.content"),
    ([42], "turns.0"),
])
def test_normalize_turns_errors_name_the_field(bad, field):
    with pytest.raises(DataError) as err:
        normalize_turns(bad)
    assert err.value.field == field


def test_empty_conversation_is_empty_list():
    assert normalize_turns([]) == [] and normalize_turns(None) == []
    assert user_turn_texts([{"role": "assistant", "content": "only me"}]) == []


# ------------------------------------------------------------------ scripted users
def test_window_hashes_cover_the_tail_and_skip_short_text():
    assert window_hashes("short") == set()
    text = "x" * 119 + "y"
    assert len(window_hashes(text)) == 1
    long = _unique(1)
    # windows every 60 chars plus one aligned with the end
    n = len(" ".join(long.lower().split()))
    expected = len(range(0, n - 120 + 1, 60)) + (0 if (n - 120) % 60 == 0 else 1)
    assert len(window_hashes(long)) == expected
    # case and whitespace do not matter
    assert window_hashes(long) == window_hashes("  " + long.upper().replace(" ", "   "))


def test_template_in_five_of_ten_turns_is_scripted_by_coverage():
    turns = [TEMPLATE + _unique(i) for i in range(5)] + [_unique(100 + i) for i in range(5)]
    r = detect_scripted_user(turns)
    assert r.scripted and r.max_repeat == 5 and r.coverage == 0.5 and "coverage" in r.rule
    assert r.example.startswith("You are a helpful assistant")


def test_five_repeats_with_low_coverage_is_not_scripted_but_eight_is():
    turns = [TEMPLATE + _unique(i) for i in range(5)] + [_unique(100 + i) for i in range(15)]
    r = detect_scripted_user(turns)
    assert not r.scripted and r.max_repeat == 5 and r.coverage == 0.25
    turns = [TEMPLATE + _unique(i) for i in range(8)] + [_unique(100 + i) for i in range(30)]
    r = detect_scripted_user(turns)
    assert r.scripted and r.rule == "repeat>=8"


def test_varied_user_is_not_scripted_and_repeats_count_distinct_turns():
    assert not detect_scripted_user([_unique(i) for i in range(20)]).scripted
    # the same window twice inside one turn counts once
    one = TEMPLATE + TEMPLATE + _unique(1)
    assert detect_scripted_user([one] * 4 + [_unique(9)]).max_repeat == 4
    assert detect_scripted_user([]).scripted is False


def test_scripted_users_pools_a_users_conversations_and_ignores_assistant_text():
    conv = lambda i: [{"role": "user", "content": TEMPLATE + _unique(i)}, {"role": "assistant", "content": TEMPLATE * 2}]  # noqa: E731
    varied = lambda i: [{"role": "user", "content": _unique(50 + i)}, {"role": "assistant", "content": TEMPLATE * 2}]  # noqa: E731
    out = scripted_users({"bot": [conv(i) for i in range(6)], "human": [varied(i) for i in range(6)]})
    assert out["bot"].scripted and not out["human"].scripted


# ------------------------------------------------------------------ activity
def test_activity_filter_thresholds():
    def conv(n_user):
        turns = []
        for k in range(n_user):
            turns += [{"role": "user", "content": f"q{k}"}, {"role": "assistant", "content": "a"}]
        return turns

    users = {
        "active": [conv(6), conv(5), conv(5)],          # 3 conversations, 16 user turns
        "exactly15": [conv(5), conv(5), conv(5)],       # > 15 required
        "two_convs": [conv(10), conv(10)],               # >= 3 conversations required
        "blank_turns": [conv(6), conv(5), [{"role": "user", "content": "  "}] * 10],
    }
    assert activity_filter(users) == ["active"]
    assert activity_filter(users, min_conversations=2, min_user_turns=14) == ["active", "exactly15", "two_convs"]


# ------------------------------------------------------------------ diversity
def test_mean_pairwise_cosine_distance_known_values():
    e = np.eye(3)
    assert mean_pairwise_cosine_distance(e) == pytest.approx(1.0)
    assert mean_pairwise_cosine_distance([[1, 0], [2, 0]]) == pytest.approx(0.0)
    assert mean_pairwise_cosine_distance([[1, 0], [-1, 0]]) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        mean_pairwise_cosine_distance([[1, 0]])
    with pytest.raises(ValueError):
        mean_pairwise_cosine_distance([[1, 0], [0, 0]])


def test_generalist_score_samples_k_and_separates_specialists():
    rng = np.random.default_rng(0)
    base = rng.normal(size=16)
    specialist = base + 0.05 * rng.normal(size=(40, 16))
    generalist = rng.normal(size=(40, 16))
    s, g = generalist_score(specialist), generalist_score(generalist)
    assert s < 0.05 < 0.5 < g
    # K = 17 of 40 rows are used: the score depends on the seed, but not when n <= K
    assert generalist_score(generalist, seed=1) != generalist_score(generalist, seed=2)
    assert generalist_score(generalist[:10], seed=1) == generalist_score(generalist[:10], seed=2)
    assert generalist_score(generalist, k=40) == pytest.approx(mean_pairwise_cosine_distance(generalist))
    with pytest.raises(ValueError):
        generalist_score(generalist[:1])


def test_quintile_bins():
    bins = quintile_bins(list(range(10)))
    assert bins == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert set(quintile_bins(np.random.default_rng(1).normal(size=100))) == {0, 1, 2, 3, 4}
    with pytest.raises(ValueError):
        quintile_bins([])


def test_farthest_point_sampling_picks_spread_points():
    # three tight clusters of 5 points: 3 samples must hit all three clusters
    rng = np.random.default_rng(0)
    centers = np.eye(3)
    x = np.concatenate([c + 0.01 * rng.normal(size=(5, 3)) for c in centers])
    picked = farthest_point_sampling(x, 3, start=0)
    assert picked[0] == 0 and sorted(i // 5 for i in picked) == [0, 1, 2]
    assert farthest_point_sampling(x, 100) and len(farthest_point_sampling(x, 100)) == 15
    assert len(set(farthest_point_sampling(x, 15))) == 15
    assert farthest_point_sampling(x, 0) == []


def test_diverse_sample_draws_from_every_quintile():
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(50, 8))
    scores = rng.uniform(size=50)
    picked = diverse_sample(vecs, scores, per_bin=2)
    bins = quintile_bins(scores)
    assert len(picked) == 10 and len(set(picked)) == 10
    assert sorted(bins[i] for i in picked) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    with pytest.raises(ValueError):
        diverse_sample(vecs, scores[:3], per_bin=1)


def test_dataset_diversity_from_embeddings():
    same = [np.array([[1.0, 0.0], [1.0, 0.1]]), np.array([[1.0, 0.05]])]
    apart = [np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]), np.array([[-1.0, 0.0]])]
    assert dataset_diversity(same) < 0.01
    assert dataset_diversity(apart) == pytest.approx((1 + 2 + 1) / 3)
    with pytest.raises(ValueError):
        dataset_diversity([np.eye(2)])
    with pytest.raises(ValueError):
        dataset_diversity([np.eye(2), np.zeros((0, 2))])


@pytest.mark.slow
def test_generalist_score_on_texts_uses_minilm():
    diet = ["The user is vegan.", "The user avoids dairy.", "The user cooks plant-based meals.", "The user eats no meat."]
    mixed = ["The user is vegan.", "The user plays jazz guitar.", "The user works night shifts.", "The user owns a cat."]
    assert generalist_score(diet) < generalist_score(mixed)
    assert dataset_diversity([diet, mixed]) > 0
