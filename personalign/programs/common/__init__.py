"""Blocks shared by the stage packages; a stage imports these, never another stage.

* :mod:`~personalign.programs.common.text` -- character truncation, sentences and list items,
  explicit mentions, requested item counts, meta and refusal phrases (pure Python);
* :mod:`~personalign.programs.common.budget` -- how much long input a prompt may carry on the
  active model (tokens via :func:`personalign.lm.count_tokens` on embedded models, characters
  otherwise) and cutting a text to it;
* :mod:`~personalign.programs.common.evidence` -- ``Role: content`` evidence texts: parsing,
  rendering, fitting to a budget (Stage 1: extraction and verification);
* :mod:`~personalign.programs.common.cv` -- grouped cross-validation (labels and groups passed in);
* :mod:`~personalign.programs.common.scorer` -- :class:`ThresholdedScorer`, a program that scores
  examples in bulk and decides by ``score >= threshold``;
* :mod:`~personalign.programs.common.embed` -- MiniLM embeddings with a process-wide cache;
* :mod:`~personalign.programs.common.cluster` -- clustering texts by cosine similarity;
* :mod:`~personalign.programs.common.logistic` -- :class:`LogisticHead` (standardize + logistic
  regression, saved as npz without pickle), :class:`HeadWeights` (its ``save_weights`` /
  ``load_weights``) and :class:`LogisticSelector` (fit, score and state of every learned selector).

Light at import: nothing here imports dspy, numpy or scikit-learn at module level except
``scorer`` (dspy).
"""
