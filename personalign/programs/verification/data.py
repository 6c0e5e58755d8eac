"""Loaders of the verification stage: PrefEval-derived pairs or human-labelled canonical JSONL.

``load_verification(path)`` dispatches on ``path``:

* a directory (the PrefEval root, or its ``implicit_preference/persona-driven`` folder) or a
  PrefEval topic ``.json`` file: the persona-driven records are split **by topic**
  (:func:`~personalign.programs.common.stage1.prefeval_topic_splits`: seeded
  :func:`~personalign.data.splits.group_split`, shares train 0.5 / val 0.25 / test 0.25 -- with
  the 16 public topics 8 / 4 / 4) and verification pairs
  are derived *within* each split (:func:`~personalign.data.derive.verification_pairs`, one
  other-topic negative per conversation), so no conversation, preference or topic crosses splits.
  No human accept/reject labels exist for PrefEval: "accepted" means "this is the preference the
  conversation was written to imply"; rejected pairs are another topic's preference.
* a ``.jsonl`` file: canonical :class:`~personalign.data.schemas.VerificationExample` lines
  (human labels), their ``split`` as written.

Every example is a ``dspy.Example`` with inputs ``evidence, attribute, reason``, the gold
``accepted``, ``split`` and ``group`` -- the unit of grouped cross-validation and of the
teleprompters' held-out dev split: the topic when known, else the user, else the example id.

Raises :class:`~personalign.errors.DataError` (file, line, field) on bad input.
"""

from __future__ import annotations

from pathlib import Path

from personalign.programs.common.stage1 import SPLIT_SEED, load_prefeval_or_jsonl


def load_verification(path: str | Path) -> list:
    """Verification examples of ``path`` (see the module doc), each with ``split`` and ``group``.

    Raises:
        DataError: missing file, malformed line/record, unknown format.
    """
    from personalign.data.derive import verification_pairs

    return load_prefeval_or_jsonl(path, "verification", lambda records: verification_pairs(
        records, negatives_per_positive=1, seed=SPLIT_SEED), inputs())


def inputs() -> tuple[str, ...]:
    """The stage's input fields: those of its signature
    (:class:`personalign.signatures.verification.VerificationSignature`), in order."""
    from personalign.signatures.verification import VerificationSignature

    return tuple(VerificationSignature.input_fields)

__all__ = ["load_verification"]
