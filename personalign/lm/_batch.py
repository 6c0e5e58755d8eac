"""Batched decoding on the embedded engine: k sequences advance together in one ``llama_batch``.

llama-cpp-python's ``Llama`` decodes one sequence at a time, and on a CPU that is memory-bound:
each generated token reads every weight once, so one token per step wastes most of that read.
llama.cpp's batch API puts several sequences in one ``llama_batch`` (a ``seq_id`` per token), so
one pass over the weights advances k sequences. This module does that for greedy decoding
or sampled (a seeded RNG per sequence), optionally grammar-constrained like the engine's typed
outputs (:mod:`personalign.lm._constrained`'s sample-then-check, per sequence):

1. the **longest prefix all prompts share** is evaluated once, in sequence 0, and copied to the
   other sequences with ``llama_memory_seq_cp`` (a unified KV cache: the copy only tags cells);
2. each prompt's remaining tokens go into one batch, logits requested only at its last token;
3. then every step decodes one batch holding the next token of every unfinished sequence.

A :class:`BatchDecoder` owns its own llama.cpp context on the engine's already loaded weights
(``n_seq_max`` = k, ``kv_unified``), so the engine's single-sequence context and its KV prefix
cache are untouched. Not thread-safe: the caller holds the engine lock.

**Rows and their batch.** Flash attention is on in this context: llama.cpp's CPU
flash-attention kernel computes each query row on its own and skips the cells its mask hides
(without it, the KQ·V products run over every cell of the batch's KV window and their rounding
changes with the batch's shape). On SmolLM2 (F16 weights) that makes a row decoded among k equal
the same prompt decoded alone by this decoder, token for token, greedy or sampled with the same
seed (``tests/lm/test_batch_decode.py``). On the Qwen2.5-Coder Q4_K_M models it does not: greedy
rows part from the prompt decoded alone after some tokens, with or without llama.cpp's weight
repacking (``benchmarks/batched_decode.py``, ``benchmarks/results/batched-decode*.json``), so a
sampled answer is reproducible for the same k and seeds, not across k. The engine's own context
keeps flash attention off (every cached margin and figure was measured so; flash attention moves
the yes/no margins slightly), so a batched row is not the engine's sequential text either.
Batching is used where k answers are *sampled* (``n > 1``), not for greedy calls.

Source: llama.cpp ``examples/batched`` and ``examples/parallel`` (the same batch layout).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from personalign.lm._engine import Completion


@dataclass
class BatchResult:
    """Per sequence: generated token ids (without the end-of-generation token), finish reason."""

    tokens: list[list[int]]
    finish: list[str]
    prompt_tokens_evaluated: int  # prompt tokens actually evaluated (the shared prefix counted once)


def _common_prefix(prompts: list[list[int]]) -> int:
    n = min(len(p) for p in prompts)
    first = prompts[0]
    for i in range(n):
        t = first[i]
        if any(p[i] != t for p in prompts[1:]):
            return i
    return n


class BatchDecoder:
    """Greedy batched decoding of up to ``n_seq`` sequences on a loaded model.

    Args:
        llm: the engine's ``llama_cpp.Llama`` (its weights and vocabulary are reused).
        n_seq: most sequences per call (k).
        n_ctx: KV cells shared by all sequences (prompt tokens + generated tokens, over all).
        n_threads: CPU threads.
    """

    def __init__(self, llm, *, n_seq: int, n_ctx: int, n_threads: int, n_batch: int = 512):
        import llama_cpp

        self.llm = llm
        self.n_seq = int(n_seq)
        self.n_ctx = int(n_ctx)
        self.n_batch = int(n_batch)
        self.n_vocab = llm.n_vocab()
        self.vocab = llm._model.vocab
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = int(n_ctx)
        params.n_batch = self.n_batch
        params.n_ubatch = self.n_batch
        params.n_seq_max = self.n_seq
        params.kv_unified = True
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED  # rows and their batch: module docstring
        params.n_threads = int(n_threads)
        params.n_threads_batch = int(n_threads)
        self.ctx = llama_cpp.llama_init_from_model(llm._model.model, params)
        if not self.ctx:
            raise RuntimeError(f"llama.cpp could not create a {self.n_seq}-sequence context of {n_ctx} tokens")
        self.mem = llama_cpp.llama_get_memory(self.ctx)
        self.batch = llama_cpp.llama_batch_init(self.n_batch, 0, self.n_seq)

    def close(self) -> None:
        import llama_cpp

        if self.ctx:
            llama_cpp.llama_batch_free(self.batch)
            llama_cpp.llama_free(self.ctx)
            self.ctx = None

    def __del__(self):  # pragma: no cover -- best effort
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    # ------------------------------------------------------------------ batch
    def _decode(self, items: list[tuple[int, int, int, bool]]) -> dict[int, np.ndarray]:
        """Decode ``(token, pos, seq, want_logits)`` items, in chunks of ``n_batch``; return
        ``{item index: a copy of its logits}`` for the items that asked for them."""
        import llama_cpp

        out: dict[int, np.ndarray] = {}
        b = self.batch
        for start in range(0, len(items), self.n_batch):
            chunk = items[start:start + self.n_batch]
            rows = {}
            for j, (tok, pos, seq, want) in enumerate(chunk):
                b.token[j] = tok
                b.pos[j] = pos
                b.n_seq_id[j] = 1
                b.seq_id[j][0] = seq
                b.logits[j] = 1 if want else 0
                if want:
                    rows[start + j] = j
            b.n_tokens = len(chunk)
            rc = llama_cpp.llama_decode(self.ctx, b)
            if rc != 0:
                raise RuntimeError(f"llama_decode failed ({rc}): the sequences do not fit the batch context")
            for i, j in rows.items():  # read before the next chunk overwrites them
                ptr = llama_cpp.llama_get_logits_ith(self.ctx, j)
                out[i] = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()
        return out

    def generate(self, prompts: list[list[int]], *, max_tokens: int, grammars: list[str | None] | None = None,
                 temperature: float = 0.0, seeds: list[int] | None = None, top_k: int = 40, top_p: float = 0.95,
                 stops: list[str] | None = None) -> BatchResult:
        """Decode up to ``max_tokens`` tokens after each of ``prompts`` (token ids), at most ``n_seq``
        of them at once.

        Args:
            grammars: per prompt a GBNF grammar or None (free text).
            temperature: 0 = greedy; else top-k, temperature, nucleus top-p, one draw from
                ``numpy.random.default_rng(seeds[i])`` per token of sequence i (as the engine's
                typed outputs sample).
            seeds: per prompt (required when ``temperature`` > 0).
            stops: strings that end a free-text sequence (the text is cut before the first).

        Each sequence's output equals decoding it alone with this decoder (k = 1): see the module
        docstring. ``BatchResult.tokens`` holds every generated token; a stop string is cut from
        the text by the caller (:func:`complete_many`)."""
        import llama_cpp

        from personalign.lm._constrained import _Candidates, _choose, _sample_nucleus

        k = len(prompts)
        if not 1 <= k <= self.n_seq:
            raise ValueError(f"{k} prompts for a decoder of {self.n_seq} sequences")
        if temperature > 0 and (seeds is None or len(seeds) != k):
            raise ValueError(f"sampling at temperature {temperature} needs one seed per prompt ({k})")
        llama_cpp.llama_memory_clear(self.mem, True)
        shared = min(_common_prefix(prompts), min(len(p) for p in prompts) - 1)  # each keeps >= 1 own token
        items = [(t, i, 0, False) for i, t in enumerate(prompts[0][:shared])]
        if items:
            self._decode(items)
            for s in range(1, k):
                llama_cpp.llama_memory_seq_cp(self.mem, 0, s, -1, -1)
        items, last = [], {}
        for s, p in enumerate(prompts):
            for i in range(shared, len(p)):
                if i == len(p) - 1:
                    last[s] = len(items)
                items.append((p[i], i, s, i == len(p) - 1))
        got = self._decode(items)
        logits_of = {s: got[last[s]] for s in range(k)}
        evaluated = shared + len(items)

        samplers = [None] * k
        if grammars is not None:
            for s, g in enumerate(grammars):
                if g is not None:
                    samplers[s] = llama_cpp.llama_sampler_init_grammar(self.vocab, g.encode("utf-8"), b"root")
        rngs = [np.random.default_rng(int(x)) for x in seeds] if temperature > 0 else [None] * k
        one, full = _Candidates(top_k), _Candidates(self.n_vocab)
        all_ids = np.arange(self.n_vocab, dtype=np.int32)
        out: list[list[int]] = [[] for _ in range(k)]
        finish = ["length"] * k
        pos = [len(p) for p in prompts]
        active = list(range(k))
        try:
            for _ in range(max_tokens):
                step = []
                for s in active:
                    logits = logits_of[s]
                    if samplers[s] is not None:
                        tok = _choose(samplers[s], logits, one, full, all_ids, temperature, top_k, top_p, rngs[s])
                    elif temperature > 0:
                        tok = _sample_nucleus(logits, temperature, top_k, top_p, rngs[s])[1]
                    else:
                        tok = int(np.argmax(logits))
                    if tok < 0 or llama_cpp.llama_vocab_is_eog(self.vocab, tok):
                        finish[s] = "stop"
                        continue
                    if samplers[s] is not None:
                        llama_cpp.llama_sampler_accept(samplers[s], tok)
                    out[s].append(tok)
                    if stops and samplers[s] is None and _stopped(self.llm, out[s], stops):
                        finish[s] = "stop"
                        continue
                    step.append((s, tok))
                if not step:
                    break
                active = [s for s, _ in step]
                if all(len(out[s]) >= max_tokens for s in active):
                    break
                got = self._decode([(tok, pos[s], s, True) for s, tok in step])
                logits_of = {s: got[j] for j, (s, _) in enumerate(step)}
                for s, _ in step:
                    pos[s] += 1
        finally:
            for smp in samplers:
                if smp is not None:
                    llama_cpp.llama_sampler_free(smp)
        return BatchResult(tokens=out, finish=finish, prompt_tokens_evaluated=evaluated)


def _stopped(llm, tokens: list[int], stops: list[str]) -> bool:
    """True when the text of ``tokens`` contains a stop string (only its tail can be new)."""
    tail = llm.detokenize(tokens[-16:]).decode("utf-8", errors="ignore")
    return any(st and st in tail for st in stops)


def _cut(text: str, stops: list[str] | None) -> str:
    cuts = [text.find(st) for st in stops or () if st and st in text]
    return text[: min(cuts)] if cuts else text


def complete_many(engine, prompts: list[str], *, max_tokens: int | None = None, temperature: float | None = None,
                  seeds: list[int] | None = None, stop: list[str] | None = None,
                  schema: dict[str, Any] | None = None) -> list[Completion]:
    """k completions of k rendered prompts in one batched decode on ``engine``'s loaded weights
    (:class:`~personalign.lm._engine.LocalEngine`; its lock is held): the provider's ``n > 1``.

    Defaults and budgets are the engine's (:meth:`LocalEngine.complete`): ``max_tokens`` capped
    by the room the longest prompt leaves in ``n_ctx``, a ``schema`` bounded and turned into the
    same grammar. ``seeds`` default to the engine's (``seed`` at temperature 0, else
    ``seed + call index``, one call per prompt). Each output equals decoding its prompt alone
    with this decoder (same seed); at temperature 0 it equals :meth:`LocalEngine.complete`.

    Returns one :class:`~personalign.lm._engine.Completion` per prompt, in order (no logprobs).

    Raises:
        ContextWindowError: a prompt does not fit ``n_ctx``.
    """
    from personalign.lm._engine import _gbnf_for, fit_schema

    s = engine.settings
    temperature = s.temperature if temperature is None else float(temperature)
    max_tokens = s.max_tokens if max_tokens is None else int(max_tokens)
    tokens = [engine._prompt_tokens(p) for p in prompts]
    max_tokens = max(1, min(max_tokens, s.n_ctx - max(len(t) for t in tokens)))
    grammar = None
    if schema is not None:
        bounded = fit_schema(schema, s.max_string_chars, s.max_list_items, budget=max_tokens)
        grammar = _gbnf_for(json.dumps(bounded, sort_keys=True))
    shared = _common_prefix(tokens)
    cells = shared + sum(len(t) - shared + max_tokens for t in tokens)
    with engine.lock:
        if seeds is None:
            seeds = [s.seed if temperature == 0 else s.seed + engine.calls + 1 + i for i in range(len(tokens))]
        engine.calls += len(tokens)
        engine.prompt_tokens += sum(len(t) for t in tokens)
        dec = getattr(engine, "batch_decoder", None)
        if dec is None or dec.n_seq < len(tokens) or dec.n_ctx < cells:
            if dec is not None:
                dec.close()
            n_ctx = max(s.n_ctx, -(-cells // 256) * 256)
            dec = engine.batch_decoder = BatchDecoder(engine.llm, n_seq=max(len(tokens), 4), n_ctx=n_ctx,
                                                      n_threads=s.n_threads)
        res = dec.generate(tokens, max_tokens=max_tokens, grammars=[grammar] * len(tokens),
                           temperature=temperature, seeds=seeds, stops=stop)
        engine.evaluated_tokens += res.prompt_tokens_evaluated
        texts = [engine.llm.detokenize(t).decode("utf-8", errors="replace") for t in res.tokens]
    return [Completion(text=_cut(text, stop) if grammar is None else text, finish_reason=fin,
                       prompt_tokens=len(t), completion_tokens=len(ids))
            for text, fin, t, ids in zip(texts, res.finish, tokens, res.tokens)]


__all__ = ["BatchDecoder", "BatchResult", "complete_many"]
