"""The same program embedded and behind an OpenAI-compatible server: calls/s and agreement.

llama-cpp-python's own server (``python -m llama_cpp.server``) serves the 0.5B GGUF from the model
cache on loopback; the relevance ``zero-shot`` program (one typed LM call per pair) runs on the
demo pairs (cache off):

1. embedded (``local/qwen2.5-coder-0.5b-instruct``), one thread;
2. through the server with ``--n-jobs`` 1 and 4 (threads issuing calls at once, as ``sweep --n-jobs``
   does), each through the schema adapter the capability check chose;

and reports calls/s per setting (wall time of all calls), the decisions' agreement between the
embedded engine and the server (share of pairs, Wilson 95% CI) and the endpoint's capability line.
Writes ``benchmarks/results/serving.json`` (run-record format) and prints it.

Usage: ``flock /tmp/personalign-model.lock python benchmarks/serving.py [--limit N] [--n-jobs 1,4]``.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor

from _common import ROOT, emit, log, quiet_logs, write_results

FAST = "local/qwen2.5-coder-0.5b-instruct"
DEMO = ROOT / "examples" / "relevance_demo.jsonl"


def _run(lm, examples, n_jobs: int) -> tuple[list, float]:
    """Decisions of the zero-shot relevance program on ``examples``, with ``n_jobs`` threads; (decisions, seconds)."""
    from personalign.lm import use
    from personalign.metrics.dspy_metrics import to_bool
    from personalign.stages import resolve_stage as get_stage

    st = get_stage("relevance")
    program = st.registry.create("zero-shot")

    def one(ex):
        with use(lm):
            return to_bool(getattr(program(**{k: getattr(ex, k) for k in st.inputs}), st.output))

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=n_jobs) as pool:
        out = list(pool.map(one, examples))
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=16, help="Demo pairs (val first, then train).")
    ap.add_argument("--n-jobs", default="1,4", help="Comma-separated thread counts against the server.")
    args = ap.parse_args()
    quiet_logs()
    from scipy.stats import binomtest

    from personalign.data.digest import file_sha256
    from personalign.lm import adapter_name, configure_cache, make_lm
    from personalign.lm.serving import known
    from personalign.stages import resolve_stage as get_stage
    from personalign.testing.server import LLAMA_CPP_SERVER_KWARGS, llama_server

    configure_cache(enabled=False)
    st = get_stage("relevance")
    rows = st.load(DEMO)
    examples = ([ex for ex in rows if ex.split == "val"] + [ex for ex in rows if ex.split != "val"])[: args.limit]
    jobs = [int(j) for j in args.n_jobs.split(",")]
    figures, extra = [], {"n_pairs": len(examples), "n_jobs": jobs, "settings": {}}
    local = make_lm(FAST, cache=False)
    log(f"embedded: {len(examples)} calls")
    embedded, secs = _run(local, examples, 1)
    extra["settings"]["embedded"] = {"seconds": round(secs, 2), "calls_per_s": round(len(examples) / secs, 3)}
    figures.append({"key": "serving.embedded.n_jobs_1.calls_per_s", "label": "embedded, 1 thread", "strategy": "zero-shot",
                    "metric": "calls_per_s", "value": round(len(examples) / secs, 3), "ci": None, "n": len(examples),
                    "note": "llama.cpp in-process, JSON grammar"})
    with llama_server(FAST) as srv:
        lm = make_lm(srv.model, api_base=srv.api_base, cache=False, **LLAMA_CPP_SERVER_KWARGS)
        endpoint = known(srv.model)
        extra["endpoint"] = endpoint.summary()
        adapter = adapter_name(srv.model)
        for n in jobs:
            log(f"server, n_jobs {n}: {len(examples)} calls")
            served, secs = _run(lm, examples, n)
            rate = len(examples) / secs
            extra["settings"][f"server_n_jobs_{n}"] = {"seconds": round(secs, 2), "calls_per_s": round(rate, 3)}
            figures.append({"key": f"serving.server.n_jobs_{n}.calls_per_s", "label": f"server, {n} threads",
                            "strategy": "zero-shot", "metric": "calls_per_s", "value": round(rate, 3), "ci": None,
                            "n": len(examples), "note": f"llama_cpp.server on loopback, adapter {adapter}"})
            same = sum(a == b for a, b in zip(embedded, served))
            ci = binomtest(same, len(examples)).proportion_ci(method="wilson")
            figures.append({"key": f"serving.server.n_jobs_{n}.agreement", "label": f"decisions equal to embedded ({n} threads)",
                            "strategy": "zero-shot", "metric": "agreement", "value": round(same / len(examples), 4),
                            "ci": [round(ci.low, 4), round(ci.high, 4)], "n": len(examples),
                            "note": "share of pairs with the same yes/no decision, Wilson 95% CI"})
    record = write_results(
        "serving", figures, title="The same program embedded and behind llama-cpp-python's OpenAI-compatible server",
        command="python benchmarks/serving.py " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in
                                                         {"limit": args.limit, "n_jobs": args.n_jobs}.items()),
        model=FAST, adapter=adapter, data=DEMO.relative_to(ROOT), data_sha256=file_sha256(DEMO),
        stage="relevance", extra=extra)
    emit(record)
    log(json.dumps({f["key"]: f["value"] for f in figures}))


if __name__ == "__main__":
    main()
