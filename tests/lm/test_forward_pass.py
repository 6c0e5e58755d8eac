"""One forward pass serves the yes/no margin and the hidden state (personalign.lm.forward).

Fast tests run a fake engine that counts its forward passes (``next_token_logprobs_hidden``
calls) and computes a margin and a hidden state from the prompt tokens and the model's sha256;
they check the cache key, that one pass fills both features, that a second strategy of the same
run and a second run (memory cleared, same cache dir) make no pass, that an entry of another model
never serves, and that concurrent writer processes leave only whole entries. The slow test runs
the real 0.5B model and compares the shared pass with the margin and hidden state computed apart
(llama.cpp's plain scorer, and a separate ``Llama(embedding=True)``), counting ``Llama.eval`` calls.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import threading

import dspy
import numpy as np
import pytest

from personalign.lm import forward
from personalign.lm.yesno import NO, YES, margin_of

N_EMBD = 8


class FakeLlama:
    def n_embd(self) -> int:
        return N_EMBD


class FakeEngine:
    """The parts of LocalEngine that forward.yes_no_pass uses; one token per character."""

    def __init__(self, sha256: str) -> None:
        self.sha256 = sha256
        self.lock = threading.RLock()
        self.llm = FakeLlama()
        self.passes = 0

    def render(self, messages):
        return "\n".join(f"<{m['role']}>{m['content']}" for m in messages) + "\n<assistant>", []

    def _prompt_tokens(self, prompt: str) -> list[int]:
        return [ord(c) for c in prompt]

    def expected(self, tokens):
        """(candidate logprobs, hidden) this fake model gives for ``tokens``."""
        seed = int.from_bytes(hashlib.sha256(f"{self.sha256}:{tokens}".encode()).digest()[:8], "little")
        rng = np.random.default_rng(seed)
        lp = {c: (i, float(-rng.uniform(0.1, 5.0))) for i, c in enumerate(YES + NO)}
        hidden = rng.normal(size=N_EMBD).astype(np.float32).astype(np.float64)
        return lp, hidden

    def next_token_logprobs_hidden(self, prompt, candidates):
        assert list(candidates) == list(YES + NO)
        self.passes += 1
        return self.expected(list(prompt))


@pytest.fixture
def engines(monkeypatch, tmp_path):
    """Fake engines by model string (``local/fake-a``...), a fresh LM cache dir, empty memory."""
    import personalign.lm._engine as engine_mod
    from personalign.lm import configure_cache

    made: dict[str, FakeEngine] = {}
    shas = {"local/fake-a": "a" * 64, "local/fake-b": "b" * 64, "local/fake-a-again": "a" * 64}
    monkeypatch.setattr(engine_mod, "get_engine", lambda model: made.setdefault(model, FakeEngine(shas[model])))
    monkeypatch.setattr(dspy, "cache", dspy.cache)  # restored after the test
    configure_cache(tmp_path / "cache")
    forward.clear_memory()
    yield made
    forward.clear_memory()


def relevance_examples(n=4):
    return [dspy.Example(attribute=f"The user likes topic {i}.", prompt=f"Request {i % 2}", prompt_id=f"p{i % 2}",
                         user_id="u", relevant=i == 0).with_inputs("attribute", "prompt") for i in range(n)]


def test_the_key_separates_models_prompts_and_positions():
    base = forward.pass_key("a" * 64, [1, 2, 3], 2)
    assert base == forward.pass_key("a" * 64, (1, 2, 3), 2)
    assert len({base, forward.pass_key("b" * 64, [1, 2, 3], 2), forward.pass_key("a" * 64, [1, 2, 4], 2),
                forward.pass_key("a" * 64, [1, 2, 3], 1), forward.pass_key("a" * 64, [1, 2], 1)}) == 5


def test_one_pass_fills_the_margin_and_the_hidden_state(engines):
    msgs = [{"role": "user", "content": "Is it raining? Answer Yes or No."}]
    first = forward.yes_no_pass("local/fake-a", msgs)
    eng = engines["local/fake-a"]
    lp, hidden = eng.expected(eng._prompt_tokens(eng.render(msgs)[0]))
    assert eng.passes == 1 and not first.cached
    assert first.margin == margin_of(lp) and np.array_equal(first.hidden, hidden)
    assert first.hidden.dtype == np.float64 and first.hidden.shape == (N_EMBD,)
    again = forward.yes_no_pass("local/fake-a", msgs)
    assert again.cached and eng.passes == 1
    assert again.margin == first.margin and np.array_equal(again.hidden, first.hidden)


def test_a_second_strategy_in_the_same_run_makes_no_forward_pass(engines):
    from personalign.programs.relevance.probe import LMProbe, hidden_states
    from personalign.programs.relevance.yes_prob import YesProbability

    exs = relevance_examples()
    before = forward.counts()
    margins = YesProbability(model="local/fake-a").score_batch(exs)
    eng = engines["local/fake-a"]
    assert eng.passes == len(exs)
    states = hidden_states("local/fake-a", exs)
    LMProbe(model="local/fake-a").fit(exs)  # its own C choice and head: the same states again
    assert eng.passes == len(exs), "lm-probe read the passes yes-prob made"
    after = forward.counts()
    assert after["computed"] - before["computed"] == len(exs)
    assert after["memory"] - before["memory"] >= 2 * len(exs)
    assert states.shape == (len(exs), N_EMBD)
    for ex, m, h in zip(exs, margins, states):
        from personalign.lm.scoring import relevance_messages

        lp, hidden = eng.expected(eng._prompt_tokens(eng.render(relevance_messages(ex.attribute, ex.prompt))[0]))
        assert m == margin_of(lp) and np.array_equal(h, hidden)


def test_a_binary_stage_s_generic_yes_prob_shares_the_pass(engines):
    from personalign.stages import resolve_stage

    stage = resolve_stage("verification")
    exs = [dspy.Example(evidence=f"I cook every day {i}", attribute="The user cooks.", reason="stated", accepted=True)
           .with_inputs("evidence", "attribute", "reason") for i in range(3)]
    with dspy.context(lm=dspy.LM("local/fake-a")):
        first = stage.registry.create("yes-prob").score_batch(exs)
        second = stage.registry.create("yes-prob").score_batch(exs)
    assert engines["local/fake-a"].passes == 3 and first == second
    # verification's positive class is a rejected attribute: the margin is turned around
    eng = engines["local/fake-a"]
    prog = stage.registry.create("yes-prob")
    lp, _ = eng.expected(eng._prompt_tokens(eng.render(prog.messages(exs[0]))[0]))
    assert first[0] == -margin_of(lp)


def test_a_later_run_reads_the_disk_cache_and_another_model_never_does(engines, tmp_path):
    from personalign.lm import configure_cache

    msgs = [{"role": "user", "content": "Does the user cook? Answer Yes or No."}]
    a = forward.yes_no_pass("local/fake-a", msgs)
    forward.clear_memory()  # as a new process
    before = forward.counts()
    served = forward.yes_no_pass("local/fake-a", msgs)
    assert served.cached and forward.counts()["disk"] == before["disk"] + 1
    assert engines["local/fake-a"].passes == 1
    assert served.margin == a.margin and np.array_equal(served.hidden, a.hidden)
    # the same prompt on another model file: computed, never served from model a's entry
    b = forward.yes_no_pass("local/fake-b", msgs)
    assert not b.cached and engines["local/fake-b"].passes == 1 and b.margin != a.margin
    # another model string whose file has the same sha256 is the same model: served
    forward.clear_memory()
    assert forward.yes_no_pass("local/fake-a-again", msgs).cached
    assert "local/fake-a-again" not in engines or engines["local/fake-a-again"].passes == 0
    assert (tmp_path / "cache" / forward.SUBDIR).is_dir()
    # with the cache off nothing is read from disk: a new process computes again
    configure_cache(enabled=False)
    forward.clear_memory()
    assert forward.store() is None
    assert not forward.yes_no_pass("local/fake-a", msgs).cached and engines["local/fake-a"].passes == 2


def test_an_entry_of_the_wrong_length_is_a_miss_and_is_overwritten(engines):
    msgs = [{"role": "user", "content": "Short? Answer Yes or No."}]
    eng = engines.setdefault("local/fake-a", FakeEngine("a" * 64))
    tokens = eng._prompt_tokens(eng.render(msgs)[0])
    key = forward.pass_key(eng.sha256, tokens, len(tokens) - 1)
    forward.store().set(key, b"\x00" * 12)
    got = forward.yes_no_pass("local/fake-a", msgs)
    assert not got.cached and eng.passes == 1
    assert forward.decode(forward.store().get(key), N_EMBD) is not None


def test_a_served_model_is_refused():
    from personalign.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="embedded model"):
        forward.yes_no_pass("openai/gpt-4o-mini", [{"role": "user", "content": "hi"}])


def _writer(directory: str, worker: int, n: int) -> None:
    from diskcache import Cache

    from personalign.lm.forward import encode

    cache = Cache(directory)
    for i in range(n):  # every key written by both workers (two runs of the same prompts), and one of each own
        cache.set(f"shared-{i}", encode(float(i), np.full(N_EMBD, i, dtype=np.float32)))
        cache.set(f"own-{worker}-{i}", encode(-float(i), np.full(N_EMBD, -i, dtype=np.float32)))
    cache.close()


def test_two_writer_processes_leave_only_whole_entries(tmp_path):
    directory = str(tmp_path / "cache" / forward.SUBDIR)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(directory, w, 150)) for w in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    from diskcache import Cache

    cache = Cache(directory)
    for i in range(150):
        for key, sign in [(f"shared-{i}", 1)] + [(f"own-{w}-{i}", -1) for w in (0, 1)]:
            margin, hidden = forward.decode(cache.get(key), N_EMBD)
            assert margin == sign * i and np.array_equal(hidden, np.full(N_EMBD, sign * i, dtype=np.float32))
    cache.close()


@pytest.mark.slow
def test_the_shared_pass_equals_the_features_computed_apart_on_the_real_model(tmp_path, monkeypatch):
    """0.5B model, 4 relevance pairs: yes-prob then lm-probe in one run make one pass per pair
    (counted as ``Llama.eval`` calls); the shared margin and hidden state equal the ones a separate
    ``Llama(embedding=True)`` computes on the same tokens (same batch split), and the margin
    agrees with the plain scorer's (the whole tail in one batch) within its batch-rounding bound."""
    import llama_cpp

    from personalign.lm import configure_cache
    from personalign.lm._engine import get_engine
    from personalign.lm.scoring import relevance_messages, yes_no_margin
    from personalign.programs.relevance.probe import hidden_states
    from personalign.programs.relevance.yes_prob import YesProbability

    model = "local/qwen2.5-coder-0.5b-instruct"
    monkeypatch.setattr(dspy, "cache", dspy.cache)
    configure_cache(tmp_path / "cache")
    forward.clear_memory()
    exs = relevance_examples(0)
    prompt = "How do I plan a week of dinners on a budget?"
    for i, attr in enumerate(["The user is vegetarian.", "The user values concise answers.",
                              "The user plays chess.", "The user has two young children."]):
        exs.append(dspy.Example(attribute=attr, prompt=prompt, prompt_id="p", user_id="u",
                                relevant=i in (0, 3)).with_inputs("attribute", "prompt"))
    engine = get_engine(model)
    evals = []
    real_eval = engine.llm.eval
    monkeypatch.setattr(engine.llm, "eval", lambda tokens: evals.append(len(tokens)) or real_eval(tokens))

    margins = YesProbability(model=model).score_batch(exs)
    n_first = len(evals)
    assert n_first >= len(exs)  # the prompt (or its new tail) and the last token, per pair
    states = hidden_states(model, exs)
    assert len(evals) == n_first, "lm-probe made no forward pass"
    forward.clear_memory()  # a second run on the same cache dir
    again = YesProbability(model=model).score_batch(exs)
    assert len(evals) == n_first and again == margins
    assert states.shape == (len(exs), 896) and not np.allclose(states[0], states[2])

    # apart: a separate context with embeddings on (all outputs), the same tokens, the same split
    other = llama_cpp.Llama(model_path=str(engine.path), n_ctx=engine.settings.n_ctx, n_threads=engine.settings.n_threads,
                            n_threads_batch=engine.settings.n_threads, embedding=True,
                            pooling_type=llama_cpp.LLAMA_POOLING_TYPE_NONE, verbose=False)
    try:
        for ex, m, h in zip(exs, margins, states):
            msgs = relevance_messages(ex.attribute, ex.prompt)
            tokens = engine._prompt_tokens(engine.render(msgs)[0])
            other.reset()
            other.eval(tokens[:-1])
            other.eval(tokens[-1:])
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(other.ctx, -1), shape=(other.n_vocab(),))
            hidden = np.ctypeslib.as_array(llama_cpp.llama_get_embeddings_ith(other.ctx, -1), shape=(other.n_embd(),))
            logits = logits.astype(np.float64)
            logz = np.logaddexp.reduce(logits)
            lp = {c: (ids[0], float(logits[ids[0]] - logz))
                  for c in YES + NO for ids in [other.tokenize(c.encode(), add_bos=False, special=False)]}
            print(f"\n{ex.attribute}: shared {m:.5f}, apart {margin_of(lp):.5f}, "
                  f"hidden max rel diff {np.max(np.abs(h - hidden)) / np.max(np.abs(hidden)):.2e}")
            # measured bit-identical (the KV of the shared prefix, the last token alone in both)
            assert m == pytest.approx(margin_of(lp), abs=1e-5)
            np.testing.assert_allclose(h, hidden.astype(np.float64), rtol=1e-5, atol=1e-6)
            # the plain scorer (the whole tail in one batch, logits only): the bound of test_lm_probe
            assert m == pytest.approx(yes_no_margin(model, msgs), abs=0.05)
    finally:
        other.close()
