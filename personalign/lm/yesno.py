"""The answer tokens of a yes/no question and their margin: what :mod:`personalign.lm.scoring`
(embedded models) and :mod:`personalign.lm.serving` (endpoints' ``top_logprobs``) both read."""

from __future__ import annotations

YES = ("Yes", " Yes", "yes")
NO = ("No", " No", "no")


def margin_of(lp: dict) -> float:
    """The yes/no margin from ``{candidate: (token id, logprob)}`` of :data:`YES` and :data:`NO`
    (each side's distinct first tokens summed in probability)."""
    import numpy as np

    yes = np.logaddexp.reduce(list({lp[c][0]: lp[c][1] for c in YES}.values()))
    no = np.logaddexp.reduce(list({lp[c][0]: lp[c][1] for c in NO}.values()))
    return float(yes - no)


__all__ = ["NO", "YES", "margin_of"]
