"""Stage ``violation``: does a response go against the user's stated preference (follows / violates)?

The judge of PrefEval's generation task, as a stage of its own so that it is validated against
labels and compiled like any other program before it scores anything. Labels: PrefEval's MCQ
options, written by its authors -- the first option follows the stated preference, the other
three violate it (:func:`personalign.programs.violation.data.load_violation`: per question the
following option and one seeded violating option, two examples). Binary stage; the positive
class is "violates"; the **set objective is Cohen's kappa**
(the generic ``kappa`` objective, :mod:`personalign.stages.objective`), so ``personalign compile violation
--optimizer labeled`` compiles the judge toward kappa on a dev split of held-out train topics and
keeps the uncompiled judge unless the compiled one is higher there.

Light at import (no dspy).

The stage itself is declared in ``stage.toml`` beside this file, in the schema of a user's stage
file (:mod:`personalign.stages.spec`); ``personalign.resolve_stage("violation")`` builds it.
"""
