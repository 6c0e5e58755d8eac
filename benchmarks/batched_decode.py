"""Batched generation on the embedded engine vs one sequence at a time, side by side in one run.

k prompts share a long prefix (one request, k perspectives: the aggregator's shape). Each round
decodes them (temperature 0, free text, ``--max-tokens``) two ways on the same loaded model:

* **sequential** -- the engine's normal path, one call per prompt (``LocalEngine.complete``; its
  KV prefix reuse keeps the shared prefix between calls);
* **batched** -- :class:`personalign.lm._batch.BatchDecoder`: the shared prefix evaluated once and
  copied to k sequences (``llama_memory_seq_cp``), then every step one ``llama_batch`` with the
  next token of each sequence.

Reports generated tokens/s of both, their ratio per round (rounds alternate which goes first)
and whether every batched output equals the sequential one token for token. The batch decoder runs
flash attention and the engine does not (docs/models.md), so equality is checked two ways: against
the same prompt decoded alone by the decoder (the guarantee: a row does not depend on its batch) and
against the engine's own text (reported, not promised). Writes
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
    ap.add_argument("--no-repack", action="store_true",
                    help="Load the model without llama.cpp's repacked weight buffers (use_extra_bufts off), to test "
                         "whether the repacked gemm/gemv kernels make a row depend on its batch.")
    ap.add_argument("--name", default="batched-decode", help="Results file stem (benchmarks/results/NAME.json).")
    ap.add_argument("--way", choices=("both", "sequential", "batched"), default="both",
                    help="Decode one way only and write no results (for timing each way as a whole process).")
    args = ap.parse_args()
    from personalign.lm import current_settings
    from personalign.lm._batch import BatchDecoder
    from personalign.lm._engine import get_engine

    if args.no_repack:  # every Llama() of this process starts from these model parameters
        import llama_cpp.llama_cpp as ll

        default_params = ll.llama_model_default_params

        def no_repack():
            params = default_params()
            params.use_extra_bufts = False
            return params

        ll.llama_model_default_params = no_repack
    eng = get_engine(args.lm)
    settings = current_settings()
    prompts = [eng.render([{"role": "system", "content": "You are a helpful travel assistant."},
                           {"role": "user", "content": f"{REQUEST}\n\nAnswer from the perspective of {p}."}])[0]
               for p in PERSPECTIVES[: args.k]]
    tokens = [eng.llm.tokenize(p.encode(), add_bos=False, special=True) for p in prompts]
    dec = BatchDecoder(eng.llm, n_seq=args.k, n_ctx=settings.n_ctx, n_threads=settings.n_threads)
    rounds, equal_all = [], True
    # each prompt decoded alone by the decoder (one sequence per call): what a batched row must equal
    alone = [eng.llm.detokenize(dec.generate([t], max_tokens=args.max_tokens).tokens[0]).decode("utf-8", errors="replace")
             for t in tokens] if args.way == "both" else []
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
        equal_alone = [a == b for a, b in zip(alone, bat_text)]
        equal_all &= all(equal_alone)
        ratio = timings["batched"]["tokens_per_s"] / timings["sequential"]["tokens_per_s"]
        rounds.append({**timings, "ratio": round(ratio, 3), "outputs_equal": equal_alone, "equal_to_engine": equal})
        log(f"round {r + 1}: {timings} ratio {ratio:.2f} equal to alone {equal_alone} to engine {equal}")
    dec.close()
    if args.way != "both":
        return
    prefix = args.name.replace("-", "_")  # figure keys are unique across the results page
    med = lambda key, way: round(statistics.median(x[way][key] for x in rounds), 3)  # noqa: E731
    ratio = round(statistics.median(x["ratio"] for x in rounds), 3)
    n_eq = sum(sum(x["outputs_equal"]) for x in rounds)
    n_out = sum(len(x["outputs_equal"]) for x in rounds)
    n_eng = sum(sum(x["equal_to_engine"]) for x in rounds)
    figures = [
        {"key": f"{prefix}.k{args.k}.sequential.tokens_per_s", "label": "one sequence at a time",
         "strategy": None, "metric": "tokens_per_s", "value": med("tokens_per_s", "sequential"), "ci": None,
         "n": args.rounds, "note": f"median of {args.rounds} rounds, {args.k} prompts, temperature 0"},
        {"key": f"{prefix}.k{args.k}.batched.tokens_per_s", "label": f"{args.k} sequences per llama_batch",
         "strategy": None, "metric": "tokens_per_s", "value": med("tokens_per_s", "batched"), "ci": None,
         "n": args.rounds, "note": f"median of {args.rounds} rounds; shared prefix evaluated once"},
        {"key": f"{prefix}.k{args.k}.ratio", "label": "batched / sequential tokens/s", "strategy": None,
         "metric": "ratio", "value": ratio, "ci": None, "n": args.rounds,
         "note": f"median over rounds; range {min(x['ratio'] for x in rounds):.2f}-{max(x['ratio'] for x in rounds):.2f}"},
        {"key": f"{prefix}.k{args.k}.outputs_equal", "label": "batched outputs equal to each prompt decoded alone",
         "strategy": None, "metric": "share", "value": round(n_eq / n_out, 4), "ci": None, "n": n_out,
         "note": "text identical, temperature 0; the decoder with one sequence per call"},
        {"key": f"{prefix}.k{args.k}.equal_to_engine", "label": "batched outputs equal to the engine's text",
         "strategy": None, "metric": "share", "value": round(n_eng / n_out, 4), "ci": None, "n": n_out,
         "note": "text identical, temperature 0; the engine runs without flash attention, so not promised"},
    ]
    record = write_results(args.name, figures, title=f"Batched generation on the embedded engine, k = {args.k}",
                          model=args.lm, adapter=None, data=None, stage=None, measures=["personalign/lm"],
                          extra={"rounds": rounds, "max_tokens": args.max_tokens, "threads": settings.n_threads,
                                 "all_equal": equal_all, "repacked_weights": not args.no_repack})
    emit(record)


if __name__ == "__main__":
    main()
