"""Stage 3 generators, the violation judge, the respond stage's loader and the text helpers."""

from __future__ import annotations

import json

import dspy
import pytest
from dspy.utils.dummies import DummyLM

from personalign.errors import ConfigurationError, DataError
from personalign.stages import resolve_stage
STAGE = resolve_stage("respond")
STRATEGIES = resolve_stage("respond").registry
from personalign.programs.respond.data import load_respond
from personalign.programs.common.text import (
    TRUNCATION_MARK,
    lexical_mention,
    parse_items,
    requested_count,
    truncate_head,
    truncate_tail,
)
from personalign.programs.respond.violation import ViolationJudge, preference_followed

ATTRS = ["The user is vegan.", "The user lives in Lisbon."]


def _last(lm) -> str:
    return "\n".join(str(m.get("content")) for m in lm.history[-1]["messages"])


# ---------------------------------------------------------------- text helpers
@pytest.mark.parametrize("q,n", [
    ("Give me 5 items to pack for a hike.", 5), ("List exactly five tips for sleeping better", 5),
    ("What are the top 3 restaurants in Rome?", 3), ("Suggest 4 easy vegan dinner ideas", 4),
    ("Name three famous painters.", 3), ("How do I boil an egg?", None), ("I am 35 years old, what should I do?", None),
    ("Recommend 10 books about history", 10), ("It costs 5 dollars, is that fair?", None),
])
def test_requested_count(q, n):
    assert requested_count(q) == n


def test_truncation_keeps_the_right_end():
    text = "\n\n".join(f"Turn {i}: " + "words " * 20 for i in range(200))
    tail = truncate_tail(text, 1000)
    assert len(tail) <= 1000 and tail.startswith(TRUNCATION_MARK) and "Turn 199" in tail and "Turn 0:" not in tail
    assert truncate_tail("short", 1000) == "short"
    head = truncate_head("word " * 100, 50)
    assert len(head) <= 50 and head.endswith("...")


def test_parse_items():
    assert parse_items("Intro:\n1. tea\n2) coffee\n- juice\n* water") == ["tea", "coffee", "juice", "water"]
    assert parse_items("One sentence. Another one!") == ["One sentence.", "Another one!"]


@pytest.mark.parametrize("attr,resp,mentions", [
    ("The user is vegan.", "Since you are vegan, try the tofu curry.", True),
    ("The user is vegan.", "Try the tofu curry with vegan naan.", False),
    ("I strictly avoid restaurants that serve gluten due to a severe gluten intolerance.",
     "Given your gluten intolerance, go to Celiachiamo.", True),
    ("I strictly avoid restaurants that serve gluten due to a severe gluten intolerance.",
     "Celiachiamo serves gluten-free pizza and pasta.", False),
    ("The user works as a nurse.", "As a nurse, you know sleep matters.", True),
    ("The user dislikes podcasts for learning.", "You mentioned you dislike podcasts, so use an app.", True),
    ("The user dislikes podcasts for learning.", "As a result, apps with games work well.", False),
])
def test_lexical_mention(attr, resp, mentions):
    assert lexical_mention(attr, resp) is mentions


# ---------------------------------------------------------------- generators
def test_generic_ignores_attributes_personalized_uses_them():
    lm = DummyLM([{"response": "Pasta with tomatoes."}, {"response": "Tofu curry."}])
    with dspy.context(lm=lm):
        g = STRATEGIES.create("generic")(prompt="What should I cook?", attributes=ATTRS)
        assert "vegan" not in _last(lm)
        p = STRATEGIES.create("personalized")(prompt="What should I cook?", attributes=ATTRS)
        assert "The user is vegan." in _last(lm)
    assert (g.response, p.response) == ("Pasta with tomatoes.", "Tofu curry.")
    assert p.mentioned == [] and p.resamples == 0


def test_implicit_resamples_then_removes_mentioning_sentences():
    lm = DummyLM([{"response": "Since you are vegan, try tofu. It is cheap in Lisbon markets."},
                  {"response": "As you are vegan, try tofu curry. Lentils are filling."}])
    with dspy.context(lm=lm):
        out = STRATEGIES.create("personalized-implicit")(prompt="What should I cook?", attributes=ATTRS)
    assert out.resamples == 1 and out.mentioned == []
    assert "vegan" not in out.response and out.response
    assert lm.history[-1]["kwargs"].get("rollout_id") == 1 and lm.history[-1]["kwargs"].get("temperature") == 0.7
    assert "NEVER mention" in _last(lm)


def test_explicit_allowed_reports_mentions():
    with dspy.context(lm=DummyLM([{"response": "Since you are vegan, try tofu."}])):
        out = STRATEGIES.create("personalized")(prompt="What should I cook?", attributes=ATTRS)
    assert out.mentioned == ["The user is vegan."] and "Since you are vegan" in out.response


def test_empty_response_is_resampled_then_an_error():
    with dspy.context(lm=DummyLM([{"response": ""}, {"response": "Rice."}])):
        assert STRATEGIES.create("generic")(prompt="Cook?").resamples == 1
    with dspy.context(lm=DummyLM([{"response": ""}, {"response": " "}])), pytest.raises(ValueError, match="empty"):
        STRATEGIES.create("personalized")(prompt="Cook?", attributes=ATTRS)


def test_violation_judge_and_metric():
    ex = dspy.Example(prompt="Where to eat in Rome?", question="Where to eat in Rome?",
                      preference="I avoid gluten.", attributes=["I avoid gluten."])
    with dspy.context(lm=DummyLM([{"violates": True}, {"violates": False}])):
        assert ViolationJudge()(preference="I avoid gluten.", question="q", response="Eat pizza.").violates is True
        assert preference_followed(ex, dspy.Prediction(response="Try a gluten-free trattoria.")) == 1.0
    assert preference_followed(ex, dspy.Prediction(response="")) == 0.0
    with dspy.context(lm=None), pytest.raises(ConfigurationError):
        preference_followed(ex, dspy.Prediction(response="Pizza."))


# ---------------------------------------------------------------- loader
def test_load_respond_prefeval_split_by_topic(shared_data):
    exs = load_respond(shared_data / "prefeval")
    assert exs and all(e.attributes == [e.preference] and e.prompt == e.question for e in exs)
    topics: dict[str, set] = {}
    for e in exs:
        topics.setdefault(e.topic, set()).add(e.split)
    assert all(len(s) == 1 for s in topics.values())
    assert {e.split for e in exs} == {"train", "val", "test"}
    assert set(exs[0].inputs().keys()) == set(STAGE.inputs)


def test_load_respond_jsonl_and_errors(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text("\n".join(json.dumps({"id": f"r{i}", "prompt": f"P{i}", "attributes": ["a"]}) for i in range(8)) + "\n")
    exs = load_respond(p)
    assert exs[0].preference == "a" and {e.split for e in exs} == {"train", "val", "test"}
    p.write_text(json.dumps({"id": "r", "prompt": "P", "attributes": [1]}) + "\n")
    with pytest.raises(DataError, match=r":1: field 'attributes'"):
        load_respond(p)


@pytest.mark.slow
def test_generators_and_judge_real_model(shared_data):
    """2 real PrefEval questions: generic, personalized and implicit responses are non-empty and
    short (max_tokens), the implicit one mentions no attribute, and the typed judge answers a bool."""
    from personalign.lm import make_lm, use
    from personalign.programs.common.text import lexical_mention

    exs = STAGE.load(shared_data / "prefeval", split="val")[:2]
    lm = make_lm(cache=False)
    with use(lm):
        for ex in exs:
            outs = {n: STRATEGIES.create(n, max_tokens=120)(prompt=ex.prompt, attributes=ex.attributes)
                    for n in ("generic", "personalized", "personalized-implicit")}
            for o in outs.values():
                assert o.response.strip() and len(o.response) < 1200
            # the implicit variant drops sentences that mention an attribute; what it cannot drop it
            # reports (the tiny control-flow model sometimes answers with one restating sentence)
            imp = outs["personalized-implicit"]
            assert imp.mentioned == [a for a in ex.attributes if lexical_mention(a, imp.response)]
            v = ViolationJudge()(preference=ex.preference, question=ex.question, response=outs["generic"].response)
            assert isinstance(v.violates, bool)
