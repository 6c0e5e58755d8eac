"""Unit tests of the LM-call projection (:mod:`personalign.optimizers.budget`) and of the
``get_params``/``config`` derived from ``__init__``."""

from __future__ import annotations

import dspy
import pytest

from personalign.optimizers import OPTIMIZERS
from personalign.optimizers.budget import (Projection, adapter_factor, calls_per_run, lm_adapter_factor,
                                            predictor_calls)


class Two(dspy.Module):
    def __init__(self):
        super().__init__()
        self.a = dspy.Predict("x -> y")
        self.b = dspy.Predict("y -> z")


class Declared(Two):
    lm_calls_per_run = 5


class PerExample(Two):
    def lm_calls_per_run(self, example):
        return 2 * len(example.things)


def test_adapter_factor():
    assert adapter_factor(dspy.ChatAdapter()) == 2  # a parse failure is retried with JSONAdapter
    assert adapter_factor(dspy.ChatAdapter(use_json_adapter_fallback=False)) == 1
    assert adapter_factor(dspy.JSONAdapter()) == 1
    with dspy.context(adapter=dspy.JSONAdapter()):
        assert adapter_factor(None) == 1
    assert adapter_factor(None) == 2  # DSPy's default adapter
    assert lm_adapter_factor(dspy.LM("local/smollm2-135m-instruct")) == 1  # embedded: JSONAdapter
    # a hosted model litellm lists with JSON-schema support runs through JSONAdapter (no fallback call)
    assert lm_adapter_factor(dspy.LM("openai/gpt-4o-mini")) == 1
    assert lm_adapter_factor(dspy.LM("openai/personalign-unknown-model")) == 2  # unknown: ChatAdapter


def test_predictor_calls_default_declared_and_per_example():
    assert predictor_calls(Two()) == 2
    assert predictor_calls(Declared()) == 5
    assert predictor_calls(Declared(), declared=7) == 7  # the optimizer's explicit setting wins
    exs = [dspy.Example(things=[1, 2, 3]), dspy.Example(things=[1])]
    assert predictor_calls(PerExample(), examples=exs) == 6  # the maximum over the examples
    assert predictor_calls(PerExample()) == 2  # no examples: one call per predictor
    assert predictor_calls(PerExample(), examples=[dspy.Example(things=[])]) == 1  # at least one
    assert calls_per_run(Declared(), 2) == 10 and calls_per_run(Two(), 1) == 2


def test_projection_totals_and_overruns():
    p = Projection(score_before=12, score_after=12, teleprompter_parts={"bootstrap": 16, "proposals": 4})
    assert p.teleprompter == 20 and p.total == 44
    assert p.as_dict() == {"score_before": 12, "teleprompter": 20, "score_after": 12,
                           "teleprompter_parts": {"bootstrap": 16, "proposals": 4}, "total": 44}
    assert p.overruns({"score_before": 12, "teleprompter": 20, "score_after": 12}) == []
    assert p.overruns({"score_before": 13, "teleprompter": 3, "score_after": 0}) == [
        "score_before: 13 calls > 12 projected"]


@pytest.mark.parametrize("name", ["bootstrap", "mipro", "simba"])
def test_wrapper_projection_uses_the_declaration(name, tiny):
    """Declaring 5 calls per run multiplies every program-run term of the projection."""
    train, val = tiny
    lm = dspy.LM("openai/none")
    opt = OPTIMIZERS.create(name, lm=lm, metric=lambda e, p, t=None: 1.0)
    one = opt.projection(Two(), train, val)
    five = opt.projection(Declared(), train, val)
    assert one["score_before"] == len(val) * 2 * 2 and five["score_before"] == len(val) * 5 * 2
    assert five["total"] > one["total"]


def test_get_params_come_from_init():
    opt = OPTIMIZERS.create("bootstrap", max_rounds=2, seed=3, metric=len)
    params = opt.get_params()
    assert params["max_rounds"] == 2 and params["seed"] == 3 and params["metric"] is len
    assert set(params) >= {"max_bootstrapped_demos", "max_labeled_demos", "lm", "num_threads", "calls_per_run"}
    cfg = opt.config()
    assert cfg["metric"] == "len" and cfg["lm"] is None and cfg["max_rounds"] == 2
    assert OPTIMIZERS.create("mipro", prompt_lm=dspy.LM("openai/x")).config()["prompt_lm"] == "openai/x"
    assert OPTIMIZERS.create("threshold-fit", label="accepted").config() == {"label": "accepted", "seed": 0,
                                                                             "objective": "f1"}
