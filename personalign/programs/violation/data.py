"""Loader of the ``violation`` stage: labelled (preference, question, response) examples.

``load_violation(path)``:

* a PrefEval folder (root or ``mcq_options/``) or one ``mcq_options`` topic ``.json`` file: per
  question, the **following** option (the first of ``classification_task_options``, as PrefEval's
  authors wrote them) with ``violates=False`` and **one** violating option, drawn seeded from
  the other three (:func:`~personalign.programs.common.stage1.prefeval_option_pairs`), with
  ``violates=True`` -- so the classes are balanced and each question is one ``pair_id``. Split **by topic** like the Stage 1
  loaders (:func:`~personalign.programs.common.stage1.prefeval_topic_splits`: train 0.5 / val
  0.25 / test 0.25 of the topics, seed 0); the same val topics as
  :func:`personalign.judge_validation.labelled_pairs`.
* a ``.jsonl`` file: one object per line with ``preference``, ``question``, ``response`` (strings)
  and ``violates`` (bool); optional ``split`` and ``topic`` (strings; the topic groups the dev
  split, default ``"all"``).

Examples carry inputs ``preference, question, response``, the label ``violates`` and ``id``,
``pair_id``, ``topic``, ``split``.
"""

from __future__ import annotations

from pathlib import Path


def _example(**fields):
    import dspy

    return dspy.Example(**fields).with_inputs(*inputs())


def load_violation(path, *, seed: int = 0) -> list:
    """Examples of ``path`` (module doc).

    Raises:
        DataError: missing file; malformed PrefEval record or JSONL line (names file, line and
            field); an unknown format; fewer topics than splits.
    """
    from personalign.errors import DataError
    p = Path(path)
    if not p.exists():
        raise DataError(p, None, None, "file not found")
    if p.is_dir() or p.suffix == ".json":
        from personalign.programs.common.stage1 import prefeval_option_pairs

        out = []
        for pair in prefeval_option_pairs(p, seed=seed):
            r = pair["record"]
            for key, violates in (("follows", False), ("violates", True)):
                out.append(_example(id=f"{r.id}:{key}", pair_id=r.id, topic=r.topic, split=pair["split"],
                                    preference=r.preference, question=r.question, response=pair[key],
                                    violates=violates))
        return out
    if p.suffix == ".jsonl":
        from personalign.data.files import iter_jsonl, require

        out = []
        for line, rec in iter_jsonl(p):
            fields = {k: require(rec, k, str, p, line) for k in ("preference", "question", "response")}
            violates = require(rec, "violates", bool, p, line)
            extra = {k: require(rec, k, str, p, line) for k in ("split", "topic") if k in rec}
            out.append(_example(id=f"{p.stem}:{line}", pair_id=f"{p.stem}:{line}",
                                topic=extra.get("topic", "all"), split=extra.get("split"), violates=violates,
                                **fields))
        return out
    raise DataError(p, None, None, "expected a PrefEval folder or mcq_options topic .json file, or .jsonl")


def inputs() -> tuple[str, ...]:
    """The stage's input fields: those of its signature
    (:class:`personalign.signatures.respond.PreferenceViolationSignature`), in order."""
    from personalign.signatures.respond import PreferenceViolationSignature

    return tuple(PreferenceViolationSignature.input_fields)

__all__ = ["load_violation"]
