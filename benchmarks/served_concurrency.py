"""Requests in flight against a served model: does throughput grow with them on this machine?

llama-cpp-python's own server (``python -m llama_cpp.server``, :func:`personalign.testing.server.llama_server`)
serves the embedded 0.5B GGUF on loopback; the same ``--requests`` chat completions (fixed prompts,
``--max-tokens`` each, temperature 0, through ``litellm.completion`` with no retries) are sent
with 1 and with 4 requests in flight (a thread pool of that size), after one warm-up request.
Reported per setting: requests/s and completion tokens/s over the wall time, and the mean and
largest per-request latency. For contrast, the same driver runs against
:mod:`personalign.testing.openai_server` (a fixed ``--mock-latency`` per answer, no compute), where
requests in flight overlap completely.

Writes ``benchmarks/results/served-concurrency.json`` (run-record format) and prints it.

Usage: ``flock /tmp/personalign-model.lock python benchmarks/served_concurrency.py [--requests 8]
[--in-flight 1,4] [--max-tokens 48] [--mock-latency 0.5]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from _common import emit, log, quiet_logs, usage_error, write_results

FAST = "local/qwen2.5-coder-0.5b-instruct"
TOPICS = ("the moon", "bread", "rivers", "chess", "bees", "glass", "trains", "volcanoes", "paper", "salt", "owls",
          "copper")
GPU_NOTE = ("llama-cpp-python's server decodes one request at a time (a lock around its one model), so on this "
            "machine more requests in flight only queue: throughput stays, each request's latency grows with the "
            "queue. A server that batches (llama.cpp's C++ server with --parallel N, vLLM) would gain on these 2 CPU "
            "cores only what batched decoding gains here (1.48x tokens/s at k = 4, batched-decode.json): the cores "
            "become the bound. On a GPU, continuous batching decodes the requests in flight together at almost the "
            "cost of one, so throughput grows nearly in proportion to them until the GPU saturates; the mock server "
            "(latency only, no compute) shows that ideal.")


def _drive(call, prompts: list[str], in_flight: int) -> dict:
    """Send ``call(prompt)`` for every prompt with ``in_flight`` at once; wall time, rates and latencies.
    ``call`` returns the completion tokens of its answer."""
    def one(prompt: str) -> tuple[float, int]:
        t0 = time.perf_counter()
        tokens = call(prompt)
        return time.perf_counter() - t0, tokens

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=in_flight) as pool:
        done = list(pool.map(one, prompts))
    wall = time.perf_counter() - t0
    latencies = [d for d, _ in done]
    tokens = sum(t for _, t in done)
    return {"in_flight": in_flight, "requests": len(prompts), "seconds": round(wall, 3),
            "requests_per_s": round(len(prompts) / wall, 4), "completion_tokens": tokens,
            "completion_tokens_per_s": round(tokens / wall, 3), "mean_latency_s": round(statistics.mean(latencies), 3),
            "max_latency_s": round(max(latencies), 3)}


def _figures(server: str, row: dict, note: str) -> list[dict]:
    k, n = row["in_flight"], row["requests"]
    base = f"served_concurrency.{server}.in_flight_{k}"
    out = [{"key": f"{base}.requests_per_s", "label": f"{server}, {k} in flight: requests/s", "strategy": None,
            "metric": "requests_per_s", "value": row["requests_per_s"], "ci": None, "n": n, "note": note},
           {"key": f"{base}.mean_latency_s", "label": f"{server}, {k} in flight: mean latency (s)", "strategy": None,
            "metric": "mean_latency_s", "value": row["mean_latency_s"], "ci": None, "n": n, "note": note}]
    if row["completion_tokens"]:
        out.append({"key": f"{base}.completion_tokens_per_s", "label": f"{server}, {k} in flight: completion tokens/s",
                    "strategy": None, "metric": "completion_tokens_per_s", "value": row["completion_tokens_per_s"],
                    "ci": None, "n": n, "note": note})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=8, help=f"Chat completions per setting (at most {len(TOPICS)}).")
    ap.add_argument("--in-flight", default="1,4", help="Comma-separated requests in flight.")
    ap.add_argument("--max-tokens", type=int, default=48, help="Completion tokens per request (its budget).")
    ap.add_argument("--mock-latency", type=float, default=0.5, help="Seconds per answer of the mock server (0: skip).")
    args = ap.parse_args()
    try:
        levels = [int(k) for k in args.in_flight.split(",")]
    except ValueError:
        usage_error(f"--in-flight: comma-separated integers, got {args.in_flight!r}")
    if not 1 <= args.requests <= len(TOPICS) or min(levels) < 1 or args.max_tokens < 1:
        usage_error(f"--requests in 1..{len(TOPICS)}, --in-flight >= 1 and --max-tokens >= 1")
    quiet_logs()
    import litellm

    from personalign.lm import current_settings
    from personalign.testing import openai_server
    from personalign.testing.server import LLAMA_CPP_SERVER_KWARGS, llama_server

    prompts = [f"List ten facts about {t}, one per line." for t in TOPICS[:args.requests]]
    figures, extra = [], {"requests": args.requests, "max_tokens": args.max_tokens, "in_flight": levels,
                          "settings": {}, "note": GPU_NOTE}

    def caller(model: str, api_base: str, **kwargs):
        def call(prompt: str) -> int:
            resp = litellm.completion(model=model, api_base=api_base, api_key="none", max_retries=0, timeout=900,
                                      messages=[{"role": "user", "content": prompt}], max_tokens=args.max_tokens,
                                      temperature=0.0, **kwargs)
            return int(resp.usage.completion_tokens)
        return call

    s = current_settings()
    with llama_server(FAST) as srv:
        call = caller(srv.model, srv.api_base, **LLAMA_CPP_SERVER_KWARGS)
        call("Say hello.")  # warm-up: the first prompt's evaluation is not measured
        for k in levels:
            log(f"llama_cpp.server: {args.requests} requests, {k} in flight")
            row = _drive(call, prompts, k)
            extra["settings"][f"llama_cpp_in_flight_{k}"] = row
            figures += _figures("llama_cpp", row, f"llama_cpp.server on loopback, n_threads {s.n_threads}, "
                                                  f"max_tokens {args.max_tokens}")
    extra["server"] = {"n_threads": s.n_threads, "n_ctx": s.n_ctx}
    for k in levels if args.mock_latency > 0 else ():
        with openai_server(latency=args.mock_latency, max_lifetime=600) as mock:  # a fresh server per setting
            row = _drive(caller("openai/mock", mock.api_base), prompts, k)
            extra["settings"][f"mock_in_flight_{k}"] = {**row, "max_in_flight_seen": mock.stats()["max_in_flight"]}
        figures += _figures("mock", {**row, "completion_tokens": 0},
                            f"personalign.testing.openai_server, {args.mock_latency} s per answer, no compute")
    record = write_results(
        "served-concurrency", figures, title="Requests in flight against llama-cpp-python's server on 2 CPU cores",
        command="python benchmarks/served_concurrency.py " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in {"requests": args.requests, "in_flight": args.in_flight,
                                                       "max_tokens": args.max_tokens,
                                                       "mock_latency": args.mock_latency}.items()),
        model=FAST, extra=extra)
    emit(record)
    log(" ".join(f"{f['key']}={f['value']}" for f in figures))


if __name__ == "__main__":
    main()
