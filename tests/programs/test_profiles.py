"""Profile builder: per-item descriptors, dedupe, contradictions, bio, profile bank (DummyLM for
control flow; MiniLM for dedupe; one slow test on the real embedded model)."""

from __future__ import annotations

import json

import dspy
import pytest
from dspy.utils.dummies import DummyLM
from dspy.utils.exceptions import AdapterParseError

from personalign.programs.profiles.builder import ProfileBuilder, build_profile_bank, find_specifics, item_text

POSTS = [
    "Spent the whole weekend re-scaping my freshwater aquarium again, added two more shrimp.",
    "lol",
    [{"role": "user", "content": "How often should I change the water in a planted tank?"},
     {"role": "assistant", "content": "About 25% weekly."}],
]


def test_find_specifics():
    text = "Born in 1987, she moved on March 3rd and again on 12/05/2021; aged 34, now 35 years old."
    found = find_specifics(text)
    assert "1987" in found and any("March 3" in f for f in found) and "12/05/2021" in found
    assert any("34" in f for f in found) and any("35 years old" in f for f in found)
    assert find_specifics("Lives in a large coastal city and recently took up rowing.") == []


def test_item_text_posts_and_conversations():
    assert item_text(POSTS[0]).startswith("Spent")
    assert item_text(POSTS[2]) == "How often should I change the water in a planted tank?"
    assert item_text(b"caf\xe9") == "caf\ufffd"
    assert item_text([{"role": "assistant", "content": "only me"}]) == ""


@pytest.mark.slow
def test_builder_flow_dedupes_drops_contradictions_and_writes_bio():
    lm = DummyLM([
        {"useful": True, "justification": "hobby", "descriptors": ["keeps a freshwater aquarium", "likes shrimp"]},
        {"useful": False, "justification": "nothing", "descriptors": ["laughs"]},
        {"useful": True, "justification": "tank care", "descriptors": ["keeps a freshwater aquarium.", "dislikes fish"]},
        {"drop_numbers": [3, 99]},
        {"bio": "An aquarium hobbyist who recently started keeping shrimp."},
    ])
    with dspy.context(lm=lm):
        p = ProfileBuilder()(items=POSTS + [""])
    assert p.n_items == 3 and p.n_useful == 2 and p.n_raw_descriptors == 4
    assert p.descriptors[0] == "keeps a freshwater aquarium" and p.support[0] == 2  # deduped, most supported first
    assert p.dropped_contradictions == ["dislikes fish"] and "dislikes fish" not in p.descriptors
    assert p.bio.startswith("An aquarium hobbyist") and p.specifics == []
    assert len(lm.history) == 5
    assert "(2 items)" in lm.history[3]["messages"][-1]["content"]


def test_builder_without_descriptors_makes_no_bio_call():
    lm = DummyLM([{"useful": False, "justification": "nothing", "descriptors": []}])
    with dspy.context(lm=lm):
        p = ProfileBuilder()(items=["lol", "   "])
    assert p.descriptors == [] and p.bio == "" and len(lm.history) == 1


@pytest.mark.slow
def test_profile_bank_is_canonical_jsonl(tmp_path):
    from personalign.data import read_examples

    lm = DummyLM([
        {"useful": True, "justification": "j", "descriptors": ["keeps an aquarium"]},
        {"bio": "An aquarium keeper."},
        {"useful": True, "justification": "j", "descriptors": ["runs marathons"]},
        {"bio": "A runner."},
    ])
    out = tmp_path / "bank.jsonl"
    with dspy.context(lm=lm):
        res = build_profile_bank({"u1": [POSTS[0]], "u2": ["I ran my fifth marathon."]}, out)
    assert res["n_users"] == 2
    rows = read_examples(out, "profile")
    assert [(r.id, r.user_id, r.descriptors, r.bio) for r in rows] == [
        ("profile:u1", "u1", ["keeps an aquarium"], "An aquarium keeper."),
        ("profile:u2", "u2", ["runs marathons"], "A runner.")]
    assert json.loads(out.read_text().splitlines()[0])["user_id"] == "u1"


def test_profile_bank_writes_nothing_on_failure(tmp_path):
    out = tmp_path / "bank.jsonl"
    with dspy.context(lm=DummyLM([{"nonsense": 1}] * 10)), pytest.raises(
            AdapterParseError, match=r"Expected to find output fields in the LM response: \[useful, justification, descriptors\]"):
        build_profile_bank({"u1": ["I keep bees."]}, out)
    assert not out.exists()


@pytest.mark.slow
def test_real_model_profile_builder():
    from personalign.lm import make_lm, use

    with use(make_lm("local/smollm2-135m-instruct")):
        p = ProfileBuilder()(items=[POSTS[0]])
    assert isinstance(p.bio, str) and all(isinstance(d, str) for d in p.descriptors) and p.n_items == 1
