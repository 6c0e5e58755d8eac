"""Profile builder: items (posts or conversations) -> descriptors -> cleaned list -> short bio.

``ProfileBuilder.forward(items)``:

1. per item, one ``dspy.Predict(ItemDescriptorSignature)`` call: ``useful``, ``justification``,
   ``descriptors`` (at most 5). An item is a post (``str``) or a conversation (turns: only the
   user's messages are shown). Item text is cleaned (invalid UTF-8 -> U+FFFD) and cut to the
   model's budget (:func:`~personalign.programs.common.budget.prompt_budget`; beginning
   kept, ``" [...]"`` marks the cut). Blank items are skipped without a
   call. Descriptors of items judged not useful are discarded.
2. dedupe: descriptors are clustered with MiniLM average linkage at cosine ``dedupe_threshold``
   (0.85: near-paraphrases only) (:func:`personalign.programs.common.cluster.cluster_labels`);
   each cluster keeps its first descriptor and ``support`` = number of items that produced a member.
3. contradictions: with two or more descriptors, one ``dspy.Predict(ContradictionSignature)``
   call returns the numbers to drop (a contradicted descriptor loses to the better supported one);
   out-of-range numbers are ignored.
4. bio: one ``dspy.Predict(BioSignature)`` call over the kept descriptors (most supported first,
   at most ``max_bio_descriptors``); no descriptors -> ``bio=""`` without a call.

Output: ``dspy.Prediction(descriptors: list[str], support: list[int], bio: str, n_items,
n_useful, n_raw_descriptors, dropped_contradictions: list[str], specifics: list[str])``;
``specifics`` lists exact dates found in the bio by :func:`find_specifics` (a check of step 4's
instruction; places cannot be checked without a gazetteer).

:func:`build_profile_bank` runs the builder per user and writes a profile bank: canonical JSONL
of :class:`~personalign.data.schemas.ProfileExample` (``id = profile:<user_id>``, ``user_id``,
``descriptors``, ``bio``), atomically.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import dspy

from personalign.programs.common.budget import cut_to_budget, prompt_budget
from personalign.signatures.profiles import BioSignature, ContradictionSignature, ItemDescriptorSignature

_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
_SPECIFIC = re.compile(
    rf"\b(?:(?:19|20)\d\d\b|\d{{1,2}}[/.-]\d{{1,2}}[/.-]\d{{2,4}}|(?:{_MONTHS})\.? \d{{1,2}}(?:st|nd|rd|th)?\b|"
    rf"\d{{1,2}}(?:st|nd|rd|th)? (?:of )?(?:{_MONTHS})\b|aged? \d{{1,3}}\b|\d{{1,3}}[- ]years?[- ]old\b)",
    re.IGNORECASE)


def find_specifics(text: str) -> list[str]:
    """Exact dates and ages in ``text``: 4-digit years 1900-2099, numeric dates, month + day,
    "age 34", "34 years old"."""
    return [m.group(0) for m in _SPECIFIC.finditer(text or "")]


def item_text(item: Any) -> str:
    """The text of an item: a post as is; a conversation (list of turns / dicts) as its user
    messages joined by blank lines.

    Raises:
        DataError: a malformed conversation.
    """
    from personalign.preprocess import clean_text, normalize_turns

    if isinstance(item, (str, bytes)):
        return clean_text(item, where="item").strip()
    turns = normalize_turns(item)
    return "\n\n".join(t.content.strip() for t in turns if t.role == "user" and t.content.strip())


class ProfileBuilder(dspy.Module):
    """Build one user's profile from their items (module doc).

    Args:
        dedupe_threshold: cosine similarity above which descriptors are duplicates (0.85).
        check_contradictions: run step 3.
        max_bio_descriptors: descriptors passed to the bio call (30).
    """

    uses_lm = True
    output_tokens = 512

    def __init__(self, *, dedupe_threshold: float = 0.85, check_contradictions: bool = True,
                 max_bio_descriptors: int = 30) -> None:
        super().__init__()
        self.dedupe_threshold = float(dedupe_threshold)
        self.check_contradictions = bool(check_contradictions)
        self.max_bio_descriptors = int(max_bio_descriptors)
        self.describe = dspy.Predict(ItemDescriptorSignature)
        self.contradictions = dspy.Predict(ContradictionSignature)
        self.write_bio = dspy.Predict(BioSignature)

    def forward(self, items: Sequence[Any]) -> dspy.Prediction:
        from personalign.programs.common.cluster import cluster_labels

        budget = prompt_budget(self.describe, {}, "item", output_tokens=self.output_tokens)
        raw: list[tuple[int, str]] = []  # (item index, descriptor)
        n_items = n_useful = 0
        for k, item in enumerate(items):
            text = item_text(item)
            if not text:
                continue
            n_items += 1
            out = self.describe(item=cut_to_budget(text, budget))
            if not bool(out.useful):
                continue
            n_useful += 1
            descs = getattr(out.descriptors, "root", out.descriptors) or []
            for d in descs:
                d = " ".join(str(d).split()).strip(" .;")
                if d:
                    raw.append((k, d))
        descriptors: list[str] = []
        support: list[int] = []
        if raw:
            labels = cluster_labels([d for _, d in raw], threshold=self.dedupe_threshold)
            for lab in range(max(labels) + 1):
                members = [raw[i] for i, x in enumerate(labels) if x == lab]
                descriptors.append(members[0][1])
                support.append(len({k for k, _ in members}))
            order = sorted(range(len(descriptors)), key=lambda i: (-support[i], i))
            descriptors = [descriptors[i] for i in order]
            support = [support[i] for i in order]
        dropped: list[str] = []
        if self.check_contradictions and len(descriptors) >= 2:
            numbered = [f"[{i + 1}] {d} ({s} item{'s' if s != 1 else ''})" for i, (d, s) in enumerate(zip(descriptors, support))]
            out = self.contradictions(descriptors=numbered)
            drop = {int(n) - 1 for n in (out.drop_numbers or []) if 1 <= int(n) <= len(descriptors)}
            dropped = [descriptors[i] for i in sorted(drop)]
            keep = [i for i in range(len(descriptors)) if i not in drop]
            descriptors = [descriptors[i] for i in keep]
            support = [support[i] for i in keep]
        bio = ""
        if descriptors:
            bio = str(self.write_bio(descriptors=descriptors[: self.max_bio_descriptors]).bio or "").strip()
        return dspy.Prediction(descriptors=descriptors, support=support, bio=bio, n_items=n_items, n_useful=n_useful,
                               n_raw_descriptors=len(raw), dropped_contradictions=dropped,
                               specifics=find_specifics(bio))


def build_profile_bank(histories: Mapping[str, Sequence[Any]], path: str | Path, *,
                       builder: ProfileBuilder | None = None, lm=None) -> dict:
    """Build a profile per user and write the bank as canonical ``profile`` JSONL (atomic: nothing
    is written when a user fails).

    Args:
        histories: user id -> items (posts or conversations).
        path: output ``.jsonl`` file.
        lm: the LM (None: the one in the current DSPy context).

    Returns:
        ``{"path", "n_users", "profiles": {user_id: Prediction}}``.
    """

    from personalign.data import ProfileExample, write_examples
    from personalign.lm import use

    builder = builder or ProfileBuilder()
    preds: dict[str, Any] = {}
    rows = []
    with use(lm):
        for uid, items in histories.items():
            pred = builder(items=list(items))
            preds[uid] = pred
            rows.append(ProfileExample(id=f"profile:{uid}", user_id=str(uid), descriptors=list(pred.descriptors),
                                       bio=pred.bio))
    write_examples(path, rows)
    return {"path": str(path), "n_users": len(rows), "profiles": preds}


__all__ = ["ProfileBuilder", "build_profile_bank", "find_specifics", "item_text"]
