"""The embedded backend end to end: real llama.cpp models through litellm and DSPy (slow)."""

from __future__ import annotations

import math
from typing import Literal

import dspy
import pydantic
import pytest

import personalign.lm as plm
from personalign.errors import ContextWindowError, find_personalign_error

pytestmark = pytest.mark.slow

LOCAL_MODELS = ["local/smollm2-135m-instruct", "local/qwen2.5-coder-0.5b-instruct", "local/qwen2.5-coder-1.5b-instruct"]


class Item(pydantic.BaseModel):
    name: str
    score: int


class Typed(dspy.Signature):
    """Describe the user's message with the requested typed fields."""

    message: str = dspy.InputField()
    flag: bool = dspy.OutputField()
    kind: Literal["hobby", "work", "other"] = dspy.OutputField()
    count: int = dspy.OutputField()
    tags: list[str] = dspy.OutputField()
    entries: list[Item] = dspy.OutputField()


@pytest.fixture(autouse=True)
def _cache_off(runs_dir):
    plm.configure_cache(enabled=False)
    yield


@pytest.mark.parametrize("model", LOCAL_MODELS)
def test_typed_outputs_are_valid_on_each_local_model(model):
    lm = plm.make_lm(model, cache=False, max_tokens=400)
    messages = ["I play chess every evening after work.", "My job is accounting; I love numbers.",
                "Weekends are for hiking and photography."]
    for text in messages:
        with plm.use(lm):
            out = dspy.Predict(Typed)(message=text)
        assert isinstance(out.flag, bool)
        assert out.kind in ("hobby", "work", "other")
        assert isinstance(out.count, int)
        assert isinstance(out.tags, list) and all(isinstance(t, str) for t in out.tags)
        assert all(isinstance(i, Item) for i in out.entries)
    # the schema really reached the provider: the last request carried a json_schema response_format
    assert lm.history[-1]["kwargs"]["response_format"] is not None


def test_litellm_completion_with_schema_returns_schema_valid_json():
    import json

    import litellm

    from personalign.lm._provider import register

    register()
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"],
              "additionalProperties": False}
    resp = litellm.completion(
        model="local/smollm2-135m-instruct",
        messages=[{"role": "user", "content": "How many legs does a cat have?"}],
        response_format={"type": "json_schema", "json_schema": {"name": "A", "schema": schema}},
        max_tokens=20,
        temperature=0,
    )
    data = json.loads(resp.choices[0].message.content)
    assert isinstance(data["answer"], int)
    assert resp.usage.prompt_tokens > 0 and resp.usage.completion_tokens > 0


def test_other_litellm_model_strings_still_route_through_litellm():
    """Registering the local provider leaves every other provider alone (mocked response, no network)."""
    import litellm

    from personalign.lm._provider import register

    register()
    resp = litellm.completion(model="openai/gpt-4o-mini", messages=[{"role": "user", "content": "hi"}],
                              mock_response="hello from openai route")
    assert resp.choices[0].message.content == "hello from openai route"


def test_grammar_constrained_reported_for_local_models():
    from personalign.lm._provider import grammar_constrained

    assert all(grammar_constrained(m) for m in LOCAL_MODELS)


def test_prompt_longer_than_context_is_a_context_window_error():
    plm.configure_local(n_ctx=256)
    try:
        lm = plm.make_lm("local/smollm2-135m-instruct", cache=False, num_retries=0)
        with pytest.raises(Exception) as err, plm.use(lm):
            dspy.Predict("question -> answer")(question="word " * 2000)
        ours = find_personalign_error(err.value)
        assert isinstance(ours, ContextWindowError)
        assert "256-token context" in str(ours)
    finally:
        plm.configure_local(n_ctx=4096)


def test_sampling_with_rollout_ids_gives_distinct_samples_and_greedy_is_deterministic():
    lm = plm.make_lm("local/smollm2-135m-instruct", cache=False, temperature=1.0, max_tokens=24)
    outs = set()
    for rid in range(4):
        with plm.use(lm.copy(rollout_id=rid)):
            outs.add(dspy.Predict("topic -> sentence")(topic="autumn").sentence)
    assert len(outs) >= 2
    greedy = plm.make_lm("local/smollm2-135m-instruct", cache=False, max_tokens=24)
    with plm.use(greedy):
        a = dspy.Predict("topic -> sentence")(topic="autumn").sentence
        b = dspy.Predict("topic -> sentence")(topic="autumn").sentence
    assert a == b


def test_one_engine_per_model_shared_across_threads():
    from concurrent.futures import ThreadPoolExecutor

    from personalign.lm._engine import get_engine

    with ThreadPoolExecutor(4) as pool:
        engines = list(pool.map(lambda _: get_engine("local/smollm2-135m-instruct"), range(8)))
    assert len({id(e) for e in engines}) == 1

    lm = plm.make_lm("local/smollm2-135m-instruct", cache=False, max_tokens=16)

    def call(i):
        with plm.use(lm):
            return dspy.Predict("number -> is_even: bool")(number=str(i)).is_even

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(call, range(6)))
    assert all(isinstance(r, bool) for r in results)


def test_cache_makes_the_second_call_free(runs_dir):
    plm.configure_cache(runs_dir / "cache")
    lm = plm.make_lm("local/smollm2-135m-instruct")
    with plm.CallCounter() as first, plm.use(lm):
        dspy.Predict("question -> answer")(question="What colour is the sky?")
    with plm.CallCounter() as second, plm.use(lm):
        dspy.Predict("question -> answer")(question="What colour is the sky?")
    assert first.calls == 1 and second.calls == 0
    assert any((runs_dir / "cache").iterdir())


REQUEST = ("I am planning a two-week trip through the mountains of northern Italy in late September. "
           "Could you suggest a day-by-day itinerary with hikes, towns to stay in and local food to try? ") * 3
ATTRIBUTES = ["The user is vegetarian.", "The user works as an accountant.", "The user has a bad knee.",
              "The user prefers short answers.", "The user speaks German.", "The user travels with a dog."]


def test_kv_prefix_reuse_evaluates_only_the_suffix_and_keeps_outputs():
    from personalign.lm._engine import get_engine
    from personalign.signatures.relevance import RelevanceSignature

    model = "local/smollm2-135m-instruct"
    lm = plm.make_lm(model, cache=False, max_tokens=32)
    engine = get_engine(model)
    outs, evaluated, submitted = {}, {}, {}
    try:
        for reuse in (True, False):
            plm.configure_local(reuse_prefix=reuse)
            p0, e0 = engine.prompt_tokens, engine.evaluated_tokens
            with plm.use(lm):
                outs[reuse] = [dspy.Predict(RelevanceSignature)(prompt=REQUEST, attribute=a).relevant for a in ATTRIBUTES]
            submitted[reuse], evaluated[reuse] = engine.prompt_tokens - p0, engine.evaluated_tokens - e0
    finally:
        plm.configure_local(reuse_prefix=True)
    assert outs[True] == outs[False]
    assert submitted[True] == submitted[False] == evaluated[False]
    # the request comes before the attribute: after the first call only the tail is evaluated
    assert evaluated[True] < 0.5 * evaluated[False], (evaluated, submitted)


def test_prefix_reuse_is_correct_under_threads():
    """Interleaved calls from threads evict each other's prefixes; margins stay those of a
    sequential run (up to llama.cpp's batch-shape rounding) and decisions agree."""
    from concurrent.futures import ThreadPoolExecutor

    from personalign.lm.scoring import relevance_messages, yes_no_margin

    model = "local/smollm2-135m-instruct"
    pairs = [(a, REQUEST if i % 2 else "What is a good name for a goldfish?") for i, a in enumerate(ATTRIBUTES * 2)]
    sequential = [yes_no_margin(model, relevance_messages(a, p)) for a, p in pairs]
    with ThreadPoolExecutor(3) as pool:
        threaded = list(pool.map(lambda ap: yes_no_margin(model, relevance_messages(*ap)), pairs))
    assert max(abs(x - y) for x, y in zip(sequential, threaded)) < 0.25


def test_typed_calls_return_logprobs_that_spell_the_answer_and_score_it():
    from personalign.lm.logprobs import scored
    from personalign.signatures.relevance import RelevanceSignature

    lm = plm.make_lm("local/smollm2-135m-instruct", cache=False)
    with plm.use(lm):
        out = dspy.Predict(RelevanceSignature)(attribute="I am vegetarian", prompt="Suggest a dinner recipe",
                                               config={"logprobs": True, "top_logprobs": 5})
        content = out.logprobs.content
        text = "".join(t.token for t in content)
        assert text.replace(" ", "").replace("\n", "").startswith('{"relevant":')
        for t in content:  # the chosen token's log-probability is a probability, and ranks among the top
            assert t.logprob <= 0 and len(t.top_logprobs) == 5
            assert t.top_logprobs[0].logprob >= t.top_logprobs[-1].logprob
        pred, score = scored(dspy.Predict(RelevanceSignature), "relevant", attribute="I am vegetarian",
                             prompt="Suggest a dinner recipe")
    assert isinstance(score, float) and math.isfinite(score)
    assert (score > 0) == pred.relevant  # greedy decoding picks the more likely side
    assert "logprobs" not in pred
