"""Batch LLM judge: all attributes of one user for one prompt in one LM call.

Per-pair judging costs one call per (attribute, prompt); a user has tens of attributes (20-80 per
prompt in the recenter data), so the batch judge asks once per (prompt, user) group which of the
numbered attributes should change the answer and reads back the list of their numbers
(:class:`~personalign.signatures.relevance.BatchRelevanceSignature`, output ``list[int]``).

Why numbers and not a ``list[bool]`` aligned with the attributes: the embedded backend bounds every
list in a grammar-constrained answer (``LocalSettings.max_list_items``, default 12), and a small
model easily returns an aligned list of the wrong length; a list of selected numbers stays short
because relevant attributes are rare (~20%), and numbers outside ``1..len(chunk)`` are ignored.
Groups larger than ``chunk_size`` attributes are split into chunks of at most ``chunk_size``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Sequence

import dspy

from personalign.signatures.relevance import BatchRelevanceSignature


def group_key(example) -> tuple[str, str]:
    """``(prompt group, user group)`` of an example: ``prompt_id`` (else the prompt text) and
    ``user_id`` (else ``""``, i.e. all attributes of the prompt form one group)."""
    prompt_key = getattr(example, "prompt_id", None) or example.prompt
    user_key = getattr(example, "user_id", None) or ""
    return str(prompt_key), str(user_key)


class BatchJudge(dspy.Module):
    """Judge all attributes of a (prompt, user) group in one call per chunk of ``chunk_size``.

    Args:
        chunk_size: maximum attributes per LM call (default 24: on the recenter val split, 196
            pairs in 5 user groups take 10 calls instead of 196).
        retries: extra attempts per failed chunk (each a fresh sample: ``rollout_id`` set and
            temperature 0.7, like :func:`personalign.programs.run.run_program`).

    ``predict_batch(examples)`` returns one ``Prediction(relevant: bool | None, score=None)`` per
    example, in input order; ``relevant`` is None for the examples of a chunk that still failed
    after the retries (``run_program`` counts those as failures). ``forward(attribute, prompt)``
    judges a single pair (a group of one) and ``judge_user(attributes, prompt)`` a list.
    The LM is the one in the current ``dspy`` context (``personalign.lm.use(lm)``).

    Raises:
        ConfigurationError: no LM is configured in the current context.
    """

    uses_lm = True

    def __init__(self, chunk_size: int = 24, retries: int = 2) -> None:
        super().__init__()
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        self.chunk_size = int(chunk_size)
        self.retries = int(retries)
        self.judge = dspy.Predict(BatchRelevanceSignature)
        self.last_errors: list[str] = []

    def _call(self, attributes: list[str], prompt: str) -> list[bool] | None:
        from personalign.errors import ConfigurationError, ContextWindowError, find_personalign_error

        lm = dspy.settings.lm
        if lm is None:
            raise ConfigurationError("BatchJudge needs an LM: run it inside personalign.lm.use(lm)")
        for attempt in range(self.retries + 1):
            try:
                if attempt == 0:
                    out = self.judge(attributes=attributes, prompt=prompt)
                else:
                    with dspy.context(lm=lm.copy(rollout_id=attempt, temperature=0.7)):
                        out = self.judge(attributes=attributes, prompt=prompt)
                chosen = {int(k) for k in (out.relevant_numbers or [])}
                return [(i + 1) in chosen for i in range(len(attributes))]
            except Exception as exc:  # noqa: BLE001 -- counted per chunk, never fatal
                ours = find_personalign_error(exc)
                if ours is not None and not isinstance(ours, ContextWindowError):
                    raise ours from None
                if attempt == self.retries or isinstance(ours, ContextWindowError):
                    self.last_errors.append(f"chunk of {len(attributes)}: {type(ours or exc).__name__}: "
                                            f"{str(ours or exc).splitlines()[0][:200] if str(ours or exc) else ''}")
                    return None
        return None

    def judge_user(self, attributes: Sequence[str], prompt: str) -> list[bool | None]:
        """Verdicts for ``attributes`` (one user's) on ``prompt``: ``ceil(n / chunk_size)`` LM calls."""
        verdicts: list[bool | None] = []
        attrs = list(attributes)
        for start in range(0, len(attrs), self.chunk_size):
            chunk = attrs[start:start + self.chunk_size]
            got = self._call(chunk, prompt)
            verdicts.extend(got if got is not None else [None] * len(chunk))
        return verdicts

    def predict_batch(self, examples: Sequence) -> list[dspy.Prediction]:
        self.last_errors = []
        groups: "OrderedDict[tuple[str, str], list[int]]" = OrderedDict()
        for i, ex in enumerate(examples):
            groups.setdefault(group_key(ex), []).append(i)
        out: list[dspy.Prediction | None] = [None] * len(examples)
        for idx in groups.values():
            # a group key may cover differing prompt texts only if prompt_id is reused: split by text
            by_text: "OrderedDict[str, list[int]]" = OrderedDict()
            for i in idx:
                by_text.setdefault(examples[i].prompt, []).append(i)
            for prompt, members in by_text.items():
                verdicts = self.judge_user([examples[i].attribute for i in members], prompt)
                for i, v in zip(members, verdicts):
                    out[i] = dspy.Prediction(relevant=v, score=None)
        return out  # type: ignore[return-value]

    def forward(self, attribute: str, prompt: str) -> dspy.Prediction:
        (verdict,) = self.judge_user([attribute], prompt)
        if verdict is None:
            raise RuntimeError(self.last_errors[-1] if self.last_errors else "batch judge failed")
        return dspy.Prediction(relevant=verdict, score=None)
