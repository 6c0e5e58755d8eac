"""Code-enforced aggregation rules: what the aggregator's instructions ask, checked and repaired
after the LM because a 135M model cannot be trusted to follow them.

:func:`enforce_rules` removes every sentence (or list item) that

* talks about the process (meta phrases: candidates, perspectives, personas, "the merged
  answer", "as an AI"; :func:`~personalign.programs.common.text.has_meta`),
* contains a persona's name (:func:`~personalign.programs.common.text.mentions_name`),
* is a refusal,
* drifts into a script the question does not use (CJK characters in an English question: the
  Qwen models' language drift, :func:`drifts`),
* is a fragment (no content word, a one-word sentence, or cut off mid-phrase -- the embedded
  model's bounded strings end wherever the budget does),
* only echoes the question or the answer format ("5 items to pack for a hiking trip",
  "items5"),
* is not grounded in the candidates: fewer than ``grounding`` of its content words appear in
  any one candidate (only sentences of 3+ content words are checked) -- "no facts absent from the
  candidates";

then, when the asker requested ``n`` items, returns exactly ``n`` numbered items: surplus items
are cut, missing ones are filled from the candidates' own sentences/items (then the parts of
their enumerations), those shared by most candidates first ("prefer details several candidates share"), skipping near-duplicates
(Jaccard similarity of content words >= 0.6). Priority when the candidates are thin: the hard
rules (no meta text, no persona name, no refusal) are never relaxed; the asker's explicit count
comes next, so when clean units run out, any unit (or comma part) of the candidates that passes
the hard rules fills the list, fragments and near-duplicates included (``report.relaxed``). If
nothing survives, the best-supported candidate sentences are used ("never empty").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from personalign.programs.common.text import (
    content_words,
    has_meta,
    is_refusal,
    mentions_name,
    numbered,
    parse_items,
    split_sentences,
)

GROUNDING = 0.3
DUPLICATE = 0.6


@dataclass
class RuleReport:
    """What :func:`enforce_rules` changed: counts of dropped units per reason, items filled from
    candidates (``filled``) and, past those, units taken under the hard rules only (``relaxed``), whether the
    item count holds (None when no count was requested)."""

    dropped_meta: int = 0
    dropped_names: int = 0
    dropped_refusals: int = 0
    dropped_ungrounded: int = 0
    dropped_fragments: int = 0
    dropped_echoes: int = 0
    dropped_language: int = 0
    filled: int = 0
    relaxed: int = 0
    fallback: bool = False
    count_ok: bool | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _overlap(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a) if a else 0.0


def _duplicate(w: set[str], seen: list[set[str]]) -> bool:
    """Near-duplicate: Jaccard similarity of content words >= DUPLICATE with a kept unit."""
    return bool(w) and any(len(w & s) / len(w | s) >= DUPLICATE for s in seen if s)


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef]")


def drifts(text: str, question: str = "") -> bool:
    """True when ``text`` holds Chinese, Japanese or Korean characters (or their full-width
    punctuation) and ``question`` holds none: the answer left the asker's language."""
    return bool(_CJK.search(text)) and not _CJK.search(question or "")


_DANGLING = {"a", "an", "the", "and", "or", "of", "to", "like", "with", "for", "in", "on", "at", "as", "such", "by",
             "from", "your", "my", "is", "are", "be", "first", "then"}
_ECHO_WORDS = {"item", "items", "answer", "list", "question", "option", "entry", "thing"}


def tidy(text: str) -> str:
    """A unit with list markers (``-``, ``*``, ``1.``) and dangling punctuation (``,;:[({``)
    stripped."""
    t = text.strip().strip("-*\u2022 ")
    t = re.sub(r"^\(?\d{1,2}[.)]\s+", "", t)
    return t.rstrip(",;:[({ ").strip()


def is_fragment(text: str, *, item: bool = False) -> bool:
    """True for a unit that is not a usable sentence or list item: no content word, fewer than
    two words with letters (sentences only: "Sunscreen" is a fine list item), or cut off
    mid-phrase (ends with "like", "and", "the", ... and no final stop)."""
    words = [w for w in text.split() if any(c.isalpha() for c in w)]
    if not words or not content_words(text) or (len(words) < 2 and not item):
        return True
    return words[-1].lower().strip(".,;:!?") in _DANGLING and not text.rstrip().endswith((".", "!", "?"))


def is_echo(text: str, question: str) -> bool:
    """True when a unit only repeats the question or names the answer format ("5 items to pack
    for a hiking trip", "items5"): its content words all occur in the question or are format
    words (item, answer, list, ...)."""
    w = set(content_words(re.sub(r"(\D)(\d)", r"\1 \2", text)))
    if not w:
        return True
    q = set(content_words(question)) | _ECHO_WORDS
    return w <= q


def _reason(t: str, names: Sequence[str], question: str, item: bool) -> str | None:
    if drifts(t, question):  # before fragments: a CJK sentence has no content word in ASCII either
        return "language"
    if is_fragment(t, item=item):
        return "fragments"
    if has_meta(t):
        return "meta"
    if mentions_name(t, names):
        return "names"
    if is_refusal(t):
        return "refusals"
    if question and is_echo(t, question):
        return "echoes"
    return None


def clean_unit(text: str, names: Iterable[str], *, question: str = "", item: bool = False) -> str | None:
    """A sentence/item tidied (:func:`tidy`), or None when it breaks a rule: fragment, meta text,
    a persona name, a refusal, or an echo of the question."""
    t = tidy(text)
    if not t or _reason(t, list(names), question, item) is not None:
        return None
    return t


def list_items(text: str) -> list[str] | None:
    """The items of ``text`` when it is a list (two or more marked lines, or an inline
    enumeration "1. A; 2. B"), else None."""
    items = parse_items(text)
    if len(items) >= 2 and items != split_sentences(text):
        return items
    return None


def clean_candidate(text: str, names: Iterable[str], *, question: str = "") -> str:
    """A candidate answer with its fragmentary, meta, named, refusal and echo units removed (may
    become ""); a list keeps its list form (renumbered)."""
    names = list(names)
    items = list_items(text)
    if items is not None:
        return numbered([u for it in items if (u := clean_unit(it, names, question=question, item=True))])
    return " ".join(u for s in split_sentences(text) if (u := clean_unit(s, names, question=question)))


def _units(text: str, as_items: bool) -> list[str]:
    return parse_items(text) if as_items else split_sentences(text)


def _support_ranked(candidates: Sequence[str], names: Sequence[str], question: str = "") -> list[str]:
    """Clean units of all candidates (list items, else sentences), ranked by how many candidates
    share them (content-word overlap >= 0.5), then by order of appearance, followed by the parts
    of enumerations inside them ("a jacket, water and a map" -> three units); near-duplicates
    removed."""
    cand_words = [set(content_words(c)) for c in candidates]
    units: list[tuple[int, int, str]] = []
    order = 0
    for c in candidates:
        items = list_items(c)
        for u in items if items is not None else split_sentences(c):
            cu = clean_unit(u, names, question=question, item=items is not None)
            if cu is None:
                continue
            w = set(content_words(cu))
            support = sum(_overlap(w, cw) >= 0.5 for cw in cand_words) if w else 0
            units.append((-support, order, cu))
            order += 1
    units.sort()
    # second tier: the parts of enumerations ("a jacket, water and a map") as items of their own
    tier2 = []
    for _, _, u in units:
        parts = [p.strip() for p in re.split(r",\s*(?:and\s+|or\s+)?|;\s*|\s+and\s+", u.rstrip(".!?"))]
        if len(parts) >= 3:
            tier2.extend((1, order + i, p) for i, p in enumerate(parts) if not is_fragment(p, item=True))
    out: list[str] = []
    seen: list[set[str]] = []
    for _, _, u in units + tier2:
        w = set(content_words(u))
        if _duplicate(w, seen):
            continue
        seen.append(w)
        out.append(u)
    return out


def enforce_rules(answer: str | Sequence[str], candidates: Sequence[str], *, names: Sequence[str] = (),
                  n_items: int | None = None, question: str = "",
                  grounding: float = GROUNDING) -> tuple[str, RuleReport]:
    """Apply the aggregation rules to ``answer`` (a text, or a list of items).

    Args:
        answer: the aggregator's output.
        candidates: the per-profile answers it merged (the evidence for grounding and filling).
        names: persona names that must not appear.
        n_items: the item count the asker requested (None: no list constraint).
        question: the question (units that only echo it are dropped).
        grounding: minimum share of a sentence's content words found in one candidate.

    Returns:
        ``(text, report)``; with ``n_items`` the text is exactly ``n_items`` lines ``1. ...``
        unless the candidates hold fewer distinct clean units (``report.count_ok`` False).
        The text is empty only when every candidate is empty after cleaning.
    """
    names = [n for n in names if n]
    rep = RuleReport()
    as_items = n_items is not None
    raw_units = list(answer) if not isinstance(answer, str) else _units(answer, as_items)
    cand_words = [set(content_words(c)) for c in candidates]
    kept: list[str] = []
    for u in raw_units:
        t = tidy(str(u))
        if not t:
            continue
        reason = _reason(t, names, question, as_items)
        if reason is not None:
            setattr(rep, f"dropped_{reason}", getattr(rep, f"dropped_{reason}") + 1)
            continue
        w = set(content_words(t))
        if cand_words and len(w) >= 3 and max(_overlap(w, cw) for cw in cand_words) < grounding:
            rep.dropped_ungrounded += 1
            continue
        kept.append(t)
    if as_items:
        items: list[str] = []
        seen: list[set[str]] = []
        for t in kept:
            w = set(content_words(t))
            if _duplicate(w, seen):
                continue
            seen.append(w)
            items.append(t)
        items = items[:n_items]
        if len(items) < n_items:
            for u in _support_ranked(candidates, names, question):
                w = set(content_words(u))
                if _duplicate(w, seen):
                    continue
                seen.append(w)
                items.append(u)
                rep.filled += 1
                if len(items) == n_items:
                    break
        if len(items) < n_items:
            # the asker's explicit count outranks the soft rules: fill from every unit of the
            # candidates that passes the hard rules (no meta, no name, no refusal, no language
            # drift), fragments,
            # echoes and near-duplicates included, exact duplicates excluded
            have = {i.lower() for i in items}
            for c in candidates:
                listed = list_items(c)
                units = listed if listed is not None else split_sentences(c)
                parts = [p for u in units for p in [u] + re.split(r",\s*|;\s*", u)]
                for u in parts:
                    t = tidy(u)
                    if (not t or not content_words(t) or t.lower() in have or has_meta(t) or mentions_name(t, names)
                            or is_refusal(t) or drifts(t, question)):
                        continue
                    have.add(t.lower())
                    items.append(t)
                    rep.relaxed += 1
                    if len(items) == n_items:
                        break
                if len(items) == n_items:
                    break
        rep.count_ok = len(items) == n_items
        if not rep.count_ok:
            rep.notes.append(f"only {len(items)} distinct items available for {n_items} requested")
        return numbered(items), rep
    text = " ".join(kept)
    if not text:
        rep.fallback = True
        text = " ".join(_support_ranked(candidates, names, question)[:4])
    return text, rep


def rule_violations(text: str, *, names: Sequence[str] = (), n_items: int | None = None,
                    question: str = "") -> list[str]:
    """The rules ``text`` breaks (empty list = compliant): ``empty``, ``meta``, ``name``,
    ``refusal``, ``language`` (:func:`drifts` from ``question``), ``count`` (with ``n_items``: not
    exactly that many list items)."""
    out = []
    if not text.strip():
        return ["empty"]
    if has_meta(text):
        out.append("meta")
    if mentions_name(text, names):
        out.append("name")
    if is_refusal(text):
        out.append("refusal")
    if drifts(text, question):
        out.append("language")
    if n_items is not None and len(parse_items(text)) != n_items:
        out.append("count")
    return out


__all__ = ["GROUNDING", "RuleReport", "tidy", "is_fragment", "is_echo", "list_items", "clean_unit", "clean_candidate", "enforce_rules", "rule_violations"]
