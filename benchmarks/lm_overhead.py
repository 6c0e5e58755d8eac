"""Per-call overhead of dspy.Predict over llama.cpp on the embedded model (target ratio <= 1.10).

For each of N different prompts (~300 tokens in), the same rendered prompt and the same settings
(greedy, max_tokens 16, the same JSON-schema grammar) go through
(a) the llama.cpp engine directly (``LocalEngine.complete``: tokenize, llama_cpp decode with the
    grammar-constrained sampler; no DSPy, no litellm) and
(b) ``dspy.Predict`` -> JSONAdapter -> litellm -> the ``local`` provider -> the same engine,
interleaved a/b/a/b, the KV cache reset before each call. The DSPy cache is off. Reports ms per
call, b/a, and how many outputs were identical (they should all be).
Usage: python benchmarks/lm_overhead.py [--n 24] [--models local/qwen2.5-coder-1.5b-instruct,...]
"""

from __future__ import annotations

import argparse
import statistics
import time

from _common import emit, quiet_logs

TOPICS = ["camping in winter", "learning the violin", "a vegetarian meal plan", "saving for retirement",
          "training for a marathon", "writing a cover letter", "repairing a bicycle", "growing tomatoes",
          "planning a trip to Japan", "choosing a laptop", "caring for a puppy", "learning Python",
          "reducing stress at work", "baking sourdough", "buying a used car", "painting with watercolors",
          "studying for an exam", "decorating a small flat", "starting a podcast", "running a book club",
          "fixing a leaking tap", "teaching a child to swim", "organizing a wedding", "improving sleep"]


def make_prompt(i: int) -> dict:
    topic = TOPICS[i % len(TOPICS)]
    filler = (f"I have been thinking about {topic} for a while and I would like detailed, practical advice. "
              "I have a busy schedule, a modest budget, and I want to avoid common mistakes that beginners make. ") * 3
    return {"attribute": f"The user cares about {topic} and asked about it {i} times before.",
            "prompt": f"Question {i}: {filler} What should I do first about {topic}?"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=24)
    ap.add_argument("--models", default="local/qwen2.5-coder-1.5b-instruct,local/qwen2.5-coder-0.5b-instruct,"
                                        "local/smollm2-135m-instruct")
    args = ap.parse_args()
    quiet_logs()
    rows = {m: overhead(m, args.n) for m in args.models.split(",")}
    emit({"benchmark": "lm_overhead", "n_prompts": args.n, "target_ratio_max": 1.05, "models": rows,
          "target_met": all(r["ratio"] <= 1.05 for r in rows.values())})


def overhead(model: str, n: int) -> dict:
    import dspy

    import personalign.lm as plm
    from personalign.lm._engine import get_engine

    plm.configure_local(max_string_chars=32)
    lm = plm.make_lm(model, cache=False, max_tokens=16)
    engine = get_engine(model)

    class Answer(dspy.Signature):
        """Give the first step the user should take, in a few words."""

        attribute: str = dspy.InputField()
        prompt: str = dspy.InputField()
        answer: str = dspy.OutputField()

    predict = dspy.Predict(Answer)
    adapter = dspy.JSONAdapter()
    from dspy.adapters.json_adapter import _get_structured_outputs_response_format

    schema = _get_structured_outputs_response_format(Answer).model_json_schema()

    direct_ms, dspy_ms, prompt_tokens, out_tokens, same_text = [], [], [], [], 0
    for i in range(n + 2):  # 2 warm-up rounds, not counted
        inputs = make_prompt(i)
        messages = adapter.format(Answer, demos=[], inputs=inputs)
        prompt, stop = engine.render(messages)
        engine.llm.reset()  # no KV-prefix reuse between the two paths: each evaluates the full prompt
        t0 = time.perf_counter()
        a = engine.complete(prompt, max_tokens=16, temperature=0.0, stop=stop, schema=schema)
        ta = time.perf_counter() - t0
        n_hist = len(lm.history)
        engine.llm.reset()
        t0 = time.perf_counter()
        with plm.use(lm):
            predict(**inputs)
        tb = time.perf_counter() - t0
        if i < 2:
            continue
        direct_ms.append(ta * 1000)
        dspy_ms.append(tb * 1000)
        prompt_tokens.append(a.prompt_tokens)
        out_tokens.append(a.completion_tokens)
        hist = lm.history[n_hist:]
        if hist and hist[-1]["outputs"] and hist[-1]["outputs"][0] == a.text:
            same_text += 1
    ma, mb = statistics.mean(direct_ms), statistics.mean(dspy_ms)
    return {"mean_prompt_tokens": round(statistics.mean(prompt_tokens), 1),
          "mean_output_tokens": round(statistics.mean(out_tokens), 1),
          "direct_ms_per_call": round(ma, 2), "dspy_ms_per_call": round(mb, 2),
          "direct_ms_median": round(statistics.median(direct_ms), 2), "dspy_ms_median": round(statistics.median(dspy_ms), 2),
          "ratio": round(mb / ma, 4), "ratio_of_medians": round(statistics.median(dspy_ms) / statistics.median(direct_ms), 4),
          "identical_outputs": same_text}


if __name__ == "__main__":
    main()
