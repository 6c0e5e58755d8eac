"""Every model call counts (issue 37): a DSPy LM call, and a forward pass made outside DSPy's LM (the
yes/no margin, the hidden state) -- counted where the engine is invoked -- with the calls a cache
answered shown apart. The engine here is :mod:`tests.fake_engine` (the real LocalEngine methods
over a stand-in for llama.cpp); DSPy calls go to the in-process mock provider."""

from __future__ import annotations

import dspy
import pytest

from personalign.lm import CallCounter, calls_text
from tests import fake_engine

TINY = "local/smollm2-135m-instruct"


@pytest.fixture
def engines(monkeypatch):
    return fake_engine.install(monkeypatch)


@pytest.fixture
def dspy_cache(tmp_path):
    from personalign.lm import configure_cache

    before = dspy.cache
    configure_cache(tmp_path / "cache")
    yield tmp_path / "cache"
    dspy.cache = before


def test_a_forward_pass_is_a_model_call_counted_where_the_engine_runs(engines):
    from personalign.lm._engine import get_engine
    from personalign.lm.yesno import NO, YES

    engine = get_engine(TINY)
    with CallCounter() as outer:
        with CallCounter() as inner:
            engine.next_token_logprobs("system: decide\nuser: is it relevant?", list(YES + NO))
        engine.next_token_logprobs("system: decide\nuser: another question?", list(YES + NO))
    assert (inner.calls, inner.forward_passes, inner.cached) == (1, 1, 0)
    assert (outer.calls, outer.forward_passes, outer.cached) == (2, 2, 0)  # the nested block's call counts too
    assert outer.seconds["forward"] > 0
    assert engine.llm.evaluated > 0  # the pass really ran through the engine


def test_a_margin_the_cache_answers_is_counted_apart(engines, dspy_cache):
    from personalign.lm.scoring import cached_yes_no_margin

    msgs = [{"role": "system", "content": "Decide."}, {"role": "user", "content": "Is it? Answer Yes or No."}]
    with CallCounter() as first:
        a = cached_yes_no_margin(TINY, msgs)
    with CallCounter() as second:
        b = cached_yes_no_margin(TINY, msgs)
    assert a == b
    assert (first.calls, first.cached) == (1, 0)
    assert (second.calls, second.cached) == (0, 1)


def test_dspy_calls_that_reached_a_model_and_cache_hits_are_told_apart(dspy_cache):
    from personalign.lm import make_lm, use
    from personalign.testing import mock_provider

    mock_provider.register()
    lm = make_lm("mock/calls")
    ask = dspy.Predict("question -> answer")
    with use(lm), CallCounter() as first:
        ask(question="one")
        ask(question="two")
    with use(lm), CallCounter() as second:
        ask(question="one")  # DSPy's cache answers
        ask(question="three")
    assert (first.calls, first.cached, first.generations) == (2, 0, 2)
    assert (second.calls, second.cached) == (1, 1)
    assert first.seconds["generation"] > 0


def test_on_call_sees_every_call_cached_or_not(engines, dspy_cache):
    from personalign.lm.scoring import cached_yes_no_margin

    seen = []
    msgs = [{"role": "user", "content": "Is it? Answer Yes or No."}]
    cached_yes_no_margin(TINY, msgs)
    with CallCounter(on_call=lambda: seen.append(1)) as c:
        cached_yes_no_margin(TINY, msgs)
        cached_yes_no_margin(TINY, msgs + [{"role": "user", "content": "and now?"}])
    assert len(seen) == 2 and (c.calls, c.cached) == (1, 1)


def test_calls_text():
    assert calls_text(120) == "120"
    assert calls_text(120, 40) == "120 (+40 cached)"
