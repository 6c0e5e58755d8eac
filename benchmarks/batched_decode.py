"""Batched generation on the embedded engine vs one sequence at a time, side by side in one run.

k prompts share a long prefix (one request, k perspectives: the aggregator's shape). Each round
decodes them (temperature 0, free text, ``--max-tokens``) two ways on the same loaded model:

* **sequential** -- the engine's normal path, one call per prompt (``LocalEngine.complete``; its
  KV prefix reuse keeps the shared prefix between calls);
* **batched** -- :class:`personalign.lm._batch.BatchDecoder`: the shared prefix evaluated once and
  copied to k sequences (``llama_memory_seq_cp``), then every step one ``llama_batch`` with the
  next token of each sequence.

Reports generated tokens/s of both, their ratio per round (rounds alternate which goes first)
and whether every batched output equals the sequential one token for token. Writes
``benchmarks/results/batched-decode.json`` (run-record format) and prints it.

Usage: ``flock /tmp/personalign-model.lock python benchmarks/batched_decode.py [--k 4] [--rounds 3]``;
``--way sequential`` or ``--way batched`` decodes one way only and writes nothing (to time the two
as whole processes, one against the other).
"""

from __future__ import annotations

import argparse
import statistics
import time

from _common import emit, log, write_results

REQUEST = ("I am planning a two-week trip to Japan in April with my partner. We like food, gardens and "
           "quiet places, we do not drive, and our budget is moderate. Please suggest how to split the "
           "time between cities and what to book in advance.")
PERSPECTIVES = ["a budget-conscious traveller", "a food lover", "someone who dislikes crowds",
                "a first-time visitor to Asia", "a rail-pass expert", "a garden enthusiast",
                "a slow traveller", "an early-spring weather expert"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lm", default="local/qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--way", choices=("both", "sequential", "batched"), default="both",
                    help="Decode one way only and write no results (for timing each way as a whole process).")
    args = ap.parse_args()
    from personalign.lm import current_settings
    from personalign.lm._batch import BatchDecoder
    from personalign.lm._engine import get_engine

    eng = get_engine(args.lm)
    settings = current_settings()
    prompts = [eng.render([{"role": "system", "content": "You are a helpful travel assistant."},
                           {"role": "user", "content": f"{REQUEST}\n\nAnswer from the perspective of {p}."}])[0]
               for p in PERSPECTIVES[: args.k]]
    tokens = [eng.llm.tokenize(p.encode(), add_bos=False, special=True) for p in prompts]
    dec = BatchDecoder(eng.llm, n_seq=args.k, n_ctx=settings.n_ctx, n_threads=settings.n_threads)
    rounds, equal_all = [], True
    for r in range(args.rounds):
        timings = {}
        order = ("sequential", "batched") if r % 2 == 0 else ("batched", "sequential")
        if args.way != "both":
            order = (args.way,)
        for way in order:
            t0 = time.perf_counter()
            if way == "sequential":
                outs = [eng.complete(p, temperature=0.0, max_tokens=args.max_tokens) for p in prompts]
                seq_text = [o.text for o in outs]
                n_gen = sum(o.completion_tokens for o in outs)
            else:
                res = dec.generate(tokens, max_tokens=args.max_tokens)
                bat_text = [eng.llm.detokenize(t).decode("utf-8", errors="replace") for t in res.tokens]
                n_gen = sum(len(t) for t in res.tokens)
            secs = time.perf_counter() - t0
            timings[way] = {"seconds": round(secs, 3), "tokens": n_gen, "tokens_per_s": round(n_gen / secs, 3)}
        if args.way != "both":
            log(f"round {r + 1}: {timings}")
            continue
        equal = [a == b for a, b in zip(seq_text, bat_text)]
        equal_all &= all(equal)
        ratio = timings["batched"]["tokens_per_s"] / timings["sequential"]["tokens_per_s"]
        rounds.append({**timings, "ratio": round(ratio, 3), "outputs_equal": equal})
        log(f"round {r + 1}: {timings} ratio {ratio:.2f} equal {equal}")
    dec.close()
    if args.way != "both":
        return
    med = lambda key, way: round(statistics.median(x[way][key] for x in rounds), 3)  # noqa: E731
    ratio = round(statistics.median(x["ratio"] for x in rounds), 3)
    n_eq = sum(sum(x["outputs_equal"]) for x in rounds)
    n_out = sum(len(x["outputs_equal"]) for x in rounds)
    figures = [
        {"key": f"batched_decode.k{args.k}.sequential.tokens_per_s", "label": "one sequence at a time",
         "strategy": None, "metric": "tokens_per_s", "value": med("tokens_per_s", "sequential"), "ci": None,
         "n": args.rounds, "note": f"median of {args.rounds} rounds, {args.k} prompts, temperature 0"},
        {"key": f"batched_decode.k{args.k}.batched.tokens_per_s", "label": f"{args.k} sequences per llama_batch",
         "strategy": None, "metric": "tokens_per_s", "value": med("tokens_per_s", "batched"), "ci": None,
         "n": args.rounds, "note": f"median of {args.rounds} rounds; shared prefix evaluated once"},
        {"key": f"batched_decode.k{args.k}.ratio", "label": "batched / sequential tokens/s", "strategy": None,
         "metric": "ratio", "value": ratio, "ci": None, "n": args.rounds,
         "note": f"median over rounds; range {min(x['ratio'] for x in rounds):.2f}-{max(x['ratio'] for x in rounds):.2f}"},
        {"key": f"batched_decode.k{args.k}.outputs_equal", "label": "batched outputs equal to sequential",
         "strategy": None, "metric": "share", "value": round(n_eq / n_out, 4), "ci": None, "n": n_out,
         "note": "text identical, temperature 0"},
    ]
    record = write_results("batched-decode", figures, title=f"Batched generation on the embedded engine, k = {args.k}",
                          model=args.lm, adapter=None, data=None, stage=None,
                          extra={"rounds": rounds, "max_tokens": args.max_tokens, "threads": settings.n_threads,
                                 "all_equal": equal_all})
    emit(record)


if __name__ == "__main__":
    main()
