"""The end-to-end pipeline (extract → verify → select → answer) and its controls: control flow with
DummyLM on real PrefEval questions; `personalign run pipeline` bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from dspy.utils.dummies import DummyLM

from personalign.errors import ConfigurationError, DataError

ROOT = Path(__file__).resolve().parents[2]
ATTR = "The user prefers quiet places."


def _lm(*, accepted=True, relevant=True, answer=0):
    # one answer per signature, keyed by a field only that signature's prompt carries
    return DummyLM({
        "[[ ## user_turns ## ]]": {"attributes": [{"attribute": ATTR, "reason": "said so", "confidence": 0.9,
                                                   "evidence_turn_ids": [0]}]},
        "[[ ## evidence ## ]]": {"accepted": accepted, "rationale": "ok"},
        "[[ ## options ## ]]": {"answer_index": answer},
        "[[ ## prompt ## ]]": {"relevant": relevant},
    })


def _run(shared_data, lm, **kw):
    from personalign.runners.pipeline import run_pipeline

    kw = {"extractor": "extract", "verifier": "zero-shot", **kw}  # the LLM steps the DummyLM scripts
    return run_pipeline(shared_data / "prefeval", split="val", limit=kw.pop("limit", 6), lm=lm, n_boot=50, **kw)


def test_pipeline_runs_every_step_and_every_control_on_the_same_questions(shared_data):
    lm = _lm()
    out = _run(shared_data, lm)
    assert out["n"] == 6 and sum(out["topics"].values()) == 6 and len(out["topics"]) >= 3  # stratified by topic
    names = [c["name"] for c in out["strategies"]]
    assert names == ["pipeline", "verified-all", "no-profile", "gold-preference", "random-attribute"]
    a = out["attributes"]
    assert a["extracted_per_question"] == a["verified_per_question"] == a["selected_per_question"] == 1.0
    assert a["rejected_share"] == 0.0 and a["questions_with_selected"] == 6
    steps = out["steps"]
    assert steps["extract"]["lm_calls"] == 6 and steps["verify"]["lm_calls"] == 6 and steps["select"]["lm_calls"] == 6
    gold0 = sum(it["gold_index"] == 0 for it in out["items"]) / 6
    for c in out["strategies"]:  # every condition answered 0 everywhere
        assert c["accuracy"] == pytest.approx(gold0) and c["failures"] == 0
        assert c["answer_lm_calls"] == 6
    pipe = out["strategies"][0]
    assert pipe["lm_calls_per_question"] == 4.0  # extract + verify + select + answer
    assert pipe["vs_no_profile"]["diff"] == 0.0
    assert out["gap_closed"] is None  # gold == no-profile: the gap is undefined
    for it in out["items"]:
        assert it["selected"] == [ATTR] and set(it["answers"].values()) == {0}
    prompts = [h["messages"][-1]["content"] for h in lm.history if "[[ ## options ## ]]" in h["messages"][-1]["content"]]
    assert sum(ATTR in p for p in prompts) == 6 * 3  # pipeline, verified-all, random-attribute


def test_rejected_attributes_never_reach_the_answer(shared_data):
    lm = _lm(accepted=False)
    out = _run(shared_data, lm, limit=4, conditions=("pipeline", "no-profile"))
    assert out["attributes"]["verified_per_question"] == 0 and out["attributes"]["rejected_share"] == 1.0
    assert out["steps"]["select"]["items"] == 0 and out["steps"]["select"]["lm_calls"] == 0
    prompts = [h["messages"][-1]["content"] for h in lm.history]
    assert not any(ATTR in p for p in prompts if "[[ ## options ## ]]" in p)
    assert [c["name"] for c in out["strategies"]] == ["pipeline", "no-profile"]


def test_random_attributes_come_from_other_topics_and_are_seeded():
    import dspy

    from personalign.runners.pipeline import random_attributes

    exs = [dspy.Example(id=f"q{i}", topic="a" if i < 2 else "b", user_id=f"u{i}") for i in range(4)]
    verified = [["a0"], ["a1"], ["b2", "b2x"], ["b3"]]
    got = random_attributes(exs, verified, [1, 0, 2, 5], seed=0)
    assert all(x.startswith("b") for x in got[0] + got[1]) and all(x.startswith("a") for x in got[2] + got[3])
    assert [len(g) for g in got] == [1, 1, 2, 2]
    assert got == random_attributes(exs, verified, [1, 0, 2, 5], seed=0)
    assert random_attributes(exs[:1], verified[:1], [1]) == [[]]


def test_bad_inputs_fail_before_any_call(shared_data, tmp_path):
    from personalign.runners.pipeline import run_pipeline

    lm = _lm()
    with pytest.raises(ConfigurationError, match="unknown condition"):
        run_pipeline(shared_data / "prefeval", conditions=("pipeline", "oracle"), lm=lm)
    with pytest.raises(ConfigurationError):
        run_pipeline(shared_data / "prefeval", extractor="nope", lm=lm)
    with pytest.raises(ConfigurationError, match="--selector-data"):
        run_pipeline(shared_data / "prefeval", selector="minilm-logreg", limit=2, lm=lm)
    with pytest.raises(DataError, match="PrefEval root"):
        run_pipeline(shared_data / "prefeval" / "mcq_options", limit=2, lm=lm)
    with pytest.raises(DataError):
        run_pipeline(tmp_path / "missing", lm=lm)
    assert lm.history == []


def test_cli_bad_input_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text("{not json")
    proc = subprocess.run([sys.executable, "-m", "personalign", "run", "pipeline", str(bad), "--limit", "2",
                           "--no-track", "--no-cache"], capture_output=True, text=True, cwd=tmp_path,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "broken.json" in lines[0]
    assert proc.stdout == "" and not (tmp_path / "runs").exists()


def test_cli_help_says_limit_is_stratified():
    proc = subprocess.run([sys.executable, "-m", "personalign", "run", "pipeline", "--help"], capture_output=True,
                          text=True, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0 and "stratified" in " ".join(proc.stdout.split())


@pytest.mark.slow  # fits minilm-logreg on PrefEval's train pairs (~1 min)
def test_the_default_steps_give_the_answer_a_profile(shared_data):
    """The defaults are the steps measured end to end on the 1.5B (first-person -> minilm-logreg -> zero-shot):
    LM-free extraction and verification, so only selection and answering call the (scripted) LM,
    and the user's own sentences reach the answer."""
    from personalign.runners.pipeline import DEFAULT_STEPS, run_pipeline

    lm = DummyLM({"[[ ## options ## ]]": {"answer_index": 0}, "[[ ## prompt ## ]]": {"relevant": True}})
    out = run_pipeline(shared_data / "prefeval", split="val", limit=3, lm=lm, n_boot=20,
                       conditions=("pipeline", "no-profile"))
    assert out["programs"]["extractor"] == DEFAULT_STEPS["extractor"] == "first-person"
    a = out["attributes"]
    assert a["extracted_per_question"] >= 1 and a["verified_per_question"] >= 1 and a["questions_with_selected"] == 3
    assert out["steps"]["extract"]["lm_calls"] == 0 and out["steps"]["verify"]["lm_calls"] == 0
    assert out["steps"]["select"]["lm_calls"] == round(a["verified_per_question"] * 3)


def test_verified_all_alone_makes_no_selection_call(shared_data):
    """verified-all reads no selection, so without pipeline or random-attribute the select step is
    skipped: 1 extract + 1 verify + 1 answer call per question, none to the selector."""
    lm = _lm()
    out = _run(shared_data, lm, limit=3, conditions=("verified-all", "no-profile"))
    assert out["steps"]["select"] is None and "selected_per_question" not in out["attributes"]
    assert not any("[[ ## prompt ## ]]" in h["messages"][-1]["content"] and "[[ ## options ## ]]" not in
                   h["messages"][-1]["content"] for h in lm.history)
    row = out["strategies"][0]
    assert row["name"] == "verified-all" and row["lm_calls_per_question"] == 3.0
    assert all(it["selected"] is None for it in out["items"])
