"""Conformance of every registered optimizer to the contract in ``personalign.optimizers.base``.

Teleprompter wrappers run under a schema-following DummyLM (control flow only, see conftest) on 8
train / 6 val demo examples; ``fit`` optimizers run on a stub scorer implementing their program
protocol (``score_batch``/``threshold``, ``prepare``, ``fit``). Every test here also runs with
``dspy.configure`` patched to fail from worker threads (autouse fixture in conftest).
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
from tests.optimizers.conftest import REL

pytestmark = pytest.mark.filterwarnings("ignore:The custom-engine complete_legacy:DeprecationWarning")

TELEPROMPTERS = OPTIMIZERS.names("teleprompter")
FITS = OPTIMIZERS.names("fit")


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


@pytest.mark.parametrize("name", OPTIMIZERS.names())
def test_compile_is_keyword_only(name):
    params = inspect.signature(OPTIMIZERS.load(name).compile).parameters
    assert params["trainset"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["valset"].kind is inspect.Parameter.KEYWORD_ONLY
    opt = OPTIMIZERS.create(name, **(small_settings(name) if name in TELEPROMPTERS else {}))
    with pytest.raises(TypeError):
        opt.compile(ZeroShotJudge(), [dspy.Example(attribute="a", prompt="b", relevant=True)])
    # every setting in __init__: the constructor is keyword-only too
    with pytest.raises(TypeError):
        OPTIMIZERS.load(name)(0)


@pytest.mark.parametrize("name", TELEPROMPTERS)
def test_teleprompter_contract_seed_and_budget(name, tiny, dummy_lm, no_configure_in_worker_threads):
    train, val = tiny
    program = ZeroShotJudge()
    before = state_json(program)
    events = []
    opt = OPTIMIZERS.create(name, **REL, lm=dummy_lm, seed=0, n_boot=200, on_event=lambda k, p: events.append((k, p)),
                            **small_settings(name))
    assert opt.config()["seed"] == 0
    compiled, result = opt.compile(program, trainset=train, valset=val)

    assert isinstance(compiled, dspy.Module) and compiled is not program
    assert isinstance(result, CompileResult)
    assert state_json(program) == before, "the input program was modified"
    assert result.optimizer == name and result.seed == 0 and result.config["seed"] == 0
    assert result.score_before is not None and result.score_after is not None
    lo, hi = result.score_after_ci
    assert lo <= result.score_after <= hi
    assert result.lm_calls == result.actual_lm_calls == len(dummy_lm.calls) > 0
    assert result.projected_lm_calls is not None
    assert result.actual_lm_calls <= result.projected_lm_calls or result.details.get("over_budget_reason")
    assert [k for k, _ in events] == ["projected", "actual"]
    assert events[0][1]["projected_lm_calls"] == result.projected_lm_calls
    assert opt.projected_lm_calls(program, train, val) == result.projected_lm_calls
    json.dumps(result.to_dict())  # JSON-serializable for tracking
    with dspy.context(lm=dummy_lm):
        pred = compiled(attribute=val[0].attribute, prompt=val[0].prompt)
    assert isinstance(pred.relevant, bool)

    # same seed -> same compiled state (a fresh LM: no shared state between the runs)
    again, _ = OPTIMIZERS.create(name, **REL, lm=type(dummy_lm)(), seed=0, n_boot=200, **small_settings(name)).compile(
        ZeroShotJudge(), trainset=train, valset=val)
    assert state_json(again) == state_json(compiled)


@pytest.mark.parametrize("name", TELEPROMPTERS)
def test_teleprompter_demo_limit_zero_gives_no_demos(name, tiny, dummy_lm):
    train, val = tiny
    compiled, result = OPTIMIZERS.create(name, **REL, lm=dummy_lm, seed=0, score=False, **zero_demo_settings(name)).compile(
        ZeroShotJudge(), trainset=train, valset=val)
    assert all(len(p.demos) == 0 for p in compiled.predictors()), result.details
    assert result.details["demos"] == {"judge": 0}
    assert result.actual_lm_calls <= result.projected_lm_calls


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
    opt = OPTIMIZERS.create(name, seed=0)
    assert opt.config()["seed"] == 0
    compiled, result = opt.compile(program, trainset=train, valset=val)
    assert isinstance(result, CompileResult) and compiled is not program
    assert state_json(program) == before
    assert compiled.threshold is not None and result.val_score is not None
    assert opt.projected_lm_calls(program, train, val) is None  # LM use depends on the scorer
    again, _ = OPTIMIZERS.create(name, seed=0).compile(StubScorer(), trainset=train, valset=val)
    assert state_json(again) == state_json(compiled)
    json.dumps(result.to_dict())
