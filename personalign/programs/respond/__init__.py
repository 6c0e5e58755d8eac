"""Stage ``respond``: write the response to a request for a user with known attributes, so that it
does not violate the user's preference (PrefEval generation task).

Examples (:func:`personalign.programs.respond.data.load_respond`) have inputs ``prompt,
attributes`` and the label ``preference``; strategies return ``response``. Scored stage:
:func:`personalign.programs.respond.violation.preference_followed` (1 when the typed violation
judge, run with the same LM, finds no violation) -- reported as the follow rate with a 95% CI;
its complement is PrefEval's violation rate.

Its text helpers are shared: :mod:`~personalign.programs.common.text`. Light at import (no dspy).

The stage itself is declared in ``stage.toml`` beside this file, in the schema of a user's stage
file (:mod:`personalign.stages.spec`); ``personalign.resolve_stage("respond")`` builds it.
"""
