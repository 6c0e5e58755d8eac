"""Humans in the loop: annotations merged into labels, the human ceiling, the next rows to label,
and the local page, store and exports that collect them.

* :func:`merge_labels` / :func:`agreement` -- the majority label, ``n_annotators`` and yes-rate of
  annotated rows (:mod:`personalign.data.annotations`), and the annotators' agreement (pairwise
  Cohen's κ, Fleiss' κ, Krippendorff's α, each annotator against the rest).
* :func:`human_ceiling` / :func:`share_of_ceiling` -- each annotator scored with the stage's own
  objective against the majority of the others, with an interval over the stage's groups: the
  figure a strategy is put beside.
* :func:`next_rows` -- the next rows to label, sampled where the leading strategies' difference is
  most at stake (or near a compiled decision rule), each with its selection probability;
  :func:`fbeta_difference` -- the unbiased estimate of the paired difference from such rows.

* :func:`serve_labels` / :func:`export_canonical` / :func:`export_label_studio` /
  :func:`import_label_studio` -- the annotation page on 127.0.0.1, its SQLAlchemy store (one
  transaction per label) and the files every verb reads (canonical JSONL with ``annotations``) or
  Label Studio reads.

Layer: above compile/evaluate (it fits strategies and runs programs), below the CLI.
"""

from personalign.labels.agreement import agreement
from personalign.labels.ceiling import human_ceiling, share_of_ceiling
from personalign.labels.estimate import Draw, fbeta_difference, lure_weights
from personalign.labels.merge import drop_annotators, merge_labels, read_annotated, refuse_identical, write_merged
from personalign.labels.next import cross_fitted, design_from_rows, next_rows

_LAZY = {"serve_labels": ("personalign.labels.serve", "serve"), "export_canonical": ("personalign.labels.export", "export_canonical"),
         "export_label_studio": ("personalign.labels.labelstudio", "export_label_studio"),
         "import_label_studio": ("personalign.labels.labelstudio", "import_label_studio"),
         "parse_annotator_map": ("personalign.labels.labelstudio", "parse_annotator_map"),
         "shown_url": ("personalign.labels.store", "shown_url")}


def __getattr__(name: str):
    """The page, store and exports, imported when first named (starlette, uvicorn, SQLAlchemy)."""
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'personalign.labels' has no attribute {name!r}")


__all__ = ["agreement", "merge_labels", "read_annotated", "write_merged", "drop_annotators", "refuse_identical", "human_ceiling", "share_of_ceiling",
           "next_rows", "cross_fitted", "design_from_rows", "fbeta_difference", "lure_weights", "Draw", *_LAZY]
