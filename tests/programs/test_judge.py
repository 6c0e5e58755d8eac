"""The ``judge`` stage: position debiasing, strategies' control flow with DummyLM, agreement
metrics against human ratings, the ratings loader, explicit-mention detectors and the rating gap."""

from __future__ import annotations

import json

import dspy
import pytest
from dspy.utils.dummies import DummyLM

from personalign.errors import DataError
from personalign.stages import resolve_stage
STAGE = resolve_stage("judge")
STRATEGIES = resolve_stage("judge").registry
from personalign.programs.judge.data import load_ratings
from personalign.programs.judge.metrics import judge_agreement
from personalign.programs.judge.mentions import LexicalMentionDetector, MentionDetector, mention_rating_gap
from personalign.programs.judge.pairwise import debias

INPUTS = dict(profile="A vegan nurse in Lisbon.", prompt="What should I cook tonight?",
              response_a="RESPONSE-ONE: grilled steak.", response_b="RESPONSE-TWO: tofu curry.",
              attributes=["The user is vegan.", "The user works night shifts."])


@pytest.mark.parametrize("r_ab,r_ba,rating,score", [
    (5, 1, 5, 5.0), (4, 2, 4, 4.0), (5, 2, 4, 4.5), (1, 4, 2, 1.5), (2, 3, 3, 2.5), (4, 3, 3, 3.5), (3, 3, 3, 3.0),
    (5, 5, 3, 3.0),  # pure position bias ("always B") cancels out
])
def test_debias(r_ab, r_ba, rating, score):
    assert debias(r_ab, r_ba) == (rating, score)


def test_debias_rejects_bad_ratings():
    with pytest.raises(ValueError):
        debias(0, 3)
    with pytest.raises(ValueError):
        debias(True, 3)


def test_pairwise_judges_both_orders_and_swaps_responses():
    lm = DummyLM([{"rating": 5}, {"rating": 5}, {"rating": 4}, {"rating": 2}])
    with dspy.context(lm=lm):
        out = STRATEGIES.create("pairwise")(**INPUTS)
    assert len(lm.history) == 4
    first, second = (lm.history[i]["messages"][-1]["content"] for i in (0, 1))
    assert first.index("RESPONSE-ONE") < first.index("RESPONSE-TWO")
    assert second.index("RESPONSE-TWO") < second.index("RESPONSE-ONE")
    assert out.ratings == {"The user is vegan.": 3, "The user works night shifts.": 4}
    assert out.consistent == {"The user is vegan.": False, "The user works night shifts.": True}
    assert out.score == pytest.approx((3.0 + 4.0) / 2)


def test_single_order_makes_one_call_per_attribute_and_maps_back():
    lm = DummyLM([{"rating": 5}, {"rating": 5}])
    prog = STRATEGIES.create("single-order")
    with dspy.context(lm=lm):
        out = prog(**INPUTS)
    assert len(lm.history) == 2
    for attr, (r_ab, r_ba) in out.orders.items():
        assert (r_ab, r_ba) in ((5, None), (None, 5))
        assert out.ratings[attr] == (5 if r_ab else 1)


def test_implicit_judge_instructions():
    lm = DummyLM([{"rating": 3}] * 4)
    with dspy.context(lm=lm):
        STRATEGIES.create("pairwise-implicit")(**INPUTS)
    assert "earns nothing" in lm.history[0]["messages"][0]["content"]


def test_tie_and_missing_attributes():
    out = STRATEGIES.create("tie")(**INPUTS)
    assert set(out.ratings.values()) == {3}
    with pytest.raises(ValueError, match="no attributes"):
        STRATEGIES.create("tie")(**{**INPUTS, "attributes": []})


def test_metric_is_rating_agreement():
    from personalign.metrics import rating_agreement

    ex = dspy.Example(ratings={"a": 5, "b": 1})
    assert rating_agreement(ex, dspy.Prediction(ratings={"a": 5, "b": 1})) == 1.0
    assert rating_agreement(ex, dspy.Prediction(ratings={"a": 1, "b": 5})) == 0.0
    assert STAGE.metric_fn() is rating_agreement


def test_agreement_perfect_opposite_and_missing():
    exs = [dspy.Example(ratings={"a": h, "b": 6 - h}) for h in (1, 2, 3, 4, 5, 2, 4)]
    same = [{"ratings": dict(e.ratings)} for e in exs]
    rep = judge_agreement(exs, same, n_boot=100)
    assert rep["spearman"] == pytest.approx(1.0) and rep["qwk"] == pytest.approx(1.0) and rep["exact"] == 1.0
    assert rep["n_pairs"] == 14 and rep["inflation"] == 0.0
    flipped = [{"ratings": {k: 6 - v for k, v in e.ratings.items()}} for e in exs]
    rep = judge_agreement(exs, flipped, n_boot=100)
    assert rep["spearman"] == pytest.approx(-1.0) and rep["qwk"] < 0
    rep = judge_agreement(exs, [None] * len(exs), n_boot=100)
    assert rep["n_pairs"] == 0 and rep["n_missing"] == 14 and rep["spearman"] is None
    const = [{"ratings": {"a": 3, "b": 3}} for _ in exs]
    rep = judge_agreement(exs, const, n_boot=100)
    assert rep["spearman"] is None and rep["qwk"] == pytest.approx(0.0)


def test_agreement_inflation_of_extreme_judge():
    exs = [dspy.Example(ratings={"a": 3}), dspy.Example(ratings={"a": 4}), dspy.Example(ratings={"a": 2})]
    preds = [{"ratings": {"a": 5}}, {"ratings": {"a": 5}}, {"ratings": {"a": 1}}]
    rep = judge_agreement(exs, preds, n_boot=50)
    assert rep["judge_extremity"] == 2.0 and rep["human_extremity"] == pytest.approx(2 / 3)
    assert rep["inflation"] > 1


def _ratings_file(tmp_path, n=8, **over):
    rows = []
    for i in range(n):
        rows.append({"id": f"r{i}", "profile": "A vegan nurse.", "prompt": f"Prompt {i % 4}", "response_a": "A",
                     "response_b": "B", "ratings": {"The user is vegan.": 1 + i % 5}, "prompt_id": f"p{i % 4}"})
    rows[-1].update(over)
    p = tmp_path / "ratings.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return p


def test_load_ratings(tmp_path):
    exs = load_ratings(_ratings_file(tmp_path))
    assert len(exs) == 8 and all(e.attributes == ["The user is vegan."] for e in exs)
    assert set(exs[0].inputs().keys()) == set(STAGE.inputs)
    by_prompt: dict[str, set] = {}
    for e in exs:
        by_prompt.setdefault(e.prompt_id, set()).add(e.split)
    assert all(len(s) == 1 for s in by_prompt.values())
    with pytest.raises(DataError, match=r":8: field 'ratings"):
        load_ratings(_ratings_file(tmp_path, ratings={"The user is vegan.": 7}))


def test_stage_eval_with_lm_free_strategy(tmp_path):
    from personalign.evaluation import evaluate_stage

    exs = load_ratings(_ratings_file(tmp_path))
    rep = evaluate_stage(STAGE, STRATEGIES.create("tie"), exs, n_boot=50, progress=False)
    # tie gets 1 - ((3 - h)/4)^2 per item: h in 1..5 -> 0.75, 0.9375, 1, 0.9375, 0.75
    assert rep["rating_agreement"] == pytest.approx(sum([0.75, 0.9375, 1, 0.9375, 0.75, 0.75, 0.9375, 1]) / 8)


def test_mention_detectors_and_gap():
    with dspy.context(lm=DummyLM([{"mentions": True}])):
        assert MentionDetector()(attribute="The user is vegan.", response="Since you're vegan...").mentions is True
    assert LexicalMentionDetector()(attribute="The user is vegan.", response="Since you are vegan, tofu.").mentions
    gap = mention_rating_gap([5, 4.5, 5, 3, 3.5, 3], [True, True, True, False, False, False], n_boot=200)
    assert gap["gap"] == pytest.approx(14.5 / 3 - 9.5 / 3) and gap["gap_ci"][0] > 0
    assert gap["n_mention"] == 3 and gap["n_no_mention"] == 3
    assert mention_rating_gap([4.0, 5.0], [True, True])["gap"] is None


@pytest.mark.slow
def test_pairwise_judge_real_model():
    """Real SmolLM2: two attributes, both orders -> 4 calls; every rating parses into 1-5."""
    from personalign.lm import CallCounter, make_lm, use

    lm = make_lm(max_tokens=16, cache=False)
    with use(lm), CallCounter() as cc:
        out = STRATEGIES.create("pairwise")(**INPUTS)
    assert cc.calls == 4
    assert all(1 <= r <= 5 for r in out.ratings.values()) and all(1 <= s <= 5 for s in out.scores.values())
    with use(lm):
        m = MentionDetector()(attribute="The user is vegan.", response="Since you are vegan, try tofu.")
    assert isinstance(m.mentions, bool)


def test_judge_stage_loads_prefeval_option_labels(shared_data):
    """PrefEval's MCQ options as judge-stage examples: the following option must win (gold rating
    1 when it is A, 5 when it is B), split by topic like the violation stage."""
    from personalign.stages import resolve_stage as get_stage

    st = get_stage("judge")
    ex = st.load(shared_data / "prefeval")
    viol = get_stage("violation").load(shared_data / "prefeval")
    assert len(ex) * 2 == len(viol)
    follows = {e.pair_id: e.response for e in viol if not e.violates}
    for e in ex:
        (attr, gold), = e.ratings.items()
        assert attr == e.profile == e.attributes[0] and gold in (1, 5)
        assert (e.response_a if gold == 1 else e.response_b) == follows[e.id]
    ratings = [next(iter(e.ratings.values())) for e in ex]
    assert 0.35 < ratings.count(1) / len(ratings) < 0.65  # the seeded order is balanced
    assert {e.topic for e in ex if e.split == "val"} == {e.topic for e in viol if e.split == "val"}


def test_labelled_demos_of_a_one_attribute_example_reach_the_judge_prompt(shared_data):
    """A PrefEval pair rates one attribute, so it carries the per-attribute signature's fields
    (attribute, rating) and LabeledFewShot's demos show the judge a labelled verdict; examples of
    several attributes do not pretend to be demos."""
    from dspy.teleprompt import LabeledFewShot

    from personalign.stages import resolve_stage as get_stage

    train = get_stage("judge").load(shared_data / "prefeval", split="train")[:2]
    for e in train:
        assert e.attribute == e.profile and e.rating == e.ratings[e.attribute]
        assert set(e.inputs().keys()) == set(STAGE.inputs)  # the demo fields are not program inputs
    prog = LabeledFewShot(k=2).compile(STRATEGIES.create("pairwise"), trainset=train)
    lm = DummyLM([{"rating": 3}] * 2)
    with dspy.context(lm=lm):
        prog(**INPUTS | {"attributes": INPUTS["attributes"][:1]})
    prompt = " ".join(m["content"] for m in lm.history[0]["messages"])
    assert train[0].response_a[:60] in prompt and train[1].response_b[:60] in prompt


def test_multi_attribute_examples_have_no_per_attribute_fields(tmp_path):
    one = load_ratings(_ratings_file(tmp_path))
    assert all(e.attribute == "The user is vegan." and e.rating == e.ratings[e.attribute] for e in one)
    for e in load_ratings(_ratings_file(tmp_path, ratings={"The user is vegan.": 2, "The user runs.": 4})):
        assert ("attribute" in e) == (len(e.ratings) == 1) and ("rating" in e) == (len(e.ratings) == 1)
