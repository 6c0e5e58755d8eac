"""``signature.py`` beside every saved program (issue 46 item 4): a fresh ``python -I`` interpreter
with only dspy (personalign blocked from importing) imports it, ``load()`` restores the compiled
instructions, demos and field order -- the prompt DSPy's ChatAdapter renders is byte-identical to
personalign's own program's -- and a learned strategy's ``load()`` refuses in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import personalign
from personalign.programs.dspy_signature import FILE, plain_module, type_source
from personalign.programs.saved import PROGRAM_FILE, save_program

# Run in `python -I`: personalign cannot be imported (a meta-path finder refuses it), so a
# signature.py that imported it would fail here; the JSON printed says what plain DSPy loaded.
PLAIN = r'''
import importlib.abc, importlib.util, json, sys, warnings

class _NoPersonalign(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "personalign":
            raise ImportError("personalign is not importable in this interpreter")
        return None

sys.meta_path.insert(0, _NoPersonalign())
import dspy
spec = importlib.util.spec_from_file_location("compiled_signature", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
inputs, out = json.loads(sys.argv[2]), {}

def described(p):
    return {"module": type(p).__name__, "fields": list(p.signature.fields),
            "descs": [f.json_schema_extra.get("desc") for f in p.signature.fields.values()],
            "instructions": p.signature.instructions,
            "demos": [d.toDict() if hasattr(d, "toDict") else dict(d) for d in p.demos],
            "messages": dspy.ChatAdapter().format(p.signature, p.demos, inputs)}

classes = [v for v in vars(mod).values() if isinstance(v, type) and issubclass(v, dspy.Signature) and v is not dspy.Signature]
if len(classes) == 1:  # the class as written, before any state is loaded into it
    (cls,) = classes
    out["class"] = {"name": cls.__name__, "instructions": cls.instructions, "fields": list(cls.fields),
                    "types": [str(f.annotation) for f in cls.fields.values()],
                    "extra": [[f.json_schema_extra.get(k) for k in ("desc", "prefix")] for f in cls.fields.values()]}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        program = mod.load()
    except Exception as exc:
        out["error"] = [type(exc).__name__, str(exc)]
    else:
        out.update(described(program.predict if isinstance(program, dspy.ChainOfThought) else program),
                   loaded=type(program).__name__)
        if len(sys.argv) > 3:  # the same state into a hand-written class with the fields reversed
            names = list(mod.__dict__[sys.argv[3]].input_fields)[::-1]
            sig = dspy.Signature({n: dspy.InputField() for n in names}
                                 | {n: dspy.OutputField() for n in mod.__dict__[sys.argv[3]].output_fields})
            reversed_ = dspy.Predict(sig)
            reversed_.load(sys.argv[1].replace("signature.py", "program.json"))
            out["reversed"] = described(reversed_)
if hasattr(mod, "predictors"):
    out["predictors"] = {k: {"fields": list(v.signature.fields), "instructions": v.signature.instructions,
                             "descs": [f.json_schema_extra.get("desc") for f in v.signature.fields.values()],
                             "demos": [d.toDict() if hasattr(d, "toDict") else dict(d) for d in v.demos]}
                         for k, v in mod.predictors().items()}
out["warnings"] = [str(w.message) for w in caught]
out["personalign_imported"] = any(m.split(".")[0] == "personalign" for m in sys.modules)
print(json.dumps(out, default=str))
'''


def plain(directory: Path, inputs: dict, reverse: str | None = None) -> dict:
    """What a DSPy-only ``python -I`` makes of ``directory/signature.py``."""
    args = [sys.executable, "-I", "-B", "-c", PLAIN, str(directory / FILE), json.dumps(inputs)] + ([reverse] if reverse else [])
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=directory)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["personalign_imported"] is False
    return got


def ours(directory: Path, inputs: dict) -> dict:
    """The same description of personalign's own loaded program (its one DSPy predictor)."""
    import dspy

    loaded = personalign.load_program(directory)
    module = plain_module(getattr(loaded, "undecided", loaded))
    p = module.predict if isinstance(module, dspy.ChainOfThought) else module
    return {"signature": p.signature, "fields": list(p.signature.fields), "instructions": p.signature.instructions,
            "descs": [f.json_schema_extra.get("desc") for f in p.signature.fields.values()],
            "demos": [d.toDict() if hasattr(d, "toDict") else dict(d) for d in p.demos],
            "messages": json.loads(json.dumps(dspy.ChatAdapter().format(p.signature, p.demos, inputs), default=str))}


@pytest.fixture
def own_task(tmp_path) -> Path:
    """A copy of the own-task example's stage.toml and data.jsonl (three inputs)."""
    import shutil

    from tests.conftest import ROOT

    for name in ("stage.toml", "data.jsonl"):
        shutil.copy(ROOT / "examples" / "own_task" / name, tmp_path / name)
    return tmp_path


RELEVANCE = {"attribute": "The user is vegan.", "prompt": "Plan my dinner."}


def _zero_shot(tmp_path: Path, strategy: str = "zero-shot") -> Path:
    import dspy

    from personalign.stages import resolve_stage

    program = resolve_stage("relevance").registry.create(strategy)
    predictor = program.judge.predict if strategy == "cot" else program.judge
    predictor.signature = predictor.signature.with_instructions("Decide relevance.\n  Compiled text: 'quoted' \\ \"x\".")
    demo = {"attribute": "vegan", "prompt": "dinner ideas?", "relevant": True}
    predictor.demos = [dspy.Example(**demo, **({"reasoning": "diet"} if strategy == "cot" else {})),
                       dspy.Example(attribute="likes jazz", prompt="fix my bike", relevant=False)]
    return save_program(program, tmp_path / strategy, stage="relevance", strategy=strategy, lm="local/x")


@pytest.mark.parametrize("strategy,module", [("zero-shot", "Predict"), ("cot", "ChainOfThought")])
def test_signature_py_loads_the_compiled_program_in_plain_dspy(tmp_path, strategy, module):
    directory = _zero_shot(tmp_path, strategy)
    text = (directory / FILE).read_text()
    assert "personalign" not in "".join(ln for ln in text.splitlines() if ln.startswith(("import", "from")))
    got, mine = plain(directory, RELEVANCE), ours(directory, RELEVANCE)
    assert got["loaded"] == module and got["warnings"] == [] and "error" not in got
    for key in ("fields", "descs", "instructions", "demos", "messages"):
        assert got[key] == mine[key], key
    assert "Compiled text: 'quoted'" in got["instructions"] and len(got["demos"]) == 2
    sig = mine["signature"]  # the class itself is the compiled signature (reasoning is ChainOfThought's)
    fields = {k: f for k, f in sig.fields.items() if k != "reasoning"}
    assert got["class"] == {"name": "RelevanceSignature", "instructions": sig.instructions, "fields": list(fields),
                            "types": [str(f.annotation) for f in fields.values()],
                            "extra": [[f.json_schema_extra.get(k) for k in ("desc", "prefix")] for f in fields.values()]}
    from personalign.signatures.relevance import RelevanceSignature

    assert [f for f in got["fields"] if f != "reasoning"] == list(RelevanceSignature.fields)


def test_compile_writes_signature_py_with_the_stage_field_order(own_task, runs_dir):
    """``personalign.compile ... out=`` on the own-task stage (three inputs, the mock LM): plain DSPy
    loads it with the compiled field order; the same state loaded into a hand-written class with the
    fields reversed gets the wrong descriptions (DSPy matches by position), which is why the file exists."""
    from personalign.testing import mock_provider

    mock_provider.register()
    out = own_task / "prog"
    personalign.compile(str(own_task / "stage.toml"), "predict", str(own_task / "data.jsonl"), lm="mock/own-task",
                        out=str(out))
    assert (out / FILE).is_file() and (out / PROGRAM_FILE).is_file()
    inputs = {"preference": "I like trains.", "question": "How do I get to Rome?", "option": "Take the night train."}
    got = plain(out, inputs, reverse="OptionFollowsSignature")
    mine = personalign.load_program(out, stage=str(own_task / "stage.toml"))
    module = plain_module(getattr(mine, "undecided", mine))
    import dspy

    expected = json.loads(json.dumps(dspy.ChatAdapter().format(module.signature, module.demos, inputs)))
    assert got["messages"] == expected
    assert got["fields"] == ["preference", "question", "option", "follows"]
    assert got["descs"][:3] == ["the user's stated preference", "the user's request", "one recommended option"]
    assert got["reversed"]["fields"][:3] == ["option", "question", "preference"]
    assert got["reversed"]["descs"][0] == "the user's stated preference"  # on the field named option
    assert got["reversed"]["messages"] != got["messages"]
    # personalign never reads nor imports it: not listed, and a file that would run code changes nothing
    assert FILE not in json.loads((out / PROGRAM_FILE).read_text())["metadata"]["personalign"]["weights"]
    (out / FILE).write_text("raise SystemExit('imported')\n")
    again = personalign.load_program(out, stage=str(own_task / "stage.toml"))
    assert dspy.ChatAdapter().format(plain_module(getattr(again, "undecided", again)).signature, [], inputs) == \
        dspy.ChatAdapter().format(module.signature, [], inputs)


def test_a_learned_strategy_refuses_in_one_line(tmp_path):
    """yes-prob-rank (a fitted decision rule, no predictor) and minilm-logreg (weights too): ``load()``
    raises one line naming what needs personalign and the command, not DSPy's KeyError 'signature'."""
    from personalign.stages import resolve_stage
    from tests.reliability.test_saved_programs import _fake_logreg

    rank = resolve_stage("relevance").registry.create("yes-prob-rank")
    rank.threshold, rank.top_fraction, rank.fitted_model = 0.5, 0.3, "local/x"
    save_program(rank, tmp_path / "rank", stage="relevance", strategy="yes-prob-rank")
    save_program(_fake_logreg(), tmp_path / "logreg", stage="relevance", strategy="minilm-logreg")
    for name, what in (("rank", "yes-prob-rank's fitted decision rule needs personalign"),
                       ("logreg", "minilm-logreg's fitted decision rule and weights need personalign")):
        got = plain(tmp_path / name, RELEVANCE)
        kind, message = got["error"]
        assert kind == "NeedsPersonalign" and "\n" not in message
        assert message.startswith(what), message
        assert f"`personalign eval relevance --program {tmp_path / name} --data FILE`" in message


def test_a_decision_rule_that_does_not_travel_is_said(tmp_path):
    """A judge compiled with a decision rule loads in plain DSPy, with a warning that its predictions
    differ from ``personalign eval`` (the rule is not applied)."""
    from personalign.programs.decision import DecisionRule, with_rule
    from personalign.stages import resolve_stage

    program = resolve_stage("relevance").registry.create("zero-shot")
    rule = DecisionRule(kind="top_share", value=0.25, cv_objective=0.6, raw_objective=0.5, n=40, n_groups=4, n_splits=4)
    save_program(with_rule(program, rule, "relevant", None), tmp_path / "ruled", stage="relevance", strategy="zero-shot")
    plain_zero = plain(tmp_path / "ruled", RELEVANCE)
    assert plain_zero["loaded"] == "Predict"
    assert len(plain_zero["warnings"]) == 1
    assert "differ from `personalign eval`" in plain_zero["warnings"][0] and "top_share" in plain_zero["warnings"][0]


def test_type_source_writes_only_builtins_and_typing():
    from typing import Any, Literal, Optional

    import pydantic

    class Model(pydantic.BaseModel):
        x: int

    names: set[str] = set()
    assert type_source(dict[str, Literal[1, 2, 3]], names) == "dict[str, Literal[1, 2, 3]]"
    assert type_source(Optional[list[str]], names) == "list[str] | None"
    assert type_source(tuple[int, ...], names) == "tuple[int, ...]"
    assert type_source(Any, names) == "Any" and names == {"Any", "Literal"}
    assert type_source(Literal["a'b", 'c"d'], names) == "Literal[\"a'b\", 'c\"d']"
    assert type_source(list[Model], names) is None


def test_a_type_that_needs_personalign_refuses(tmp_path):
    """A predictor whose output is a pydantic model of personalign's: the file defines no class
    (it cannot, with dspy alone) and ``load()`` says which field."""
    import dspy

    from personalign.signatures.extraction import ExtractedAttribute

    sig = dspy.Signature({"text": (str, dspy.InputField(desc="a text")),
                          "value": (ExtractedAttribute, dspy.OutputField(desc="v"))}, "Do it.")
    directory = save_program(dspy.Predict(sig), tmp_path / "p", stage="relevance", strategy="custom")
    text = (directory / FILE).read_text()
    assert "(dspy.Signature)" not in text and "MODULE = None" in text
    got = plain(directory, {"text": "t"})
    assert got["error"][0] == "NeedsPersonalign"
    assert got["error"][1].startswith("custom's field 'value' has type ExtractedAttribute, which needs personalign")


def test_load_refuses_a_program_json_that_names_a_model(tmp_path):
    """DSPy's ``load`` restores a predictor state's ``lm``; ``load()`` refuses it before DSPy reads the file."""
    directory = _zero_shot(tmp_path)
    doc = json.loads((directory / PROGRAM_FILE).read_text())
    doc["lm"] = {"model": "openai/gpt-4o-mini", "api_base": "http://127.0.0.1:9"}
    (directory / PROGRAM_FILE).write_text(json.dumps(doc))
    got = plain(directory, RELEVANCE)
    assert got["error"][0] == "ValueError" and "lm names a model" in got["error"][1]


def test_texts_are_literals_never_code(tmp_path):
    """Instructions, stage and strategy names with quotes, newlines and non-ASCII stay data: the file
    imports cleanly and holds them verbatim (every one is written by ``repr``)."""
    import dspy

    from personalign.stages import resolve_stage

    program = resolve_stage("relevance").registry.create("zero-shot")
    text = 'Décide.\n"""\nraise SystemExit(3)\n"""\t\\ end'
    program.judge.signature = program.judge.signature.with_instructions(text)
    stage = '9"""\nraise SystemExit(4)#'
    directory = save_program(program, tmp_path / "odd", stage=stage, strategy="zero'''shot", lm="local/x")
    got = plain(directory, RELEVANCE)
    assert got["loaded"] == "Predict" and got["class"]["name"] == "CompiledSignature"  # the stage name is no class name
    assert got["instructions"] == program.judge.signature.instructions == got["class"]["instructions"]
    assert got["messages"] == json.loads(json.dumps(dspy.ChatAdapter().format(program.judge.signature, [], RELEVANCE)))


def test_a_composed_program_refuses_load_and_gives_its_predictors(tmp_path):
    """Two predictors in one module of one's own: ``load()`` refuses (plain DSPy has no one module for
    it) and ``predictors()`` gives each with its compiled instructions, fields in order and demos."""
    import dspy

    class Two(dspy.Module):
        def __init__(self):
            super().__init__()
            self.first = dspy.Predict(dspy.Signature({"b": (str, dspy.InputField(desc="bee")),
                                                      "a": (str, dspy.InputField(desc="ay")),
                                                      "out": (bool, dspy.OutputField(desc="yes?"))}, "First."))
            self.second = dspy.Predict("question -> answer")

    program = Two()
    program.second.signature = program.second.signature.with_instructions("Second, compiled.")
    program.first.demos = [dspy.Example(b="x", a="y", out=True)]
    directory = save_program(program, tmp_path / "two", stage="relevance", strategy="two")
    got = plain(directory, RELEVANCE)
    assert got["error"][0] == "NeedsPersonalign" and "two composes 2 DSPy predictors" in got["error"][1]
    assert got["error"][1].endswith("; its predictors one by one: predictors()")
    first, second = got["predictors"]["first"], got["predictors"]["second"]
    assert (first["fields"], first["descs"], first["instructions"]) == (["b", "a", "out"], ["bee", "ay", "yes?"], "First.")
    assert first["demos"] == [{"b": "x", "a": "y", "out": True}]
    assert (second["fields"], second["instructions"]) == (["question", "answer"], "Second, compiled.")
