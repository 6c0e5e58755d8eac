"""Conformance of every registered optimizer to the contract in ``personalign.optimizers.base``.

Teleprompter wrappers run the shipped suite :class:`personalign.testing.OptimizerTestCase` (one
subclass per registered teleprompter: compile contract, actual LM calls <= projected with no
exception, no constant winner on an imbalanced task) under a schema-following DummyLM
(:class:`personalign.testing.dummies.SchemaDummyLM`) on 8 train / 6 val demo examples; ``fit``
optimizers run on a stub scorer implementing their program protocol (``score_batch``/``threshold``,
``prepare``, ``fit``). Every test here also runs with ``dspy.configure`` patched to fail from worker
threads (autouse fixture in conftest).
"""

from __future__ import annotations

import inspect
import json
import random

import dspy
import pytest
from dspy.utils.dummies import DummyVectorizer

from personalign.optimizers import OPTIMIZERS, CompileResult
from personalign.programs.relevance.judges import ZeroShotJudge
from personalign.testing import OptimizerTestCase
from tests.optimizers.conftest import REL

pytestmark = pytest.mark.filterwarnings("ignore:The custom-engine complete_legacy:DeprecationWarning")

TELEPROMPTERS = OPTIMIZERS.names(kind="teleprompter")
FITS = OPTIMIZERS.names(kind="fit")


def small_settings(name: str) -> dict:
    """CPU-tiny settings per wrapper (the defaults are already small; these are smaller)."""
    return {
        "labeled": dict(k=2),
        "bootstrap": dict(max_bootstrapped_demos=2, max_labeled_demos=2),
        "bootstrap-rs": dict(num_candidate_programs=2, max_bootstrapped_demos=2, max_labeled_demos=2),
        "mipro": dict(auto="light", max_trials=3),
        "copro": dict(breadth=2, depth=2),
        "simba": dict(bsize=4, num_candidates=2, max_steps=2, max_demos=2),
        "gepa": dict(max_metric_calls=16),
        "knn": dict(k=2, vectorizer=dspy.Embedder(DummyVectorizer())),
    }[name]


def zero_demo_settings(name: str) -> dict:
    s = small_settings(name)
    s.update({
        "labeled": dict(k=0),
        "bootstrap": dict(max_bootstrapped_demos=0, max_labeled_demos=0),
        "bootstrap-rs": dict(max_bootstrapped_demos=0, max_labeled_demos=0),
        "mipro": dict(max_bootstrapped_demos=0, max_labeled_demos=0),
        "simba": dict(max_demos=0),
        "knn": dict(k=0),
    }.get(name, {}))
    return s


def state_json(program) -> str:
    return json.dumps(program.dump_state(), sort_keys=True, default=str)


def test_registry_names_match_classes():
    assert set(TELEPROMPTERS) == {"labeled", "bootstrap", "bootstrap-rs", "mipro", "copro", "simba", "gepa", "knn"}
    for name in OPTIMIZERS.names():
        cls = OPTIMIZERS.load(name)
        assert cls.name == name
        assert OPTIMIZERS.info(name).kind in ("teleprompter", "fit")
    from personalign.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="unknown optimizer 'nope'"):
        OPTIMIZERS.info("nope")


def _facts(name: str) -> dict:
    """What the relevance stage tells the fit ``name`` (a fit has no stage defaults of its own)."""
    from personalign.stages import resolve_stage

    return resolve_stage("relevance").fit_facts(OPTIMIZERS.load(name))


@pytest.mark.parametrize("name", FITS)
def test_fit_compile_is_keyword_only(name):
    params = inspect.signature(OPTIMIZERS.load(name).compile).parameters
    assert params["trainset"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["valset"].kind is inspect.Parameter.KEYWORD_ONLY
    opt = OPTIMIZERS.create(name, **_facts(name))
    with pytest.raises(TypeError):
        opt.compile(ZeroShotJudge(), [dspy.Example(attribute="a", prompt="b", relevant=True)])
    # every setting in __init__: the constructor is keyword-only too
    with pytest.raises(TypeError):
        OPTIMIZERS.load(name)(0)


# -- teleprompters: one OptimizerTestCase subclass per registered teleprompter --------------------

class _Conformance(OptimizerTestCase):
    """The shared suite with this file's tiny settings; runs with ``dspy.configure`` patched to fail
    from worker threads (autouse fixture in conftest)."""

    def check_compile_info(self, info):
        if self.optimizer == "bootstrap-rs":  # runners-up of the teleprompter's own search are candidates too
            assert any(c["name"].startswith("bootstrap-rs#") for c in info["details"]["selection"]["candidates"])


for _name in TELEPROMPTERS:
    _cls = f"TestConformance_{_name.replace('-', '_')}"
    globals()[_cls] = type(_cls, (_Conformance,), {"optimizer": _name, "settings": small_settings(_name),
                                                   "zero_demo_settings": zero_demo_settings(_name),
                                                   "__module__": __name__})


@pytest.mark.parametrize("name", ["labeled", "bootstrap"])
def test_seed_changes_the_demos(name, relevance_sets, dummy_lm):
    train, _ = relevance_sets
    states = {state_json(OPTIMIZERS.create(name, **REL, lm=dummy_lm, seed=s, score=False, **small_settings(name)).compile(
        ZeroShotJudge(), trainset=train)[0]) for s in (0, 1, 2)}
    assert len(states) > 1


# -- fit optimizers ------------------------------------------------------------------------------

class StubScorer(dspy.Module):
    """Scorer protocol of the fit optimizers: word overlap of attribute and prompt, plus a bias set by
    ``fit(examples, seed=)``; ``prepare`` records the train vocabulary size. No LM."""

    def __init__(self):
        super().__init__()
        self.threshold = None
        self.bias = 0.0
        self.vocab = 0

    def prepare(self, examples):
        self.vocab = len({w for e in examples for w in e.attribute.lower().split()})

    def fit(self, examples, *, seed=0):
        self.bias = random.Random(seed).random() / 100
        return self

    def score_batch(self, examples):
        out = []
        for e in examples:
            a, p = set(e.attribute.lower().split()), set(e.prompt.lower().split())
            out.append(len(a & p) / (1 + len(a)) + self.bias)
        return out

    def forward(self, attribute, prompt):
        (s,) = self.score_batch([dspy.Example(attribute=attribute, prompt=prompt)])
        return dspy.Prediction(relevant=s >= self.threshold, score=s)

    def dump_state(self, *args, **kwargs):
        return {"threshold": self.threshold, "bias": self.bias, "vocab": self.vocab}


@pytest.mark.parametrize("name", FITS)
def test_fit_contract_and_seed(name, relevance_sets):
    train, val = relevance_sets
    program = StubScorer()
    before = state_json(program)
    opt = OPTIMIZERS.create(name, seed=0, **_facts(name))
    assert opt.config()["seed"] == 0
    compiled, result = opt.compile(program, trainset=train, valset=val)
    assert isinstance(result, CompileResult) and compiled is not program
    assert state_json(program) == before
    assert compiled.threshold is not None and result.val_score is not None
    assert opt.projected_lm_calls(program, train, val) is None  # LM use depends on the scorer
    again, _ = OPTIMIZERS.create(name, seed=0, **_facts(name)).compile(StubScorer(), trainset=train, valset=val)
    assert state_json(again) == state_json(compiled)
    json.dumps(result.to_dict())
