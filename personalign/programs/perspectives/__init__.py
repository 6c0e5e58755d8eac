"""Stage ``perspectives``: answer an open question from k sampled user profiles and merge the
answers under explicit rules (:mod:`personalign.programs.perspectives.aggregator`), against a
single answer and its baselines.

Examples (:func:`personalign.programs.perspectives.data.load_questions`) have inputs
``question, profile_bank`` (a bank path; see :mod:`~personalign.programs.perspectives.bank`).
Scored stage: :func:`~personalign.programs.perspectives.metrics.answer_win_rate` (LLM-judged win
rate against the reference / single answer, both orders). Light at import (no dspy).

The stage itself is declared in ``stage.toml`` beside this file, in the schema of a user's stage
file (:mod:`personalign.stages.spec`); ``personalign.resolve_stage("perspectives")`` builds it.
"""
