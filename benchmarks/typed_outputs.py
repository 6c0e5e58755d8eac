"""Parse failures of typed outputs on the embedded models: grammar-constrained vs unconstrained.

For each local model, N calls (default 200, spread evenly over five signatures whose outputs are
bool, Literal, int, list[str] and list[pydantic model]) go through
(a) personalign's path -- JSONAdapter, the signature's JSON schema sent as response_format and
    turned into a llama.cpp grammar (target: 0 failures), and
(b) DSPy's default ChatAdapter with no constraint and no JSON fallback (for comparison).
Inputs differ per call; the cache is off. A failure is any exception from the predictor or an
output that does not validate against its annotated type.
Usage: python benchmarks/typed_outputs.py [--n 200] [--n-unconstrained 50] [--models local/qwen2.5-coder-1.5b-instruct,local/qwen2.5-coder-0.5b-instruct]
"""


import argparse
import time
from typing import Literal

from _common import emit, quiet_logs

SUBJECTS = ["hiking", "jazz", "vegan cooking", "chess", "gardening", "marathons", "photography", "knitting",
            "astronomy", "sailing", "poetry", "woodworking", "baking", "cycling", "birdwatching", "pottery",
            "skiing", "board games", "climbing", "calligraphy"]


def build_signatures():
    import dspy
    import pydantic

    class Preference(pydantic.BaseModel):
        topic: str
        strength: int

    class IsRelevant(dspy.Signature):
        """Decide whether the attribute matters for the request."""

        attribute: str = dspy.InputField()
        request: str = dspy.InputField()
        relevant: bool = dspy.OutputField()

    class Category(dspy.Signature):
        """Classify the user's message."""

        message: str = dspy.InputField()
        category: Literal["hobby", "work", "health", "other"] = dspy.OutputField()

    class Rating(dspy.Signature):
        """Rate from 1 to 5 how much the user likes the subject."""

        message: str = dspy.InputField()
        rating: int = dspy.OutputField()

    class Keywords(dspy.Signature):
        """List keywords of the message."""

        message: str = dspy.InputField()
        keywords: list[str] = dspy.OutputField()

    class Preferences(dspy.Signature):
        """Extract the user's preferences with a strength from 1 to 5."""

        message: str = dspy.InputField()
        preferences: list[Preference] = dspy.OutputField()

    def inputs(kind: str, i: int) -> dict:
        s = SUBJECTS[i % len(SUBJECTS)]
        t = SUBJECTS[(i * 7 + 3) % len(SUBJECTS)]
        msg = f"Message {i}: I really enjoy {s} on weekends, and I am curious about {t} too."
        if kind == "bool":
            return {"attribute": f"The user likes {s}.", "request": f"Plan my weekend number {i} around {t}."}
        return {"message": msg}

    return [("bool", IsRelevant, "relevant"), ("literal", Category, "category"), ("int", Rating, "rating"),
            ("list[str]", Keywords, "keywords"), ("list[pydantic]", Preferences, "preferences")], inputs


def valid(sig, field: str, value) -> bool:
    import pydantic

    ann = sig.output_fields[field].annotation
    try:
        pydantic.TypeAdapter(ann).validate_python(value, strict=False)
        return value is not None
    except pydantic.ValidationError:
        return False


def run(model: str, n: int, constrained: bool) -> dict:
    import dspy

    import personalign.lm as plm

    sigs, inputs = build_signatures()
    lm = plm.make_lm(model, cache=False, max_tokens=256)
    adapter = dspy.JSONAdapter() if constrained else dspy.ChatAdapter(use_json_adapter_fallback=False)
    failures = {kind: 0 for kind, _, _ in sigs}
    calls = {kind: 0 for kind, _, _ in sigs}
    examples = []
    t0 = time.perf_counter()
    for i in range(n):
        kind, sig, field = sigs[i % len(sigs)]
        calls[kind] += 1
        try:
            with dspy.context(lm=lm, adapter=adapter):
                out = dspy.Predict(sig)(**inputs(kind, i))
            ok = valid(sig, field, getattr(out, field))
        except Exception as exc:  # noqa: BLE001 -- counting failures is the point
            ok = False
            if len(examples) < 3:
                examples.append(f"{kind}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
        failures[kind] += 0 if ok else 1
    return {"calls": n, "failures": sum(failures.values()), "failures_by_type": failures,
            "calls_by_type": calls, "seconds": round(time.perf_counter() - t0, 1), "example_errors": examples}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--models", default="local/qwen2.5-coder-1.5b-instruct,local/qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--n-unconstrained", type=int, default=50,
                    help="calls per model for the unconstrained comparison (0 to skip); it generates up to 256 tokens of free text per call")
    args = ap.parse_args()
    quiet_logs()
    out = {"benchmark": "typed_outputs", "n_per_model": args.n, "models": {}}
    for model in args.models.split(","):
        row = {"constrained_json_adapter": run(model, args.n, True)}
        if args.n_unconstrained:
            row["unconstrained_chat_adapter"] = run(model, args.n_unconstrained, False)
        out["models"][model] = row
    out["total_constrained_failures"] = sum(r["constrained_json_adapter"]["failures"] for r in out["models"].values())
    out["target_constrained_failures"] = 0
    emit(out)


if __name__ == "__main__":
    main()
