"""A comparison's result as data, for scripts beside the verbs (the benchmarks): the same functions
:func:`personalign.compare` uses, so a script's figures are the command line's.

* :func:`result_record` -- the :mod:`personalign.record` run record of a compare result (its
  figures, the model, the data's sha256, what the intervals resample);
* :func:`result_figures` -- the run-record figures of a compare result alone (leave-one-group-out:
  the headline mean per group, pooled, worst group, each group; single split: the metric);
* :func:`summarize_strategy`, :func:`paired_groups`, :func:`add_holm` -- the leave-one-group-out row
  of a strategy from its per-group reports, its per-group difference to the first strategy
  (interval over resampled groups, exact sign-flip p, MDE) and the Holm adjustment over the rows.
"""

from personalign._verbs.groups import add_holm, paired_groups, summarize_strategy
from personalign._verbs.results import result_figures, result_record

__all__ = ["add_holm", "paired_groups", "result_figures", "result_record", "summarize_strategy"]
