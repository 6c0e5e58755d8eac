"""The ``perspectives`` stage: profile bank, sampling, distinct samples, rule enforcement (no meta
phrases, no persona names, exact item counts, never empty) with adversarial DummyLM outputs and
on the real embedded model, the loader and the baselines."""

from __future__ import annotations

import json
import random

import dspy
import pytest
from dspy.utils.dummies import DummyLM

from personalign.errors import ConfigurationError, DataError
from personalign.stages import resolve_stage
STRATEGIES = resolve_stage("perspectives").registry
from personalign.programs.perspectives.bank import load_bank, profile_names
from personalign.programs.perspectives.data import load_questions
from personalign.programs.perspectives.metrics import answer_win_rate
from personalign.programs.perspectives.rules import enforce_rules, rule_violations
from personalign.programs.common.text import has_meta, mentions_name, parse_items

PROFILES = [
    ("u1", "Maria Lopez, a pediatric nurse who hikes on weekends.", ["likes mountains"], None),
    ("u2", "Tom is a software engineer and an amateur trail runner.", [], None),
    ("u3", "A retired teacher who walks with her dog every morning.", [], "Edith"),
    ("u4", "Kenji, a photographer who camps in national parks.", [], None),
    ("u5", "A college student on a tight budget who loves the outdoors.", [], None),
    ("u6", "Priya is a chef who forages wild herbs.", [], None),
    ("u7", "An accountant who has never been hiking.", [], None),
]
NAMES = ["Maria", "Lopez", "Tom", "Edith", "Kenji", "Priya"]
QUESTION = "Give me 5 items to pack for a weekend hiking trip."


@pytest.fixture
def fake_embed(monkeypatch):
    """Bag-of-words hashing embeddings instead of MiniLM (these tests check control flow and the
    rules, not similarity; the slow test uses MiniLM)."""
    import numpy as np

    import personalign.lm.embedder as emb
    from personalign.programs.common.text import content_words

    def embed(texts, **kwargs):
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in content_words(t):
                out[i, sum(map(ord, w)) % 64] += 1.0
            out[i] /= max(1e-6, float(np.linalg.norm(out[i])))
        return out

    monkeypatch.setattr(emb, "embed", embed)


@pytest.fixture
def bank(bank_file, fake_embed):
    return bank_file


@pytest.fixture
def bank_file(tmp_path):
    p = tmp_path / "profiles.jsonl"
    rows = []
    for uid, bio, desc, name in PROFILES:
        r = {"user_id": uid, "bio": bio, "descriptors": desc}
        if name:
            r["name"] = name
        rows.append(json.dumps(r))
    p.write_text("\n".join(rows) + "\n")
    return p


def _adversarial_lm(typed: bool = False):
    """Plausible for all; per-profile answers that use names, meta text, refusals and echoes; an
    aggregator that names a persona, talks about candidates, echoes the question and gives 4 items
    instead of 5 (as text, or as a typed list with ``typed``)."""
    agg = ["Maria would pack a first-aid kit.", "Based on the candidates, bring water.",
           "5 items to pack for a weekend hiking trip", "A warm jacket for cold nights."]
    answers = {
        "[[ ## candidates ## ]]": {"answer": {"items": agg} if typed else "\n".join(f"{i}. {a}" for i, a in
                                                                                   enumerate(agg, 1))},
        "[[ ## plausible ## ]]": {"plausible": True},
    }
    per = {  # per-profile lists (the question asks for 5 items, so candidates are typed lists)
        "Maria Lopez": ["As Maria, I always bring a first-aid kit.", "Pack a warm jacket.",
                        "Bring two liters of water.", "Maria loves trail mix.", "Pack a rain poncho."],
        "Tom is": ["Tom here: trail shoes matter most.", "Pack energy bars.", "Bring a headlamp.",
                   "Pack a warm jacket.", "Bring two liters of water."],
        "retired teacher": ["Edith says: a walking stick helps.", "Bring a paper map.", "Pack a whistle.",
                            "Bring two liters of water.", "Pack a warm jacket."],
        "Kenji": ["Kenji recommends a rain jacket.", "The other perspectives agree on sunscreen.", "Pack sunscreen.",
                  "Bring a paper map.", "Pack energy bars."],
        "college student": ["I'm sorry, I cannot help with that.", "I'm sorry.", "Sorry.", "No.", "N/A"],
        "Priya": ["Priya: a small stove.", "Pack a pot.", "Pack sunscreen.", "Bring a hat.", "Pack energy bars."],
        "accountant": ["Comfortable shoes.", "A paper map.", "Pack water.", "Bring a hat.", "Pack snacks."],
    }
    for key, items in per.items():
        answers[key] = {"answer": {"items": items} if typed else "Here you go: " + "; ".join(
            f"{i}. {a}" for i, a in enumerate(items, 1))}
    return DummyLM(answers)


def test_profile_names_heuristic():
    assert "Maria" in profile_names("Maria Lopez, a pediatric nurse.")
    assert "Tom" in profile_names("Tom is a software engineer.")
    assert profile_names("A retired teacher.") == ()
    assert profile_names("A retired teacher.", "Edith") == ("Edith",)
    assert "Sam" in profile_names("An engineer named Sam who bikes.")


def test_bank_loads_names_and_rejects_bad_lines(bank, tmp_path):
    b = load_bank(bank)
    assert len(b) == 7 and b.profiles[2].names == ("Edith",)
    assert "likes mountains" in b.profiles[0].text
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"user_id": "a", "bio": "x", "descriptors": []}\n{"user_id": "a", "bio": "y", "descriptors": []}\n')
    with pytest.raises(DataError, match=r":2: field 'user_id'"):
        load_bank(bad)
    with pytest.raises(DataError, match="not found"):
        load_bank(tmp_path / "nope.jsonl")


@pytest.mark.parametrize("typed", [False, True])
def test_aggregator_enforces_rules_against_adversarial_outputs(bank, typed):
    """The aggregator's output never contains meta phrases or a persona's name, and exactly 5 items
    hold, although every LM output breaks those rules."""
    lm = _adversarial_lm(typed)
    prog = STRATEGIES.create("aggregator", typed_items=typed)
    with dspy.context(lm=lm):
        out = prog(question=QUESTION, profile_bank=str(bank))
    items = parse_items(out.answer)
    assert len(items) == 5, out.answer
    assert out.answer.splitlines()[0].startswith("1. ")
    assert not has_meta(out.answer), out.answer
    assert not mentions_name(out.answer, NAMES), out.answer
    assert "sorry" not in out.answer.lower()
    assert out.report["violations"] == [] and out.report["count_ok"] is True
    assert out.report["dropped_names"] >= 1 and out.report["dropped_meta"] >= 1 and out.report["filled"] >= 1
    assert out.report["dropped_echoes"] >= 1 and "hiking trip" not in out.answer
    assert len(out.profiles) == 5 and len(out.candidates) <= 5
    assert not any(mentions_name(c, NAMES) or has_meta(c) for c in out.candidates)
    # k distinct samples: rollout ids 1..k, temperature > 0
    answer_calls = [h["kwargs"] for h in lm.history if "rollout_id" in h["kwargs"]]
    assert sorted(k["rollout_id"] for k in answer_calls) == [1, 2, 3, 4, 5]
    assert all(k["temperature"] > 0 for k in answer_calls)


def test_plausibility_check_filters_then_fills(bank):
    answers = {"[[ ## candidates ## ]]": {"answer": "Pack water and a map."}}
    for uid, bio, _, _ in PROFILES:
        answers[bio[:15]] = {"plausible": "accountant" not in bio and "chef" not in bio, "answer": "Pack water."}
    lm = DummyLM(answers)
    prog = STRATEGIES.create("aggregator", pool=7)
    with dspy.context(lm=lm):
        out = prog(question="What should I pack for a hike?", profile_bank=str(bank))
    assert out.report["plausible"] == 5 and out.report["profiles_filled"] == 0
    assert not any("accountant" in p or "chef" in p for p in out.profiles)
    assert out.answer == "Pack water and a map."


@pytest.mark.parametrize("seed", range(30))
def test_rules_property_never_meta_never_names_exact_count(seed):
    """Random adversarial aggregator outputs and candidates: the enforced answer never has a meta
    phrase or a name, is never empty, and has exactly n items whenever the candidates hold n
    distinct clean sentences."""
    rng = random.Random(seed)
    facts = ["Pack {} for the trail.".format(w) for w in
             ("water", "sunscreen", "a map", "a headlamp", "snacks", "a jacket", "a whistle", "a knife", "a tent")]
    junk = ["As Maria says, bring socks.", "Based on the candidates, pack rope.", "The personas agree on boots.",
            "I'm sorry, I can't help.", "Tom prefers a hat.", "Here is the merged answer: pack gloves.",
            "Answer 2 suggests a stove.", "Kenji: bring a tarp."]
    candidates = [" ".join(rng.sample(facts, 3) + rng.sample(junk, 2)) for _ in range(5)]
    raw = rng.sample(facts + junk, rng.randint(0, 8))
    n = rng.choice([None, 3, 5])
    answer, rep = enforce_rules(raw if n else " ".join(raw), candidates, names=NAMES, n_items=n)
    assert answer.strip()
    assert not has_meta(answer) and not mentions_name(answer, NAMES), answer
    if n:
        distinct = {f for f in facts if any(f in c for c in candidates)} | {f for f in raw if f in facts}
        assert len(distinct) >= n  # the sampled material always holds enough facts here
        assert len(parse_items(answer)) == n and rep.count_ok, answer
    assert rule_violations(answer, names=NAMES, n_items=n) == []


def test_rules_drop_ungrounded_sentences():
    answer, rep = enforce_rules("Pack water for the trail. Quantum chromodynamics explains gluons perfectly.",
                                ["Pack water for the trail and snacks."])
    assert answer == "Pack water for the trail." and rep.dropped_ungrounded == 1


def test_rules_drop_language_drift_the_question_does_not_share():
    """The Qwen models drift into Chinese mid-answer (seen in 12 of 87 candidates on PrefEval val):
    such units are dropped, counted, never used to fill a list, and flagged when left in a text."""
    q = "Give me 3 tips for sleeping better."
    cands = ["1. Keep a regular bedtime. 2. 避免咖啡因在下午。 3. Keep the bedroom dark and cool.",
             "Avoid screens an hour before bed. Keep a regular bedtime."]
    answer, rep = enforce_rules(["Keep a regular bedtime.", "避免咖啡因在下午。", "Keep the bedroom dark and cool."], cands,
                                n_items=3, question=q)
    assert rep.dropped_language == 1 and "避" not in answer and rep.count_ok
    assert len(parse_items(answer)) == 3 and "Avoid screens an hour before bed." in answer  # filled from English
    text, rep = enforce_rules("Sleep early. 保持规律的作息时间。", ["Sleep early and keep a routine."], question="How to sleep?")
    assert text == "Sleep early." and rep.dropped_language == 1
    assert rule_violations("Dormir 保持规律", question="How to sleep?") == ["language"]
    assert rule_violations("保持规律的作息时间。", question="如何睡得更好？") == []  # the asker's own language


def test_baselines_control_flow(bank):
    lm = DummyLM({"[[ ## candidates ## ]]": {"answer": "Pack water."}, "[[ ## existing ## ]]": {"profile": "A hiker."},
                  "[[ ## prompt ## ]]": {"response": "Pack water and snacks."},
                  "[[ ## profile ## ]]": {"answer": "Pack water."}})
    with dspy.context(lm=lm):
        hi = STRATEGIES.create("high-temperature")(question="What to pack?")
        assert hi.profiles == [] and hi.answer == "Pack water."
        calls = [h["kwargs"] for h in lm.history if "rollout_id" in h["kwargs"]]
        assert [(c["temperature"], c["n"]) for c in calls] == [(1.0, 5)]  # k samples of one prompt: one call, n = k
        assert len(hi.candidates) >= 1
        syn = STRATEGIES.create("synthetic-profiles")(question="What to pack?")
        assert syn.profiles == ["A hiker."] * 5
        rnd = STRATEGIES.create("random-profiles")(question="What to pack?", profile_bank=str(bank))
        rnd2 = STRATEGIES.create("random-profiles")(question="What to pack?", profile_bank=str(bank))
        assert len(rnd.profiles) == 5 and rnd.profiles == rnd2.profiles
        single = STRATEGIES.create("no-profile")(question="What to pack?")
        assert single.answer == "Pack water and snacks."
    with dspy.context(lm=lm), pytest.raises(ConfigurationError, match="profile bank"):
        STRATEGIES.create("aggregator")(question="What to pack?", profile_bank="")


def test_load_questions_jsonl_and_prefeval(tmp_path, bank, shared_data):
    q = bank.parent / "questions.jsonl"
    q.write_text("\n".join(json.dumps({"id": f"q{i}", "question": f"Question {i}?"}) for i in range(8)) + "\n")
    exs = load_questions(q)
    assert all(e.profile_bank == str(bank) for e in exs) and {e.split for e in exs} == {"train", "val", "test"}
    q.write_text(json.dumps({"id": "q", "question": "Q?", "profile_bank": "missing.jsonl"}) + "\n")
    with pytest.raises(DataError, match=r":1: field 'profile_bank'"):
        load_questions(q)
    pe = load_questions(shared_data / "prefeval")
    assert pe and all(e.profile_bank.endswith("persona-driven") for e in pe)
    assert len({e.question for e in pe}) == len(pe)
    assert len(load_bank(pe[0].profile_bank)) > 10


def test_win_rate_metric():
    ex = dspy.Example(question="What to pack?", reference="Water.")
    with dspy.context(lm=DummyLM([{"preferred": "A"}, {"preferred": "B"}, {"preferred": "tie"}, {"preferred": "A"}])):
        assert answer_win_rate(ex, dspy.Prediction(answer="Water, a map and snacks.")) == 1.0
        assert answer_win_rate(ex, dspy.Prediction(answer="Water and a map.")) == 0.25
    assert answer_win_rate(ex, dspy.Prediction(answer="The candidates say water.")) == 0.0
    assert answer_win_rate(dspy.Example(question=QUESTION, reference="x"), dspy.Prediction(answer="Water.")) == 0.0


@pytest.mark.slow
def test_aggregator_real_model_rules_hold(bank_file):
    """Real SmolLM2, one question asking for exactly 5 items (k=3 to stay under a minute): the
    answer has exactly 5 items, no meta phrase, no persona name, and is not empty."""
    from personalign.lm import CallCounter, make_lm, use

    from personalign.lm import default_model
    from personalign.lm._engine import get_engine

    lm = make_lm(cache=False)
    # start from an empty KV cache: earlier tests' prompts change llama.cpp's batching of the shared
    # prefix, which is enough to flip this tiny model's borderline answers (the test is about the rules)
    get_engine(default_model()).llm.reset()
    prog = STRATEGIES.create("aggregator", k=3, pool=4)
    with use(lm), CallCounter() as cc:
        out = prog(question=QUESTION, profile_bank=str(bank_file))
    assert len(parse_items(out.answer)) == 5, out.answer
    assert not has_meta(out.answer) and not mentions_name(out.answer, NAMES), out.answer
    assert out.report["violations"] == []
    assert 3 + 1 <= cc.calls <= 4 + 3 + 3 + 3
