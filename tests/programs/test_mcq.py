"""The ``mcq`` stage: loader (PrefEval split by topic, canonical JSONL with attributes, PersonaMem),
strategies' control flow with DummyLM, typed index schema, and a slow end-to-end run on the real
embedded model."""

from __future__ import annotations

import json
from pathlib import Path

import dspy
import pytest
from dspy.utils.dummies import DummyLM
from dspy.utils.exceptions import AdapterParseError

from personalign.errors import DataError
from personalign.stages import resolve_stage
STAGE = resolve_stage("mcq")
STRATEGIES = resolve_stage("mcq").registry
from personalign.programs.mcq.data import attach_attributes, load_mcq, read_attributes
from personalign.programs.common.text import TRUNCATION_MARK

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _ex(**kw):
    base = dict(id="x", context="I am vegan and never eat meat.", question="What should I cook tonight?",
                options=["A beef steak.", "A tofu stir fry.", "Grilled salmon.", "Chicken wings."], gold_index=1,
                attributes=["The user is vegan."], split="val")
    base.update(kw)
    return dspy.Example(**base).with_inputs(*STAGE.inputs)


def _messages(lm) -> str:
    return "\n".join(str(m.get("content")) for m in lm.history[-1]["messages"])


# ---------------------------------------------------------------- loader
def test_prefeval_loader_splits_by_topic_and_tracks_gold(shared_data):
    from personalign.data import load_prefeval

    root = shared_data / "prefeval"
    examples = load_mcq(root)
    recs = {r.id: r for r in load_prefeval(root, "mcq")}
    assert len(examples) == len(recs) > 700
    by_split: dict[str, set] = {}
    for e in examples:
        by_split.setdefault(e.split, set()).add(e.topic)
        assert set(e.inputs().keys()) == {"context", "question", "options", "attributes"}
        assert e.attributes == []
    assert set(by_split) == {"train", "val", "test"}
    topics = [t for s in by_split.values() for t in s]
    assert len(topics) == len(set(topics)), "a topic appears in two splits"
    # the gold option is the upstream FIRST option (the one that follows the preference)
    for e in examples[:50]:
        assert e.options[e.gold_index] == recs[e.id].mcq_options[0]
        assert e.context == recs[e.id].preference
    # shuffled: the gold is not always at one position
    assert len({e.gold_index for e in examples}) == 4


def test_stage_load_by_split(shared_data):
    val = STAGE.load(shared_data / "prefeval" / "mcq_options", split="val")
    assert val and all(e.split == "val" for e in val)


def test_canonical_jsonl_with_attributes(tmp_path):
    rows = [{"id": f"q{i}", "context": "", "question": f"Q{i}?", "options": ["a", "b", "c"], "gold_index": i % 3,
             "topic": f"t{i % 4}", "attributes": [f"attr {i}"]} for i in range(12)]
    p = tmp_path / "mcq.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    exs = load_mcq(p)
    assert [e.attributes for e in exs][:2] == [["attr 0"], ["attr 1"]]
    assert {e.split for e in exs} == {"train", "val", "test"}


@pytest.mark.parametrize("line,field", [
    ({"id": "a", "context": "", "question": "Q", "options": ["x", "y"], "gold_index": 0, "attributes": "oops"},
     "attributes"),
    ({"id": "a", "context": "", "question": "Q", "options": ["x", "y"], "gold_index": 5}, "gold_index"),
])
def test_canonical_jsonl_bad_lines_name_line_and_field(tmp_path, line, field):
    p = tmp_path / "bad.jsonl"
    good = {"id": "z", "context": "", "question": "Q", "options": ["x", "y"], "gold_index": 0}
    p.write_text(json.dumps(good) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(DataError) as err:
        load_mcq(p)
    assert f"{p}:2" in str(err.value) and field in str(err.value)


def test_unknown_format_and_missing_file(tmp_path):
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(DataError, match="unknown multiple-choice format"):
        load_mcq(tmp_path / "x.txt")
    with pytest.raises(DataError, match="not found"):
        load_mcq(tmp_path / "nope.jsonl")


def test_personamem_csv_and_missing_contexts_named():
    exs = load_mcq(FIXTURES / "personamem" / "questions_tiny.csv")
    assert exs and all(e.context for e in exs) and all(e.attributes == [] for e in exs)
    with pytest.raises(DataError, match="shared_contexts_32k.jsonl"):
        load_mcq(FIXTURES / "bad" / "personamem_missing_contexts" / "questions_32k.csv")


def test_read_and_attach_attributes(tmp_path):
    p = tmp_path / "attrs.jsonl"
    p.write_text('{"user_id": "u1", "attributes": ["likes tea", {"text": "is vegan"}]}\n'
                 '{"user_id": "u2", "text": "runs marathons"}\n{"user_id": "u2", "text": "lives in Oslo"}\n')
    attrs = read_attributes(p)
    assert attrs == {"u1": ["likes tea", "is vegan"], "u2": ["runs marathons", "lives in Oslo"]}
    exs = attach_attributes([_ex(user_id="u2"), _ex(user_id="u3")], attrs)
    assert exs[0].attributes == ["runs marathons", "lives in Oslo"] and exs[1].attributes == []
    assert "attributes" in exs[0].inputs().keys()
    p.write_text('{"user_id": "u1", "attributes": [""]}\n')
    with pytest.raises(DataError, match=r":1: field 'attributes.0'"):
        read_attributes(p)


# ---------------------------------------------------------------- strategies
def test_typed_index_is_an_enum_of_the_option_count():
    from dspy.adapters.json_adapter import _get_structured_outputs_response_format

    from personalign.signatures.mcq import MCQContextSignature, with_option_count

    schema = _get_structured_outputs_response_format(with_option_count(MCQContextSignature, 3)).model_json_schema()
    assert schema["properties"]["answer_index"]["enum"] == [0, 1, 2]
    with pytest.raises(ValueError):
        with_option_count(MCQContextSignature, 1)


@pytest.mark.parametrize("name,sees_context,sees_attrs", [
    ("no-profile", False, False), ("gold-preference", True, False), ("extracted-attributes", False, True)])
def test_llm_strategies_use_their_inputs(name, sees_context, sees_attrs):
    lm = DummyLM([{"answer_index": 1}])
    with dspy.context(lm=lm):
        out = STRATEGIES.create(name)(**_ex().inputs())
    assert out.answer_index == 1 and out.score is None
    text = _messages(lm)
    assert ("never eat meat" in text) == sees_context
    assert ("The user is vegan." in text) == sees_attrs
    assert "A tofu stir fry." in text


def test_out_of_range_answer_is_an_error():
    # the typed answer is narrowed to Literal[0..3]: the adapter rejects 9
    with dspy.context(lm=DummyLM([{"answer_index": 9}] * 3)), \
            pytest.raises(AdapterParseError, match=r"Expected to find output fields in the LM response: \[answer_index\]"):
        STRATEGIES.create("no-profile")(**_ex().inputs())
    # a backend that slips past the narrowing meets the program's own range check
    program = STRATEGIES.create("no-profile")

    class OutOfRange:  # the predictor of such a backend
        signature = program.choose.signature

        def __call__(self, **kwargs):
            return dspy.Prediction(answer_index=9)

    program.choose = OutOfRange()
    with pytest.raises(ValueError, match=r"^answer_index 9 out of range for 4 options$"):
        program(**_ex().inputs())


def test_long_context_keeps_its_end():
    lm = DummyLM([{"answer_index": 0}])
    long = "old turn. " * 2000 + "LATEST: I am vegan."
    with dspy.context(lm=lm):
        STRATEGIES.create("gold-preference")(**_ex(context=long).inputs())
    text = _messages(lm)
    assert "LATEST: I am vegan." in text and TRUNCATION_MARK in text
    assert len(text) < 6000 + 4000


def test_random_baseline_is_seeded_and_uniformish():
    prog = STRATEGIES.create("random")
    picks = [prog(question=f"q{i}", options=["a", "b", "c", "d"]).answer_index for i in range(400)]
    assert picks == [prog(question=f"q{i}", options=["a", "b", "c", "d"]).answer_index for i in range(400)]
    assert all(60 < picks.count(k) < 140 for k in range(4))


def test_metric_scores_index():
    from personalign.metrics import mcq_correct

    assert mcq_correct(_ex(), dspy.Prediction(answer_index=1)) == 1.0
    assert mcq_correct(_ex(), dspy.Prediction(answer_index=0)) == 0.0


@pytest.mark.slow
def test_minilm_baseline_follows_the_context():
    """Similarity follows a positively stated preference (it cannot read negation: "never eat
    meat" is closest to the steak, which is why it is a baseline)."""
    prog = STRATEGIES.create("minilm-preference")
    out = prog.predict_batch([_ex(context="I love tofu and plant-based cooking."),
                              _ex(context="I only eat seafood; I love fish.", gold_index=2)])
    assert [o.answer_index for o in out] == [1, 2]
    assert all(-1.0 <= o.score <= 1.0 for o in out)


@pytest.mark.slow
def test_end_to_end_real_model(shared_data):
    """3 real PrefEval val questions x the three LLM strategies on SmolLM2: every answer parses
    into a valid index (grammar-constrained) and the evaluation counts calls."""
    from personalign.evaluation import evaluate_stage
    from personalign.lm import make_lm

    examples = STAGE.load(shared_data / "prefeval", split="val")[:3]
    examples = attach_attributes(examples, {e.user_id: [e.context] for e in examples})
    lm = make_lm(max_tokens=16)
    for name in ("no-profile", "gold-preference", "extracted-attributes"):
        rep = evaluate_stage(STAGE, STRATEGIES.create(name), examples, lm=lm, n_boot=50, progress=False)
        assert rep["failures"] == 0, rep["errors"]
        assert all(p in range(4) for p in rep["predictions"])
        assert 0.0 <= rep["accuracy"] <= 1.0
