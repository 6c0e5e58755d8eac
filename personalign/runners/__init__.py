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

from personalign.data.personamem import default_contexts_path
from personalign.runners.cupid import run_cupid
from personalign.runners.judge import run_judge_agreement
from personalign.runners.personamem import run_personamem
from personalign.runners.pipeline import DEFAULT_STEPS as PIPELINE_STEPS
from personalign.runners.pipeline import check_plan, pipeline_examples, run_pipeline
from personalign.runners.prefeval import run_prefeval_generation, run_prefeval_mcq, write_mcq_jsonl
from personalign.runners.sft import bank_pairs, export_sft, prefeval_pairs
from personalign.runners.tracked import check_inputs, run_tracked

__all__ = ["PIPELINE_STEPS", "bank_pairs", "check_inputs", "check_plan", "default_contexts_path", "export_sft",
           "pipeline_examples", "prefeval_pairs", "run_cupid", "run_judge_agreement", "run_personamem",
           "run_pipeline", "run_prefeval_generation", "run_prefeval_mcq", "run_tracked", "write_mcq_jsonl"]
