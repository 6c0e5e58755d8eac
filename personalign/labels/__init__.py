"""Humans in the loop: annotations merged into labels, the human ceiling, and the next rows to label.

* :func:`merge_labels` / :func:`agreement` -- the majority label, ``n_annotators`` and yes-rate of
  annotated rows (:mod:`personalign.data.annotations`), and the annotators' agreement (pairwise
  Cohen's κ, Fleiss' κ, Krippendorff's α, each annotator against the rest).
* :func:`human_ceiling` / :func:`share_of_ceiling` -- each annotator scored with the stage's own
  objective against the majority of the others, with an interval over the stage's groups: the
  figure a strategy is put beside.
* :func:`next_rows` -- the next rows to label, sampled where the leading strategies' difference is
  most at stake (or near a compiled decision rule), each with its selection probability;
  :func:`fbeta_difference` -- the unbiased estimate of the paired difference from such rows.

Layer: above compile/evaluate (it fits strategies and runs programs), below the CLI.
"""

from personalign.labels.agreement import agreement
from personalign.labels.ceiling import human_ceiling, share_of_ceiling
from personalign.labels.estimate import Draw, fbeta_difference, lure_weights
from personalign.labels.merge import merge_labels, read_annotated, write_merged
from personalign.labels.next import cross_fitted, design_from_rows, next_rows

__all__ = ["agreement", "merge_labels", "read_annotated", "write_merged", "human_ceiling", "share_of_ceiling",
           "next_rows", "cross_fitted", "design_from_rows", "fbeta_difference", "lure_weights", "Draw"]
