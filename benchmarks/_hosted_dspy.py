"""Plain DSPy on the same rows and loopback server as ``hosted_throughput.py`` (no personalign
import: this is what a DSPy user writes). Prints one JSON object: the evaluation's wall seconds,
its score and the predictions.

    python benchmarks/_hosted_dspy.py --api-base URL --data FILE --split val --limit 192 [--threads 8]
    python benchmarks/_hosted_dspy.py ... --bootstrap   # BootstrapFewShot with its defaults, then Evaluate
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--api-base", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--split", default="val")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None, help="Evaluate's num_threads (default: DSPy's own)")
    ap.add_argument("--bootstrap", action="store_true")
    ap.add_argument("--train-limit", type=int, default=None)
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    import dspy

    class RelevanceSignature(dspy.Signature):
        """Decide whether one known attribute of a user should change how a thoughtful assistant answers the user's new prompt."""

        prompt: str = dspy.InputField(desc="the user's new request")
        attribute: str = dspy.InputField(desc="one attribute of the user, e.g. 'The user prefers concise answers.'")
        relevant: bool = dspy.OutputField(desc="true only if the answer should differ because of this attribute")

    rows = [json.loads(line) for line in open(args.data, encoding="utf-8") if line.strip()]

    def examples(split):
        out = [dspy.Example(prompt=r["prompt_text"], attribute=r["attribute"], relevant=bool(r["label"]))
               .with_inputs("prompt", "attribute") for r in rows if r["split"] == split]
        return out

    devset = examples(args.split)
    if args.limit:
        devset = random.Random(0).sample(devset, min(args.limit, len(devset)))
    lm = dspy.LM("openai/mock", api_base=args.api_base, api_key="none", cache=False, temperature=0.0, max_tokens=512)
    dspy.configure(lm=lm)

    def metric(ex, pred, trace=None):
        return bool(getattr(pred, "relevant", None)) == ex.relevant

    program = dspy.Predict(RelevanceSignature)
    out = {"dspy": dspy.__version__, "n": len(devset)}
    if args.bootstrap:
        trainset = examples("train")
        if args.train_limit:
            trainset = random.Random(0).sample(trainset, min(args.train_limit, len(trainset)))
        t0 = time.perf_counter()
        program = dspy.BootstrapFewShot(metric=metric).compile(program, trainset=trainset)
        out["compile_seconds"] = time.perf_counter() - t0
        out["n_train"] = len(trainset)
    kwargs = {"num_threads": args.threads} if args.threads else {}
    evaluate = dspy.Evaluate(devset=devset, metric=metric, display_progress=False, **kwargs)
    t0 = time.perf_counter()
    result = evaluate(program)
    out["evaluation_seconds"] = time.perf_counter() - t0
    out["num_threads"] = evaluate.num_threads or dspy.settings.num_threads
    out["score"] = float(getattr(result, "score", result))
    out["predictions"] = [bool(getattr(p, "relevant", None)) for _, p, _ in getattr(result, "results", [])]
    out["process_seconds_in_python"] = time.perf_counter() - t_start
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
