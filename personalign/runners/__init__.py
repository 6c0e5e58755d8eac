"""Benchmark runners of Stage 3 and the SFT export. Each returns a JSON-ready dict.

* :mod:`~personalign.runners.prefeval` -- PrefEval MCQ accuracy with 95% CIs per strategy
  (:func:`~personalign.runners.prefeval.run_prefeval_mcq`), preference following in generation
  (:func:`~personalign.runners.prefeval.run_prefeval_generation`: a typed judge decides whether a
  response violates the stated preference), canonical MCQ JSONL with attributes
  (:func:`~personalign.runners.prefeval.write_mcq_jsonl`);
* :mod:`~personalign.runners.personamem` -- PersonaMem multiple choice (needs its shared-contexts
  file; a missing one is a DataError naming it);
* :mod:`~personalign.runners.judge` -- judge agreement with human 1-5 ratings (Spearman's rho,
  quadratic-weighted kappa, with CIs) per ``judge`` strategy;
* :mod:`~personalign.runners.cupid` -- CUPID: scoring inferred preferences against the gold
  contextual preference, and responses against the checklists;
* :mod:`~personalign.runners.sft` -- profile-conditioned teacher answers to chat-format JSONL.

``personalign run --help`` runs them from the command line (one JSON object on stdout; input errors
print one line and exit 2); :func:`run_tracked` runs one with a run's callbacks. Importing this
package is light (each runner's machinery loads when it runs).
"""

PIPELINE_STEPS = {"extractor": "first-person", "verifier": "minilm-logreg", "selector": "zero-shot"}
"""Default strategy of each step of ``run pipeline`` (:mod:`personalign.runners.pipeline`): one place for
the runner, the CLI and the benchmark."""

_LAZY = {"default_contexts_path": "personalign.data.personamem", "run_cupid": "personalign.runners.cupid",
         "run_judge_agreement": "personalign.runners.judge", "run_personamem": "personalign.runners.personamem",
         "check_plan": "personalign.runners.pipeline", "pipeline_examples": "personalign.runners.pipeline",
         "run_pipeline": "personalign.runners.pipeline", "run_prefeval_generation": "personalign.runners.prefeval",
         "run_prefeval_mcq": "personalign.runners.prefeval", "write_mcq_jsonl": "personalign.runners.prefeval",
         "bank_pairs": "personalign.runners.sft", "export_sft": "personalign.runners.sft",
         "prefeval_pairs": "personalign.runners.sft", "check_inputs": "personalign.runners.tracked",
         "run_tracked": "personalign.runners.tracked"}


def __getattr__(name: str):
    """The runners, imported when first named (their data layers load then)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'personalign.runners' has no attribute {name!r}")


__all__ = ["PIPELINE_STEPS", *_LAZY]
