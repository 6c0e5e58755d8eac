"""Text helpers shared by the stages (respond, judge, mcq, perspectives): prompt-budget
truncation, sentences and list items, explicit mentions, requested item counts, meta phrases.
Pure Python (``re``; scikit-learn's English stop words, imported lazily); no LM.

Prompt budget. The embedded models have a 4096-token window (``PERSONALIGN_N_CTX``) shared by the
adapter's instructions (~250-400 tokens), the inputs and the output. English text tokenizes at
~4 characters per token with SmolLM2's tokenizer, so character budgets are used:
:func:`truncate_tail` keeps the *end* of a long context (the most recent turns of a conversation),
cut at a paragraph or line boundary and prefixed with :data:`TRUNCATION_MARK`;
:func:`truncate_head` keeps the beginning of a single long text (a question, an option).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable, Sequence

TRUNCATION_MARK = "[... earlier text truncated ...]"

CHARS_PER_TOKEN = 4
"""Rough characters per token of English text for SmolLM2/Gemma tokenizers (used for budgets)."""


def truncate_tail(text: str, max_chars: int) -> str:
    """Keep the last ``max_chars`` characters of ``text`` (the most recent part of a
    conversation), starting at a paragraph or line boundary when one falls in the first half of
    the kept window, prefixed with :data:`TRUNCATION_MARK`. Text within the budget is unchanged."""
    if max_chars <= 0:
        return ""
    if len(text) <= max_chars:
        return text
    budget = max(0, max_chars - len(TRUNCATION_MARK) - 1)
    window = text[len(text) - budget:]
    for sep in ("\n\n", "\n", ". "):
        cut = window.find(sep)
        if 0 <= cut < budget // 2:
            window = window[cut + len(sep):]
            break
    return f"{TRUNCATION_MARK}\n{window.lstrip()}"


def truncate_head(text: str, max_chars: int) -> str:
    """Keep the first ``max_chars`` characters of ``text``, cut at a word boundary, with ``...``."""
    if len(text) <= max_chars:
        return text
    cut = text[: max(0, max_chars - 3)]
    space = cut.rfind(" ")
    if space > max_chars // 2:
        cut = cut[:space]
    return cut.rstrip() + "..."


def clip_list(items: Iterable[str] | None, *, max_items: int, max_chars: int) -> list[str]:
    """The first ``max_items`` non-empty strings of ``items``, each cut to ``max_chars``."""
    out = []
    for it in items or []:
        s = str(it).strip()
        if s:
            out.append(truncate_head(s, max_chars))
        if len(out) >= max_items:
            break
    return out


# a stop then a capital, a digit or a CJK character; or a CJK full stop (mixed-script answers)
_SENT = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af])|(?<=[\u3002\uff01\uff1f])\s*")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (line breaks also separate), stripped, empty ones dropped."""
    out = []
    for line in text.splitlines():
        for s in _SENT.split(line.strip()):
            if s.strip():
                out.append(s.strip())
    return out


_ITEM = re.compile(r"^\s*(?:[-*\u2022]|\(?\d{1,2}[.)]|\(?[a-zA-Z][.)])\s+(.*\S)\s*$")


_INLINE_NUM = re.compile(r"(?:^|(?<=[\s;,:]))(\d{1,2})[.)]\s+")


def _inline_items(text: str) -> list[str]:
    """Items of an inline enumeration "... 1. A; 2. B; 3. C." (numbers 1, 2, 3, ... in order)."""
    marks = [m for m in _INLINE_NUM.finditer(text)]
    seq, expect = [], 1
    for m in marks:
        if int(m.group(1)) == expect:
            seq.append(m)
            expect += 1
    if len(seq) < 2:
        return []
    out = []
    for i, m in enumerate(seq):
        end = seq[i + 1].start() if i + 1 < len(seq) else len(text)
        item = text[m.end():end].strip().rstrip(";,").strip()
        if item:
            out.append(item)
    return out


def parse_items(text: str) -> list[str]:
    """List items of ``text``: lines starting with ``-``, ``*``, ``•``, ``1.``, ``1)``, ``a)``
    (when there are two or more such lines, or every non-empty line is one); else an inline
    enumeration ("1. A; 2. B; 3. C"); otherwise its sentences."""
    lines = [line for line in text.splitlines() if line.strip()]
    items = [m.group(1).strip() for line in lines if (m := _ITEM.match(line))]
    if len(items) >= 2 or (items and len(items) == len(lines)):
        return items
    inline = _inline_items(text)
    if inline:
        return inline
    return split_sentences(text)


def numbered(items: Sequence[str]) -> str:
    """``1. first\\n2. second ...``."""
    return "\n".join(f"{i}. {it.strip()}" for i, it in enumerate(items, 1))


_NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                 "ten": 10, "a couple of": 2, "a pair of": 2, "a few": None, "several": None}
_LIST_NOUNS = (r"items?|ideas?|tips?|ways?|examples?|things?|suggestions?|reasons?|steps?|options?|"
               r"recommendations?|places?|books?|movies?|films?|songs?|dishes?|recipes?|restaurants?|"
               r"activities|activity|exercises?|questions?|names?|points?|bullet points?|strategies|strategy|"
               r"destinations?|games?|apps?|tools?|habits?|products?|gifts?|facts?|benefits?|meals?|snacks?|"
               r"spots?|shows?|podcasts?|hobbies|hobby|plants?|breeds?|cities|city|countries|country|words?")
_NUM = r"(\d{1,2}|two|three|four|five|six|seven|eight|nine|ten|a couple of|a pair of)"
_COUNT = re.compile(
    # a number followed (within three words) by a list noun: "5 items", "4 easy vegan dinner ideas"
    r"\b" + _NUM + r"\s+(?:[a-z-]+\s+){0,3}?(?:" + _LIST_NOUNS + r")\b"
    # or a listing verb, the number, then any plural: "name three famous painters", "top 3 cafes"
    r"|\b(?:exactly|top|list|give(?:\s+me)?|name|suggest|recommend|provide|share|what are(?: the)?)\s+"
    + _NUM + r"\s+(?:[a-z-]+\s+){0,3}?[a-z]+s\b",
    re.IGNORECASE,
)


def requested_count(question: str) -> int | None:
    """The number of items the user explicitly asks for ("5 items", "exactly five tips", "top 3
    restaurants", "give me 4 ideas"), or None. Counts outside 1..20 are ignored."""
    for m in _COUNT.finditer(question):
        raw = (m.group(1) or m.group(2)).lower()
        n = int(raw) if raw.isdigit() else _NUMBER_WORDS.get(raw)
        if n is not None and 1 <= n <= 20:
            return n
    return None


@lru_cache(maxsize=1)
def _stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS) | {"user", "prefers", "prefer", "likes", "like", "really", "strictly",
                                             "usually", "always", "generally", "don", "doesn", "im", "ive"}


_WORD = re.compile(r"[a-z][a-z'-]+")


def _stem(word: str) -> str:
    w = word.strip("'-")
    for suf in ("ing", "ies", "es", "ed", "s"):
        if len(w) > len(suf) + 3 and w.endswith(suf):
            return w[: -len(suf)] + ("y" if suf == "ies" else "")
    return w


def content_words(text: str) -> list[str]:
    """Lower-cased, crudely stemmed words of ``text`` minus English stop words (order kept)."""
    stop = _stop_words()
    return [_stem(w) for w in _WORD.findall(text.lower()) if w not in stop and len(w) > 2]


_USER_REF = re.compile(
    r"\b(?:since|as|because|given(?: that)?|considering|knowing)\s+(?:you|your)\b|"
    r"\byou(?:'ve|'re| have| are)?\s+(?:mentioned|said|told|noted|stated|shared|prefer|like|love|enjoy|"
    r"avoid|dislike|follow|hate|want|need|can't|cannot|don't)\b|"
    r"\byour\s+(?:stated\s+)?(?:preference|preferences|interest|interests|love|passion|dislike|background|"
    r"experience|diet|dietary|condition|allergy|allergies|intolerance|job|work|goal|goals|profile|"
    r"attribute|attributes|situation|needs|taste|tastes|lifestyle|values|budget)\b|"
    r"\bas an?\s+(?!result\b|whole\b|rule\b|bonus\b|side\b|general\b|reminder\b)[a-z-]+(?:\s+[a-z-]+)?\s*,",
    re.IGNORECASE,
)


def lexical_mention(attribute: str, response: str, *, min_ngram: int = 3) -> bool:
    """Cheap explicit-mention detector: True when a sentence of ``response`` refers to the user
    ("since you ...", "you mentioned ...", "your diet", "as a nurse, ...") *and* shares a content
    word with ``attribute``, or when ``response`` copies ``min_ngram`` consecutive content words of
    the attribute. Using a topical word alone ("gluten-free pasta") is not an explicit mention.

    A heuristic baseline for the typed detector
    (:class:`personalign.programs.judge.mentions.MentionDetector`); its misses are phrasings
    outside the patterns above.
    """
    attr_words = content_words(attribute)
    if not attr_words:
        return False
    attr_set = set(attr_words)
    resp_words = content_words(response)
    grams = {tuple(attr_words[i:i + min_ngram]) for i in range(len(attr_words) - min_ngram + 1)}
    if grams and any(tuple(resp_words[i:i + min_ngram]) in grams for i in range(len(resp_words) - min_ngram + 1)):
        return True
    for sent in split_sentences(response):
        if _USER_REF.search(sent) and attr_set & set(content_words(sent)):
            return True
    return False


META_PATTERNS = (
    r"\bcandidates?\b", r"\bcandidate answers?\b", r"\bperspectives?\b", r"\bpersonas?\b", r"\bprofiles?\b",
    r"\bthe (?:above|previous|given|provided|other) (?:answers?|responses?)\b",
    r"\b(?:answer|response|option) (?:#\s*)?\d\b", r"\bboth (?:answers|responses)\b",
    r"\b(?:merged|combined|aggregated|synthesi[sz]ed|final) (?:answer|response|version)\b",
    r"\baggregat\w*\b", r"\bas an ai\b", r"\blanguage model\b", r"\bjson\b", r"\boutput fields?\b",
    r"\b(?:here is|here's) (?:the|a|my) (?:merged|combined|final|single|aggregated)\b",
    r"\b(?:these|the) (?:users|people) (?:above|listed)\b", r"\bbased on (?:the|these) (?:answers|responses)\b",
)
_META = re.compile("|".join(META_PATTERNS), re.IGNORECASE)

REFUSAL_PATTERNS = (
    r"\bI(?:'m| am) (?:sorry|unable|not able)\b", r"\bI can(?:not|'t) (?:help|provide|assist|answer)\b",
    r"\bI don't have (?:enough|access|personal)\b", r"\bas an ai\b", r"\bI(?:'m| am) (?:just )?an? (?:ai|assistant)\b",
)
_REFUSAL = re.compile("|".join(REFUSAL_PATTERNS), re.IGNORECASE)


def has_meta(text: str) -> bool:
    """True when ``text`` talks about the answering process (candidates, perspectives, personas,
    "the merged answer", "as an AI") instead of answering."""
    return bool(_META.search(text))


def is_refusal(text: str) -> bool:
    """True for refusals and AI disclaimers ("I'm sorry", "I cannot help", "as an AI")."""
    return bool(_REFUSAL.search(text))


def mentions_name(text: str, names: Iterable[str]) -> bool:
    """True when ``text`` contains one of ``names`` as a whole word (case-sensitive: names are
    proper nouns; "Rose" the name vs "rose" the flower)."""
    for n in names:
        if n and re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text):
            return True
    return False


__all__ = [
    "TRUNCATION_MARK", "CHARS_PER_TOKEN", "truncate_tail", "truncate_head", "clip_list", "split_sentences",
    "parse_items", "numbered", "requested_count", "content_words", "lexical_mention", "META_PATTERNS",
    "REFUSAL_PATTERNS", "has_meta", "is_refusal", "mentions_name",
]
