"""The one validated loader of saved programs: every damaged program.json or weights file is a
one-line DataError naming the file and the key; saves are atomic; program.json loads in plain DSPy."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import personalign
from personalign.errors import ConfigurationError, DataError
from personalign.programs.saved import PROGRAM_FILE, read_npz, save_program
from personalign.programs.common.logistic import LogisticHead

MOCK = Path(__file__).resolve().parents[2] / "benchmarks" / "_mock_lm.py"
PAIRS = [(f"The user {x}.", f"Help me {y}.") for x in ("is vegan", "plays chess", "has a dog", "is blind")
         for y in ("plan dinner", "pick a gift", "fix my bike")]
D = 384 * 3 + 1  # minilm-logreg's default features: attribute, product, absdiff (384 each) + cosine


def _fake_logreg(threshold: float = 0.4):
    """A fitted minilm-logreg without MiniLM: random weights of the right shapes."""
    from personalign.stages import resolve_stage
    STRATEGIES = resolve_stage("relevance").registry

    program = STRATEGIES.create("minilm-logreg")
    rng = np.random.default_rng(0)
    program.head = LogisticHead.from_arrays(coef=rng.normal(size=D), intercept=np.asarray(0.1),
                                            mean=rng.normal(size=D), scale=rng.uniform(0.5, 2.0, size=D))
    program.threshold = threshold
    return program


@pytest.fixture
def saved(tmp_path) -> Path:
    return save_program(_fake_logreg(), tmp_path / "prog", stage="relevance", strategy="minilm-logreg")


def _edit(directory: Path, fn) -> None:
    doc = json.loads((directory / PROGRAM_FILE).read_text())
    fn(doc)
    (directory / PROGRAM_FILE).write_text(json.dumps(doc))


def _replace_weights(directory: Path, arrays: dict, *, rehash: bool = True) -> None:
    """Write new weights; drop the sha256 list so the array checks (not the hash) are exercised."""
    np.savez(directory / "minilm_logreg.npz", **arrays)
    if rehash:
        _edit(directory, lambda d: d["metadata"]["personalign"].__setitem__("weights", {}))


def _load_error(directory: Path) -> DataError:
    with pytest.raises(DataError) as ei:
        personalign.load_program(directory)
    msg = str(ei.value)
    assert "\n" not in msg
    return ei.value


def test_roundtrip_and_layout(saved):
    program, meta = personalign.load_program(saved, with_metadata=True)
    assert meta["strategy"] == "minilm-logreg" and meta["format"] == 2
    assert program.threshold == 0.4 and program.head.coef_.shape == (D,)
    expected = _fake_logreg().head
    for name in ("coef_", "intercept_", "mean_", "scale_"):
        np.testing.assert_array_equal(getattr(program.head, name), getattr(expected, name))
    doc = json.loads((saved / PROGRAM_FILE).read_text())
    assert doc["metadata"]["dependency_versions"]["dspy"]  # what dspy's Module.load reads
    assert set(doc["metadata"]["personalign"]["weights"]) == {"minilm_logreg.npz"}


def _bad_weights():
    rng = np.random.default_rng(1)
    good = {"coef": rng.normal(size=D), "intercept": np.asarray(0.0), "mean": np.zeros(D), "scale": np.ones(D)}
    return [
        ("wrong shape", {**good, "coef": good["coef"][:5]}, "coef", "shape (5,)"),
        ("missing key", {k: v for k, v in good.items() if k != "mean"}, "mean", "missing array"),
        ("pickled", {**good, "coef": np.array([object()] * D, dtype=object)}, "coef", "pickled"),
        ("nan", {**good, "intercept": np.asarray(np.nan)}, "intercept", "NaN"),
        ("inf", {**good, "mean": np.full(D, np.inf)}, "mean", "NaN or infinity"),
        ("strings", {**good, "coef": np.array(["a"] * D)}, "coef", "not numeric"),
        ("zero scale", {**good, "scale": np.zeros(D)}, "scale", "> 0"),
    ]


@pytest.mark.parametrize("case, arrays, key, fragment", _bad_weights(), ids=[c[0] for c in _bad_weights()])
def test_bad_weight_arrays_name_file_and_key(saved, case, arrays, key, fragment):
    _replace_weights(saved, arrays)
    err = _load_error(saved)
    assert err.path.endswith("minilm_logreg.npz") and err.field == key and fragment in err.problem


def test_missing_corrupt_or_replaced_weights_file(saved):
    good = (saved / "minilm_logreg.npz").read_bytes()
    (saved / "minilm_logreg.npz").unlink()
    assert "weights file missing" in _load_error(saved).problem
    (saved / "minilm_logreg.npz").write_bytes(b"PK\x03\x04 not a zip")
    assert "sha256" in _load_error(saved).problem  # the listed hash catches a swapped/corrupt file
    _edit(saved, lambda d: d["metadata"]["personalign"].__setitem__("weights", {}))
    assert "not a valid .npz" in _load_error(saved).problem
    (saved / "minilm_logreg.npz").write_bytes(good[: len(good) // 2])  # truncated
    assert _load_error(saved).path.endswith("minilm_logreg.npz")


@pytest.mark.parametrize("mutate, key, fragment", [
    # a NaN literal is not JSON: refused as program.json is read, at its key in the file (issue 38)
    (lambda d: d.__setitem__("threshold", float("nan")), "threshold", "not a finite number"),
    (lambda d: d.__setitem__("threshold", "0.5"), "state.threshold", "expected"),
    (lambda d: d.pop("features"), "state.features", "missing"),
    (lambda d: d.__setitem__("features", "attribute"), "state.features", "expected array"),
    (lambda d: d.__setitem__("C", None), "state.C", "expected number"),
    (lambda d: d["metadata"]["personalign"].__setitem__("strategy", "nope"), "metadata.personalign.strategy",
     "unknown"),
    (lambda d: d["metadata"]["personalign"].__setitem__("strategy", 5), "metadata.personalign.strategy", "string"),
    (lambda d: d["metadata"].__setitem__("personalign", []), "metadata.personalign", "expected an object"),
], ids=["nan-threshold", "string-threshold", "missing-key", "mistyped-list", "null-number", "unknown-strategy",
        "int-strategy", "metadata-not-object"])
def test_bad_state_names_file_and_key(saved, mutate, key, fragment):
    _edit(saved, mutate)
    err = _load_error(saved)
    assert err.path.endswith(PROGRAM_FILE) and err.field == key and fragment in err.problem, str(err)


@pytest.mark.parametrize("content, fragment", [
    (b"", "invalid JSON"), (b"[1, 2]", "expected a JSON object"), (b"{\"a\": 1}", "not a saved personalign"),
    (b"\x00\x01binary", "binary file"), (b"{\"x\": " + b"9" * 5000 + b"}", "invalid JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "invalid JSON"),
])
def test_unreadable_program_json(saved, content, fragment):
    (saved / PROGRAM_FILE).write_bytes(content)
    assert fragment in _load_error(saved).problem


def test_old_top_level_format_still_loads(saved):
    state = {"threshold": 0.25, "features": ["attribute", "product", "absdiff", "cosine"], "C": 0.01, "fitted": True}
    (saved / PROGRAM_FILE).write_text(json.dumps({"stage": "relevance", "strategy": "minilm-logreg", "state": state}))
    program, meta = personalign.load_program(saved, with_metadata=True)
    assert program.threshold == 0.25 and meta["format"] == 1


def test_save_onto_a_program_replaces_it_whole_and_refuses_foreign_dirs(saved, tmp_path):
    (saved / "stale.npz").write_bytes(b"old")
    from personalign.stages import resolve_stage
    STRATEGIES = resolve_stage("relevance").registry

    bm25 = STRATEGIES.create("bm25")
    bm25.threshold = 1.5
    save_program(bm25, saved, stage="relevance", strategy="bm25")
    assert sorted(p.name for p in saved.iterdir()) == [PROGRAM_FILE, "signature.py"]  # no old weights, no stray file
    assert personalign.load_program(saved).threshold == 1.5
    assert not [p for p in saved.parent.iterdir() if p.name.startswith(".")]  # no temp dirs left
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigurationError, match="not empty"):
        save_program(bm25, foreign, stage="relevance", strategy="bm25")
    assert (foreign / "notes.txt").read_text() == "keep me"
    with pytest.raises(ConfigurationError, match="is a file"):
        save_program(bm25, foreign / "notes.txt", stage="relevance", strategy="bm25")


def test_read_npz_rejects_a_single_npy(tmp_path):
    np.save(tmp_path / "w.npz", np.zeros(3))  # np.save appends .npy
    (tmp_path / "w.npz.npy").rename(tmp_path / "w.npz")
    with pytest.raises(DataError, match="single .npy"):
        read_npz(tmp_path / "w.npz", {"coef": (3,)})


def test_program_json_loads_in_plain_dspy_in_a_fresh_process(tmp_path):
    """Compiled zero-shot judge with demos: plain ``dspy.Predict(RelevanceSignature).load`` renders
    exactly the prompt our loader's program renders (same instructions, same demos)."""
    import dspy

    from personalign.stages import resolve_stage

    STRATEGIES = resolve_stage("relevance").registry

    program = STRATEGIES.create("zero-shot")
    program.judge.signature = program.judge.signature.with_instructions("Decide relevance. Custom compiled text.")
    program.judge.demos = [dspy.Example(attribute="vegan", prompt="dinner ideas?", relevant=True),
                           dspy.Example(attribute="likes jazz", prompt="fix my bike", relevant=False)]
    save_program(program, tmp_path / "zs", stage="relevance", strategy="zero-shot", lm="local/x")
    script = textwrap.dedent(f"""
        import json, sys, dspy
        sys.path.insert(0, {str(MOCK.parent)!r})
        import _mock_lm
        from personalign.signatures.relevance import RelevanceSignature
        p = dspy.Predict(RelevanceSignature)
        p.load({str(tmp_path / "zs" / PROGRAM_FILE)!r})
        msgs = dspy.ChatAdapter().format(p.signature, p.demos, {{"attribute": "a", "prompt": "b"}})
        _mock_lm.register()
        with dspy.context(lm=dspy.LM("mock/relevance", cache=False), adapter=dspy.ChatAdapter()):
            preds = [bool(p(attribute=a, prompt=q).relevant) for a, q in {PAIRS!r}]
        print(json.dumps({{"messages": msgs, "predictions": preds}}))
    """)
    plain = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr[-2000:]
    got = json.loads(plain.stdout)
    loaded = personalign.load_program(tmp_path / "zs")
    ours = loaded.judge
    expected = dspy.ChatAdapter().format(ours.signature, ours.demos, {"attribute": "a", "prompt": "b"})
    assert got["messages"] == json.loads(json.dumps(expected))
    assert "Custom compiled text." in plain.stdout and "likes jazz" in plain.stdout
    # the mock LM answers as a function of the whole conversation: same prompt -> same predictions
    from tests.sweep.conftest import load_mock

    load_mock().register()
    with dspy.context(lm=dspy.LM("mock/relevance", cache=False), adapter=dspy.ChatAdapter()):
        mine = [bool(loaded(attribute=a, prompt=q).relevant) for a, q in PAIRS]
        fresh = [bool(STRATEGIES.create("zero-shot")(attribute=a, prompt=q).relevant) for a, q in PAIRS]
    assert got["predictions"] == mine
    assert fresh != mine  # the compiled instructions and demos matter to the mock: the check can fail


def test_chain_of_thought_program_loads_in_plain_dspy(tmp_path):
    """``cot`` wraps dspy.ChainOfThought: plain ``dspy.ChainOfThought(RelevanceSignature).load``."""
    import dspy

    from personalign.stages import resolve_stage

    STRATEGIES = resolve_stage("relevance").registry
    from personalign.signatures.relevance import RelevanceSignature

    program = STRATEGIES.create("cot")
    program.judge.predict.demos = [dspy.Example(attribute="vegan", prompt="dinner?", reasoning="diet", relevant=True)]
    save_program(program, tmp_path / "cot", stage="relevance", strategy="cot")
    plain = dspy.ChainOfThought(RelevanceSignature)
    plain.load(str(tmp_path / "cot" / PROGRAM_FILE))
    ours = personalign.load_program(tmp_path / "cot").judge.predict
    inputs = {"attribute": "a", "prompt": "b"}
    assert dspy.ChatAdapter().format(plain.predict.signature, plain.predict.demos, inputs) == \
        dspy.ChatAdapter().format(ours.signature, ours.demos, inputs)
    assert len(plain.predict.demos) == 1
