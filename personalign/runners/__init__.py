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

``python -m personalign.runners --help`` runs them from the command line (one JSON object on
stdout; input errors print one line and exit 2). Importing this package is light.
"""

__all__ = ["prefeval", "personamem", "judge", "cupid", "sft"]
