"""KV prefix reuse on the embedded default: the same calls with the KV cache kept vs reset.

Workload: the relevance val split (real human-labelled pairs, ``../shared/data/recenter_relevance``)
through the real path -- the ``zero-shot`` judge (``dspy.Predict`` on ``RelevanceSignature``) ->
DSPy's adapter -> litellm -> the ``local`` provider -> the llama.cpp engine, DSPy cache off, in the
order :func:`personalign.lm.scoring.sharing_order` gives (grouped by request and user). The
pairs run in blocks of ``--block`` calls, alternating "reuse" (the engine keeps its KV cache and
evaluates only the tokens after the prefix shared with the previous call) and "reset" (the cache
is cleared before every call), so both modes see the same machine load (side by side, one run).
Second part: the yes/no margin (``yes-prob``'s score, one prompt evaluation, no generation) of
the same pairs both ways.

Reports per mode: seconds, calls, prompt tokens submitted and evaluated per call; the wall-time
ratio reset/reuse (target >= 4); how many typed outputs are identical (target: all); for margins,
how many decisions (margin >= 0) agree and the largest absolute difference (llama.cpp's
kernels batch a shorter suffix differently, so margins agree to a few hundredths, not bit for
bit).

Usage: python benchmarks/prefix_reuse.py [--model local/qwen2.5-coder-1.5b-instruct] [--n 0]
[--block 4] [--seed 0]   (--n 0 = the whole val split; otherwise a seeded sample of n pairs)
"""

from __future__ import annotations

import argparse
import random
import time

from _common import emit, quiet_logs, shared_data


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="embedded model (default: personalign.lm.DEFAULT_MODEL)")
    ap.add_argument("--n", type=int, default=0, help="val pairs (0 = all)")
    ap.add_argument("--block", type=int, default=4, help="calls per alternating block")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    data = shared_data() / "recenter_relevance" / "relevance_labels.jsonl"
    out = {"benchmark": "prefix_reuse", "data": str(data)}
    if not data.exists():
        emit({**out, "skipped": f"data not found at {data} (set PERSONALIGN_SHARED_DATA)"})
        return 0
    quiet_logs()
    import personalign.lm as plm
    from personalign.data import load_relevance
    from personalign.lm._engine import get_engine
    from personalign.lm.scoring import relevance_messages, sharing_order, yes_no_margin
    from personalign.stages import resolve_stage
    STRATEGIES = resolve_stage("relevance").registry

    model = args.model or plm.DEFAULT_MODEL
    val = [r.to_dspy() for r in load_relevance(data) if r.split == "val"]
    if 0 < args.n < len(val):
        val = [val[i] for i in sorted(random.Random(args.seed).sample(range(len(val)), args.n))]
    order = sharing_order([(e.prompt, str(e.user_id or ""), e.attribute) for e in val])
    val = [val[i] for i in order]
    plm.configure_cache(enabled=False)
    lm = plm.make_lm(model, cache=False)
    engine = get_engine(model)
    judge = STRATEGIES.create("zero-shot")

    def run(mode: str, fn, items):
        plm.configure_local(reuse_prefix=(mode == "reuse"))
        p0, e0, t0 = engine.prompt_tokens, engine.evaluated_tokens, time.perf_counter()
        outs = [fn(ex) for ex in items]
        return outs, time.perf_counter() - t0, engine.prompt_tokens - p0, engine.evaluated_tokens - e0

    def judge_one(ex):
        with plm.use(lm):
            return bool(judge(prompt=ex.prompt, attribute=ex.attribute).relevant)

    def margin_one(ex):
        return yes_no_margin(model, relevance_messages(ex.attribute, ex.prompt))

    for part, fn in (("judge", judge_one), ("margin", margin_one)):
        stats = {m: {"seconds": 0.0, "calls": 0, "prompt_tokens": 0, "evaluated_tokens": 0} for m in ("reuse", "reset")}
        results: dict[str, list] = {"reuse": [None] * len(val), "reset": [None] * len(val)}
        fn(val[0])  # warm-up (model load, first prompt), not counted
        for start in range(0, len(val), args.block):
            block = list(range(start, min(start + args.block, len(val))))
            modes = ("reuse", "reset") if (start // args.block) % 2 == 0 else ("reset", "reuse")
            for mode in modes:  # each block runs both ways, in alternating order
                outs, secs, ptoks, etoks = run(mode, fn, [val[i] for i in block])
                for i, o in zip(block, outs):
                    results[mode][i] = o
                s = stats[mode]
                s["seconds"] += secs
                s["calls"] += len(block)
                s["prompt_tokens"] += ptoks
                s["evaluated_tokens"] += etoks
        for s in stats.values():
            s["seconds"] = round(s["seconds"], 2)
            s["prompt_tokens_per_call"] = round(s["prompt_tokens"] / max(1, s["calls"]), 1)
            s["evaluated_tokens_per_call"] = round(s["evaluated_tokens"] / max(1, s["calls"]), 1)
        row = {**stats, "time_ratio_reset_over_reuse": round(stats["reset"]["seconds"] / stats["reuse"]["seconds"], 3)}
        a, b = results["reuse"], results["reset"]
        if part == "judge":
            row["identical_outputs"] = sum(x == y for x, y in zip(a, b))
        else:
            row["identical_decisions"] = sum((x >= 0) == (y >= 0) for x, y in zip(a, b))
            row["max_abs_margin_diff"] = round(max(abs(x - y) for x, y in zip(a, b)), 4)
        row["n"] = len(val)
        out[part] = row
    plm.configure_local(reuse_prefix=True)
    out.update(model=model, n=len(val), block=args.block, target_ratio_min=4.0,
               target_met=out["judge"]["time_ratio_reset_over_reuse"] >= 4.0
               and out["judge"]["identical_outputs"] == len(val))
    emit(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
