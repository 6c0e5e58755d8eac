"""Conformance of every registered stage, and the stage-generic scoring helpers."""

from __future__ import annotations

import json
import subprocess
import sys

import dspy
import pytest

from personalign.errors import ConfigurationError
from personalign.evaluation import paired_comparison, stage_report
from personalign.stages import Stage, all_stages
from personalign.stages import resolve_stage as get_stage

KINDS = ("binary", "multiclass", "scored")

STAGES = all_stages()


def test_relevance_is_a_stage():
    assert "relevance" in STAGES
    assert get_stage("relevance") is STAGES["relevance"]


def test_unknown_stage_lists_the_available_ones():
    with pytest.raises(ConfigurationError, match="unknown stage 'nosuch'.*relevance"):
        get_stage("nosuch")


@pytest.mark.parametrize("name", sorted(STAGES))
def test_stage_conformance(name):
    """Every stage resolves its registry, strategies, loader and metric, and its defaults parse."""
    from personalign._verbs.inputs import parse_strategies

    st = STAGES[name]
    assert st.kind in KINDS and st.name == name
    reg = st.registry
    assert reg.names(), f"{name} has no strategies"
    for strategy in reg.names():
        cls = reg.load(strategy)
        assert issubclass(cls, dspy.Module), f"{name}/{strategy} is not a dspy.Module"
        info = reg.info(strategy)
        if info.trainable:
            assert info.optimizer, f"{name}/{strategy} is trainable but names no optimizer"
    assert parse_strategies(st, None)
    loader = st.loader.partition(":")
    assert callable(getattr(__import__(loader[0], fromlist=[loader[2]]), loader[2]))
    if st.metric is not None:
        assert callable(st.metric_fn())
    assert st.inputs and st.output and st.label
    assert st.inputs == tuple(st.signature_class.input_fields) and st.output in st.signature_class.output_fields


@pytest.mark.parametrize("name", sorted(STAGES))
def test_stage_signature_is_what_every_strategy_takes(name):
    """The stage's signature is the one declaration of its fields: every strategy's ``forward``
    accepts every input by keyword, and a strategy class that says whether it uses an LM agrees
    with its registry entry (the one place ``uses_lm`` / ``trainable`` / the fit are declared)."""
    import inspect

    st = STAGES[name]
    for strategy in st.registry.names():
        cls = st.registry.load(strategy)
        params = inspect.signature(cls.forward).parameters
        takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in params.values())
        missing = [k for k in st.inputs if k not in params and not takes_kwargs]
        assert not missing, f"{name}/{strategy}.forward does not take {missing}"
        info = st.registry.info(strategy)
        if "uses_lm" in vars(cls) or any("uses_lm" in vars(b) for b in cls.__mro__[1:-1]):
            assert bool(cls.uses_lm) == info.uses_lm, f"{name}/{strategy}: class uses_lm disagrees with the registry"


# the canonical file kind each stage's loader reads (data.schemas), where it has one
SCHEMA_KIND = {"relevance": "relevance", "verification": "verification", "extraction": "extraction",
               "judge": "rating", "mcq": "mcq"}


@pytest.mark.parametrize("name", sorted(SCHEMA_KIND))
def test_file_schema_inputs_are_stage_inputs(name):
    """``data/`` cannot import the signatures (a lower layer), so a file schema's ``INPUTS`` are
    the input fields its *file* carries: a subset of the stage signature's inputs (judge adds
    ``attributes`` from the ratings' keys, mcq the extracted ``attributes``)."""
    from personalign.data.schemas import EXAMPLE_TYPES

    assert set(EXAMPLE_TYPES[SCHEMA_KIND[name]].INPUTS) <= set(STAGES[name].inputs)


def test_stage_rejects_unknown_kind_and_scored_without_metric():
    from personalign.errors import DataError
    from personalign.stages import declare_stage

    sig = "personalign.signatures.mcq:MCQSignature"
    with pytest.raises(DataError, match="kind"):
        declare_stage(name="x", signature=sig, label="l", kind="ranked")
    with pytest.raises(DataError, match="metric"):
        declare_stage(name="x", signature=sig, label="l", kind="scored")


def _declare(**fields):
    from personalign.stages import declare_stage

    return declare_stage(**fields)


MCQ = _declare(name="mcq-test", summary="test", signature="personalign.signatures.mcq:MCQSignature",
               label="gold_index", kind="scored", metric="personalign.metrics:mcq_correct", metric_name="accuracy")


def test_scored_report_counts_failures_as_zero():
    examples = [dspy.Example(question=f"q{i}", gold_index=i % 3) for i in range(6)]
    preds = [0, 1, 0, None, 1, 2]  # correct: 0, 1, 4?, -, 1, 2 -> items 0,1,4,5 right
    report = stage_report(MCQ, examples, preds, n_boot=200, seed=0)
    assert report["n"] == 6
    assert report["correct"] == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    assert report["accuracy"] == pytest.approx(4 / 6)
    lo, hi = report["accuracy_ci"]
    assert 0.0 <= lo <= report["accuracy"] <= hi <= 1.0


def test_binary_report_uses_the_positive_class():
    """Verification-like stage: the positive class is a rejected attribute (accepted == False)."""
    st = _declare(name="verif-test", summary="test",
                  signature="personalign.signatures.verification:VerificationSignature", label="accepted",
                  kind="binary", positive=False)
    examples = [dspy.Example(attribute="a", accepted=v) for v in (True, False, False, True)]
    report = stage_report(st, examples, [True, False, True, None], n_boot=100)
    # gold rejected = [F, T, T, F]; predicted rejected = [F, T, F, (failure -> wrong: T)]
    assert report["gold_positive"] == [False, True, True, False]
    assert report["predicted_positive"] == [False, True, False, True]
    assert report["recall"] == pytest.approx(0.5)
    assert report["precision"] == pytest.approx(0.5)


def test_paired_comparison_scored_and_binary():
    examples = [dspy.Example(question=f"q{i}", gold_index=0) for i in range(40)]
    a = stage_report(MCQ, examples, [0] * 30 + [1] * 10, n_boot=200)
    b = stage_report(MCQ, examples, [0] * 10 + [1] * 30, n_boot=200)
    cmp = paired_comparison(MCQ, a, b, n_boot=200)
    assert cmp["diff"]["diff"] == pytest.approx(0.5)
    assert cmp["diff"]["ci"][0] > 0
    assert cmp["mcnemar"]["b"] == 20 and cmp["mcnemar"]["c"] == 0 and cmp["mcnemar"]["p_value"] < 1e-4
    rel = get_stage("relevance")
    ex = [dspy.Example(attribute="a", prompt="p", relevant=i < 10) for i in range(40)]
    ra = stage_report(rel, ex, [i < 10 for i in range(40)], n_boot=200)
    rb = stage_report(rel, ex, [True] * 40, n_boot=200)
    cmp = paired_comparison(rel, ra, rb, n_boot=200)
    assert cmp["metric"] == "f1" and cmp["diff"]["diff"] == pytest.approx(1.0 - 20 / 50)


def test_cli_stages_json_and_unknown_stage():
    out = subprocess.run([sys.executable, "-m", "personalign", "stages", "--json"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = {r["stage"]: r for r in json.loads(out.stdout)}
    assert set(rows) == set(STAGES)
    assert "minilm-logreg" in rows["relevance"]["strategies"]
    bad = subprocess.run([sys.executable, "-m", "personalign", "compare", "nosuch", "--data", "x.jsonl"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [bad.stderr.strip()]
    assert "unknown stage 'nosuch'" in bad.stderr


def test_a_fit_optimizer_gets_the_stage_s_label_positive_class_and_group_key():
    from personalign.errors import ConfigurationError
    from personalign.optimizers.learned import LearnedSelectorFit
    from personalign.optimizers.threshold import ThresholdFit
    from personalign.stages import resolve_stage as get_stage

    ver, rel = get_stage("verification"), get_stage("relevance")
    kw = ver.fit_kwargs("minilm-maxsim", LearnedSelectorFit, seed=3)
    assert kw == {"label": "accepted", "positive": False, "group_key": "group", "beta": 2.0, "seed": 3}
    assert rel.fit_kwargs("bm25", ThresholdFit, seed=0) == {"label": "relevant", "seed": 0}
    assert ver.fit_kwargs("minilm-maxsim", LearnedSelectorFit, beta=1.0)["beta"] == 1.0  # settings win
    with pytest.raises(ConfigurationError, match="predicts accepted=False"):
        ver.fit_kwargs("minilm-maxsim", ThresholdFit)


def test_an_explicit_fit_on_verification_is_the_strategy_s_own_fit(shared_data):
    """``compile --optimizer learned-selector-fit`` on a verifier fits the REJECTED class like its
    default fit (it used to read a ``relevant`` label the verification rows do not have)."""
    import random

    from personalign.compile_service import compile_program
    from personalign.stages import resolve_stage as get_stage

    stage = get_stage("verification")
    rows = stage.load(shared_data / "prefeval", split="train")
    random.Random(0).shuffle(rows)
    rows = rows[:150]
    explicit, _ = compile_program(stage, "minilm-maxsim", "learned-selector-fit", rows, seed=0)
    default, _ = compile_program(stage, "minilm-maxsim", None, rows, seed=0)
    assert explicit.threshold == pytest.approx(default.threshold)


def test_a_missing_split_names_the_rows_without_one(tmp_path):
    """Rows with no ``split`` field show as such in the error, not as the string 'None'."""
    import json

    from personalign.errors import DataError
    from personalign.stages import splits_present

    rows = [{"id": f"c{i}", "conversation": [{"role": "user", "content": "I usually prefer tea."}],
             "gold_attributes": ["I prefer tea."], **({"split": "train"} if i else {})} for i in range(2)]
    path = tmp_path / "nosplit.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=r"splits present: train, \(no 'split' field\)"):
        get_stage("extraction").load(path, "val")
    assert splits_present([]) == "none"
