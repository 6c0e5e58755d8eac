"""Extraction stage: chunking, the typed extractor (DummyLM), filtering, merging, metric, loader,
verify-and-refine, baseline, bad input; slow tests on the real embedded model and MiniLM."""

from __future__ import annotations

import math

import dspy
import pytest
from dspy.utils.dummies import DummyLM

from personalign.errors import DataError
from personalign.stages import resolve_stage
STAGE = resolve_stage("extraction")
STRATEGIES = resolve_stage("extraction").registry
from personalign.programs.extraction.chunking import chunk_user_turns
from personalign.programs.extraction.extractor import AttributeExtractor, clean_attributes
from personalign.programs.extraction.merge import merge_attributes, merged_confidence
from personalign.preprocess import normalize_turns
from personalign.signatures.extraction import ExtractedAttribute

CONV = [
    {"role": "user", "content": "I only eat vegan food. Can you suggest a dinner?"},
    {"role": "assistant", "content": "Sure: a lentil curry with rice."},
    {"role": "user", "content": "Thanks! I also run marathons every spring, so something with protein."},
    {"role": "assistant", "content": "Add tofu."},
]


def _attr(text, conf=0.8, ids=(0,), reason="r"):
    return {"attribute": text, "reason": reason, "confidence": conf, "evidence_turn_ids": list(ids)}


# ------------------------------------------------------------------ stage / registry
def test_stage_definition():
    from personalign.stages import resolve_stage as get_stage

    st = get_stage("extraction")
    assert st is STAGE and st.kind == "scored" and st.output == "attributes" and st.inputs == ("conversation",)
    assert st.metric_name == "recall" and st.metric_fn() is not None
    st.registry.parse(st.default_strategies)
    for name in STRATEGIES.names():
        cls, info = STRATEGIES.load(name), STRATEGIES.info(name)
        assert issubclass(cls, dspy.Module) and getattr(cls, "uses_lm", False) == info.uses_lm, name
        assert not info.trainable


# ------------------------------------------------------------------ chunking
def test_chunks_on_turn_boundaries_user_turns_only():
    turns = normalize_turns([{"role": "user", "content": "a" * 40}, {"role": "assistant", "content": "b" * 500},
                             {"role": "user", "content": "c" * 40}, {"role": "user", "content": "d" * 40}])
    ch = chunk_user_turns(turns, max_chars=120)
    assert [c.turn_ids for c in ch.chunks] == [[0, 2], [3]]
    assert all(len(c.text) <= 120 for c in ch.chunks) and "b" not in "".join(c.text for c in ch.chunks)
    assert ch.chunks[0].text.startswith("[turn 0] ") and "\n\n[turn 2] " in ch.chunks[0].text
    assert chunk_user_turns(turns).chunks[0].turn_ids == [0, 2, 3]  # 50,000 by default: one chunk


def test_oversized_turn_is_cut_then_split_into_parts():
    turns = normalize_turns([{"role": "user", "content": "x" * 5_000_000}, {"role": "user", "content": "short"}])
    ch = chunk_user_turns(turns, max_chars=8_000, max_turn_chars=20_000)
    assert ch.truncated_turns == [0]
    assert all(len(c.text) <= 8_000 for c in ch.chunks)
    # 20,000 kept characters in 3 parts; the short turn joins the last part's chunk
    assert len(ch.chunks) == 3 and ch.chunks[0].text.startswith("[turn 0, part 1/3] ")
    assert ch.chunks[-1].turn_ids == [0, 1] and ch.chunks[-1].text.endswith("[...]\n\n[turn 1] short")
    with pytest.raises(ValueError):
        chunk_user_turns(turns, max_chars=10)


def test_no_user_turns_no_chunks():
    assert chunk_user_turns(normalize_turns([{"role": "assistant", "content": "hi"}])).chunks == []
    assert chunk_user_turns(normalize_turns([{"role": "user", "content": "   "}])).n_user_turns == 0


# ------------------------------------------------------------------ filtering
def test_clean_attributes_filters_confidence_evidence_and_duplicates():
    raw = [_attr("The user is vegan.", 0.9, [0]), _attr("the user is  vegan", 0.95, [0, 2]),
           _attr("The user runs.", 0.3, [2]), _attr("The user likes curry.", 0.8, [1]),
           _attr("   ", 0.9, [0]), _attr("The user is loud.", 1.7, [2, 99])]
    got, dropped = clean_attributes(raw, [0, 2])
    assert [a.attribute for a in got] == ["the user is vegan", "The user is loud."]
    assert got[1].confidence == 1.0 and got[1].evidence_turn_ids == [2]
    assert dropped == {"blank": 1, "low_confidence": 1, "no_user_evidence": 1, "duplicate": 1}
    got, _ = clean_attributes(raw, [0, 2], min_confidence=0.0, require_evidence=False)
    assert "The user likes curry." in [a.attribute for a in got]


# ------------------------------------------------------------------ extractor (DummyLM)
def test_extractor_one_call_filters_and_returns_typed_attributes():
    lm = DummyLM([{"attributes": [_attr("The user is vegan.", 0.9, [0]), _attr("The user runs marathons.", 0.3, [2]),
                                  _attr("The user likes curry.", 0.8, [1])]}])
    with dspy.context(lm=lm):
        p = STRATEGIES.create("extract")(conversation=CONV)
    assert [a.attribute for a in p.attributes] == ["The user is vegan."]
    assert all(isinstance(a, ExtractedAttribute) for a in p.attributes)
    assert p.n_chunks == 1 and p.n_proposed == 3
    assert p.dropped["low_confidence"] == 1 and p.dropped["no_user_evidence"] == 1
    prompt = lm.history[0]["messages"][-1]["content"]
    assert "[turn 0] I only eat vegan" in prompt and "lentil curry" not in prompt  # assistant text not shown


def test_extractor_pools_chunks_and_merges():
    turns = [{"role": "user", "content": f"Message {i}: " + "I am vegan and cook at home. " * 8} for i in range(3)]
    lm = DummyLM([{"attributes": [_attr("The user is vegan.", 0.6, [0])]},
                  {"attributes": [_attr("The user follows a vegan diet.", 0.7, [1])]},
                  {"attributes": [_attr("The user is vegan.", 0.5, [2])]}])
    ext = AttributeExtractor(max_chunk_chars=300)
    with dspy.context(lm=lm):
        p = ext(conversation=turns)
    assert p.n_chunks == 3 and len(lm.history) == 3
    assert sorted(a.attribute for a in p.attributes) == ["The user follows a vegan diet.", "The user is vegan."]
    assert p.dropped["duplicate"] == 1


@pytest.mark.parametrize("conv, note", [([], "empty history"),
                                        ([{"role": "assistant", "content": "Hello!"}], "no user turns with text")])
def test_extractor_defined_empty_results_without_calls(conv, note):
    lm = DummyLM([{"attributes": []}])
    with dspy.context(lm=lm):
        p = STRATEGIES.create("extract")(conversation=conv)
    assert p.attributes == [] and p.note == note and lm.history == []


def test_extractor_huge_message_and_non_utf8():
    conv = [{"role": "user", "content": "I like tea. " * 450_000}, {"role": "user", "content": b"caf\xe9 lover \xff"}]
    lm = DummyLM([{"attributes": [_attr("The user likes tea.", 0.9, [0])]}])
    with dspy.context(lm=lm):
        p = STRATEGIES.create("extract")(conversation=conv)
    assert p.truncated_turns == [0] and p.n_chunks == 1
    prompt = lm.history[0]["messages"][-1]["content"]
    assert len(prompt) < 25_000 and "caf\ufffd lover \ufffd" in prompt


def test_extractor_bad_turns_raise_data_error():
    with pytest.raises(DataError) as err:
        STRATEGIES.create("extract")(conversation=[{"role": "user", "content": 3}])
    assert err.value.field == "turns.0.content"


def test_extractor_chunk_budget_on_hosted_models_is_50000_chars():
    with dspy.context(lm=DummyLM([])):
        b = AttributeExtractor().budget()
    assert (b.limit, b.unit) == (50_000, "chars")


@pytest.mark.slow
def test_extractor_chunks_fit_the_embedded_model_in_tokens():
    from personalign.lm import make_lm

    ext = AttributeExtractor()
    turns = normalize_turns([{"role": "user", "content": f"Note {i}: 12.5 kg; 3/4 cup (x{i}) ok?" * 20} for i in range(40)])
    with dspy.context(lm=make_lm("local/smollm2-135m-instruct")):
        b = ext.budget()
        assert b.unit == "tokens" and 500 < b.limit < 4096 - 2300
        ch = ext.chunking(turns, b)
    assert len(ch.chunks) > 1 and all(b.measure(c.text) <= b.limit for c in ch.chunks)
    assert sorted(i for c in ch.chunks for i in c.turn_ids) == list(range(40))


def test_output_budget_holds_the_longest_bounded_answer():
    """The embedded backend shortens string bounds when a schema's longest answer exceeds the output
    budget; OUTPUT_TOKENS must leave the declared bounds intact."""
    from dspy.adapters.json_adapter import _get_structured_outputs_response_format

    from personalign.lm._engine import _max_chars, fit_schema
    from personalign.programs.extraction.extractor import OUTPUT_TOKENS
    from personalign.signatures.extraction import ExtractionSignature

    schema = _get_structured_outputs_response_format(ExtractionSignature).model_json_schema()
    assert _max_chars(schema, schema["$defs"]) <= OUTPUT_TOKENS
    assert fit_schema(schema, 600, 12, OUTPUT_TOKENS) == fit_schema(schema, 600, 12, 10**6)


def test_restate_output_budget_leaves_a_whole_attribute():
    """The restating call's budget must not make the backend shorten its free string below twice
    an attribute's length (a 96-token budget cut answers at ~60 characters)."""
    from dspy.adapters.json_adapter import _get_structured_outputs_response_format

    from personalign.lm._engine import fit_schema
    from personalign.lm._engine import LocalSettings
    from personalign.programs.extraction.restate import OUTPUT_TOKENS
    from personalign.signatures.extraction import MAX_ATTRIBUTE_CHARS, RestateSignature

    schema = _get_structured_outputs_response_format(RestateSignature).model_json_schema()
    bounded = fit_schema(schema, LocalSettings().max_string_chars, 12, OUTPUT_TOKENS)
    assert bounded["properties"]["attribute"]["maxLength"] >= 2 * MAX_ATTRIBUTE_CHARS
    assert fit_schema(schema, LocalSettings().max_string_chars, 12, 96)["properties"]["attribute"]["maxLength"] < 100


# ------------------------------------------------------------------ merging
def test_merged_confidence_formula():
    # disjoint evidence: plain noisy-OR
    assert merged_confidence([0.6, 0.5], [[1], [2]]) == pytest.approx(1 - 0.4 * 0.5)
    # identical evidence: nothing added beyond the most confident member
    assert merged_confidence([0.6, 0.5], [[1], [1]]) == pytest.approx(0.6)
    # half overlap (Jaccard 1/3): factor raised to 2/3
    assert merged_confidence([0.6, 0.5], [[1, 2], [2, 3]]) == pytest.approx(1 - 0.4 * 0.5 ** (2 / 3))
    # empty evidence sets count as fully overlapping with each other
    assert merged_confidence([0.6, 0.5], [[], []]) == pytest.approx(0.6)
    assert merged_confidence([], []) == 0.0 and merged_confidence([1.0, 0.2], [[1], [2]]) == 1.0
    # monotone: never below the best member, never above 1
    for cs in ([0.4, 0.9, 0.7], [0.99, 0.99, 0.99]):
        m = merged_confidence(cs, [[i] for i in range(len(cs))])
        assert max(cs) <= m <= 1.0


def test_merge_with_given_embeddings_representative_and_union():
    attrs = [ExtractedAttribute(**_attr("The user is vegan.", 0.5, [0])),
             ExtractedAttribute(**_attr("The user eats plant-based.", 0.9, [2])),
             ExtractedAttribute(**_attr("The user eats no meat.", 0.4, [4])),
             ExtractedAttribute(**_attr("The user runs marathons.", 0.8, [6]))]
    e = [[1.0, 0.0, 0.0], [0.95, 0.31, 0.0], [0.9, -0.44, 0.0], [0.0, 0.0, 1.0]]
    norm = [[v / math.sqrt(sum(x * x for x in row)) for v in row] for row in e]
    merged = merge_attributes(attrs, embeddings=norm, threshold=0.7)
    assert len(merged) == 2
    m = merged[0]
    assert m.support == 3 and m.evidence_turn_ids == [0, 2, 4] and len(m.members) == 3
    # weighted centroid leans towards the 0.9 member; the closest member is the representative
    import numpy as np

    E = np.array(norm[:3])
    w = np.array([0.5, 0.9, 0.4])
    c = (w[:, None] * E).sum(0) / w.sum()
    assert m.attribute == attrs[int(np.argmax(E @ c))].attribute
    assert m.confidence == pytest.approx(merged_confidence([0.5, 0.9, 0.4], [[0], [2], [4]]))
    assert merged[1].attribute == "The user runs marathons." and merged[1].support == 1
    assert merge_attributes([]) == []
    with pytest.raises(ValueError):
        merge_attributes(attrs, embeddings=norm, threshold=0.0)


@pytest.mark.slow
def test_merge_with_minilm_clusters_paraphrases():
    texts = ["The user is vegan.", "The user follows a vegan diet.", "The user runs marathons.",
             "The user trains for marathon races.", "The user owns a cat."]
    attrs = [ExtractedAttribute(**_attr(t, 0.8, [i])) for i, t in enumerate(texts)]
    merged = merge_attributes(attrs)
    assert len(merged) == 3 and sorted(m.support for m in merged) == [1, 2, 2]


# ------------------------------------------------------------------ metric and loader
@pytest.mark.slow
def test_gold_recovered_metric():
    from personalign.programs.extraction.metrics import gold_recovered

    ex = dspy.Example(gold_attributes=["I have a strong aversion to online learning and prefer in-person classes."])
    hit = dspy.Prediction(attributes=[ExtractedAttribute(**_attr("The user prefers in-person learning over online courses."))])
    miss = dspy.Prediction(attributes=[ExtractedAttribute(**_attr("The user is a retired postal worker."))])
    assert gold_recovered(ex, hit) == 1.0 and gold_recovered(ex, miss) == 0.0
    assert gold_recovered(ex, dspy.Prediction(attributes=[])) == 0.0 and gold_recovered(ex, None) == 0.0
    assert gold_recovered(ex, [{"attribute": "The user prefers in-person learning over online courses."}]) == 1.0
    assert gold_recovered(ex, hit, trace=object()) is True


def test_canonical_extraction_loader(tmp_path):
    import json

    from personalign.programs.extraction.data import load_extraction

    p = tmp_path / "e.jsonl"
    p.write_text(json.dumps({"id": "x", "conversation": CONV, "gold_attributes": ["I am vegan."], "split": "val",
                             "topic": "diet"}) + "\n")
    (ex,) = load_extraction(p)
    assert ex.group == "diet" and ex.split == "val" and list(ex.inputs().keys()) == ["conversation"]
    p.write_text(json.dumps({"id": "x", "conversation": [], "gold_attributes": ["I am vegan."]}) + "\n")
    with pytest.raises(DataError) as err:
        load_extraction(p)
    assert err.value.line == 1 and err.value.field == "conversation"


def test_prefeval_extraction_targets_split_like_verification(shared_data):
    from personalign.programs.extraction.data import load_extraction
    from personalign.programs.verification.data import load_verification

    ext = load_extraction(shared_data / "prefeval")
    ver = load_verification(shared_data / "prefeval")
    for split in ("train", "val", "test"):
        assert {e.topic for e in ext if e.split == split} == {e.topic for e in ver if e.split == split}
    assert all(len(e.gold_attributes) == 1 and e.conversation for e in ext)


# ------------------------------------------------------------------ baseline
def test_first_person_baseline():
    p = STRATEGIES.create("first-person")(conversation=CONV)
    assert [a.attribute for a in p.attributes] == ['The user said: "I only eat vegan food."',
                                                   'The user said: "I also run marathons every spring, so something with protein."']
    assert p.attributes[1].evidence_turn_ids == [2]
    assert STRATEGIES.create("first-person")(conversation=[]).attributes == []


# ------------------------------------------------------------------ verify and refine
class _ScriptedVerifier(dspy.Module):
    """Accepts attributes containing 'vegan' or 'narrow'."""

    def forward(self, evidence, attribute, reason=""):
        ok = "vegan" in attribute or "narrow" in attribute
        return dspy.Prediction(accepted=ok, rationale="ok" if ok else "over-generalizes")


def test_verify_and_refine_rounds_and_acceptance():
    from personalign.programs.extraction.refine import VerifyAndRefine

    lm = DummyLM([
        {"attributes": [_attr("The user is vegan.", 0.9, [0]), _attr("The user is an athlete.", 0.8, [2]),
                        _attr("The user loves all sports.", 0.7, [2])]},
        {"remove": False, "revised_attribute": "The user runs marathons (narrow)."},
        {"remove": True, "revised_attribute": ""},
    ])
    program = VerifyAndRefine(verifier=_ScriptedVerifier(), rounds=1)
    with dspy.context(lm=lm):
        p = program(conversation=CONV)
    assert [a.attribute for a in p.attributes] == ["The user is vegan.", "The user runs marathons (narrow)."]
    assert p.acceptance_before == pytest.approx(1 / 3) and p.acceptance_after == pytest.approx(2 / 3)
    assert p.passes == [{"pass": 0, "verified": 3, "accepted": 1}, {"pass": 1, "verified": 1, "accepted": 1}]
    assert [r["attribute"] for r in p.removed] == ["The user loves all sports."] and p.rejected == []
    refine_prompt = lm.history[1]["messages"][-1]["content"]
    assert "over-generalizes" in refine_prompt and "Assistant" not in refine_prompt


def test_verify_and_refine_zero_rounds_and_empty_history():
    from personalign.programs.extraction.refine import VerifyAndRefine

    lm = DummyLM([{"attributes": [_attr("The user is an athlete.", 0.8, [2])]}])
    with dspy.context(lm=lm):
        p = VerifyAndRefine(verifier=_ScriptedVerifier(), rounds=0)(conversation=CONV)
        q = VerifyAndRefine(verifier=_ScriptedVerifier(), rounds=2)(conversation=[])
    assert p.attributes == [] and p.rejected[0]["rationale"] == "over-generalizes" and p.acceptance_after == 0.0
    assert q.attributes == [] and q.acceptance_before is None and q.note == "empty history"
    with pytest.raises(ValueError):
        VerifyAndRefine(rounds=-1)


def test_extraction_stage_runs_through_evaluate_stage():
    from personalign.evaluation import evaluate_stage

    exs = [dspy.Example(conversation=normalize_turns(CONV), gold_attributes=["I only eat vegan food."],
                        group="g").with_inputs("conversation")]
    rep = evaluate_stage(STAGE, STRATEGIES.create("first-person"), exs, n_boot=50, progress=False)
    assert rep["n"] == 1 and rep["recall"] == 1.0 and rep["failures"] == 0


# ------------------------------------------------------------------ real embedded model
@pytest.mark.slow
def test_real_model_extraction_and_refine_end_to_end(shared_data):
    from personalign.evaluation import evaluate_stage
    from personalign.lm import make_lm
    from personalign.programs.extraction.data import load_extraction

    val = [e for e in load_extraction(shared_data / "prefeval") if e.split == "val"]
    val.sort(key=lambda e: sum(len(t.content) for t in e.conversation if t.role == "user"))
    lm = make_lm("local/smollm2-135m-instruct")
    rep = evaluate_stage(STAGE, AttributeExtractor(min_confidence=0.0), val[:3], lm=lm, n_boot=50, progress=False)
    assert rep["failures"] == 0 and rep["n"] == 3 and 0.0 <= rep["recall"] <= 1.0
    assert all(isinstance(p, list) for p in rep["predictions"])
    extracted = [i for i, p in enumerate(rep["predictions"]) if p]
    assert extracted, "the model extracts at least one attribute from one of three conversations"
    assert all(str(a["attribute"]).strip() for a in rep["predictions"][extracted[0]])  # plain dicts in reports
    from personalign.lm import use
    from personalign.programs.extraction.refine import VerifyAndRefine

    with use(lm):  # the same prompts as above, with a looser evidence filter
        p = VerifyAndRefine(extractor=AttributeExtractor(min_confidence=0.0, require_evidence=False), rounds=1)(
            conversation=val[extracted[0]].conversation)
    assert p.n_extracted > 0
    assert p.passes[0]["verified"] == p.n_extracted
    assert len(p.attributes) + len(p.rejected) + len(p.removed) == p.n_extracted  # each ends up exactly once
    assert all(isinstance(a, ExtractedAttribute) for a in p.attributes)
    assert p.acceptance_before == pytest.approx(p.passes[0]["accepted"] / p.n_extracted)
    assert p.acceptance_after == pytest.approx(len(p.attributes) / p.n_extracted)


# ------------------------------------------------------------------ extract-sentences (restate)
def test_sentence_restater_one_call_per_first_person_sentence():
    from personalign.programs.extraction.restate import SentenceRestater

    lm = DummyLM([{"attribute": "The user eats only vegan food."}, {"attribute": "none"}])
    with dspy.context(lm=lm):
        p = STRATEGIES.create("extract-sentences")(conversation=CONV)
    assert isinstance(STRATEGIES.create("extract-sentences"), SentenceRestater)
    assert len(lm.history) == 2 and "I only eat vegan food." in str(lm.history[0]["messages"])
    assert [a.attribute for a in p.attributes] == ["The user eats only vegan food."]
    assert p.attributes[0].evidence_turn_ids == [0] and p.attributes[0].reason == '"I only eat vegan food."'
    assert p.n_candidates == 2 and p.n_proposed == 1 and p.dropped == {"none": 1, "duplicate": 0, "over_limit": 0}


def test_sentence_restater_limits_dedupes_and_needs_no_call_without_candidates():
    from personalign.programs.extraction.restate import SentenceRestater, is_none

    lm = DummyLM([{"attribute": "The user is vegan."}, {"attribute": "the user is vegan"}])
    with dspy.context(lm=lm):
        p = SentenceRestater(max_sentences=1)(conversation=CONV)
        assert len(lm.history) == 1 and p.dropped["over_limit"] == 1 and len(p.attributes) == 1
        lm2 = DummyLM([{"attribute": "The user is vegan."}, {"attribute": "the user is vegan."}])
        with dspy.context(lm=lm2):
            p = SentenceRestater()(conversation=CONV)
        assert [a.attribute for a in p.attributes] == ["The user is vegan."] and p.dropped["duplicate"] == 1
        empty = SentenceRestater()(conversation=[{"role": "user", "content": "Hello there."}])
    assert empty.attributes == [] and empty.note == "no first-person user sentences" and len(lm.history) == 1
    assert SentenceRestater()(conversation=[]).note == "empty history"
    assert is_none(" None. ") and is_none('"none"') and not is_none("The user is none the wiser.")
    with pytest.raises(ValueError, match="max_sentences"):
        SentenceRestater(max_sentences=0)
    with pytest.raises(DataError):
        SentenceRestater()(conversation=[{"role": "robot", "content": "I like tea a lot."}])



def test_own_voice_restater_asks_for_the_users_voice_and_bare_quotes_drop_the_wrapper():
    from personalign.programs.extraction.restate import OwnVoiceRestater

    lm = DummyLM([{"attribute": "I only eat vegan food."}, {"attribute": "none"}])
    prog = STRATEGIES.create("extract-own-voice")
    assert isinstance(prog, OwnVoiceRestater) and prog.restate.signature.instructions != \
        STRATEGIES.create("extract-sentences").restate.signature.instructions
    with dspy.context(lm=lm):
        p = prog(conversation=CONV)
    system = lm.history[0]["messages"][0]["content"]
    assert "in the user's own voice, starting 'I'" in system and "starting 'The user'" not in system
    assert [a.attribute for a in p.attributes] == ["I only eat vegan food."] and p.dropped["none"] == 1
    quoted = [a.attribute for a in STRATEGIES.create("first-person")(conversation=CONV).attributes]
    bare = [a.attribute for a in STRATEGIES.create("first-person-bare")(conversation=CONV).attributes]
    assert quoted == [f'The user said: "{b}"' for b in bare] and "I only eat vegan food." in bare


# ------------------------------------------------------------------ extract-generalize
CUED = [
    {"role": "user", "content": "I'm planning a team event. Any ideas that skip those cheesy sci-fi escape rooms? "
                                "I tend to avoid anything too fantastical."},
    {"role": "assistant", "content": "A cooking class."},
    {"role": "user", "content": "Great, my team has twelve people. I usually prefer mornings."},
]


def test_generalizer_keeps_the_sentences_and_generalizes_only_the_cued_ones():
    from personalign.programs.extraction.baseline import SENTENCE_REASON
    from personalign.programs.extraction.generalize import PreferenceGeneralizer, cued

    lm = DummyLM([{"preference": "I dislike fantasy and sci-fi."}, {"preference": "none"}])
    prog = STRATEGIES.create("extract-generalize")
    assert isinstance(prog, PreferenceGeneralizer)
    with dspy.context(lm=lm):
        p = prog(conversation=CUED)
    # 4 first-person sentences, 2 of them cued ("tend to avoid", "usually prefer"): one call each
    assert p.n_candidates == 4 and p.n_cued == 2 and len(lm.history) == 2
    assert prog.lm_calls_per_run({"conversation": CUED}) == 2
    first = str(lm.history[0]["messages"])
    assert "I tend to avoid anything too fantastical." in first and "cheesy sci-fi escape rooms" in first  # + its message
    assert [a.attribute for a in p.generalized] == ["I dislike fantasy and sci-fi."]
    assert p.generalized[0].evidence_turn_ids == [0] and p.dropped["none"] == 1
    bare = [a.attribute for a in STRATEGIES.create("first-person-bare")(conversation=CUED).attributes]
    assert [a.attribute for a in p.attributes] == bare + ["I dislike fantasy and sci-fi."]
    assert all(a.reason == SENTENCE_REASON for a in p.attributes[:-1]) and p.attributes[-1].reason.startswith("generalized")
    assert cued("I usually prefer mornings.") and not cued("My team has twelve people.")


def test_generalizer_limits_drops_duplicates_and_needs_no_call_without_candidates():
    from personalign.programs.extraction.generalize import PreferenceGeneralizer

    # the LM copies the sentence: a duplicate of the kept sentence, not a second attribute
    lm = DummyLM([{"preference": "I tend to avoid anything too fantastical."}])
    with dspy.context(lm=lm):
        p = PreferenceGeneralizer(max_sentences=1)(conversation=CUED)
        assert len(lm.history) == 1 and p.dropped["over_limit"] == 1 and p.dropped["duplicate"] == 1
        assert len(p.attributes) == 4
        only = PreferenceGeneralizer(keep_sentences=False)
        with dspy.context(lm=DummyLM([{"preference": "I dislike fantasy."}, {"preference": "I like mornings."}])):
            assert [a.attribute for a in only(conversation=CUED).attributes] == ["I dislike fantasy.", "I like mornings."]
        empty = PreferenceGeneralizer()(conversation=[{"role": "user", "content": "Hello there."}])
    assert empty.attributes == [] and empty.note == "no first-person user sentences" and len(lm.history) == 1
    with pytest.raises(ValueError, match="max_sentences"):
        PreferenceGeneralizer(max_sentences=0)
    with pytest.raises(DataError):
        PreferenceGeneralizer()(conversation=[{"role": "robot", "content": "I usually like tea."}])


@pytest.mark.slow
def test_real_model_generalizes_the_cued_sentences(shared_data):
    """On the embedded default: for the val conversations with the fewest cue sentences, the LM
    writes in the user's voice, in English, and says something the bare sentences do not."""
    import re

    from personalign.lm import make_lm, use
    from personalign.programs.extraction.data import load_extraction
    from personalign.programs.extraction.generalize import PreferenceGeneralizer

    val = [e for e in load_extraction(shared_data / "prefeval") if e.split == "val"]
    prog = PreferenceGeneralizer()
    val = sorted((e for e in val if prog.lm_calls_per_run(e) >= 1), key=prog.lm_calls_per_run)[:2]
    with use(make_lm("local/qwen2.5-coder-1.5b-instruct")):
        preds = [prog(conversation=e.conversation) for e in val]
    general = [a.attribute for p in preds for a in p.generalized]
    assert general, preds
    assert all(g.startswith("I") and not re.search(r"[\u4e00-\u9fff]", g) for g in general), general
    bare = {a.attribute.lower() for e in val for a in STRATEGIES.create("first-person-bare")(conversation=e.conversation).attributes}
    assert any(g.lower() not in bare for g in general), general  # not only copies of the user's sentences


@pytest.mark.slow
def test_real_model_restates_the_hidden_preference(shared_data):
    """On the embedded default, per sentence: the restated attributes of the shortest val
    conversations recover its gold preference at least as often as the quoted sentences do."""
    from personalign.lm import make_lm, use
    from personalign.programs.extraction.data import load_extraction
    from personalign.programs.extraction.metrics import gold_recovered
    from personalign.programs.extraction.restate import SentenceRestater

    val = [e for e in load_extraction(shared_data / "prefeval") if e.split == "val"]
    val.sort(key=lambda e: len(STRATEGIES.create("first-person")(conversation=e.conversation).attributes))
    ex = val[0]
    with use(make_lm("local/qwen2.5-coder-1.5b-instruct")):
        p = SentenceRestater()(conversation=ex.conversation)
    assert p.n_candidates >= 1 and p.attributes, p
    assert all(a.attribute.lower().startswith("the user") for a in p.attributes)
    base = STRATEGIES.create("first-person")(conversation=ex.conversation)
    assert gold_recovered(ex, p) >= gold_recovered(ex, base)
