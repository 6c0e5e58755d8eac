"""How fast an embedded model runs on this machine (``personalign doctor --bench``,
``benchmarks/local_models.py``)."""

from __future__ import annotations

import time

from personalign.lm._engine import get_engine


def bench_model(model: str, *, prompt_tokens: int = 256, gen_tokens: int = 64) -> dict:
    """Prompt-processing and generation speed of an embedded model, in tokens/s (one run each)."""
    eng = get_engine(model)
    text = " ".join(["The user enjoys hiking in the mountains and reading history books."] * 40)
    toks = eng.llm.tokenize(text.encode(), add_bos=False)[:prompt_tokens]
    with eng.lock:
        eng.llm.reset()
        t0 = time.perf_counter()
        eng.llm.eval(toks)
        t_prompt = time.perf_counter() - t0
        eng.llm.reset()
        t0 = time.perf_counter()
        story, _ = eng.render([{"role": "user", "content": "Write a long story about a dragon."}])
        out = eng.llm.create_completion(prompt=story, max_tokens=gen_tokens, temperature=0.0, stop=[],
                                        repeat_penalty=1.0, logit_bias={eng.llm.token_eos(): -1e9})
        t_gen = time.perf_counter() - t0
    n_gen = out["usage"]["completion_tokens"]
    return {"model": model, "prompt_tokens": len(toks), "prompt_tokens_per_s": round(len(toks) / t_prompt, 1),
            "gen_tokens": n_gen, "gen_tokens_per_s": round(n_gen / t_gen, 1)}


__all__ = ["bench_model"]
