"""Stage 3 runners: PrefEval MCQ/generation, PersonaMem (missing contexts named), CUPID scoring, SFT
export -- control flow with DummyLM and LM-free strategies; one slow run on the real model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dspy.utils.dummies import DummyLM

from personalign.errors import ConfigurationError, DataError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_mcq_examples_fixed_sample_and_attributes(shared_data, tmp_path):
    from personalign.runners.prefeval import mcq_examples

    a = mcq_examples(shared_data / "prefeval", split="val", limit=6, seed=1)
    b = mcq_examples(shared_data / "prefeval", split="val", limit=6, seed=1)
    assert [e.id for e in a] == [e.id for e in b] and len(a) == 6
    attrs = tmp_path / "attrs.jsonl"
    attrs.write_text(json.dumps({"user_id": a[0].user_id, "attributes": ["The user avoids gluten."]}) + "\n")
    c = mcq_examples(shared_data / "prefeval", split="val", limit=6, seed=1, attributes=attrs)
    assert c[0].attributes == ["The user avoids gluten."] and all(e.attributes == [] for e in c[1:])
    with pytest.raises(ConfigurationError):
        mcq_examples(shared_data / "prefeval", limit=0)


def test_run_mcq_lm_free(shared_data):
    from personalign.runners.prefeval import run_prefeval_mcq

    out = run_prefeval_mcq(shared_data / "prefeval", strategies=["random", "random"][:1], split="val", limit=40,
                           n_boot=100)
    row = out["strategies"][0]
    assert out["n"] == 40 and row["lm_calls"] == 0 and row["failures"] == 0
    lo, hi = row["accuracy_ci"]
    assert lo <= row["accuracy"] <= hi and 0.0 <= lo and hi <= 1.0
    assert sum(row["answer_counts"].values()) == 40


def test_run_mcq_with_dummy_lm_and_paired_diff(shared_data):
    from personalign.runners.prefeval import mcq_examples, run_mcq

    exs = mcq_examples(shared_data / "prefeval", split="val", limit=8, seed=0)
    gold = [{"answer_index": e.gold_index} for e in exs]
    lm = DummyLM(gold)
    out = run_mcq(exs, ["gold-preference", "random"], lm=lm, n_boot=100)
    by = {r["name"]: r for r in out["strategies"]}
    assert by["gold-preference"]["accuracy"] == 1.0
    assert out["vs_first"]["random"]["diff"] == pytest.approx(by["random"]["accuracy"] - 1.0)


def test_write_mcq_jsonl_roundtrip(shared_data, tmp_path):
    from personalign.programs.mcq.data import load_mcq
    from personalign.runners.prefeval import write_mcq_jsonl

    attrs = {"prefeval:lifestyle_dietary:0": ["The user is vegan."]}
    n = write_mcq_jsonl(shared_data / "prefeval" / "mcq_options" / "lifestyle_dietary.json", tmp_path / "m.jsonl",
                        attributes=attrs)
    back = load_mcq(tmp_path / "m.jsonl")
    assert len(back) == n > 10
    assert back[0].attributes == ["The user is vegan."] and back[1].attributes == []
    assert {e.split for e in back} <= {"train", "val", "test"}


def test_generation_runner_with_dummy_lm(shared_data):
    from personalign.runners.prefeval import generation_examples, run_generation

    exs = generation_examples(shared_data / "prefeval", split="val", limit=3, seed=0)
    # run_program calls the generator for all examples first, then the judge
    lm = DummyLM([{"response": f"Answer {i}."} for i in range(3)] + [{"violates": v} for v in (True, False, False)])
    out = run_generation(exs, ["generic"], lm=lm, n_boot=50)
    row = out["strategies"][0]
    assert row["violation_rate"] == pytest.approx(1 / 3) and row["failures"] == 0 and row["mention_rate"] == 0.0


def test_judge_agreement_runner(tmp_path):
    from personalign.runners.judge import run_judge_agreement

    rows = [{"id": f"r{i}", "profile": "A vegan nurse.", "prompt": f"Dinner {i % 6}?", "response_a": "Steak.",
             "response_b": "Tofu curry.", "ratings": {"The user is vegan.": 1 + i % 5, "The user runs.": 3},
             "prompt_id": f"p{i % 6}", "split": "val"} for i in range(6)]
    p = tmp_path / "ratings.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    lm = DummyLM([{"rating": r} for r in [5, 1] * 12])  # both orders agree: "B much better" every time
    out = run_judge_agreement(p, strategies=["pairwise", "tie"], lm=lm, n_boot=50)
    pw, tie = out["strategies"]
    assert out["n"] == 6 and pw["n_pairs"] == 12 and pw["lm_calls"] == 24  # 6 pairs x 2 attributes x 2 orders
    assert pw["judge_mean"] == 5.0 and pw["inflation"] > 0 and pw["failures"] == 0
    assert tie["spearman"] is None and tie["qwk"] == pytest.approx(0.0)
    assert 0 <= pw["rating_agreement"] <= 1


def test_personamem_runner_names_missing_contexts():
    from personalign.runners.personamem import personamem_examples, run_personamem

    with pytest.raises(DataError, match="shared_contexts_32k.jsonl"):
        run_personamem(FIXTURES / "bad" / "personamem_missing_contexts" / "questions_32k.csv")
    exs = personamem_examples(FIXTURES / "personamem" / "questions_tiny.csv")
    out = run_personamem(FIXTURES / "personamem" / "questions_tiny.csv", strategies=["random"], n_boot=50)
    assert out["n"] == len(exs) and out["strategies"][0]["lm_calls"] == 0


@pytest.mark.slow
def test_cupid_scoring_with_dummy_lm(tmp_path):
    """(slow: loads MiniLM for the cosine)"""
    from personalign.data import load_cupid
    from personalign.runners.cupid import run_cupid, score_inferred_preferences

    data = FIXTURES / "cupid" / "cupid_tiny.jsonl"
    inst = load_cupid(data)
    inferred = {inst[0].id: inst[0].current_contextual_preference}
    n_checks = len(inst[0].current_checklist)
    lm = DummyLM([{"covered": True}] * n_checks)
    out = score_inferred_preferences(inst, inferred, lm=lm, n_boot=50)
    assert out["items"][0]["match"] == 1.0 and out["n_missing"] == len(inst) - 1
    assert out["items"][0]["cosine"] == pytest.approx(1.0, abs=1e-4)
    assert out["preference_match"] == pytest.approx(1.0 / len(inst))
    bad = tmp_path / "inf.jsonl"
    bad.write_text(json.dumps({"id": "cupid:99:nobody", "preference": "x"}) + "\n")
    with pytest.raises(DataError, match="match no CUPID instance"):
        run_cupid(data, inferred=bad, use_lm=False)
    with pytest.raises(ConfigurationError):
        run_cupid(data)
    # --limit 1 is a seeded sample stratified by persona: score the instance it picks
    from personalign.data.sample import stratified_limit

    picked = stratified_limit(inst, 1, "persona_id", 0)[0]
    k = len(picked.current_checklist)
    resp = tmp_path / "resp.jsonl"
    resp.write_text(json.dumps({"id": picked.id, "response": "Request: approve $4,250."}) + "\n")
    out = run_cupid(data, responses=resp, lm=DummyLM([{"satisfied": True}] + [{"satisfied": False}] * (k - 1)),
                    limit=1)
    assert out["n"] == 1 and out["responses"]["n_missing"] == 0
    assert out["responses"]["items"][0]["checklist"] == pytest.approx(1 / k)


GOOD_ANSWER = ("Try a chickpea curry with spinach and rice on Monday, black bean tacos on Tuesday, and a lentil "
               "shepherd's pie with mashed potatoes later in the week.")


@pytest.mark.slow  # loads MiniLM for the answer check
def test_sft_export_keeps_only_answers_to_the_question(tmp_path):
    from personalign.runners.sft import export_sft

    pairs = [{"id": "s1", "profile": "The user is vegan.", "question": "What should I cook for dinner this week?",
              "source": "test"},
             {"id": "s2", "profile": "I strictly follow a Kosher diet.",
              "question": "What are some top dining spots I should check out while in Chicago?", "source": "test"},
             {"id": "s3", "profile": "I do not enjoy small, confined spaces.",
              "question": "Can you recommend some thrilling adventure sports I can try?", "source": "test"},
             {"id": "s4", "profile": "I avoid chain restaurants.", "question": "Where should I eat in Orlando?",
              "source": "test"},
             {"id": "s5", "profile": "The user runs.", "question": "Plan my week.", "source": "test"}]
    answers = [GOOD_ANSWER,
               "As someone who keeps kosher, I only eat food prepared under rabbinic supervision and never mix "
               "meat with dairy.",  # a paraphrased restatement of the profile
               "Can you recommend some thrilling adventure sports that I could try?",  # echoes the question
               "{response}"]  # a template placeholder
    lm = DummyLM([{"response": a} for a in answers] + [{"response": ""}] * 6)  # s5: empty every time
    out = export_sft(pairs, tmp_path / "sft.jsonl", lm=lm)
    assert out["written"] == 1 and out["generation_failures"] == 1 and out["failed"] == 4
    assert out["rejected"] == {"echoes_question": 1, "restates_profile": 1, "too_short": 1}
    assert any(e.startswith("s2: restates_profile") for e in out["errors"])
    lines = (tmp_path / "sft.jsonl").read_text().splitlines()
    assert len(lines) == 1
    rec = json.loads(lines[0])
    assert [m["role"] for m in rec["messages"]] == ["system", "user", "assistant"]
    assert rec["messages"][0]["content"] == "User profile: The user is vegan."
    assert rec["messages"][2]["content"] == GOOD_ANSWER and rec["metadata"]["implicit"] is True
    assert rec["metadata"]["question_cosine"] > rec["metadata"]["profile_cosine"]
    assert not list(tmp_path.glob(".sft.jsonl.*"))  # no temporary file left


def test_check_answer_rules():
    from personalign.runners.sft import check_answer

    kw = dict(profile="I strictly follow a Kosher diet.", question="Where should I eat in Chicago tonight?")
    assert check_answer(answer="I strictly follow a Kosher diet.", profile_cosine=1.0, question_cosine=0.1,
                        **kw) == "too_short"
    assert check_answer(answer=GOOD_ANSWER, profile_cosine=0.8, question_cosine=0.5, **kw) == "restates_profile"
    assert check_answer(answer=GOOD_ANSWER, profile_cosine=0.6, question_cosine=0.3, **kw) == "restates_profile"
    assert check_answer(answer=GOOD_ANSWER, profile_cosine=0.3, question_cosine=0.95, **kw) == "echoes_question"
    assert check_answer(answer=GOOD_ANSWER, profile_cosine=0.0, question_cosine=0.05, **kw) == "off_topic"
    assert check_answer(answer=GOOD_ANSWER, profile_cosine=0.3, question_cosine=0.5, **kw) is None


def test_cli_exit_code_2_on_bad_input(tmp_path):
    import subprocess
    import sys

    from tests.conftest import cli_env

    runs = tmp_path / "runs"
    r = subprocess.run([sys.executable, "-m", "personalign", "run", "personamem",
                        str(FIXTURES / "bad" / "personamem_missing_contexts" / "questions_32k.csv")],
                       capture_output=True, text=True, timeout=300, env=cli_env(runs))
    assert r.returncode == 2 and "shared_contexts_32k.jsonl" in r.stderr and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1
    r = subprocess.run([sys.executable, "-m", "personalign", "run", "prefeval-mcq", str(tmp_path / "nope")],
                       capture_output=True, text=True, timeout=300, env=cli_env(runs))
    assert r.returncode == 2 and r.stderr.strip() == f"error: {tmp_path / 'nope'}: file not found"
    assert not (runs / "mlflow.db").exists() and not (runs / "cache").exists()  # nothing written


@pytest.mark.slow
def test_prefeval_mcq_and_generation_real_model(shared_data):
    """Real SmolLM2 on 2 PrefEval val questions: MCQ gold-preference and generation + judge."""
    from personalign.runners.prefeval import run_prefeval_generation, run_prefeval_mcq

    out = run_prefeval_mcq(shared_data / "prefeval", strategies=["gold-preference"], limit=2, n_boot=50)
    assert out["strategies"][0]["failures"] == 0 and out["strategies"][0]["lm_calls"] <= 2
    gen = run_prefeval_generation(shared_data / "prefeval", strategies=["generic"], limit=2, n_boot=50)
    row = gen["strategies"][0]
    assert row["failures"] == 0 and row["judge_failures"] == 0 and 0.0 <= row["violation_rate"] <= 1.0
