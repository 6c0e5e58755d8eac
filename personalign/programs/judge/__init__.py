"""Stage ``judge``: rate, per attribute of a user, which of two responses serves the user better
(1 = A much better, 3 = equal, 5 = B much better), against human ratings.

Examples (:func:`personalign.programs.judge.data.load_ratings`, canonical
preference-rating JSONL) have inputs ``profile, prompt, response_a, response_b, attributes`` and
the gold ``ratings`` (attribute -> 1-5). Scored stage: per example
:func:`personalign.metrics.rating_agreement` (mean over attributes of ``1 - ((judge - human)/4)^2``,
the per-item analogue of the quadratic weights of kappa_w), so any teleprompter compiles a judge
toward human agreement; the set objective a compile maximizes is Cohen's kappa of the verdicts
(A better / tie / B better) of the unrounded debiased scores
(:func:`personalign.programs.judge.metrics.verdict_kappa`); corpus Spearman rho and weighted
kappa come from :func:`personalign.programs.judge.metrics.judge_agreement`.

Also here (not strategies of the stage): explicit-mention detectors and the rating gap
(:mod:`personalign.programs.judge.mentions`). The validation of the violation and pairwise judges
against PrefEval's option labels before they score anything runs programs, so it sits a layer up:
:func:`personalign.judge_validation.validate_judges` (``usable`` = the kappa CI above 0 and the
accuracy CI above 0.5).
Light at import (no dspy).

The stage itself is declared in ``stage.toml`` beside this file, in the schema of a user's stage
file (:mod:`personalign.stages.spec`); ``personalign.resolve_stage("judge")`` builds it.
"""
