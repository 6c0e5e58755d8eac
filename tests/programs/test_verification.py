"""Verification stage: registry and STAGE, loaders (PrefEval-derived and canonical JSONL), evidence
fitting, LLM verifiers with DummyLM, learned verifiers (fit, threshold by grouped CV with F2 on the
rejected class, save/load), error taxonomy, bad input; slow tests on the real embedded model."""

from __future__ import annotations

import json

import dspy
import pytest
from dspy.utils.dummies import DummyLM

from personalign.errors import DataError
from personalign.stages import resolve_stage
STAGE = resolve_stage("verification")
STRATEGIES = resolve_stage("verification").registry
from personalign.programs.verification.data import load_verification
from personalign.programs.common.budget import Budget, prompt_budget
from personalign.programs.common.evidence import fit_evidence, parse_evidence
from personalign.programs.verification.learned import user_segments

CONV = ("User: I have been vegan for ten years and I cook every evening.\n\n"
        "Assistant: That is great! Do you want recipes?\n\n"
        "User: Yes please, something quick. I also train for marathons, so high protein helps.\n\n"
        "Assistant: Try a lentil and tofu bowl.")
OTHER = ("User: My cat keeps scratching the sofa. Any advice?\n\n"
         "Assistant: Try a scratching post near the sofa.\n\n"
         "User: I live in a small flat, so space is tight.")


def _ex(evidence, attribute, accepted, group, split="train", reason=""):
    return dspy.Example(evidence=evidence, attribute=attribute, reason=reason, accepted=accepted, group=group,
                        split=split).with_inputs("evidence", "attribute", "reason")


def _toy_train():
    """Constructed pairs over 4 groups: own-conversation attributes accepted, others rejected."""
    pos_a = ["The user is vegan.", "The user cooks every evening.", "The user trains for marathons.",
             "The user wants quick recipes."]
    pos_b = ["The user has a cat.", "The user lives in a small flat.", "The user's cat scratches the sofa."]
    out = []
    for g in range(4):
        for a in pos_a:
            out.append(_ex(CONV, a, True, f"g{g}"))
            out.append(_ex(OTHER, a, False, f"g{g}"))
        for a in pos_b:
            out.append(_ex(OTHER, a, True, f"g{g}"))
            out.append(_ex(CONV, a, False, f"g{g}"))
    return out


# ------------------------------------------------------------------ registry / stage
def test_stage_definition():
    from personalign.stages import resolve_stage as get_stage

    st = get_stage("verification")
    assert st is STAGE and st.kind == "binary" and st.positive is False and st.label == st.output == "accepted"
    assert st.inputs == ("evidence", "attribute", "reason") and st.group_key == "group"
    assert st.registry is STRATEGIES
    # the positive class is a REJECTED attribute
    assert st.is_positive(False) is True and st.is_positive(True) is False
    st.registry.parse(st.default_strategies)


def test_registry_entries_and_default_optimizers_are_configured_for_rejections():
    for name in STRATEGIES.names():
        info = STRATEGIES.info(name)
        cls = STRATEGIES.load(name)
        assert issubclass(cls, dspy.Module) and getattr(cls, "uses_lm", False) == info.uses_lm, name
        assert info.trainable == (info.optimizer is not None)
        if info.trainable and name != "majority":  # every threshold fit: F2 of "rejected", by grouped CV
            opt = STAGE.default_optimizer(name, seed=3)
            cfg = opt.config()
            assert (cfg["label"], cfg["positive"], cfg["beta"], cfg["group_key"], cfg["seed"]) == ("accepted", False, 2.0,
                                                                                                   "group", 3), name


def test_package_import_is_light():
    import subprocess
    import sys

    code = ("import sys, personalign.programs.verification, personalign.programs.extraction, "
            "personalign.programs.profiles; "
            "print(any(m in sys.modules for m in ('dspy', 'torch', 'litellm', 'sentence_transformers')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------ loaders
def test_canonical_jsonl_loader(tmp_path):
    p = tmp_path / "v.jsonl"
    rows = [
        {"id": "a", "evidence": CONV, "attribute": "The user is vegan.", "accepted": True, "split": "train",
         "topic": "diet"},
        {"id": "b", "evidence": CONV, "attribute": "The user hates cooking.", "accepted": False, "split": "val",
         "user_id": "u1"},
        {"id": "c", "evidence": OTHER, "attribute": "The user has a cat.", "reason": "mentions my cat", "accepted": True},
    ]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    exs = load_verification(p)
    assert [e.group for e in exs] == ["diet", "u1", "c"]
    assert [e.split for e in exs] == ["train", "val", None]
    assert set(exs[2].inputs().keys()) == {"evidence", "attribute", "reason"} and exs[2].reason == "mentions my cat"
    assert [len(STAGE.load(p, split="val"))] == [1]


@pytest.mark.parametrize("line, field", [
    ('{"id": "a", "evidence": "x", "attribute": "y", "accepted": "yes"}', "accepted"),
    ('{"id": "a", "evidence": "x", "accepted": true}', "attribute"),
    ('{"id": "a", "evidence": "", "attribute": "y", "accepted": true}', "evidence"),
    ('not json', None),
])
def test_canonical_loader_errors_name_line_and_field(tmp_path, line, field):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"id": "ok", "evidence": "x", "attribute": "y", "accepted": true}\n' + line + "\n")
    with pytest.raises(DataError) as err:
        load_verification(p)
    assert err.value.line == 2
    if field:
        assert err.value.field == field


def test_loader_rejects_missing_and_unknown_files(tmp_path):
    with pytest.raises(DataError):
        load_verification(tmp_path / "nope.jsonl")
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(DataError):
        load_verification(tmp_path / "x.csv")


def test_prefeval_derived_pairs_split_by_topic(shared_data):
    from personalign.data.splits import find_leaks

    exs = load_verification(shared_data / "prefeval")
    splits = {s: [e for e in exs if e.split == s] for s in ("train", "val", "test")}
    assert all(splits.values()) and sum(map(len, splits.values())) == len(exs)
    assert not find_leaks(splits, by="topic")
    for part in splits.values():  # one rejected pair per accepted pair
        assert sum(e.accepted for e in part) * 2 == len(part)
    assert all(e.group == e.topic for e in exs)
    # a rejected pair's attribute is the preference of another topic's record of the same split
    val_prefs = {e.attribute for e in splits["val"] if e.accepted}
    assert all(e.attribute in val_prefs for e in splits["val"] if not e.accepted)
    assert {len(e.evidence) > 0 for e in exs} == {True}


# ------------------------------------------------------------------ evidence fitting
def test_parse_evidence_roles_and_free_text():
    turns = parse_evidence(CONV)
    assert [t.role for t in turns] == ["user", "assistant", "user", "assistant"]
    assert parse_evidence("no markers at all")[0].role == "user"
    assert parse_evidence("   ") == []
    assert parse_evidence("Assistant: only the assistant")[0].role == "assistant"


def test_fit_evidence_steps():
    assert fit_evidence(CONV, "x", 10_000).steps == []
    f = fit_evidence(CONV, "x", len(CONV) - 10)
    assert f.steps == ["user_turns_only"] and "Assistant" not in f.text and "marathons" in f.text
    long = "User: " + "word " * 3000 + "\n\nUser: I am vegan.\n\nAssistant: ok"
    f = fit_evidence(long, "The user is vegan.", 2500, per_turn_chars=2000)
    assert f.steps == ["user_turns_only", "turns_cut"] and len(f.text) <= 2500 and "[...]" in f.text


@pytest.mark.slow
def test_fit_evidence_ranks_turns_by_similarity_when_they_do_not_fit():
    turns = [f"User: I repaired bicycle number {i} in my garage today and oiled the chain." for i in range(40)]
    turns.insert(17, "User: I have been strictly vegan for ten years.")
    text = "\n\n".join(turns)
    f = fit_evidence(text, "The user is vegan.", 400)
    assert f.steps[-1] == "ranked_by_similarity" and "vegan" in f.text and len(f.text) <= 400
    assert f.n_turns == 41 and 0 < f.n_turns_kept < 41


def test_prompt_budget_on_hosted_models_is_characters():
    judge = STRATEGIES.create("criteria").judge
    b = prompt_budget(judge, {"attribute": "a", "reason": ""}, "evidence", output_tokens=512, model="openai/gpt-4o-mini")
    assert (b.limit, b.unit) == (50_000, "chars") and b.fits("x" * 50_000) and not b.fits("x" * 50_001)


@pytest.mark.slow
def test_prompt_budget_on_the_embedded_model_counts_the_exact_prompt_and_demos():
    from personalign.errors import ContextWindowError
    from personalign.lm._engine import current_settings

    model = "local/smollm2-135m-instruct"
    program = STRATEGIES.create("criteria")
    b = prompt_budget(program.judge, {"attribute": "The user is vegan.", "reason": ""}, "evidence", output_tokens=512,
                      model=model)
    assert b.unit == "tokens" and 2000 < b.limit < current_settings().n_ctx - 512
    assert b.measure("hello world") == 2
    # demos added by a teleprompter take room from the evidence
    program.judge.demos = [dspy.Example(evidence=CONV, attribute="The user is vegan.", reason="", accepted=True,
                                        rationale="says so")] * 3
    b2 = prompt_budget(program.judge, {"attribute": "The user is vegan.", "reason": ""}, "evidence", output_tokens=512,
                       model=model)
    assert b2.limit < b.limit - 200
    program.judge.demos = [dspy.Example(evidence="User: " + "word " * 3000, attribute="a", reason="",
                                        accepted=True, rationale="r")] * 2
    with pytest.raises(ContextWindowError):
        prompt_budget(program.judge, {"attribute": "a", "reason": ""}, "evidence", output_tokens=512, model=model)


def test_fit_evidence_token_budget_with_a_fake_tokenizer():
    words = Budget(50, "tokens", lambda t: len(t.split()))  # one token per word: CONV has 42, its user turns 27
    assert fit_evidence(CONV, "The user is vegan.", words).steps == []
    f = fit_evidence(CONV + "\n\nAssistant: " + "more " * 20, "The user is vegan.", words)
    assert words.fits(f.text) and f.steps == ["user_turns_only"]


# ------------------------------------------------------------------ LLM verifiers (DummyLM)
@pytest.mark.parametrize("name", ["zero-shot", "criteria"])
def test_llm_verifiers_return_bool_and_rationale(name):
    program = STRATEGIES.create(name)
    lm = DummyLM([{"accepted": True, "rationale": "the user says so"}, {"accepted": False, "rationale": "a guess"}])
    with dspy.context(lm=lm):
        a = program(evidence=CONV, attribute="The user is vegan.", reason="says vegan")
        b = program(evidence=CONV, attribute="The user is a chef.")
    assert (a.accepted, b.accepted) == (True, False) and a.rationale == "the user says so" and a.score is None
    assert "vegan for ten years" in lm.history[0]["messages"][-1]["content"]


def test_cot_verifier():
    with dspy.context(lm=DummyLM([{"reasoning": "stated", "accepted": True, "rationale": "stated"}])):
        assert STRATEGIES.create("cot")(evidence=CONV, attribute="The user is vegan.").accepted is True


def test_empty_or_assistant_only_evidence_is_rejected_without_a_call():
    lm = DummyLM([{"accepted": True, "rationale": "x"}])
    with dspy.context(lm=lm):
        for ev in ("", "   ", "Assistant: I said something."):
            p = STRATEGIES.create("criteria")(evidence=ev, attribute="The user is vegan.")
            assert p.accepted is False and "no user messages" in p.rationale
    assert lm.history == []


def test_huge_and_non_utf8_evidence_do_not_crash_llm_verifiers():
    huge = "User: " + ("I like tea. " * 450_000)  # ~5 MB, one message
    assert len(huge) > 5_000_000
    lm = DummyLM([{"accepted": False, "rationale": "r"}, {"accepted": True, "rationale": "r"}])
    with dspy.context(lm=lm):
        p = STRATEGIES.create("zero-shot")(evidence=huge, attribute="The user likes tea.")
        q = STRATEGIES.create("zero-shot")(evidence="User: caf\udce9 every day \udcff", attribute="The user likes caf\udce9.")
    assert p.evidence_steps == ["user_turns_only", "turns_cut"]
    assert len(lm.history[0]["messages"][-1]["content"]) < 60_000
    assert q.accepted is True and "\ufffd" in lm.history[1]["messages"][-1]["content"]


def test_run_program_counts_llm_failures():
    from personalign.evaluation import run_program

    exs = [_ex(CONV, "The user is vegan.", True, "g")]
    with dspy.context(lm=DummyLM([{"nonsense": 1}] * 5)):
        out = run_program(STRATEGIES.create("zero-shot"), exs, inputs=STAGE.inputs, output="accepted", progress=False)
    assert out.failures == 1 and out.predictions == [None]


# ------------------------------------------------------------------ learned verifiers
def test_user_segments_only_user_text_and_bounded():
    segs = user_segments(CONV)
    assert all("Try a lentil" not in s for s in segs) and any("vegan" in s for s in segs)
    assert user_segments("Assistant: hi") == []
    huge = "User: " + "I like tea. " * 450_000
    segs = user_segments(huge)
    assert len(segs) <= 200_000 // 600 + 2 and all(len(s) <= 600 for s in segs)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["minilm-logreg", "minilm-maxsim"])
def test_learned_verifier_compiles_with_f2_threshold_and_roundtrips(name, tmp_path):
    train = _toy_train()
    program, res = STAGE.default_optimizer(name, seed=0).compile(STRATEGIES.create(name), trainset=train)
    assert res.config["positive"] is False and res.config["beta"] == 2.0
    assert len(res.details["folds"]) == 4  # leave-one-group-out over 4 groups
    preds = program.predict_batch(train)
    gold_rejected = [not e.accepted for e in train]
    pred_rejected = [not p.accepted for p in preds]
    assert sum(g == p for g, p in zip(gold_rejected, pred_rejected)) / len(train) > 0.8
    assert all(isinstance(p.score, float) and "cosine" in p.rationale for p in preds)
    one = program(evidence=CONV, attribute="The user is vegan.")
    assert one.accepted is True
    if name == "minilm-logreg":
        # 4 groups: too few to trust an absolute threshold on a new group, so the F2 threshold stays
        # on the scorer and a within-unit rule (with its yes-rate guard) wraps it
        scorer = getattr(program, "undecided", program)
        assert scorer.threshold is not None
        scorer.save_weights(tmp_path)
        fresh = STRATEGIES.create(name).load_state(scorer.dump_state()).load_weights(tmp_path)
        assert [p.score for p in fresh.predict_batch(train[:6])] == pytest.approx([p.score for p in preds[:6]])
        bad = STRATEGIES.create(name, features=["sims"])
        from personalign.errors import DataError

        with pytest.raises(DataError, match="shape"):
            bad.load_weights(tmp_path)


def test_unfitted_learned_verifiers_raise():
    with pytest.raises(RuntimeError):
        STRATEGIES.create("minilm-logreg").score_batch([_ex(CONV, "a", True, "g")])
    with pytest.raises(RuntimeError):
        STRATEGIES.create("minilm-maxsim").predict_batch([_ex(CONV, "a", True, "g")])
    with pytest.raises(ValueError):
        STRATEGIES.create("minilm-logreg").fit([_ex(CONV, "a", True, "g")])


@pytest.mark.slow
def test_learned_verifier_bad_input_defined_results():
    train = _toy_train()
    program, _ = STAGE.default_optimizer("minilm-logreg").compile(STRATEGIES.create("minilm-logreg"), trainset=train)
    empty = program(evidence="Assistant: only me", attribute="The user is vegan.")
    assert empty.rationale == "no user messages in the evidence" and isinstance(empty.accepted, bool)
    weird = program(evidence="User: I am vegan \udcff\udcfe", attribute="The user is vegan.")
    assert isinstance(weird.accepted, bool)


# ------------------------------------------------------------------ error taxonomy
def test_error_taxonomy_counts_with_dummy_lm():
    from personalign.programs.verification.taxonomy import classify_errors

    items = [{"evidence": CONV, "attribute": "The user is a professional chef.", "rationale": "guess"},
             {"evidence": CONV, "attribute": "The user likes the second one.", "rationale": "unclear"},
             {"evidence": "", "attribute": "The user is tall."},
             dspy.Example(evidence=CONV, attribute="The user always eats tofu.", rationale="one bowl")]
    lm = DummyLM([{"category": "missing_evidence"}, {"category": "not_standalone"}, {"category": "overgeneralization"}])
    with dspy.context(lm=lm):
        out = classify_errors(items)
    assert out["categories"] == ["missing_evidence", "not_standalone", "missing_evidence", "overgeneralization"]
    assert out["counts"] == {"overgeneralization": 1, "missing_evidence": 2, "task_context_confusion": 0,
                             "not_standalone": 1, "other": 0}
    assert out["failures"] == 0 and sum(out["shares"].values()) == pytest.approx(1.0)
    assert len(lm.history) == 3  # the empty-evidence item needed no call


# ------------------------------------------------------------------ real embedded model
@pytest.fixture(scope="module")
def small_val(shared_data):
    exs = [e for e in load_verification(shared_data / "prefeval") if e.split == "val"]
    exs.sort(key=lambda e: len(e.evidence))
    return [exs[0], next(e for e in exs if e.accepted != exs[0].accepted), exs[2]]


@pytest.mark.slow
def test_real_model_llm_verifiers_end_to_end(small_val):
    from personalign.evaluation import evaluate_stage
    from personalign.lm import make_lm

    lm = make_lm("local/smollm2-135m-instruct")
    for name in ("zero-shot", "criteria"):
        rep = evaluate_stage(STAGE, STRATEGIES.create(name), small_val, lm=lm, n_boot=50, progress=False)
        assert rep["failures"] == 0 and all(isinstance(p, bool) for p in rep["predictions"])
        assert rep["n"] == 3 and 0.0 <= rep["recall"] <= 1.0


@pytest.mark.slow
def test_real_model_error_taxonomy(small_val):
    from personalign.lm import make_lm
    from personalign.programs.verification.taxonomy import classify_errors
    from personalign.signatures.verification import ERROR_CATEGORIES

    rejected = [e for e in small_val if not e.accepted][:1]
    out = classify_errors(rejected, lm=make_lm("local/smollm2-135m-instruct"))
    assert out["failures"] == 0 and out["categories"][0] in ERROR_CATEGORIES


@pytest.mark.slow
def test_fitted_prompts_fit_the_embedded_context():
    """The longest evidence the LLM verifiers pass on, and the largest extraction chunk, leave the
    answer budget free in the 4096-token window of the embedded model (dense text: ~3.6 chars/token)."""
    from personalign.lm import make_lm
    from personalign.lm._engine import current_settings, get_engine
    from personalign.programs.extraction.extractor import OUTPUT_TOKENS, AttributeExtractor
    from personalign.programs.verification.judges import CriteriaVerifier
    from personalign.preprocess import normalize_turns
    from personalign.signatures.extraction import ExtractionSignature
    from personalign.signatures.verification import VerificationCriteriaSignature

    model = "local/smollm2-135m-instruct"
    engine = get_engine(model)
    n_ctx = current_settings().n_ctx
    dense = " ".join(f"Item-{i}: 37 kg, (x{i % 7}); ok?" for i in range(4000))  # digits and punctuation: few chars/token
    adapter = dspy.JSONAdapter()
    with dspy.context(lm=make_lm(model, load=False)):
        verifier = CriteriaVerifier()
        # without demos, and with 4 long demos as a teleprompter would add them
        for demos in ([], [dspy.Example(evidence="User: " + dense[k * 9000:(k + 1) * 9000], attribute=f"attr {k}",
                                        reason="", accepted=bool(k % 2), rationale="r") for k in range(4)]):
            verifier.judge.demos = demos
            sent, budget = verifier.budget("The user weighs 37 kg.", "")
            assert (sent is None) == (not demos)
            fitted = fit_evidence("User: " + dense, "The user weighs 37 kg.", budget)
            msgs = adapter.format(VerificationCriteriaSignature, demos=sent or [],
                                  inputs={"evidence": fitted.text, "attribute": "The user weighs 37 kg.", "reason": ""})
            prompt, _ = engine.render(msgs)
            assert engine.count_tokens(prompt) + verifier.output_tokens <= n_ctx
            assert len(fitted.text) > (300 if demos else 2000)  # dense text: ~1.5 characters per token
        chunk = AttributeExtractor().chunking(normalize_turns([{"role": "user", "content": dense[:20_000]}])).chunks[0]
        msgs = adapter.format(ExtractionSignature, demos=[], inputs={"user_turns": chunk.text})
        prompt, _ = engine.render(msgs)
        assert engine.count_tokens(prompt) + OUTPUT_TOKENS <= n_ctx
