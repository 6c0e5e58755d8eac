"""Stage ``mcq``: choose the option that follows the user's preference (PrefEval classification
task, PersonaMem multiple choice).

Examples (:func:`personalign.programs.mcq.data.load_mcq`) have inputs ``context`` (the stated
preference / conversation), ``question``, ``options``, ``attributes`` (extracted attributes, may be
empty) and the gold ``gold_index``; strategies return ``answer_index`` (0-based). Scored stage:
per-example :func:`personalign.metrics.mcq_correct`, reported as accuracy with a 95% CI.

Light at import (no dspy): strategies are resolved by name.

The stage itself is declared in ``stage.toml`` beside this file, in the schema of a user's stage
file (:mod:`personalign.stages.spec`); ``personalign.resolve_stage("mcq")`` builds it.
"""
