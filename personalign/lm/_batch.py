"""Batched decoding on the embedded engine: k sequences advance together in one ``llama_batch``.

llama-cpp-python's ``Llama`` decodes one sequence at a time, and on a CPU that is memory-bound:
each generated token reads every weight once, so one token per step wastes most of that read.
llama.cpp's batch API puts several sequences in one ``llama_batch`` (a ``seq_id`` per token), so
one pass over the weights advances k sequences. This module does that for greedy decoding
(temperature 0), optionally grammar-constrained like the engine's typed outputs
(:mod:`personalign.lm._constrained`'s sample-then-check, per sequence):

1. the **longest prefix all prompts share** is evaluated once, in sequence 0, and copied to the
   other sequences with ``llama_memory_seq_cp`` (a unified KV cache: the copy only tags cells);
2. each prompt's remaining tokens go into one batch, logits requested only at its last token;
3. then every step decodes one batch holding the next token of every unfinished sequence.

A :class:`BatchDecoder` owns its own llama.cpp context on the engine's already loaded weights
(``n_seq_max`` = k, ``kv_unified``), so the engine's single-sequence context and its KV prefix
cache are untouched. Not thread-safe: the caller holds the engine lock.

Source: llama.cpp ``examples/batched`` and ``examples/parallel`` (the same batch layout).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
        self.n_batch = int(n_batch)
        self.n_vocab = llm.n_vocab()
        self.vocab = llm._model.vocab
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = int(n_ctx)
        params.n_batch = self.n_batch
        params.n_ubatch = self.n_batch
        params.n_seq_max = self.n_seq
        params.kv_unified = True
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

    def generate(self, prompts: list[list[int]], *, max_tokens: int, grammars: list[str] | None = None,
                 top_k: int = 40) -> BatchResult:
        """Greedy-decode up to ``max_tokens`` tokens after each of ``prompts`` (token ids), at most
        ``n_seq`` of them at once; each may be constrained by a GBNF grammar (``grammars[i]``,
        None = free text). The result equals decoding each prompt alone greedily, up to
        floating-point differences between batch shapes (measured in ``benchmarks/batched_decode.py``)."""
        import llama_cpp

        from personalign.lm._constrained import _Candidates, _choose

        k = len(prompts)
        if not 1 <= k <= self.n_seq:
            raise ValueError(f"{k} prompts for a decoder of {self.n_seq} sequences")
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
                    if samplers[s] is None:
                        tok = int(np.argmax(logits))
                    else:
                        tok = _choose(samplers[s], logits, one, full, all_ids, 0.0, top_k, 1.0, None)
                    if tok < 0 or llama_cpp.llama_vocab_is_eog(self.vocab, tok):
                        finish[s] = "stop"
                        continue
                    if samplers[s] is not None:
                        llama_cpp.llama_sampler_accept(samplers[s], tok)
                    out[s].append(tok)
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


__all__ = ["BatchDecoder", "BatchResult"]
