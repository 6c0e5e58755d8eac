"""Batched decoding (lm/_batch.py), slow (real llama.cpp models): each row equals the same prompt decoded
alone by the decoder with the same seed; its typed decisions equal the engine's (free text may part: the
decoder runs flash attention, the engine does not); the provider's ``n > 1`` goes through it."""

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


@pytest.mark.parametrize("model", [TINY, FAST])
@pytest.mark.xfail(strict=False, reason=(
    "the engine keeps flash attention off (its margins and figures were measured so) while the batch decoder "
    "turns it on; measured with both on: SmolLM2 equal on all 4 prompts, the 0.5B Q4_K_M left the sequential "
    "text after ~35 tokens on one prompt (suspected: AVX2 repacked Q4_K weights, gemm for 4 rows vs gemv for 1)"))
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

    def decision(text: str) -> bool:  # the typed field both decodes must agree on (the first value token)
        return json.loads(text)["relevant"] if text.endswith("}") else '"relevant": true' in text.replace('":true', '": true')

    # the decoder runs flash attention and the engine does not (module docstring of lm/_batch.py): the
    # typed decisions must agree; the free-text reason may part after some tokens
    assert [decision(t) for t in batched] == [decision(t) for t in sequential], (batched, sequential)
    assert all(isinstance(json.loads(t)["relevant"], bool) for t, f in zip(batched, res.finish) if f == "stop"), batched


def test_sampled_rows_equal_each_prompt_decoded_alone_with_its_seed():
    from personalign.lm._batch import complete_many
    from personalign.lm._engine import get_engine

    eng = get_engine(TINY)
    prompts = _prompts(eng, 4)
    seeds = [11, 12, 13, 14]
    together = complete_many(eng, prompts, temperature=0.8, seeds=seeds, max_tokens=40)
    alone = [complete_many(eng, [p], temperature=0.8, seeds=[sd], max_tokens=40)[0] for p, sd in zip(prompts, seeds)]
    assert [c.text for c in together] == [c.text for c in alone]
    assert len({c.text for c in together}) == 4 and all(c.completion_tokens > 0 for c in together)
    again = complete_many(eng, prompts, temperature=0.8, seeds=[21, 22, 23, 24], max_tokens=40)
    assert [c.text for c in again] != [c.text for c in together]  # the seeds matter


def test_provider_n_choices_decode_as_one_batch_and_the_switch_turns_it_off():
    import litellm

    from personalign.lm._engine import configure_settings, current_settings, get_engine
    from personalign.lm._provider import register

    register()
    eng = get_engine(TINY)
    msgs = [{"role": "user", "content": REQUEST}]
    greedy = eng.complete(eng.render(msgs)[0], temperature=0.0, max_tokens=30).text
    calls = eng.calls
    resp = litellm.completion(model=TINY, messages=msgs, n=3, temperature=0.0, max_tokens=30)
    assert [c.message.content for c in resp.choices] == [greedy] * 3  # greedy: the engine's own path, exact
    assert eng.calls == calls + 3
    resp = litellm.completion(model=TINY, messages=msgs, n=3, temperature=0.9, max_tokens=30, seed=5)
    sampled = [c.message.content for c in resp.choices]
    assert len(set(sampled)) > 1 and eng.batch_decoder is not None  # sampled: one batch of 3
    from dataclasses import replace

    before = current_settings()
    configure_settings(replace(before, batch_decode=False))
    try:
        dec = eng.batch_decoder
        n_eval = eng.evaluated_tokens
        resp = litellm.completion(model=TINY, messages=msgs, n=2, temperature=0.9, max_tokens=30, seed=5)
        assert len(resp.choices) == 2
        assert eng.batch_decoder is dec and eng.evaluated_tokens > n_eval  # the engine's own path, call by call
    finally:
        configure_settings(before)
