"""Relevance strategies: registry conformance, control flow with DSPy's DummyLM, learned fit/save/load.

Unit tests use the demo labels in ``examples/`` (no shared data needed) and DummyLM for LLM
control flow only. The slow test runs the real embedded model.
"""

from __future__ import annotations

import json
from pathlib import Path

import dspy
import pytest
from dspy.utils.dummies import DummyLM

from personalign.data import load_relevance
from personalign.stages import resolve_stage
STRATEGIES = resolve_stage("relevance").registry
from tests.conftest import shared_data_dir

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "relevance_demo.jsonl"
SHARED = shared_data_dir() / "recenter_relevance" / "relevance_labels.jsonl"  # PERSONALIGN_SHARED_DATA or ../shared/data


@pytest.fixture(scope="module")
def demo():
    rows = load_relevance(DEMO)
    return [r.to_dspy() for r in rows if r.split == "train"], [r.to_dspy() for r in rows if r.split == "val"]


def test_registry_entries_resolve():
    for name in STRATEGIES.names():
        info = STRATEGIES.info(name)
        cls = STRATEGIES.load(name)
        assert issubclass(cls, dspy.Module) and getattr(cls, "uses_lm", False) == info.uses_lm, name
        assert info.trainable == (info.optimizer is not None), name
        if info.trainable:
            opt = resolve_stage("relevance").default_optimizer(name, seed=3)
            assert opt.config()["seed"] == 3


def test_programs_never_import_optimizers():
    for path in (ROOT / "personalign" / "programs").rglob("*.py"):
        text = path.read_text()
        assert "from personalign.optimizers" not in text and "import personalign.optimizers" not in text, path


@pytest.mark.parametrize("name", ["zero-shot", "criteria"])
def test_judges_return_bool_and_none_score(name):
    program = STRATEGIES.create(name)
    with dspy.context(lm=DummyLM([{"relevant": True}, {"relevant": False}])):
        a = program(attribute="The user is vegan.", prompt="Plan my dinners.")
        b = program(attribute="The user plays chess.", prompt="Plan my dinners.")
    assert (a.relevant, b.relevant) == (True, False)
    assert a.score is None


def test_cot_judge():
    program = STRATEGIES.create("cot")
    with dspy.context(lm=DummyLM([{"reasoning": "diet matters", "relevant": True}])):
        assert program(attribute="The user is vegan.", prompt="Plan my dinners.").relevant is True


def test_batch_judge_groups_chunks_and_counts_calls():
    program = STRATEGIES.create("batch", chunk_size=2)
    exs = [dspy.Example(attribute=f"a{i}", prompt="p", prompt_id="P", user_id="U" if i < 3 else "V",
                        relevant=False).with_inputs("attribute", "prompt") for i in range(5)]
    # groups: U -> [a0, a1], [a2]; V -> [a3, a4]  => 3 calls
    lm = DummyLM([{"relevant_numbers": [2]}, {"relevant_numbers": [1, 7]}, {"relevant_numbers": []}])
    with dspy.context(lm=lm):
        preds = program.predict_batch(exs)
    assert [p.relevant for p in preds] == [False, True, True, False, False]
    assert len(lm.history) == 3


def test_batch_judge_needs_lm():
    from personalign.errors import ConfigurationError

    with dspy.context(lm=None), pytest.raises(ConfigurationError):
        STRATEGIES.create("batch").predict_batch([dspy.Example(attribute="a", prompt="p")])


def test_batch_judge_with_run_program_counts_failures():
    from personalign.evaluation import run_program

    program = STRATEGIES.create("batch", retries=0)
    exs = [dspy.Example(attribute=f"a{i}", prompt="p", prompt_id="P", relevant=False).with_inputs("attribute", "prompt")
           for i in range(3)]
    with dspy.context(lm=DummyLM([{"nonsense": 1}])):
        outcome = run_program(program, exs, inputs=("attribute", "prompt"), output="relevant", progress=False)
    assert outcome.failures == 3 and program.last_errors


def test_bm25_and_cosine_compile(demo):
    train, val = demo
    for name in ("bm25", "minilm-cosine"):
        compiled, res = resolve_stage("relevance").default_optimizer(name).compile(STRATEGIES.create(name), trainset=train)
        preds = compiled.predict_batch(val)
        assert len(preds) == len(val) and all(isinstance(p.relevant, bool) for p in preds)
        assert all(isinstance(p.score, float) for p in preds)
        state = json.loads(json.dumps(compiled.dump_state()))
        again = STRATEGIES.create(name).load_state(state)
        assert [p.relevant for p in again.predict_batch(val)] == [p.relevant for p in preds]


def test_learned_threshold_from_grouped_cv_and_npz_roundtrip(demo, tmp_path):
    from personalign._verbs.relevance import load_program, save_program

    train, val = demo
    program = STRATEGIES.create("minilm-logreg")
    opt = resolve_stage("relevance").default_optimizer("minilm-logreg", seed=0)
    compiled, res = opt.compile(program, trainset=train, valset=val)
    folds = res.details["folds"]
    assert len(folds) == len({e.prompt_id for e in train})  # leave-one-prompt-out
    assert all(len(f["held_out"]) == 1 for f in folds)
    assert compiled.threshold is not None and program.threshold is None  # input not modified
    save_program(compiled, tmp_path, strategy="minilm-logreg", compile_info=res.to_dict())
    assert (tmp_path / "minilm_logreg.npz").exists()
    import numpy as np

    np.load(tmp_path / "minilm_logreg.npz", allow_pickle=False)  # plain arrays
    loaded, meta = load_program(tmp_path)
    assert meta["strategy"] == "minilm-logreg"
    assert loaded.score_batch(val) == pytest.approx(compiled.score_batch(val))
    assert loaded.threshold == compiled.threshold


def test_learned_seed_is_honoured(demo):
    train, val = demo
    a, _ = resolve_stage("relevance").default_optimizer("minilm-logreg", seed=1).compile(STRATEGIES.create("minilm-logreg"), trainset=train)
    b, _ = resolve_stage("relevance").default_optimizer("minilm-logreg", seed=1).compile(STRATEGIES.create("minilm-logreg"), trainset=train)
    assert a.score_batch(val) == pytest.approx(b.score_batch(val))


def test_grouped_cv_needs_two_prompts(demo):
    from personalign.optimizers.learned import LearnedSelectorFit

    train, _ = demo
    one = [e for e in train if e.prompt_id == train[0].prompt_id]
    with pytest.raises(ValueError, match="groups"):
        LearnedSelectorFit(label="relevant", group_key="prompt_id").compile(STRATEGIES.create("minilm-logreg"), trainset=one)


def test_unfitted_learned_raises():
    with pytest.raises(RuntimeError, match="not fitted"):
        STRATEGIES.create("minilm-logreg").score_batch([dspy.Example(attribute="a", prompt="p")])


def test_predict_relevance_python_call():
    from personalign._verbs.relevance import predict_relevance

    out = predict_relevance(["The user follows a vegetarian diet.", "The user enjoys playing chess online."],
                            "Suggest a weekly dinner plan for a family of four.")
    assert [set(r) for r in out] == [{"attribute", "relevant", "score", "decision"}] * 2
    assert out[0]["score"] > out[1]["score"]


def test_yes_prob_on_a_hosted_model_needs_its_lm_in_context():
    """A non-embedded model reads its margin from the endpoint's top_logprobs (through its dspy.LM;
    tests/lm/test_endpoint_capabilities.py), so without that LM in context it is a clear error."""
    from personalign.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="needs its LM in context"):
        STRATEGIES.create("yes-prob", model="openai/gpt-4o-mini", threshold=0.0)(attribute="a", prompt="p")


def test_cli_predict_is_light_and_works():
    import subprocess
    import sys

    code = ("import sys, personalign.cli.predict; "
            "bad=[m for m in ('dspy','litellm','torch','llama_cpp') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    from typer.testing import CliRunner

    import typer

    from personalign.cli.predict import app as predict_app

    app = typer.Typer()
    app.add_typer(predict_app, name="predict")  # mounted as `personalign predict`
    res = CliRunner().invoke(app, ["predict", "relevance", "--prompt", "Suggest a weekly dinner plan.", "-a",
                                   "The user follows a vegetarian diet.", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout.strip().splitlines()[-1])["predictions"][0]["attribute"]


@pytest.mark.slow
def test_real_model_judges_and_yes_prob(demo):
    from personalign.evaluation import run_program
    from personalign.lm import make_lm, use

    train, val = demo
    lm = make_lm("local/smollm2-135m-instruct")
    for name in ("criteria", "batch"):
        with use(lm):
            outcome = run_program(STRATEGIES.create(name), val[:4], inputs=("attribute", "prompt"),
                                  output="relevant", lm=lm, progress=False)
        assert outcome.failures == 0 and all(isinstance(p, bool) for p in outcome.predictions)
    with use(lm):
        compiled, res = resolve_stage("relevance").default_optimizer("yes-prob").compile(STRATEGIES.create("yes-prob"), trainset=train[:12])
        pred = compiled(attribute=val[0].attribute, prompt=val[0].prompt)
    assert isinstance(pred.relevant, bool) and isinstance(pred.score, float)


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/data is absent (real human relevance labels)")
def test_learned_selector_on_real_labels_beats_all_yes():
    from personalign.metrics import f1

    rows = load_relevance(SHARED)
    train = [r.to_dspy() for r in rows if r.split == "train"]
    val = [r.to_dspy() for r in rows if r.split == "val"]
    compiled, res = resolve_stage("relevance").default_optimizer("minilm-logreg").compile(STRATEGIES.create("minilm-logreg"), trainset=train)
    gold = [e.relevant for e in val]
    pred = [p.relevant for p in compiled.predict_batch(val)]
    all_yes = f1(gold, [True] * len(gold))
    assert f1(gold, pred) > all_yes


def test_yes_prob_rank_marks_the_train_rate_share_of_each_group_in_sharing_order(monkeypatch):
    """No model: the margin is stubbed, and the order in which margins are asked for is recorded."""
    import dspy

    from personalign.programs.relevance import yes_prob

    from personalign.lm import scoring

    asked = []

    def fake_margin(model, messages):  # the one margin a batch asks for, in the order it asks
        request, fact = messages[-1]["content"].split("\n\n")[:2]
        prompt, attribute = request.removeprefix("User's request: "), fact.removeprefix("User fact: ")
        asked.append((prompt, attribute))
        return float(attribute.rsplit(" ", 1)[1])

    monkeypatch.setattr(scoring, "cached_yes_no_margin", fake_margin)
    exs = [dspy.Example(attribute=f"attr {(i * 7) % 10}", prompt=f"prompt {g}", prompt_id=f"p{g}", user_id="u",
                        relevant=(i < 2)).with_inputs("attribute", "prompt")
           for i in range(10) for g in (1, 0)]  # interleaved prompts: sharing order must regroup them
    prog = STRATEGIES.create("yes-prob-rank", model="local/smollm2-135m-instruct").fit(exs)
    assert prog.top_fraction == pytest.approx(0.2)
    prog.threshold = 100.0  # only small groups use it
    preds = prog.predict_batch(exs)
    for g in ("prompt 0", "prompt 1"):
        chosen = sorted(p.score for p, e in zip(preds, exs) if e.prompt == g and p.relevant)
        assert chosen == [8.0, 9.0]  # top 2 of 10 margins in the group
    assert [p for p, _ in asked] == sorted(p for p, _ in asked), "margins are computed grouped by request"
    state = prog.dump_state()
    again = STRATEGIES.create("yes-prob-rank").load_state(state)
    assert (again.top_fraction, again.min_group, again.threshold) == (0.2, 5, 100.0)


def test_all_yes_baseline_says_yes_to_everything(demo):
    train, val = demo
    prog = STRATEGIES.create("all-yes")
    assert all(p.relevant for p in prog.predict_batch(val)) and prog(attribute="a", prompt="p").relevant


def test_a_served_model_s_margins_are_kept_in_the_lm_cache(tmp_path, monkeypatch):
    """A served model's margin: a second process (here: the per-process memo cleared) reads it from
    DSPy's cache. (An embedded model's margins are the shared forward passes of
    tests/lm/test_forward_pass.py.)"""
    import dspy

    import personalign.lm.scoring as scoring
    from personalign.lm import configure_cache
    from personalign.programs.relevance import yes_prob

    calls = []
    monkeypatch.setattr(scoring, "yes_no_margin", lambda model, messages: calls.append(messages) or 1.25)
    monkeypatch.setattr(scoring, "_served", {})
    monkeypatch.setattr(dspy, "cache", dspy.cache)  # restored after the test
    configure_cache(tmp_path / "cache")
    model = "openai/served-model"
    assert yes_prob.cached_margin(model, "The user is vegan.", "Plan my dinner.") == 1.25
    assert yes_prob.cached_margin(model, "The user is vegan.", "Plan my dinner.") == 1.25
    assert len(calls) == 1, "the same process asks once"
    scoring._served.clear()
    assert yes_prob.cached_margin(model, "The user is vegan.", "Plan my dinner.") == 1.25
    assert len(calls) == 1, "a new process reads DSPy's cache"
    configure_cache(enabled=False)
    scoring._served.clear()
    yes_prob.cached_margin(model, "The user is vegan.", "Plan my dinner.")
    assert len(calls) == 2, "with the cache off a new process computes every margin"
