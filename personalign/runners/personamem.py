"""PersonaMem multiple choice ("Know Me, Respond to Me", COLM 2025; bowen-upenn/PersonaMem).

Each question sees the conversation prefix of its shared context (often tens of thousands of
tokens). The embedded models' window is 4096 tokens, so the ``gold-preference`` (context)
strategy keeps the last ``max_context_chars`` characters of the conversation (default 6000,
~1500 tokens; :func:`personalign.programs.common.text.truncate_tail`); the question and the four
options are always kept whole (options cut at 300 characters). Chance is 25%.
"""

from __future__ import annotations

import os
from typing import Sequence


def personamem_examples(questions_csv: str | os.PathLike, contexts_jsonl: str | os.PathLike | None = None, *,
                        limit: int | None = None, seed: int = 0) -> list:
    """PersonaMem questions as ``mcq`` examples (``context`` = the conversation prefix),
    ``limit`` of them a seeded sample stratified by topic (:meth:`personalign.stages.Stage.limit`).

    Raises:
        DataError: the questions CSV or the shared-contexts JSONL is missing (the message names
            the missing file: ``shared_contexts_<suffix>.jsonl`` beside the CSV unless given) or
            malformed.
    """
    from personalign.data import load_personamem
    from personalign.stages import resolve_stage

    stage = resolve_stage("mcq")
    items = stage.limit(load_personamem(questions_csv, contexts_jsonl), limit, seed)
    return [stage.mark_inputs(ex.to_dspy().copy(attributes=[])) for ex in items]


def run_personamem(questions_csv: str | os.PathLike, contexts_jsonl: str | os.PathLike | None = None, *,
                   strategies: Sequence[str] = ("no-profile", "gold-preference"), limit: int | None = None,
                   lm=None, n_boot: int = 1000, seed: int = 0, progress: bool = False) -> dict:
    """Accuracy with 95% CIs of ``mcq`` strategies on PersonaMem (``gold-preference`` reads the
    conversation as context; ``no-profile`` the question only).

    Raises:
        DataError: see :func:`personamem_examples`.
    """
    from personalign.runners.prefeval import run_mcq

    examples = personamem_examples(questions_csv, contexts_jsonl, limit=limit, seed=seed)
    out = run_mcq(examples, strategies, lm=lm, n_boot=n_boot, seed=seed, progress=progress)
    out.update(data=str(questions_csv), contexts=str(contexts_jsonl) if contexts_jsonl else "beside the CSV",
               context_chars_max=max((len(e.context) for e in examples), default=0))
    return out


__all__ = ["personamem_examples", "run_personamem"]
