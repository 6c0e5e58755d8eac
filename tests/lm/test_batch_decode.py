"""Batched greedy decoding (lm/_batch.py) equals one-at-a-time decoding at temperature 0 (slow:
real llama.cpp models)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow

TINY = "local/smollm2-135m-instruct"
FAST = "local/qwen2.5-coder-0.5b-instruct"
REQUEST = "We are four friends planning a weekend of hiking near a lake. What should we pack?"
VIEWS = ["a cautious first-aider", "a minimalist backpacker", "a hungry cook", "a photographer"]


def _prompts(eng, k):
    return [eng.render([{"role": "system", "content": "You are a helpful assistant."},
                        {"role": "user", "content": f"{REQUEST}\n\nAnswer as {v}."}])[0] for v in VIEWS[:k]]


@pytest.mark.xfail(strict=False, reason=(
    "measured at merge: on smollm2 the batched free text leaves the sequential text after ~25 tokens "
    "(llama.cpp's kernels round differently by batch shape); greedy equality holds for grammar-constrained "
    "outputs (next test). Issue 29 item 3 stays open until batched decoding is exact or its drift is bounded."))
@pytest.mark.parametrize("model", [TINY, FAST])
def test_batched_free_text_equals_sequential(model):
    from personalign.lm import current_settings
    from personalign.lm._batch import BatchDecoder
    from personalign.lm._engine import get_engine

    eng = get_engine(model)
    prompts = _prompts(eng, 4)
    sequential = [eng.complete(p, temperature=0.0, max_tokens=40).text for p in prompts]
    dec = BatchDecoder(eng.llm, n_seq=4, n_ctx=current_settings().n_ctx, n_threads=current_settings().n_threads)
    try:
        res = dec.generate([eng.llm.tokenize(p.encode(), add_bos=False, special=True) for p in prompts],
                           max_tokens=40)
    finally:
        dec.close()
    batched = [eng.llm.detokenize(t).decode("utf-8", errors="replace") for t in res.tokens]
    shared = len(eng.llm.tokenize(prompts[0].split("Answer as")[0].encode(), add_bos=False, special=True))
    assert res.prompt_tokens_evaluated < sum(len(eng.llm.tokenize(p.encode(), add_bos=False, special=True))
                                             for p in prompts) - 2 * shared, "the shared prefix is evaluated once"
    assert batched == sequential


def test_batched_grammar_constrained_equals_the_engines_typed_output():
    from personalign.lm import current_settings
    from personalign.lm._batch import BatchDecoder
    from personalign.lm._engine import _gbnf_for, fit_schema, get_engine

    eng = get_engine(FAST)
    schema = {"type": "object", "properties": {"relevant": {"type": "boolean"}, "reason": {"type": "string"}},
              "required": ["relevant", "reason"]}
    s = current_settings()
    grammar = _gbnf_for(json.dumps(fit_schema(schema, s.max_string_chars, s.max_list_items, budget=60), sort_keys=True))
    prompts = _prompts(eng, 3)
    sequential = [eng.complete(p, temperature=0.0, max_tokens=60, schema=schema).text for p in prompts]
    dec = BatchDecoder(eng.llm, n_seq=3, n_ctx=s.n_ctx, n_threads=s.n_threads)
    try:
        res = dec.generate([eng.llm.tokenize(p.encode(), add_bos=False, special=True) for p in prompts],
                           max_tokens=60, grammars=[grammar] * 3)
    finally:
        dec.close()
    batched = [eng.llm.detokenize(t).decode("utf-8", errors="replace") for t in res.tokens]
    assert batched == sequential
    assert all(isinstance(json.loads(t)["relevant"], bool) for t in batched if res.finish[batched.index(t)] == "stop")
